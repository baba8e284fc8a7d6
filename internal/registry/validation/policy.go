package validation

import (
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The policy/v1 PodDisruptionBudget rules of upstream's pkg/apis/policy/validation and
// its registry strategy. Upstream checks a budget's name only as a path segment (the
// generic store's rule): budgets are not DNS names.

var unhealthyPodEvictionPolicies = []string{string(policyv1.AlwaysAllow), string(policyv1.IfHealthyBudget)}

// ValidatePodDisruptionBudget returns the field errors of a new PodDisruptionBudget.
func ValidatePodDisruptionBudget(pdb *policyv1.PodDisruptionBudget) field.ErrorList {
	errs := validateMetaWith(&pdb.ObjectMeta, true, path.ValidatePathSegmentName, false)
	return append(errs, validatePodDisruptionBudgetSpec(&pdb.Spec, false, field.NewPath("spec"))...)
}

// ValidatePodDisruptionBudgetUpdate returns the field errors of an update of a budget:
// its spec is mutable; a selector whose label values were invalid before may stay so.
func ValidatePodDisruptionBudgetUpdate(pdb, old *policyv1.PodDisruptionBudget) field.ErrorList {
	errs := validateMetaUpdateWith(&pdb.ObjectMeta, &old.ObjectMeta, false)
	return append(errs, validatePodDisruptionBudgetSpec(&pdb.Spec, hasInvalidLabelValue(old.Spec.Selector), field.NewPath("spec"))...)
}

// ValidatePodDisruptionBudgetStatusUpdate returns the field errors of a status update:
// valid conditions and non-negative counts.
func ValidatePodDisruptionBudgetStatusUpdate(pdb, old *policyv1.PodDisruptionBudget) field.ErrorList {
	errs := validateMetaUpdateWith(&pdb.ObjectMeta, &old.ObjectMeta, false)
	p := field.NewPath("status")
	errs = append(errs, metav1validation.ValidateConditions(pdb.Status.Conditions, p.Child("conditions"))...)
	errs = append(errs, validateNonnegative(int64(pdb.Status.DisruptionsAllowed), p.Child("disruptionsAllowed"))...)
	errs = append(errs, validateNonnegative(int64(pdb.Status.CurrentHealthy), p.Child("currentHealthy"))...)
	errs = append(errs, validateNonnegative(int64(pdb.Status.DesiredHealthy), p.Child("desiredHealthy"))...)
	return append(errs, validateNonnegative(int64(pdb.Status.ExpectedPods), p.Child("expectedPods"))...)
}

func validatePodDisruptionBudgetSpec(spec *policyv1.PodDisruptionBudgetSpec, allowInvalidLabelValue bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.MinAvailable != nil && spec.MaxUnavailable != nil {
		errs = append(errs, field.Invalid(fldPath, *spec, "minAvailable and maxUnavailable cannot be both set"))
	}
	for _, f := range []struct {
		v    *intstr.IntOrString
		name string
	}{{spec.MinAvailable, "minAvailable"}, {spec.MaxUnavailable, "maxUnavailable"}} {
		if f.v == nil {
			continue
		}
		errs = append(errs, validatePositiveIntOrPercent(*f.v, fldPath.Child(f.name))...)
		if n, ok := percentValue(*f.v); ok && n > 100 {
			errs = append(errs, field.Invalid(fldPath.Child(f.name), *f.v, "must not be greater than 100%"))
		}
	}
	opts := metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: allowInvalidLabelValue}
	errs = append(errs, metav1validation.ValidateLabelSelector(spec.Selector, opts, fldPath.Child("selector"))...)
	if p := spec.UnhealthyPodEvictionPolicy; p != nil && *p != policyv1.AlwaysAllow && *p != policyv1.IfHealthyBudget {
		errs = append(errs, field.NotSupported(fldPath.Child("unhealthyPodEvictionPolicy"), *p, unhealthyPodEvictionPolicies))
	}
	return errs
}

// hasInvalidLabelValue reports whether a selector holds a label value that is not valid
// (accepted by older servers), which an update may then keep.
func hasInvalidLabelValue(sel *metav1.LabelSelector) bool {
	if sel == nil {
		return false
	}
	opts := metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: false}
	return len(metav1validation.ValidateLabelSelector(sel, opts, nil)) > 0 &&
		len(metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: true}, nil)) == 0
}
