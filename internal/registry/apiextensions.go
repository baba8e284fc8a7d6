package registry

import (
	"context"
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsinstall "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// apiextensionsResources are the kinds of apiextensions.k8s.io: the
// CustomResourceDefinition, defaulted and validated by upstream's own packages
// (k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1 and .../validation: the
// structural-schema, CEL-rule and name checks are the contract, not something to
// re-type), which work on the group's internal types, so the strategy converts to them.
func apiextensionsResources() []*Resource {
	return []*Resource{{
		GroupVersion: apiextensionsv1.SchemeGroupVersion, Kind: "CustomResourceDefinition", ListKind: "CustomResourceDefinitionList",
		Plural: "customresourcedefinitions", Singular: "customresourcedefinition", ShortNames: []string{"crd", "crds"},
		Categories:    []string{"api-extensions"},
		StoragePrefix: "/registry/apiextensions.k8s.io/customresourcedefinitions", Subresources: []string{"status"},
		Strategy: crdStrategy(newCRDConverter()),
		New:      func() runtime.Object { return &apiextensionsv1.CustomResourceDefinition{} },
		NewList:  func() runtime.Object { return &apiextensionsv1.CustomResourceDefinitionList{} },
	}}
}

// crdConverter converts CustomResourceDefinitions to the internal version upstream's
// validation takes, with a scheme of its own holding only that group.
type crdConverter struct{ scheme *runtime.Scheme }

func newCRDConverter() crdConverter {
	s := runtime.NewScheme()
	apiextensionsinstall.Install(s)
	return crdConverter{scheme: s}
}

// internal returns obj in the internal version, or a field error saying why not.
func (c crdConverter) internal(obj runtime.Object) (*apiextensions.CustomResourceDefinition, field.ErrorList) {
	in, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
	if !ok {
		return nil, field.ErrorList{field.InternalError(nil, fmt.Errorf("not a CustomResourceDefinition: %T", obj))}
	}
	out := &apiextensions.CustomResourceDefinition{}
	if err := c.scheme.Convert(in, out, nil); err != nil {
		return nil, field.ErrorList{field.InternalError(nil, fmt.Errorf("convert the CustomResourceDefinition: %w", err))}
	}
	return out, nil
}

// crdStrategy is upstream's CustomResourceDefinition strategy: the status is the
// server's (a create starts it with the storage version in storedVersions, an update
// of the main resource keeps it and adds a new storage version there), the spec may
// only change through the main resource, and the validation is upstream's.
func crdStrategy(c crdConverter) Strategy {
	return Strategy{
		PrepareForCreate: func(obj runtime.Object) {
			crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
			if !ok {
				return
			}
			crd.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
			addStorageVersion(crd)
		},
		PrepareForUpdate: func(obj, old runtime.Object) {
			n, ok1 := obj.(*apiextensionsv1.CustomResourceDefinition)
			o, ok2 := old.(*apiextensionsv1.CustomResourceDefinition)
			if !ok1 || !ok2 {
				return
			}
			n.Status = *o.Status.DeepCopy()
			addStorageVersion(n)
		},
		Default: func(obj runtime.Object) {
			if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
				apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
			}
		},
		PrepareForDelete: func(obj runtime.Object) bool {
			crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
			if ok && crd.DeletionTimestamp == nil {
				markCRDForDeletion(crd)
			}
			return false
		},
		Validate: func(obj runtime.Object) field.ErrorList {
			crd, errs := c.internal(obj)
			if errs != nil {
				return errs
			}
			return crdvalidation.ValidateCustomResourceDefinition(context.Background(), crd)
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
			return crdvalidation.ValidateCustomResourceDefinitionUpdate(context.Background(), n, o)
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
			return crdvalidation.ValidateUpdateCustomResourceDefinitionStatus(context.Background(), n, o)
		},
	}
}

// CustomResourceCleanupFinalizer holds a deleted CustomResourceDefinition until its
// objects are deleted (upstream's finalizer name).
const CustomResourceCleanupFinalizer = "customresourcecleanup.apiextensions.k8s.io"

// markCRDForDeletion is what the first deletion of a definition does upstream: it
// adds the clean-up finalizer, for the finalizer controller to delete the objects,
// and says so in the Terminating condition.
func markCRDForDeletion(crd *apiextensionsv1.CustomResourceDefinition) {
	if !apihelpers.CRDHasFinalizer(crd, CustomResourceCleanupFinalizer) {
		crd.Finalizers = append(crd.Finalizers, CustomResourceCleanupFinalizer)
	}
	apihelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
		Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionTrue,
		Reason: "InstanceDeletionPending", Message: "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
	})
}

// addStorageVersion records the version marked storage in status.storedVersions, as
// upstream's strategy does on every write of the main resource.
func addStorageVersion(crd *apiextensionsv1.CustomResourceDefinition) {
	for _, v := range crd.Spec.Versions {
		if !v.Storage {
			continue
		}
		for _, s := range crd.Status.StoredVersions {
			if s == v.Name {
				return
			}
		}
		crd.Status.StoredVersions = append(crd.Status.StoredVersions, v.Name)
		return
	}
}
