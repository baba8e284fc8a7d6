package registry

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubette/kubette/internal/registry/defaults"
	"github.com/kubette/kubette/internal/registry/validation"
)

var schedulingV1 = schema.GroupVersion{Group: "scheduling.k8s.io", Version: "v1"}

// quotaResources are the kinds that bound what a namespace may use: core/v1 LimitRange
// and ResourceQuota, and scheduling.k8s.io/v1 PriorityClass, which pods' priorities
// (and priority-scoped quotas) come from.
func quotaResources() []*Resource {
	return []*Resource{
		{
			GroupVersion: coreV1, Kind: "LimitRange", ListKind: "LimitRangeList", Plural: "limitranges", Singular: "limitrange", Namespaced: true,
			ShortNames: []string{"limits"}, StoragePrefix: "/registry/limitranges",
			Strategy: Strategy{
				Default: func(obj runtime.Object) {
					if lr, ok := obj.(*corev1.LimitRange); ok {
						defaults.LimitRange(lr)
					}
				},
				Validate: func(obj runtime.Object) field.ErrorList {
					return validateAs(obj, validation.ValidateLimitRange)
				},
				ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
					return validateUpdateAs(obj, old, validation.ValidateLimitRangeUpdate)
				},
			},
			New: func() runtime.Object { return &corev1.LimitRange{} }, NewList: func() runtime.Object { return &corev1.LimitRangeList{} },
		},
		{
			GroupVersion: coreV1, Kind: "ResourceQuota", ListKind: "ResourceQuotaList", Plural: "resourcequotas", Singular: "resourcequota", Namespaced: true,
			ShortNames: []string{"quota"}, StoragePrefix: "/registry/resourcequotas", Subresources: []string{"status"},
			Strategy: Strategy{
				Default: func(runtime.Object) {},
				Validate: func(obj runtime.Object) field.ErrorList {
					return validateAs(obj, validation.ValidateResourceQuota)
				},
				ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
					return validateUpdateAs(obj, old, validation.ValidateResourceQuotaUpdate)
				},
				ValidateStatusUpdate: func(obj, old runtime.Object) field.ErrorList {
					return validateUpdateAs(obj, old, validation.ValidateResourceQuotaStatusUpdate)
				},
			},
			New: func() runtime.Object { return &corev1.ResourceQuota{} }, NewList: func() runtime.Object { return &corev1.ResourceQuotaList{} },
		},
		{
			GroupVersion: schedulingV1, Kind: "PriorityClass", ListKind: "PriorityClassList", Plural: "priorityclasses", Singular: "priorityclass",
			ShortNames: []string{"pc"}, StoragePrefix: "/registry/priorityclasses",
			Strategy: Strategy{
				Default: func(obj runtime.Object) {
					if pc, ok := obj.(*schedulingv1.PriorityClass); ok {
						defaults.PriorityClass(pc)
					}
				},
				Validate: func(obj runtime.Object) field.ErrorList {
					return validateAs(obj, validation.ValidatePriorityClass)
				},
				ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
					return validateUpdateAs(obj, old, validation.ValidatePriorityClassUpdate)
				},
			},
			New: func() runtime.Object { return &schedulingv1.PriorityClass{} }, NewList: func() runtime.Object { return &schedulingv1.PriorityClassList{} },
		},
	}
}

// validateAs runs a kind's validation on obj, or reports an object of another type.
func validateAs[T runtime.Object](obj runtime.Object, fn func(T) field.ErrorList) field.ErrorList {
	o, ok := obj.(T)
	if !ok {
		return field.ErrorList{field.InternalError(nil, errWrongType(obj))}
	}
	return fn(o)
}

// validateUpdateAs runs a kind's update validation on obj and old.
func validateUpdateAs[T runtime.Object](obj, old runtime.Object, fn func(T, T) field.ErrorList) field.ErrorList {
	o, ok := obj.(T)
	p, ok2 := old.(T)
	if !ok || !ok2 {
		return field.ErrorList{field.InternalError(nil, errWrongType(obj))}
	}
	return fn(o, p)
}

// errWrongType reports an object handed to the strategy of another kind.
func errWrongType(obj runtime.Object) error { return fmt.Errorf("unexpected object of type %T", obj) }
