package registry

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubette/kubette/internal/registry/defaults"
	"github.com/kubette/kubette/internal/registry/validation"
)

// The hooks of typed kinds: upstream's defaults and validation rules for the
// k8s.io/api types, as the defaults and validation packages implement them.

func defaultTyped(obj runtime.Object) { defaults.Apply(obj) }

func validateTyped(obj runtime.Object) field.ErrorList { return validation.ValidateCreate(obj) }

func validateTypedUpdate(obj, old runtime.Object) field.ErrorList {
	return validation.ValidateUpdate(obj, old)
}

func validateTypedStatusUpdate(obj, old runtime.Object) field.ErrorList {
	return validation.ValidateStatusUpdate(obj, old)
}

func metaOf(obj runtime.Object) (metav1.Object, error) { return meta.Accessor(obj) }

// keepStatus is the create preparation of kinds whose creator writes the status too.
func keepStatus(runtime.Object) {}
