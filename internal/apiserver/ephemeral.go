package apiserver

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubette/kubette/internal/registry/validation"
)

// subEphemeralContainers is the pods subresource kubectl debug adds ephemeral containers
// through (GET, PUT and PATCH, all of a whole Pod).
const subEphemeralContainers = "ephemeralcontainers"

// ephemeralContainersUpdate is what an update through pods/ephemeralcontainers writes, as
// upstream's strategy: the current pod with the request's spec.ephemeralContainers, and of
// the request's metadata only what a status update may change (the annotations; labels,
// finalizers and owners stay). Anything else the request changes is dropped, not refused.
func ephemeralContainersUpdate(cur, newObj runtime.Object) runtime.Object {
	np, ok := newObj.(*corev1.Pod)
	cp, ok2 := cur.(*corev1.Pod)
	if !ok || !ok2 {
		return newObj
	}
	out := cp.DeepCopy()
	out.Spec.EphemeralContainers = np.Spec.EphemeralContainers
	out.Annotations = np.Annotations
	out.ResourceVersion = np.ResourceVersion
	out.ManagedFields = np.ManagedFields
	return out
}

// validateEphemeralContainersUpdate validates an update through pods/ephemeralcontainers:
// ephemeral containers may only be added, by the spec's rules.
func validateEphemeralContainersUpdate(newObj, cur runtime.Object) field.ErrorList {
	np, ok := newObj.(*corev1.Pod)
	cp, ok2 := cur.(*corev1.Pod)
	if !ok || !ok2 {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("ephemeralcontainers is a subresource of pods, not of %T", newObj))}
	}
	return validation.ValidateEphemeralContainersUpdate(np, cp)
}
