package registry

import (
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubette/kubette/internal/registry/validation"
)

var nodeV1 = schema.GroupVersion{Group: "node.k8s.io", Version: "v1"}

// nodeResources are the node.k8s.io/v1 kinds: RuntimeClasses, which the RuntimeClass
// admission plugin applies to new pods and the kubelet turns into a CRI runtime handler.
func nodeResources() []*Resource {
	return []*Resource{
		{
			GroupVersion: nodeV1, Kind: "RuntimeClass", ListKind: "RuntimeClassList",
			Plural: "runtimeclasses", Singular: "runtimeclass", StoragePrefix: "/registry/runtimeclasses",
			Strategy: Strategy{
				// Upstream's node/v1 has no defaults for a RuntimeClass.
				Default: func(runtime.Object) {},
				Validate: func(obj runtime.Object) field.ErrorList {
					return validateAs(obj, validation.ValidateRuntimeClass)
				},
				ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
					return validateUpdateAs(obj, old, validation.ValidateRuntimeClassUpdate)
				},
			},
			New:     func() runtime.Object { return &nodev1.RuntimeClass{} },
			NewList: func() runtime.Object { return &nodev1.RuntimeClassList{} },
		},
	}
}
