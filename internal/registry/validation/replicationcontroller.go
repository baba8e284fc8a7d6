package validation

import (
	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateReplicationController validates a new ReplicationController as upstream's
// ValidateReplicationController: its metadata and spec.
func validateReplicationController(rc *corev1.ReplicationController) field.ErrorList {
	errs := validateMeta(&rc.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain)
	return append(errs, validateReplicationControllerSpec(&rc.Spec, field.NewPath("spec"))...)
}

// validateReplicationControllerUpdate validates an update: the metadata's update rules
// and the new spec (upstream runs the create rules too, and its error list drops the
// duplicates). Unlike a ReplicaSet's, the selector may change.
func validateReplicationControllerUpdate(rc, old *corev1.ReplicationController) field.ErrorList {
	errs := validateMetaUpdate(&rc.ObjectMeta, &old.ObjectMeta)
	return append(errs, validateReplicationControllerSpec(&rc.Spec, field.NewPath("spec"))...)
}

func validateReplicationControllerSpec(spec *corev1.ReplicationControllerSpec, fldPath *field.Path) field.ErrorList {
	errs := validateNonnegative(int64(spec.MinReadySeconds), fldPath.Child("minReadySeconds"))
	if labels.Set(spec.Selector).AsSelector().Empty() {
		errs = append(errs, field.Required(fldPath.Child("selector"), ""))
	}
	errs = append(errs, validateNonnegative(int64(replicasOf(spec.Replicas)), fldPath.Child("replicas"))...)
	return append(errs, validatePodTemplateSpecForRC(spec.Template, spec.Selector, fldPath.Child("template"))...)
}

// validatePodTemplateSpecForRC validates the template of a ReplicationController: it
// is required, its labels must match the selector and its pods must restart Always.
func validatePodTemplateSpecForRC(tmpl *corev1.PodTemplateSpec, selector map[string]string, fldPath *field.Path) field.ErrorList {
	if tmpl == nil {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var errs field.ErrorList
	if sel := labels.Set(selector).AsSelector(); !sel.Empty() && !sel.Matches(labels.Set(tmpl.Labels)) {
		errs = append(errs, field.Invalid(fldPath.Child("metadata", "labels"), tmpl.Labels, "`selector` does not match template `labels`"))
	}
	errs = append(errs, validatePodTemplateSpec(tmpl, fldPath)...)
	if tmpl.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(fldPath.Child("spec", "restartPolicy"), tmpl.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	if tmpl.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in ReplicationController is not Supported"))
	}
	return errs
}

// validateReplicationControllerStatusUpdate validates an update through the status
// subresource: the metadata and the status counts.
func validateReplicationControllerStatusUpdate(rc, old *corev1.ReplicationController) field.ErrorList {
	errs := validateMetaUpdate(&rc.ObjectMeta, &old.ObjectMeta)
	p := field.NewPath("status")
	s := &rc.Status
	errs = append(errs, validateNonnegative(int64(s.Replicas), p.Child("replicas"))...)
	errs = append(errs, validateNonnegative(int64(s.FullyLabeledReplicas), p.Child("fullyLabeledReplicas"))...)
	errs = append(errs, validateNonnegative(int64(s.ReadyReplicas), p.Child("readyReplicas"))...)
	errs = append(errs, validateNonnegative(int64(s.AvailableReplicas), p.Child("availableReplicas"))...)
	errs = append(errs, validateNonnegative(s.ObservedGeneration, p.Child("observedGeneration"))...)
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
