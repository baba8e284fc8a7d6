package validation

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateEphemeralContainersUpdate validates an update through pods/ephemeralcontainers, as
// upstream's ValidatePodEphemeralContainersUpdate: the pod as a whole (its ephemeral
// containers by the rules of the spec: unique names, no ports, probes, resources or
// lifecycle, a target that exists), the metadata update, no static pod, and ephemeral
// containers only added — existing ones may be neither removed nor changed. newPod differs
// from oldPod only in its ephemeral containers (and the metadata a status update may change).
func ValidateEphemeralContainersUpdate(newPod, oldPod *corev1.Pod) field.ErrorList {
	metaPath := field.NewPath("metadata")
	errs := validateMetaUpdate(&newPod.ObjectMeta, &oldPod.ObjectMeta)
	errs = append(errs, validatePodBody(newPod)...)
	errs = append(errs, validatePodAnnotationUpdates(newPod, oldPod, metaPath.Child("annotations"))...)
	if _, ok := oldPod.Annotations[mirrorPodAnnotationKey]; ok {
		return field.ErrorList{field.Forbidden(field.NewPath(""), "static pods do not support ephemeral containers")}
	}
	specPath := field.NewPath("spec", "ephemeralContainers")
	byName := make(map[string]*corev1.EphemeralContainer, len(newPod.Spec.EphemeralContainers))
	for i := range newPod.Spec.EphemeralContainers {
		byName[newPod.Spec.EphemeralContainers[i].Name] = &newPod.Spec.EphemeralContainers[i]
	}
	for _, old := range oldPod.Spec.EphemeralContainers {
		cur, ok := byName[old.Name]
		switch {
		case !ok:
			errs = append(errs, field.Forbidden(specPath, fmt.Sprintf("existing ephemeral containers %q may not be removed\n", old.Name)))
		case !apiequality.Semantic.DeepEqual(old, *cur):
			errs = append(errs, field.Forbidden(specPath, fmt.Sprintf("existing ephemeral containers %q may not be changed\n%v", old.Name, diff.Diff(old, *cur))))
		}
	}
	return errs
}
