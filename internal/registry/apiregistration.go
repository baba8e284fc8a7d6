package registry

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration"
	apiregistrationinstall "k8s.io/kube-aggregator/pkg/apis/apiregistration/install"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationv1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	apiregistrationvalidation "k8s.io/kube-aggregator/pkg/apis/apiregistration/validation"
)

// apiregistrationResources are the kinds of apiregistration.k8s.io: the APIService,
// which names a group-version served by this server (local) or by an extension API
// server behind a Service, which the API server proxies to. Validation is upstream's
// own package (k8s.io/kube-aggregator/pkg/apis/apiregistration/validation), which
// works on the group's internal types, so the strategy converts to them.
func apiregistrationResources() []*Resource {
	c := newAPIServiceConverter()
	return []*Resource{{
		GroupVersion: apiregistrationv1.SchemeGroupVersion, Kind: "APIService", ListKind: "APIServiceList",
		Plural: "apiservices", Singular: "apiservice", Categories: []string{"api-extensions"},
		StoragePrefix: "/registry/apiregistration.k8s.io/apiservices", Subresources: []string{"status"},
		Strategy: apiServiceStrategy(c),
		New:      func() runtime.Object { return &apiregistrationv1.APIService{} },
		NewList:  func() runtime.Object { return &apiregistrationv1.APIServiceList{} },
	}}
}

// apiServiceConverter converts APIServices to the internal version upstream's
// validation takes, with a scheme of its own holding only that group.
type apiServiceConverter struct{ scheme *runtime.Scheme }

func newAPIServiceConverter() apiServiceConverter {
	s := runtime.NewScheme()
	apiregistrationinstall.Install(s)
	return apiServiceConverter{scheme: s}
}

// internal returns obj in the internal version, or a field error saying why not.
func (c apiServiceConverter) internal(obj runtime.Object) (*apiregistration.APIService, field.ErrorList) {
	in, ok := obj.(*apiregistrationv1.APIService)
	if !ok {
		return nil, field.ErrorList{field.InternalError(nil, fmt.Errorf("not an APIService: %T", obj))}
	}
	out := &apiregistration.APIService{}
	if err := c.scheme.Convert(in, out, nil); err != nil {
		return nil, field.ErrorList{field.InternalError(nil, fmt.Errorf("convert the APIService: %w", err))}
	}
	return out, nil
}

// apiServiceStrategy is upstream's APIService strategy: a create clears the status
// and marks a local APIService (no spec.service) Available at once, an update of the
// main resource keeps the status, and the validation is upstream's.
func apiServiceStrategy(c apiServiceConverter) Strategy {
	return Strategy{
		PrepareForCreate: func(obj runtime.Object) {
			s, ok := obj.(*apiregistrationv1.APIService)
			if !ok {
				return
			}
			s.Status = apiregistrationv1.APIServiceStatus{}
			if s.Spec.Service == nil {
				apiregistrationv1helper.SetAPIServiceCondition(s, apiregistrationv1helper.NewLocalAvailableAPIServiceCondition())
			}
		},
		Default: func(obj runtime.Object) {
			if s, ok := obj.(*apiregistrationv1.APIService); ok {
				apiregistrationv1.SetObjectDefaults_APIService(s)
			}
		},
		Validate: func(obj runtime.Object) field.ErrorList {
			s, errs := c.internal(obj)
			if errs != nil {
				return errs
			}
			return apiregistrationvalidation.ValidateAPIService(context.Background(), s)
		},
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			n, errs := c.internal(obj)
			if errs != nil {
				return errs
			}
			o, errs := c.internal(old)
			if errs != nil {
				return errs
			}
			return apiregistrationvalidation.ValidateAPIServiceUpdate(context.Background(), n, o)
		},
		ValidateStatusUpdate: func(obj, old runtime.Object) field.ErrorList {
			n, errs := c.internal(obj)
			if errs != nil {
				return errs
			}
			o, errs := c.internal(old)
			if errs != nil {
				return errs
			}
			return apiregistrationvalidation.ValidateAPIServiceStatusUpdate(context.Background(), n, o)
		},
	}
}
