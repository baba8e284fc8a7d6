package registry

import (
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubette/kubette/internal/registry/conversion"
	"github.com/kubette/kubette/internal/registry/defaults"
	"github.com/kubette/kubette/internal/registry/validation"
)

var (
	autoscalingV1 = schema.GroupVersion{Group: "autoscaling", Version: "v1"}
	autoscalingV2 = schema.GroupVersion{Group: "autoscaling", Version: "v2"}
)

// autoscalingResources are the HorizontalPodAutoscalers, served as autoscaling/v2 (the
// preferred and storage version, listed first as upstream's discovery lists it) and as
// autoscaling/v1, which is converted to and from v2 with upstream's round-trip
// annotations. Both are checked in their v2 form, as upstream checks its internal one.
func autoscalingResources() []*Resource {
	hpa := func(gv schema.GroupVersion, strategy Strategy, newObj, newList func() runtime.Object) *Resource {
		r := &Resource{
			GroupVersion: gv, Kind: "HorizontalPodAutoscaler", ListKind: "HorizontalPodAutoscalerList",
			Plural: "horizontalpodautoscalers", Singular: "horizontalpodautoscaler", ShortNames: []string{"hpa"},
			Namespaced: true, Categories: []string{"all"}, StoragePrefix: "/registry/horizontalpodautoscalers",
			StorageVersion: autoscalingV2, Subresources: []string{"status"},
			Strategy: strategy, New: newObj, NewList: newList,
		}
		if gv == autoscalingV1 {
			r.ToServed, r.ToStorage = hpaToV1, hpaToV2
		}
		return r
	}
	return []*Resource{
		hpa(autoscalingV2, Strategy{
			Default: defaults.Apply,
			Validate: func(obj runtime.Object) field.ErrorList {
				return validateAs(obj, validation.ValidateHorizontalPodAutoscaler)
			},
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validateUpdateAs(obj, old, validation.ValidateHorizontalPodAutoscalerUpdate)
			},
			ValidateStatusUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validateUpdateAs(obj, old, validation.ValidateHorizontalPodAutoscalerStatusUpdate)
			},
		}, func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscaler{} },
			func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscalerList{} }),
		hpa(autoscalingV1, Strategy{
			Default: defaults.Apply,
			Validate: func(obj runtime.Object) field.ErrorList {
				return validateAsV2(obj, nil, func(h, _ *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList {
					return validation.ValidateHorizontalPodAutoscaler(h)
				})
			},
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validateAsV2(obj, old, validation.ValidateHorizontalPodAutoscalerUpdate)
			},
			ValidateStatusUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validateAsV2(obj, old, validation.ValidateHorizontalPodAutoscalerStatusUpdate)
			},
		}, func() runtime.Object { return &autoscalingv1.HorizontalPodAutoscaler{} },
			func() runtime.Object { return &autoscalingv1.HorizontalPodAutoscalerList{} }),
	}
}

// validateAsV2 checks autoscaling/v1 autoscalers (obj, and old unless nil) in their v2
// form. An object whose round-trip annotations cannot be read is invalid there.
func validateAsV2(obj, old runtime.Object, fn func(h, old *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList) field.ErrorList {
	h, err := hpaToV2(obj)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("metadata", "annotations"), nil, err.Error())}
	}
	var prev runtime.Object = &autoscalingv2.HorizontalPodAutoscaler{}
	if old != nil {
		if prev, err = hpaToV2(old); err != nil {
			return field.ErrorList{field.InternalError(field.NewPath("metadata", "annotations"), err)}
		}
	}
	return fn(h.(*autoscalingv2.HorizontalPodAutoscaler), prev.(*autoscalingv2.HorizontalPodAutoscaler))
}

// hpaToV1 is the autoscaling/v1 resource's ToServed.
func hpaToV1(obj runtime.Object) (runtime.Object, error) {
	if h, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler); ok {
		return conversion.HPAToV1(h)
	}
	return obj, nil
}

// hpaToV2 is the autoscaling/v1 resource's ToStorage.
func hpaToV2(obj runtime.Object) (runtime.Object, error) {
	if h, ok := obj.(*autoscalingv1.HorizontalPodAutoscaler); ok {
		return conversion.HPAFromV1(h)
	}
	return obj, nil
}
