package registry

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubette/kubette/internal/registry/defaults"
	"github.com/kubette/kubette/internal/registry/validation"
)

var admissionregistrationV1 = schema.GroupVersion{Group: "admissionregistration.k8s.io", Version: "v1"}

// webhookConfigurationResources are the dynamic admission webhooks'
// configurations, admissionregistration.k8s.io/v1: cluster-scoped, no status. The
// API server's webhook admission plugins read them.
func webhookConfigurationResources() []*Resource {
	return []*Resource{
		{
			GroupVersion: admissionregistrationV1, Kind: "ValidatingWebhookConfiguration", ListKind: "ValidatingWebhookConfigurationList",
			Plural: "validatingwebhookconfigurations", Singular: "validatingwebhookconfiguration",
			Categories: []string{"api-extensions"}, StoragePrefix: "/registry/validatingwebhookconfigurations",
			Strategy: Strategy{
				Default: func(obj runtime.Object) {
					if c, ok := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration); ok {
						defaults.ValidatingWebhookConfiguration(c)
					}
				},
				Validate: func(obj runtime.Object) field.ErrorList {
					return validateAs(obj, func(c *admissionregistrationv1.ValidatingWebhookConfiguration) field.ErrorList {
						return validation.ValidateValidatingWebhookConfiguration(c)
					})
				},
				ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
					return validateUpdateAs(obj, old, func(c, o *admissionregistrationv1.ValidatingWebhookConfiguration) field.ErrorList {
						return validation.ValidateValidatingWebhookConfigurationUpdate(c, o)
					})
				},
				GenerationChanged: webhooksChanged, PrepareForCreate: firstGeneration,
			},
			New: func() runtime.Object { return &admissionregistrationv1.ValidatingWebhookConfiguration{} },
			NewList: func() runtime.Object {
				return &admissionregistrationv1.ValidatingWebhookConfigurationList{}
			},
		},
		{
			GroupVersion: admissionregistrationV1, Kind: "MutatingWebhookConfiguration", ListKind: "MutatingWebhookConfigurationList",
			Plural: "mutatingwebhookconfigurations", Singular: "mutatingwebhookconfiguration",
			Categories: []string{"api-extensions"}, StoragePrefix: "/registry/mutatingwebhookconfigurations",
			Strategy: Strategy{
				Default: func(obj runtime.Object) {
					if c, ok := obj.(*admissionregistrationv1.MutatingWebhookConfiguration); ok {
						defaults.MutatingWebhookConfiguration(c)
					}
				},
				Validate: func(obj runtime.Object) field.ErrorList {
					return validateAs(obj, func(c *admissionregistrationv1.MutatingWebhookConfiguration) field.ErrorList {
						return validation.ValidateMutatingWebhookConfiguration(c)
					})
				},
				ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
					return validateUpdateAs(obj, old, func(c, o *admissionregistrationv1.MutatingWebhookConfiguration) field.ErrorList {
						return validation.ValidateMutatingWebhookConfigurationUpdate(c, o)
					})
				},
				GenerationChanged: webhooksChanged, PrepareForCreate: firstGeneration,
			},
			New: func() runtime.Object { return &admissionregistrationv1.MutatingWebhookConfiguration{} },
			NewList: func() runtime.Object {
				return &admissionregistrationv1.MutatingWebhookConfigurationList{}
			},
		},
	}
}

// firstGeneration sets metadata.generation 1 on a kind without a spec whose
// generation still tracks changes.
func firstGeneration(obj runtime.Object) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetGeneration(1)
	}
}

// webhooksChanged moves metadata.generation when the webhooks change, as upstream's
// strategies of these spec-less kinds do.
func webhooksChanged(obj, old runtime.Object) bool {
	switch o := obj.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		p, _ := old.(*admissionregistrationv1.ValidatingWebhookConfiguration)
		return p == nil || !apiequality.Semantic.DeepEqual(o.Webhooks, p.Webhooks)
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		p, _ := old.(*admissionregistrationv1.MutatingWebhookConfiguration)
		return p == nil || !apiequality.Semantic.DeepEqual(o.Webhooks, p.Webhooks)
	}
	return false
}
