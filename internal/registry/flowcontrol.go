package registry

import (
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubette/kubette/internal/registry/defaults"
	"github.com/kubette/kubette/internal/registry/validation"
)

var flowcontrolV1 = schema.GroupVersion{Group: "flowcontrol.apiserver.k8s.io", Version: "v1"}

// flowcontrolResources are the kinds of API Priority and Fairness,
// flowcontrol.apiserver.k8s.io/v1: cluster-scoped FlowSchemas and
// PriorityLevelConfigurations, each with a status subresource (the API server writes
// their conditions).
func flowcontrolResources() []*Resource {
	return []*Resource{
		{
			GroupVersion: flowcontrolV1, Kind: "FlowSchema", ListKind: "FlowSchemaList", Plural: "flowschemas", Singular: "flowschema",
			StoragePrefix: "/registry/flowschemas", Subresources: []string{"status"},
			Strategy: Strategy{
				Default: func(obj runtime.Object) {
					if fs, ok := obj.(*flowcontrolv1.FlowSchema); ok {
						defaults.FlowSchema(fs)
					}
				},
				Validate: func(obj runtime.Object) field.ErrorList {
					return validateAs(obj, validation.ValidateFlowSchema)
				},
				ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
					return validateUpdateAs(obj, old, validation.ValidateFlowSchemaUpdate)
				},
				ValidateStatusUpdate: func(obj, old runtime.Object) field.ErrorList {
					return validateUpdateAs(obj, old, validation.ValidateFlowSchemaStatus)
				},
			},
			New: func() runtime.Object { return &flowcontrolv1.FlowSchema{} }, NewList: func() runtime.Object { return &flowcontrolv1.FlowSchemaList{} },
		},
		{
			GroupVersion: flowcontrolV1, Kind: "PriorityLevelConfiguration", ListKind: "PriorityLevelConfigurationList",
			Plural: "prioritylevelconfigurations", Singular: "prioritylevelconfiguration",
			StoragePrefix: "/registry/prioritylevelconfigurations", Subresources: []string{"status"},
			Strategy: Strategy{
				Default: func(obj runtime.Object) {
					if pl, ok := obj.(*flowcontrolv1.PriorityLevelConfiguration); ok {
						defaults.PriorityLevelConfiguration(pl)
					}
				},
				Validate: func(obj runtime.Object) field.ErrorList {
					return validateAs(obj, validation.ValidatePriorityLevelConfiguration)
				},
				ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
					return validateUpdateAs(obj, old, validation.ValidatePriorityLevelConfigurationUpdate)
				},
				ValidateStatusUpdate: func(obj, old runtime.Object) field.ErrorList {
					return validateUpdateAs(obj, old, validation.ValidatePriorityLevelConfigurationStatus)
				},
			},
			New: func() runtime.Object { return &flowcontrolv1.PriorityLevelConfiguration{} },
			NewList: func() runtime.Object {
				return &flowcontrolv1.PriorityLevelConfigurationList{}
			},
		},
	}
}
