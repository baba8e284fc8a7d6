package validation

import (
	appsv1 "k8s.io/api/apps/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The apps/v1 DaemonSet rules of upstream's pkg/apis/apps/validation: the selector
// and template as for other workloads, the update strategy (exactly one of
// maxUnavailable and maxSurge non-zero), non-negative counts, an immutable selector,
// and status counts that are never negative and a collision count that never drops.

func validateDaemonSet(ds *appsv1.DaemonSet) field.ErrorList {
	errs := validateMeta(&ds.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain)
	return append(errs, validateDaemonSetSpec(&ds.Spec, field.NewPath("spec"))...)
}

func validateDaemonSetSpec(spec *appsv1.DaemonSetSpec, fldPath *field.Path) field.ErrorList {
	errs := validateControllerSelectorAndTemplate(spec.Selector, &spec.Template, "daemonset", "DaemonSet", fldPath)
	errs = append(errs, validateNonnegative(int64(spec.MinReadySeconds), fldPath.Child("minReadySeconds"))...)
	if spec.RevisionHistoryLimit != nil {
		errs = append(errs, validateNonnegative(int64(*spec.RevisionHistoryLimit), fldPath.Child("revisionHistoryLimit"))...)
	}
	return append(errs, validateDaemonSetUpdateStrategy(&spec.UpdateStrategy, fldPath.Child("updateStrategy"))...)
}

func validateDaemonSetUpdateStrategy(s *appsv1.DaemonSetUpdateStrategy, fldPath *field.Path) field.ErrorList {
	switch s.Type {
	case appsv1.OnDeleteDaemonSetStrategyType:
		return nil
	case appsv1.RollingUpdateDaemonSetStrategyType:
		if s.RollingUpdate == nil {
			return field.ErrorList{field.Required(fldPath.Child("rollingUpdate"), "")}
		}
		return validateRollingUpdateDaemonSet(s.RollingUpdate, fldPath.Child("rollingUpdate"))
	}
	return field.ErrorList{field.NotSupported(fldPath, s, []string{string(appsv1.OnDeleteDaemonSetStrategyType), string(appsv1.RollingUpdateDaemonSetStrategyType)})}
}

func validateRollingUpdateDaemonSet(ru *appsv1.RollingUpdateDaemonSet, fldPath *field.Path) field.ErrorList {
	maxUnavailable, maxSurge := intOrPercent(ru.MaxUnavailable), intOrPercent(ru.MaxSurge)
	errs := validatePositiveIntOrPercent(maxUnavailable, fldPath.Child("maxUnavailable"))
	errs = append(errs, validatePositiveIntOrPercent(maxSurge, fldPath.Child("maxSurge"))...)
	errs = append(errs, notMoreThan100Percent(maxUnavailable, fldPath.Child("maxUnavailable"))...)
	errs = append(errs, notMoreThan100Percent(maxSurge, fldPath.Child("maxSurge"))...)
	hasUnavailable, hasSurge := intOrPercentValue(maxUnavailable) != 0, intOrPercentValue(maxSurge) != 0
	switch {
	case hasUnavailable && hasSurge:
		errs = append(errs, field.Invalid(fldPath.Child("maxSurge"), maxSurge, "may not be set when maxUnavailable is non-zero"))
	case !hasUnavailable && !hasSurge:
		errs = append(errs, field.Required(fldPath.Child("maxUnavailable"), "cannot be 0 when maxSurge is 0"))
	}
	return errs
}

// notMoreThan100Percent refuses a percentage above 100%.
func notMoreThan100Percent(v intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	if n, ok := percentValue(v); ok && n > 100 {
		return field.ErrorList{field.Invalid(fldPath, v, "must not be greater than 100%")}
	}
	return nil
}

func validateDaemonSetUpdate(ds, old *appsv1.DaemonSet) field.ErrorList {
	errs := validateMetaUpdate(&ds.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateDaemonSetSpec(&ds.Spec, field.NewPath("spec"))...)
	return append(errs, validateImmutable(ds.Spec.Selector, old.Spec.Selector, field.NewPath("spec", "selector"))...)
}

func validateDaemonSetStatusUpdate(ds, old *appsv1.DaemonSet) field.ErrorList {
	errs := validateMetaUpdate(&ds.ObjectMeta, &old.ObjectMeta)
	p := field.NewPath("status")
	s := &ds.Status
	for _, f := range []struct {
		name  string
		value int64
	}{
		{"currentNumberScheduled", int64(s.CurrentNumberScheduled)},
		{"numberMisscheduled", int64(s.NumberMisscheduled)},
		{"desiredNumberScheduled", int64(s.DesiredNumberScheduled)},
		{"numberReady", int64(s.NumberReady)},
		{"observedGeneration", s.ObservedGeneration},
		{"updatedNumberScheduled", int64(s.UpdatedNumberScheduled)},
		{"numberAvailable", int64(s.NumberAvailable)},
		{"numberUnavailable", int64(s.NumberUnavailable)},
	} {
		errs = append(errs, validateNonnegative(f.value, p.Child(f.name))...)
	}
	if s.CollisionCount != nil {
		errs = append(errs, validateNonnegative(int64(*s.CollisionCount), p.Child("collisionCount"))...)
	}
	return append(errs, validateCollisionCountUpdate(s.CollisionCount, old.Status.CollisionCount, p.Child("collisionCount"))...)
}
