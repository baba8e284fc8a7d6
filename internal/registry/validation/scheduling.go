package validation

import (
	"fmt"
	"net/netip"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// isDualStack reports whether the two IPs (or CIDRs) belong to different families.
func isDualStack(a, b string) bool {
	fa, oka := ipFamilyOf(a)
	fb, okb := ipFamilyOf(b)
	return oka && okb && fa != fb
}

// ipFamilyOf returns 4 or 6 for an IP or a CIDR.
func ipFamilyOf(s string) (int, bool) {
	if addr, err := netip.ParseAddr(s); err == nil {
		if addr.Is4() || addr.Is4In6() {
			return 4, true
		}
		return 6, true
	}
	if prefix, err := netip.ParsePrefix(s); err == nil {
		if prefix.Addr().Is4() || prefix.Addr().Is4In6() {
			return 4, true
		}
		return 6, true
	}
	return 0, false
}

func validateAffinity(affinity *corev1.Affinity, fldPath *field.Path) field.ErrorList {
	if affinity == nil {
		return nil
	}
	var errs field.ErrorList
	if na := affinity.NodeAffinity; na != nil {
		naPath := fldPath.Child("nodeAffinity")
		if na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			errs = append(errs, validateNodeSelector(na.RequiredDuringSchedulingIgnoredDuringExecution, naPath.Child("requiredDuringSchedulingIgnoredDuringExecution"))...)
		}
		for i, term := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			p := naPath.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
			if term.Weight <= 0 || term.Weight > 100 {
				errs = append(errs, field.Invalid(p.Child("weight"), term.Weight, "must be in the range 1-100"))
			}
			errs = append(errs, validateNodeSelectorTerm(term.Preference, p.Child("preference"))...)
		}
	}
	if pa := affinity.PodAffinity; pa != nil {
		errs = append(errs, validatePodAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, fldPath.Child("podAffinity"))...)
	}
	if pa := affinity.PodAntiAffinity; pa != nil {
		errs = append(errs, validatePodAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, fldPath.Child("podAntiAffinity"))...)
	}
	return errs
}

func validateNodeSelector(ns *corev1.NodeSelector, fldPath *field.Path) field.ErrorList {
	termsPath := fldPath.Child("nodeSelectorTerms")
	if len(ns.NodeSelectorTerms) == 0 {
		return field.ErrorList{field.Required(termsPath, "must have at least one node selector term")}
	}
	var errs field.ErrorList
	for i, term := range ns.NodeSelectorTerms {
		errs = append(errs, validateNodeSelectorTerm(term, termsPath.Index(i))...)
	}
	return errs
}

func validateNodeSelectorTerm(term corev1.NodeSelectorTerm, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, req := range term.MatchExpressions {
		errs = append(errs, validateNodeSelectorRequirement(req, fldPath.Child("matchExpressions").Index(i))...)
	}
	for i, req := range term.MatchFields {
		p := fldPath.Child("matchFields").Index(i)
		if req.Key != "metadata.name" {
			errs = append(errs, field.NotSupported(p.Child("key"), req.Key, []string{"metadata.name"}))
		}
		switch req.Operator {
		case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
			if len(req.Values) != 1 {
				errs = append(errs, field.Required(p.Child("values"), "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
			}
		default:
			errs = append(errs, field.Invalid(p.Child("operator"), req.Operator, "not a valid selector operator"))
		}
	}
	return errs
}

func validateNodeSelectorRequirement(req corev1.NodeSelectorRequirement, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch req.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(req.Values) == 0 {
			errs = append(errs, field.Required(fldPath.Child("values"), "must be specified when `operator` is 'In' or 'NotIn'"))
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(req.Values) > 0 {
			errs = append(errs, field.Forbidden(fldPath.Child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(req.Values) != 1 {
			errs = append(errs, field.Required(fldPath.Child("values"), "must be specified single value when `operator` is 'Lt' or 'Gt'"))
		} else if _, err := strconv.ParseInt(req.Values[0], 10, 64); err != nil {
			errs = append(errs, field.Invalid(fldPath.Child("values").Index(0), req.Values[0], "must be an integer when `operator` is 'Lt' or 'Gt'"))
		}
	default:
		errs = append(errs, field.Invalid(fldPath.Child("operator"), req.Operator, "not a valid selector operator"))
	}
	errs = append(errs, metav1validation.ValidateLabelName(req.Key, fldPath.Child("key"))...)
	for i, v := range req.Values {
		if req.Operator == corev1.NodeSelectorOpGt || req.Operator == corev1.NodeSelectorOpLt {
			continue
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(fldPath.Child("values").Index(i), v, msg))
		}
	}
	return errs
}

func validatePodAffinityTerms(required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, term := range required {
		errs = append(errs, validatePodAffinityTerm(term, fldPath.Child("requiredDuringSchedulingIgnoredDuringExecution").Index(i))...)
	}
	for i, wt := range preferred {
		p := fldPath.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
		if wt.Weight <= 0 || wt.Weight > 100 {
			errs = append(errs, field.Invalid(p.Child("weight"), wt.Weight, "must be in the range 1-100"))
		}
		errs = append(errs, validatePodAffinityTerm(wt.PodAffinityTerm, p.Child("podAffinityTerm"))...)
	}
	return errs
}

func validatePodAffinityTerm(term corev1.PodAffinityTerm, fldPath *field.Path) field.ErrorList {
	opts := metav1validation.LabelSelectorValidationOptions{}
	errs := metav1validation.ValidateLabelSelector(term.LabelSelector, opts, fldPath.Child("labelSelector"))
	errs = append(errs, metav1validation.ValidateLabelSelector(term.NamespaceSelector, opts, fldPath.Child("namespaceSelector"))...)
	for _, ns := range term.Namespaces {
		errs = append(errs, validateDNS1123Label(ns, fldPath.Child("namespace"))...)
	}
	if term.TopologyKey == "" {
		errs = append(errs, field.Required(fldPath.Child("topologyKey"), "can not be empty"))
	} else {
		errs = append(errs, metav1validation.ValidateLabelName(term.TopologyKey, fldPath.Child("topologyKey"))...)
	}
	for i, key := range term.MatchLabelKeys {
		errs = append(errs, metav1validation.ValidateLabelName(key, fldPath.Child("matchLabelKeys").Index(i))...)
	}
	for i, key := range term.MismatchLabelKeys {
		errs = append(errs, metav1validation.ValidateLabelName(key, fldPath.Child("mismatchLabelKeys").Index(i))...)
	}
	return errs
}

func validateTopologySpreadConstraints(constraints []corev1.TopologySpreadConstraint, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, c := range constraints {
		p := fldPath.Index(i)
		if c.MaxSkew <= 0 {
			errs = append(errs, field.Invalid(p.Child("maxSkew"), c.MaxSkew, isNotPositiveErrorMsg))
		}
		if c.TopologyKey == "" {
			errs = append(errs, field.Required(p.Child("topologyKey"), "can not be empty"))
		}
		switch c.WhenUnsatisfiable {
		case corev1.DoNotSchedule, corev1.ScheduleAnyway:
		default:
			errs = append(errs, field.NotSupported(p.Child("whenUnsatisfiable"), c.WhenUnsatisfiable, []corev1.UnsatisfiableConstraintAction{corev1.DoNotSchedule, corev1.ScheduleAnyway}))
		}
		for _, rest := range constraints[i+1:] {
			if c.TopologyKey == rest.TopologyKey && c.WhenUnsatisfiable == rest.WhenUnsatisfiable {
				errs = append(errs, field.Duplicate(p.Child("{topologyKey, whenUnsatisfiable}"), fmt.Sprintf("{%v, %v}", c.TopologyKey, c.WhenUnsatisfiable)))
				break
			}
		}
		if c.MinDomains != nil {
			if *c.MinDomains <= 0 {
				errs = append(errs, field.Invalid(p.Child("minDomains"), c.MinDomains, isNotPositiveErrorMsg))
			}
			if c.WhenUnsatisfiable != corev1.DoNotSchedule {
				errs = append(errs, field.Invalid(p.Child("minDomains"), c.MinDomains, fmt.Sprintf("can only use minDomains if whenUnsatisfiable=%s, not %s", corev1.DoNotSchedule, c.WhenUnsatisfiable)))
			}
		}
		for _, pol := range []struct {
			v    *corev1.NodeInclusionPolicy
			name string
		}{{c.NodeAffinityPolicy, "nodeAffinityPolicy"}, {c.NodeTaintsPolicy, "nodeTaintsPolicy"}} {
			if pol.v != nil && *pol.v != corev1.NodeInclusionPolicyHonor && *pol.v != corev1.NodeInclusionPolicyIgnore {
				errs = append(errs, field.NotSupported(p.Child(pol.name), pol.v, []corev1.NodeInclusionPolicy{corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore}))
			}
		}
		for j, key := range c.MatchLabelKeys {
			errs = append(errs, metav1validation.ValidateLabelName(key, p.Child("matchLabelKeys").Index(j))...)
		}
		errs = append(errs, metav1validation.ValidateLabelSelector(c.LabelSelector, metav1validation.LabelSelectorValidationOptions{}, p.Child("labelSelector"))...)
	}
	return errs
}
