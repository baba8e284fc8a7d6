package registry

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubette/kubette/internal/registry/defaults"
	"github.com/kubette/kubette/internal/registry/validation"
)

// admissionPolicyResources are the kinds of CEL admission policies,
// admissionregistration.k8s.io/v1: cluster-scoped ValidatingAdmissionPolicies (with a
// status subresource the server writes: observedGeneration and type checking) and
// the ValidatingAdmissionPolicyBindings that apply them.
func admissionPolicyResources() []*Resource {
	gv := admissionregistrationv1.SchemeGroupVersion
	return []*Resource{
		{
			GroupVersion: gv, Kind: "ValidatingAdmissionPolicy", ListKind: "ValidatingAdmissionPolicyList",
			Plural: "validatingadmissionpolicies", Singular: "validatingadmissionpolicy", Categories: []string{"api-extensions"},
			StoragePrefix: "/registry/validatingadmissionpolicies", Subresources: []string{"status"},
			Strategy: Strategy{
				Default: func(obj runtime.Object) {
					if p, ok := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok {
						defaults.ValidatingAdmissionPolicy(p)
					}
				},
				Validate: func(obj runtime.Object) field.ErrorList {
					return validateAs(obj, validation.ValidateValidatingAdmissionPolicy)
				},
				ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
					return validateUpdateAs(obj, old, validation.ValidateValidatingAdmissionPolicyUpdate)
				},
				ValidateStatusUpdate: func(obj, old runtime.Object) field.ErrorList {
					return validateUpdateAs(obj, old, validation.ValidateValidatingAdmissionPolicyStatus)
				},
			},
			New: func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicy{} },
			NewList: func() runtime.Object {
				return &admissionregistrationv1.ValidatingAdmissionPolicyList{}
			},
		},
		{
			GroupVersion: gv, Kind: "ValidatingAdmissionPolicyBinding", ListKind: "ValidatingAdmissionPolicyBindingList",
			Plural: "validatingadmissionpolicybindings", Singular: "validatingadmissionpolicybinding", Categories: []string{"api-extensions"},
			StoragePrefix: "/registry/validatingadmissionpolicybindings",
			Strategy: Strategy{
				Default: func(obj runtime.Object) {
					if b, ok := obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding); ok {
						defaults.ValidatingAdmissionPolicyBinding(b)
					}
				},
				Validate: func(obj runtime.Object) field.ErrorList {
					return validateAs(obj, validation.ValidateValidatingAdmissionPolicyBinding)
				},
				ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
					return validateUpdateAs(obj, old, validation.ValidateValidatingAdmissionPolicyBindingUpdate)
				},
			},
			New: func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{} },
			NewList: func() runtime.Object {
				return &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{}
			},
		},
	}
}
