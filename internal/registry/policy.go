package registry

import (
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubette/kubette/internal/registry/validation"
)

var policyV1 = schema.GroupVersion{Group: "policy", Version: "v1"}

// policyResources are the policy/v1 kinds: PodDisruptionBudgets, whose status the
// disruption controller keeps and the pods/eviction subresource draws on.
func policyResources() []*Resource {
	return []*Resource{
		{
			GroupVersion: policyV1, Kind: "PodDisruptionBudget", ListKind: "PodDisruptionBudgetList",
			Plural: "poddisruptionbudgets", Singular: "poddisruptionbudget", Namespaced: true,
			ShortNames: []string{"pdb"}, StoragePrefix: "/registry/poddisruptionbudgets", Subresources: []string{"status"},
			Strategy: Strategy{
				// Upstream's policy/v1 has no defaults for a budget.
				Default: func(runtime.Object) {},
				Validate: func(obj runtime.Object) field.ErrorList {
					return validateAs(obj, validation.ValidatePodDisruptionBudget)
				},
				ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
					return validateUpdateAs(obj, old, validation.ValidatePodDisruptionBudgetUpdate)
				},
				ValidateStatusUpdate: func(obj, old runtime.Object) field.ErrorList {
					return validateUpdateAs(obj, old, validation.ValidatePodDisruptionBudgetStatusUpdate)
				},
			},
			New:     func() runtime.Object { return &policyv1.PodDisruptionBudget{} },
			NewList: func() runtime.Object { return &policyv1.PodDisruptionBudgetList{} },
		},
	}
}
