package validation

import (
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The node.k8s.io/v1 RuntimeClass rules of upstream's pkg/apis/node/validation: a
// DNS-subdomain name, a handler that is a DNS label and never changes, an overhead
// checked as container limits, and scheduling labels and tolerations (unique by key,
// operator, value and effect).

// ValidateRuntimeClass returns the field errors of a new RuntimeClass.
func ValidateRuntimeClass(rc *nodev1.RuntimeClass) field.ErrorList {
	errs := validateMetaWith(&rc.ObjectMeta, false, apimachineryvalidation.NameIsDNSSubdomain, false)
	errs = append(errs, validateDNS1123Label(rc.Handler, field.NewPath("handler"))...)
	if rc.Overhead != nil {
		errs = append(errs, validateContainerResources(&corev1.ResourceRequirements{Limits: rc.Overhead.PodFixed}, nil, field.NewPath("overhead"))...)
	}
	if s := rc.Scheduling; s != nil {
		p := field.NewPath("scheduling")
		if s.NodeSelector != nil {
			errs = append(errs, metav1validation.ValidateLabels(s.NodeSelector, p.Child("nodeSelector"))...)
		}
		errs = append(errs, validateRuntimeClassTolerations(s.Tolerations, p.Child("tolerations"))...)
	}
	return errs
}

// ValidateRuntimeClassUpdate returns the field errors of an update: only the handler
// is fixed; overhead and scheduling may change (pods admitted earlier keep theirs).
func ValidateRuntimeClassUpdate(rc, old *nodev1.RuntimeClass) field.ErrorList {
	errs := validateMetaUpdateWith(&rc.ObjectMeta, &old.ObjectMeta, false)
	return append(errs, validateImmutable(rc.Handler, old.Handler, field.NewPath("handler"))...)
}

// validateRuntimeClassTolerations checks each toleration as a pod's and refuses a
// second one of the same key, operator, value and effect. Upstream reports the
// per-toleration errors under "tolerations" once more (scheduling.tolerations.tolerations[i]),
// and so does this.
func validateRuntimeClassTolerations(tolerations []corev1.Toleration, fldPath *field.Path) field.ErrorList {
	errs := validateTolerations(tolerations, fldPath.Child("tolerations"))
	type key struct {
		key, operator, value, effect string
	}
	seen := map[key]bool{}
	for i, t := range tolerations {
		k := key{t.Key, string(t.Operator), t.Value, string(t.Effect)}
		if seen[k] {
			errs = append(errs, field.Duplicate(fldPath.Index(i), t))
		}
		seen[k] = true
	}
	return errs
}
