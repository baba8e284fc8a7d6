package validation

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// replicasOf returns the replica count a nil pointer stands for after defaulting.
func replicasOf(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// validateWorkloadSelectorAndTemplate validates the selector of a Deployment
// or ReplicaSet and the pod template it must match.
func validateWorkloadSelectorAndTemplate(selector *metav1.LabelSelector, tmpl *corev1.PodTemplateSpec, kind string, fldPath *field.Path) field.ErrorList {
	return validateControllerSelectorAndTemplate(selector, tmpl, kind, "ReplicaSet", fldPath)
}

// validateControllerSelectorAndTemplate validates the selector of a workload and the
// pod template it must match: kind names the workload in the empty-selector message,
// deadlineKind in the activeDeadlineSeconds one (upstream says ReplicaSet for
// Deployments too).
func validateControllerSelectorAndTemplate(selector *metav1.LabelSelector, tmpl *corev1.PodTemplateSpec, kind, deadlineKind string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	selPath := fldPath.Child("selector")
	if selector == nil {
		errs = append(errs, field.Required(selPath, ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(selector, metav1validation.LabelSelectorValidationOptions{}, selPath)...)
		if len(selector.MatchLabels)+len(selector.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(selPath, selector, "empty selector is invalid for "+kind))
		}
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return append(errs, field.Invalid(selPath, selector, "invalid label selector"))
	}
	tmplPath := fldPath.Child("template")
	if !sel.Empty() && !sel.Matches(labels.Set(tmpl.Labels)) {
		errs = append(errs, field.Invalid(tmplPath.Child("metadata", "labels"), tmpl.Labels, "`selector` does not match template `labels`"))
	}
	errs = append(errs, validatePodTemplateSpec(tmpl, tmplPath)...)
	if tmpl.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(tmplPath.Child("spec", "restartPolicy"), tmpl.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	if tmpl.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(tmplPath.Child("spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in "+deadlineKind+" is not Supported"))
	}
	return errs
}

func validateDeploymentSpec(spec *appsv1.DeploymentSpec, fldPath *field.Path) field.ErrorList {
	errs := validateNonnegative(int64(replicasOf(spec.Replicas)), fldPath.Child("replicas"))
	errs = append(errs, validateWorkloadSelectorAndTemplate(spec.Selector, &spec.Template, "deployment", fldPath)...)
	errs = append(errs, validateDeploymentStrategy(&spec.Strategy, fldPath.Child("strategy"))...)
	errs = append(errs, validateNonnegative(int64(spec.MinReadySeconds), fldPath.Child("minReadySeconds"))...)
	if spec.RevisionHistoryLimit != nil {
		errs = append(errs, validateNonnegative(int64(*spec.RevisionHistoryLimit), fldPath.Child("revisionHistoryLimit"))...)
	}
	if spec.ProgressDeadlineSeconds != nil {
		errs = append(errs, validateNonnegative(int64(*spec.ProgressDeadlineSeconds), fldPath.Child("progressDeadlineSeconds"))...)
		if *spec.ProgressDeadlineSeconds <= spec.MinReadySeconds {
			errs = append(errs, field.Invalid(fldPath.Child("progressDeadlineSeconds"), spec.ProgressDeadlineSeconds, "must be greater than minReadySeconds"))
		}
	}
	return errs
}

func validateDeploymentStrategy(strategy *appsv1.DeploymentStrategy, fldPath *field.Path) field.ErrorList {
	switch strategy.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if strategy.RollingUpdate != nil {
			return field.ErrorList{field.Forbidden(fldPath.Child("rollingUpdate"), "may not be specified when strategy `type` is '"+string(appsv1.RecreateDeploymentStrategyType)+"'")}
		}
	case appsv1.RollingUpdateDeploymentStrategyType:
		if strategy.RollingUpdate == nil {
			return field.ErrorList{field.Required(fldPath.Child("rollingUpdate"), "this should be defaulted and never be nil")}
		}
		return validateRollingUpdateDeployment(strategy.RollingUpdate, fldPath.Child("rollingUpdate"))
	default:
		return field.ErrorList{field.NotSupported(fldPath, strategy, []string{string(appsv1.RecreateDeploymentStrategyType), string(appsv1.RollingUpdateDeploymentStrategyType)})}
	}
	return nil
}

// intOrPercent returns the referenced value (nil counts as 0) with the percent
// value for valid percentages.
func intOrPercent(v *intstr.IntOrString) intstr.IntOrString {
	if v == nil {
		return intstr.FromInt32(0)
	}
	return *v
}

func percentValue(v intstr.IntOrString) (int, bool) {
	if v.Type != intstr.String || len(validation.IsValidPercent(v.StrVal)) != 0 {
		return 0, false
	}
	n, err := strconv.Atoi(v.StrVal[:len(v.StrVal)-1])
	return n, err == nil
}

func intOrPercentValue(v intstr.IntOrString) int {
	if n, ok := percentValue(v); ok {
		return n
	}
	return v.IntValue()
}

func validatePositiveIntOrPercent(v intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch v.Type {
	case intstr.String:
		for _, msg := range validation.IsValidPercent(v.StrVal) {
			errs = append(errs, field.Invalid(fldPath, v, msg))
		}
	case intstr.Int:
		errs = append(errs, validateNonnegative(int64(v.IntValue()), fldPath)...)
	default:
		errs = append(errs, field.Invalid(fldPath, v, "must be an integer or percentage (e.g '5%%')"))
	}
	return errs
}

func validateRollingUpdateDeployment(ru *appsv1.RollingUpdateDeployment, fldPath *field.Path) field.ErrorList {
	maxUnavailable, maxSurge := intOrPercent(ru.MaxUnavailable), intOrPercent(ru.MaxSurge)
	errs := validatePositiveIntOrPercent(maxUnavailable, fldPath.Child("maxUnavailable"))
	errs = append(errs, validatePositiveIntOrPercent(maxSurge, fldPath.Child("maxSurge"))...)
	if intOrPercentValue(maxUnavailable) == 0 && intOrPercentValue(maxSurge) == 0 {
		errs = append(errs, field.Invalid(fldPath.Child("maxUnavailable"), maxUnavailable, "may not be 0 when `maxSurge` is 0"))
	}
	if n, ok := percentValue(maxUnavailable); ok && n > 100 {
		errs = append(errs, field.Invalid(fldPath.Child("maxUnavailable"), maxUnavailable, "must not be greater than 100%"))
	}
	return errs
}

func validateDeploymentUpdate(d, old *appsv1.Deployment) field.ErrorList {
	errs := validateMetaUpdate(&d.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateDeploymentSpec(&d.Spec, field.NewPath("spec"))...)
	// apps/v1 forbids changing the selector.
	return append(errs, validateImmutable(d.Spec.Selector, old.Spec.Selector, field.NewPath("spec", "selector"))...)
}

func validateReplicaSetSpec(spec *appsv1.ReplicaSetSpec, fldPath *field.Path) field.ErrorList {
	errs := validateNonnegative(int64(replicasOf(spec.Replicas)), fldPath.Child("replicas"))
	errs = append(errs, validateNonnegative(int64(spec.MinReadySeconds), fldPath.Child("minReadySeconds"))...)
	// Upstream reports the same "empty selector" message for ReplicaSets.
	return append(errs, validateWorkloadSelectorAndTemplate(spec.Selector, &spec.Template, "deployment", fldPath)...)
}

func validateReplicaSetUpdate(rs, old *appsv1.ReplicaSet) field.ErrorList {
	errs := validateMetaUpdate(&rs.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateReplicaSetSpec(&rs.Spec, field.NewPath("spec"))...)
	return append(errs, validateImmutable(rs.Spec.Selector, old.Spec.Selector, field.NewPath("spec", "selector"))...)
}

const greaterThanReplicasMsg = "cannot be greater than status.replicas"

func validateDeploymentStatusUpdate(d, old *appsv1.Deployment) field.ErrorList {
	errs := validateMetaUpdate(&d.ObjectMeta, &old.ObjectMeta)
	p := field.NewPath("status")
	s := &d.Status
	errs = append(errs, validateNonnegative(s.ObservedGeneration, p.Child("observedGeneration"))...)
	errs = append(errs, validateNonnegative(int64(s.Replicas), p.Child("replicas"))...)
	errs = append(errs, validateNonnegative(int64(s.UpdatedReplicas), p.Child("updatedReplicas"))...)
	errs = append(errs, validateNonnegative(int64(s.ReadyReplicas), p.Child("readyReplicas"))...)
	errs = append(errs, validateNonnegative(int64(s.AvailableReplicas), p.Child("availableReplicas"))...)
	errs = append(errs, validateNonnegative(int64(s.UnavailableReplicas), p.Child("unavailableReplicas"))...)
	if s.TerminatingReplicas != nil {
		errs = append(errs, validateNonnegative(int64(*s.TerminatingReplicas), p.Child("terminatingReplicas"))...)
	}
	if s.CollisionCount != nil {
		errs = append(errs, validateNonnegative(int64(*s.CollisionCount), p.Child("collisionCount"))...)
	}
	if s.UpdatedReplicas > s.Replicas {
		errs = append(errs, field.Invalid(p.Child("updatedReplicas"), s.UpdatedReplicas, greaterThanReplicasMsg))
	}
	if s.ReadyReplicas > s.Replicas {
		errs = append(errs, field.Invalid(p.Child("readyReplicas"), s.ReadyReplicas, greaterThanReplicasMsg))
	}
	if s.AvailableReplicas > s.Replicas {
		errs = append(errs, field.Invalid(p.Child("availableReplicas"), s.AvailableReplicas, greaterThanReplicasMsg))
	}
	if s.AvailableReplicas > s.ReadyReplicas {
		errs = append(errs, field.Invalid(p.Child("availableReplicas"), s.AvailableReplicas, "cannot be greater than readyReplicas"))
	}
	return append(errs, validateCollisionCountUpdate(s.CollisionCount, old.Status.CollisionCount, p.Child("collisionCount"))...)
}

func validateCollisionCountUpdate(newCount, oldCount *int32, fldPath *field.Path) field.ErrorList {
	decremented := (newCount == nil && oldCount != nil) || (newCount != nil && oldCount != nil && *newCount < *oldCount)
	if !decremented {
		return nil
	}
	value := int32(0)
	if newCount != nil {
		value = *newCount
	}
	return field.ErrorList{field.Invalid(fldPath, value, "cannot be decremented")}
}

func validateReplicaSetStatusUpdate(rs, old *appsv1.ReplicaSet) field.ErrorList {
	errs := validateMetaUpdate(&rs.ObjectMeta, &old.ObjectMeta)
	p := field.NewPath("status")
	s := &rs.Status
	errs = append(errs, validateNonnegative(int64(s.Replicas), p.Child("replicas"))...)
	errs = append(errs, validateNonnegative(int64(s.FullyLabeledReplicas), p.Child("fullyLabeledReplicas"))...)
	errs = append(errs, validateNonnegative(int64(s.ReadyReplicas), p.Child("readyReplicas"))...)
	errs = append(errs, validateNonnegative(int64(s.AvailableReplicas), p.Child("availableReplicas"))...)
	errs = append(errs, validateNonnegative(s.ObservedGeneration, p.Child("observedGeneration"))...)
	if s.TerminatingReplicas != nil {
		errs = append(errs, validateNonnegative(int64(*s.TerminatingReplicas), p.Child("terminatingReplicas"))...)
	}
	if s.FullyLabeledReplicas > s.Replicas {
		errs = append(errs, field.Invalid(p.Child("fullyLabeledReplicas"), s.FullyLabeledReplicas, greaterThanReplicasMsg))
	}
	if s.ReadyReplicas > s.Replicas {
		errs = append(errs, field.Invalid(p.Child("readyReplicas"), s.ReadyReplicas, greaterThanReplicasMsg))
	}
	if s.AvailableReplicas > s.Replicas {
		errs = append(errs, field.Invalid(p.Child("availableReplicas"), s.AvailableReplicas, greaterThanReplicasMsg))
	}
	if s.AvailableReplicas > s.ReadyReplicas {
		errs = append(errs, field.Invalid(p.Child("availableReplicas"), s.AvailableReplicas, "cannot be greater than readyReplicas"))
	}
	return errs
}

// validateScale validates a scale subresource request (create and update alike).
func validateScale(s *autoscalingv1.Scale) field.ErrorList {
	errs := validateMeta(&s.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain)
	if s.Spec.Replicas < 0 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "replicas"), s.Spec.Replicas, "must be greater than or equal to 0"))
	}
	return errs
}
