package validation

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The apps/v1 StatefulSet rules of upstream's pkg/apis/apps/validation: pod
// management and update strategy, the claim retention policy, non-negative counts,
// the selector and template as for other workloads, claim templates with access
// modes and a storage request, a spec of which an update may change only replicas,
// ordinals, template, updateStrategy, revisionHistoryLimit,
// persistentVolumeClaimRetentionPolicy and minReadySeconds, and a status whose
// counts are not negative, not above status.replicas, and whose collision count never
// drops.

func validateStatefulSet(ss *appsv1.StatefulSet) field.ErrorList {
	errs := validateMeta(&ss.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain)
	return append(errs, validateStatefulSetSpec(&ss.Spec, field.NewPath("spec"))...)
}

func validateStatefulSetSpec(spec *appsv1.StatefulSetSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch spec.PodManagementPolicy {
	case "":
		errs = append(errs, field.Required(fldPath.Child("podManagementPolicy"), ""))
	case appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement:
	default:
		errs = append(errs, field.Invalid(fldPath.Child("podManagementPolicy"), spec.PodManagementPolicy,
			fmt.Sprintf("must be '%s' or '%s'", appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement)))
	}
	errs = append(errs, validateStatefulSetUpdateStrategy(&spec.UpdateStrategy, fldPath.Child("updateStrategy"))...)
	errs = append(errs, validateClaimRetentionPolicy(spec.PersistentVolumeClaimRetentionPolicy, fldPath.Child("persistentVolumeClaimRetentionPolicy"))...)
	errs = append(errs, validateNonnegative(int64(replicasOf(spec.Replicas)), fldPath.Child("replicas"))...)
	errs = append(errs, validateNonnegative(int64(spec.MinReadySeconds), fldPath.Child("minReadySeconds"))...)
	if spec.RevisionHistoryLimit != nil {
		errs = append(errs, validateNonnegative(int64(*spec.RevisionHistoryLimit), fldPath.Child("revisionHistoryLimit"))...)
	}
	if spec.Ordinals != nil {
		errs = append(errs, validateNonnegative(int64(spec.Ordinals.Start), fldPath.Child("ordinals", "start"))...)
	}
	errs = append(errs, validateControllerSelectorAndTemplate(spec.Selector, &spec.Template, "statefulset", "StatefulSet", fldPath)...)
	for i := range spec.VolumeClaimTemplates {
		errs = append(errs, validateClaimTemplate(&spec.VolumeClaimTemplates[i], fldPath.Child("volumeClaimTemplates").Index(i))...)
	}
	return errs
}

func validateStatefulSetUpdateStrategy(s *appsv1.StatefulSetUpdateStrategy, fldPath *field.Path) field.ErrorList {
	switch s.Type {
	case "":
		return field.ErrorList{field.Required(fldPath, "")}
	case appsv1.OnDeleteStatefulSetStrategyType:
		if s.RollingUpdate != nil {
			return field.ErrorList{field.Invalid(fldPath.Child("rollingUpdate"), s.RollingUpdate,
				fmt.Sprintf("only allowed for updateStrategy '%s'", appsv1.RollingUpdateStatefulSetStrategyType))}
		}
		return nil
	case appsv1.RollingUpdateStatefulSetStrategyType:
		ru := s.RollingUpdate
		if ru == nil {
			return nil
		}
		p := fldPath.Child("rollingUpdate")
		var errs field.ErrorList
		if ru.Partition != nil {
			errs = append(errs, validateNonnegative(int64(*ru.Partition), p.Child("partition"))...)
		}
		if ru.MaxUnavailable != nil {
			errs = append(errs, validatePositiveIntOrPercent(*ru.MaxUnavailable, p.Child("maxUnavailable"))...)
			if intOrPercentValue(*ru.MaxUnavailable) == 0 {
				errs = append(errs, field.Invalid(p.Child("maxUnavailable"), ru.MaxUnavailable, "cannot be 0"))
			}
			errs = append(errs, notMoreThan100Percent(*ru.MaxUnavailable, p.Child("maxUnavailable"))...)
		}
		return errs
	}
	return field.ErrorList{field.Invalid(fldPath, s,
		fmt.Sprintf("must be '%s' or '%s'", appsv1.RollingUpdateStatefulSetStrategyType, appsv1.OnDeleteStatefulSetStrategyType))}
}

func validateClaimRetentionPolicy(p *appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy, fldPath *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	supported := []string{string(appsv1.RetainPersistentVolumeClaimRetentionPolicyType), string(appsv1.DeletePersistentVolumeClaimRetentionPolicyType)}
	var errs field.ErrorList
	for _, f := range []struct {
		name  string
		value appsv1.PersistentVolumeClaimRetentionPolicyType
	}{{"whenDeleted", p.WhenDeleted}, {"whenScaled", p.WhenScaled}} {
		switch f.value {
		case appsv1.RetainPersistentVolumeClaimRetentionPolicyType, appsv1.DeletePersistentVolumeClaimRetentionPolicyType:
		default:
			errs = append(errs, field.NotSupported(fldPath.Child(f.name), f.value, supported))
		}
	}
	return errs
}

// validateClaimTemplate checks what every claim needs: an access mode and, unless it
// is filled from a data source, a storage request.
func validateClaimTemplate(c *corev1.PersistentVolumeClaim, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	spec := fldPath.Child("spec")
	if len(c.Spec.AccessModes) == 0 {
		errs = append(errs, field.Required(spec.Child("accessModes"), "at least 1 access mode is required"))
	}
	supported := []string{string(corev1.ReadWriteOnce), string(corev1.ReadOnlyMany), string(corev1.ReadWriteMany), string(corev1.ReadWriteOncePod)}
	for _, m := range c.Spec.AccessModes {
		switch m {
		case corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOncePod:
		default:
			errs = append(errs, field.NotSupported(spec.Child("accessModes"), m, supported))
		}
	}
	if c.Spec.DataSource == nil && c.Spec.DataSourceRef == nil {
		if _, ok := c.Spec.Resources.Requests[corev1.ResourceStorage]; !ok {
			errs = append(errs, field.Required(spec.Child("resources").Key(string(corev1.ResourceStorage)), ""))
		}
	}
	return errs
}

func validateStatefulSetUpdate(ss, old *appsv1.StatefulSet) field.ErrorList {
	errs := validateMetaUpdate(&ss.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateStatefulSetSpec(&ss.Spec, field.NewPath("spec"))...)
	// Only these fields may change; the rest of the spec must stay as it is.
	mutable := ss.Spec.DeepCopy()
	mutable.Replicas = old.Spec.Replicas
	mutable.Ordinals = old.Spec.Ordinals
	mutable.Template = old.Spec.Template
	mutable.UpdateStrategy = old.Spec.UpdateStrategy
	mutable.RevisionHistoryLimit = old.Spec.RevisionHistoryLimit
	mutable.PersistentVolumeClaimRetentionPolicy = old.Spec.PersistentVolumeClaimRetentionPolicy
	mutable.MinReadySeconds = old.Spec.MinReadySeconds
	if !equality.Semantic.DeepEqual(*mutable, old.Spec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"))
	}
	return errs
}

func validateStatefulSetStatusUpdate(ss, old *appsv1.StatefulSet) field.ErrorList {
	errs := validateMetaUpdate(&ss.ObjectMeta, &old.ObjectMeta)
	p := field.NewPath("status")
	s := &ss.Status
	errs = append(errs, validateNonnegative(int64(s.Replicas), p.Child("replicas"))...)
	errs = append(errs, validateNonnegative(int64(s.ReadyReplicas), p.Child("readyReplicas"))...)
	errs = append(errs, validateNonnegative(int64(s.CurrentReplicas), p.Child("currentReplicas"))...)
	errs = append(errs, validateNonnegative(int64(s.UpdatedReplicas), p.Child("updatedReplicas"))...)
	errs = append(errs, validateNonnegative(int64(s.AvailableReplicas), p.Child("availableReplicas"))...)
	errs = append(errs, validateNonnegative(s.ObservedGeneration, p.Child("observedGeneration"))...)
	if s.CollisionCount != nil {
		errs = append(errs, validateNonnegative(int64(*s.CollisionCount), p.Child("collisionCount"))...)
	}
	for _, f := range []struct {
		name  string
		value int32
	}{{"readyReplicas", s.ReadyReplicas}, {"currentReplicas", s.CurrentReplicas}, {"updatedReplicas", s.UpdatedReplicas}, {"availableReplicas", s.AvailableReplicas}} {
		if f.value > s.Replicas {
			errs = append(errs, field.Invalid(p.Child(f.name), f.value, greaterThanReplicasMsg))
		}
	}
	if s.AvailableReplicas > s.ReadyReplicas {
		errs = append(errs, field.Invalid(p.Child("availableReplicas"), s.AvailableReplicas, "cannot be greater than status.readyReplicas"))
	}
	return append(errs, validateCollisionCountUpdate(s.CollisionCount, old.Status.CollisionCount, p.Child("collisionCount"))...)
}
