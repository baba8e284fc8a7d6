package validation

import (
	rbacv1 "k8s.io/api/rbac/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The rules of rbac.authorization.k8s.io/v1, as upstream's pkg/apis/rbac/validation.
// Verbs are not checked against a list: a rule may name any verb (upstream keeps
// "frobnicate" as it keeps "get").

// rbacName is upstream's minimal name rule for roles and bindings: a valid path segment.
func rbacName(name string, _ bool) []string { return path.IsValidPathSegmentName(name) }

// ValidateRole returns the field errors of a Role.
func ValidateRole(r *rbacv1.Role) field.ErrorList {
	errs := validateMeta(&r.ObjectMeta, true, rbacName)
	for i := range r.Rules {
		errs = append(errs, validatePolicyRule(&r.Rules[i], true, field.NewPath("rules").Index(i))...)
	}
	return errs
}

// ValidateRoleUpdate returns the field errors of an update of a Role.
func ValidateRoleUpdate(r, old *rbacv1.Role) field.ErrorList {
	return append(ValidateRole(r), validateMetaUpdate(&r.ObjectMeta, &old.ObjectMeta)...)
}

// ValidateClusterRole returns the field errors of a ClusterRole.
func ValidateClusterRole(r *rbacv1.ClusterRole) field.ErrorList {
	errs := validateMeta(&r.ObjectMeta, false, rbacName)
	for i := range r.Rules {
		errs = append(errs, validatePolicyRule(&r.Rules[i], false, field.NewPath("rules").Index(i))...)
	}
	if r.AggregationRule != nil {
		p := field.NewPath("aggregationRule", "clusterRoleSelectors")
		if len(r.AggregationRule.ClusterRoleSelectors) == 0 {
			errs = append(errs, field.Required(p, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
		}
		for i := range r.AggregationRule.ClusterRoleSelectors {
			sel := &r.AggregationRule.ClusterRoleSelectors[i]
			errs = append(errs, metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, p.Index(i))...)
			if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
				errs = append(errs, field.Invalid(p.Index(i), sel, "invalid label selector."))
			}
		}
	}
	return errs
}

// ValidateClusterRoleUpdate returns the field errors of an update of a ClusterRole.
func ValidateClusterRoleUpdate(r, old *rbacv1.ClusterRole) field.ErrorList {
	return append(ValidateClusterRole(r), validateMetaUpdate(&r.ObjectMeta, &old.ObjectMeta)...)
}

func validatePolicyRule(rule *rbacv1.PolicyRule, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(rule.Verbs) == 0 {
		errs = append(errs, field.Required(p.Child("verbs"), "verbs must contain at least one value"))
	}
	if len(rule.NonResourceURLs) > 0 {
		if namespaced {
			errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
		}
		if len(rule.APIGroups) > 0 || len(rule.Resources) > 0 || len(rule.ResourceNames) > 0 {
			errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
		}
		return errs
	}
	if len(rule.APIGroups) == 0 {
		errs = append(errs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
	}
	if len(rule.Resources) == 0 {
		errs = append(errs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
	}
	return errs
}

// ValidateRoleBinding returns the field errors of a RoleBinding.
func ValidateRoleBinding(b *rbacv1.RoleBinding) field.ErrorList {
	errs := validateMeta(&b.ObjectMeta, true, rbacName)
	errs = append(errs, validateRoleRef(&b.RoleRef, []string{"Role", "ClusterRole"})...)
	for i := range b.Subjects {
		errs = append(errs, validateSubject(&b.Subjects[i], true, field.NewPath("subjects").Index(i))...)
	}
	return errs
}

// ValidateRoleBindingUpdate returns the field errors of an update of a RoleBinding:
// its roleRef may not change.
func ValidateRoleBindingUpdate(b, old *rbacv1.RoleBinding) field.ErrorList {
	errs := append(ValidateRoleBinding(b), validateMetaUpdate(&b.ObjectMeta, &old.ObjectMeta)...)
	if b.RoleRef != old.RoleRef {
		errs = append(errs, field.Invalid(field.NewPath("roleRef"), b.RoleRef, "cannot change roleRef"))
	}
	return errs
}

// ValidateClusterRoleBinding returns the field errors of a ClusterRoleBinding.
func ValidateClusterRoleBinding(b *rbacv1.ClusterRoleBinding) field.ErrorList {
	errs := validateMeta(&b.ObjectMeta, false, rbacName)
	errs = append(errs, validateRoleRef(&b.RoleRef, []string{"ClusterRole"})...)
	for i := range b.Subjects {
		errs = append(errs, validateSubject(&b.Subjects[i], false, field.NewPath("subjects").Index(i))...)
	}
	return errs
}

// ValidateClusterRoleBindingUpdate returns the field errors of an update of a
// ClusterRoleBinding: its roleRef may not change.
func ValidateClusterRoleBindingUpdate(b, old *rbacv1.ClusterRoleBinding) field.ErrorList {
	errs := append(ValidateClusterRoleBinding(b), validateMetaUpdate(&b.ObjectMeta, &old.ObjectMeta)...)
	if b.RoleRef != old.RoleRef {
		errs = append(errs, field.Invalid(field.NewPath("roleRef"), b.RoleRef, "cannot change roleRef"))
	}
	return errs
}

func validateRoleRef(ref *rbacv1.RoleRef, kinds []string) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(p.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	known := false
	for _, k := range kinds {
		known = known || ref.Kind == k
	}
	if !known {
		errs = append(errs, field.NotSupported(p.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		for _, msg := range rbacName(ref.Name, false) {
			errs = append(errs, field.Invalid(p.Child("name"), ref.Name, msg))
		}
	}
	return errs
}

func validateSubject(s *rbacv1.Subject, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		if s.Name != "" {
			for _, msg := range apimachineryvalidation.ValidateServiceAccountName(s.Name, false) {
				errs = append(errs, field.Invalid(p.Child("name"), s.Name, msg))
			}
		}
		if s.APIGroup != "" {
			errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{""}))
		}
		if !namespaced && s.Namespace == "" {
			errs = append(errs, field.Required(p.Child("namespace"), ""))
		}
	case rbacv1.UserKind, rbacv1.GroupKind:
		if s.APIGroup != rbacv1.GroupName {
			errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("kind"), s.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
	}
	return errs
}
