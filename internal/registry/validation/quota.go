package validation

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The rules of core/v1 LimitRange and ResourceQuota and of scheduling.k8s.io/v1
// PriorityClass, as upstream's pkg/apis/core/validation and pkg/apis/scheduling/validation.

const invalidQuotaResourceMsg = `must be a standard resource for quota`

// isStandardQuotaResourceName reports whether quota tracks the unqualified resource name.
func isStandardQuotaResourceName(name string) bool {
	switch name {
	case "cpu", "memory", "ephemeral-storage",
		"requests.cpu", "requests.memory", "requests.storage", "requests.ephemeral-storage",
		"limits.cpu", "limits.memory", "limits.ephemeral-storage",
		"pods", "resourcequotas", "services", "replicationcontrollers", "secrets",
		"persistentvolumeclaims", "configmaps", "services.nodeports", "services.loadbalancers":
		return true
	}
	return isHugePageResourceName(name) || strings.HasPrefix(name, requestsHugePagesPrefix)
}

// isStandardQuotaScope reports whether scope is one upstream knows.
func isStandardQuotaScope(scope corev1.ResourceQuotaScope) bool {
	switch scope {
	case corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating,
		corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort,
		corev1.ResourceQuotaScopePriorityClass, corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return true
	}
	return false
}

// quotaScopeAllows reports whether a quota with scope may limit resource: the pod
// scopes apply to the pod count and the pod compute resources (BestEffort only to the
// count, best-effort pods having no compute resources).
func quotaScopeAllows(scope corev1.ResourceQuotaScope, name string) bool {
	count := name == "pods"
	compute := false
	switch name {
	case "cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory":
		compute = true
	}
	switch scope {
	case corev1.ResourceQuotaScopeBestEffort:
		return count
	case corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating, corev1.ResourceQuotaScopeNotBestEffort,
		corev1.ResourceQuotaScopePriorityClass, corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return count || compute
	}
	return true
}

// validateQuotaResourceName validates a resource name of a quota's hard or used list.
func validateQuotaResourceName(name string, fldPath *field.Path) field.ErrorList {
	errs := validateResourceName(name, fldPath)
	if !strings.Contains(name, "/") && !isStandardQuotaResourceName(name) {
		errs = append(errs, field.Invalid(fldPath, name, invalidQuotaResourceMsg))
	}
	return errs
}

// validateQuotaList validates a hard or used list of a quota.
func validateQuotaList(list corev1.ResourceList, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range sortedResourceNames(list) {
		p := fldPath.Key(string(name))
		errs = append(errs, validateQuotaResourceName(string(name), p)...)
		errs = append(errs, validateResourceQuantityValue(string(name), list[name], p)...)
	}
	return errs
}

// conflictingScopes reports whether the set holds both of an exclusive pair.
func conflictingScopes(set map[corev1.ResourceQuotaScope]bool) bool {
	return (set[corev1.ResourceQuotaScopeBestEffort] && set[corev1.ResourceQuotaScopeNotBestEffort]) ||
		(set[corev1.ResourceQuotaScopeTerminating] && set[corev1.ResourceQuotaScopeNotTerminating])
}

func validateQuotaScopes(spec *corev1.ResourceQuotaSpec, fldPath *field.Path) field.ErrorList {
	if len(spec.Scopes) == 0 {
		return nil
	}
	var errs field.ErrorList
	p := fldPath.Child("scopes")
	names := sortedResourceNames(spec.Hard)
	set := map[corev1.ResourceQuotaScope]bool{}
	for _, scope := range spec.Scopes {
		if !isStandardQuotaScope(scope) {
			errs = append(errs, field.Invalid(p, spec.Scopes, "unsupported scope"))
		}
		for _, name := range names {
			if isStandardQuotaResourceName(string(name)) && !quotaScopeAllows(scope, string(name)) {
				errs = append(errs, field.Invalid(p, spec.Scopes, "unsupported scope applied to resource"))
			}
		}
		set[scope] = true
	}
	if conflictingScopes(set) {
		errs = append(errs, field.Invalid(p, spec.Scopes, "conflicting scopes"))
	}
	return errs
}

func validateQuotaScopeSelector(spec *corev1.ResourceQuotaSpec, fldPath *field.Path) field.ErrorList {
	if spec.ScopeSelector == nil {
		return nil
	}
	var errs field.ErrorList
	p := fldPath.Child("scopeSelector", "matchExpressions")
	names := sortedResourceNames(spec.Hard)
	set := map[corev1.ResourceQuotaScope]bool{}
	for _, req := range spec.ScopeSelector.MatchExpressions {
		if !isStandardQuotaScope(req.ScopeName) {
			errs = append(errs, field.Invalid(p.Child("scopeName"), req.ScopeName, "unsupported scope"))
		}
		for _, name := range names {
			if isStandardQuotaResourceName(string(name)) && !quotaScopeAllows(req.ScopeName, string(name)) {
				errs = append(errs, field.Invalid(p, spec.ScopeSelector, "unsupported scope applied to resource"))
			}
		}
		switch req.ScopeName {
		case corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort, corev1.ResourceQuotaScopeTerminating,
			corev1.ResourceQuotaScopeNotTerminating, corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
			if req.Operator != corev1.ScopeSelectorOpExists {
				errs = append(errs, field.Invalid(p.Child("operator"), req.Operator,
					"must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity"))
			}
		}
		switch req.Operator {
		case corev1.ScopeSelectorOpIn, corev1.ScopeSelectorOpNotIn:
			if len(req.Values) == 0 {
				errs = append(errs, field.Required(p.Child("values"), "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"))
			}
		case corev1.ScopeSelectorOpExists, corev1.ScopeSelectorOpDoesNotExist:
			if len(req.Values) != 0 {
				errs = append(errs, field.Invalid(p.Child("values"), req.Values, "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"))
			}
		default:
			errs = append(errs, field.Invalid(p.Child("operator"), req.Operator, "not a valid selector operator"))
		}
		set[req.ScopeName] = true
	}
	if conflictingScopes(set) {
		errs = append(errs, field.Invalid(p, spec.Scopes, "conflicting scopes"))
	}
	return errs
}

func validateQuotaSpec(spec *corev1.ResourceQuotaSpec, fldPath *field.Path) field.ErrorList {
	errs := validateQuotaList(spec.Hard, fldPath.Child("hard"))
	errs = append(errs, validateQuotaScopes(spec, fldPath)...)
	return append(errs, validateQuotaScopeSelector(spec, fldPath)...)
}

// ValidateResourceQuota returns the field errors of a new ResourceQuota.
func ValidateResourceQuota(q *corev1.ResourceQuota) field.ErrorList {
	errs := validateMeta(&q.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain)
	errs = append(errs, validateQuotaSpec(&q.Spec, field.NewPath("spec"))...)
	errs = append(errs, validateQuotaList(q.Status.Hard, field.NewPath("status", "hard"))...)
	return append(errs, validateQuotaList(q.Status.Used, field.NewPath("status", "used"))...)
}

// ValidateResourceQuotaUpdate returns the field errors of an update of a ResourceQuota's
// spec: the scopes may not change.
func ValidateResourceQuotaUpdate(q, old *corev1.ResourceQuota) field.ErrorList {
	errs := validateMetaUpdate(&q.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateQuotaSpec(&q.Spec, field.NewPath("spec"))...)
	a, b := slices.Clone(q.Spec.Scopes), slices.Clone(old.Spec.Scopes)
	slices.Sort(a)
	slices.Sort(b)
	if !slices.Equal(slices.Compact(a), slices.Compact(b)) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "scopes"), q.Spec.Scopes, fieldImmutableErrorMsg))
	}
	return errs
}

// ValidateResourceQuotaStatusUpdate returns the field errors of an update through the
// status subresource.
func ValidateResourceQuotaStatusUpdate(q, old *corev1.ResourceQuota) field.ErrorList {
	errs := validateMetaUpdate(&q.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateQuotaList(q.Status.Hard, field.NewPath("status", "hard"))...)
	return append(errs, validateQuotaList(q.Status.Used, field.NewPath("status", "used"))...)
}

// validateLimitTypeName validates the type of a LimitRange item.
func validateLimitTypeName(t corev1.LimitType, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(string(t)) {
		errs = append(errs, field.Invalid(fldPath, t, msg))
	}
	if len(errs) != 0 {
		return errs
	}
	if !strings.Contains(string(t), "/") {
		switch t {
		case corev1.LimitTypePod, corev1.LimitTypeContainer, corev1.LimitTypePersistentVolumeClaim:
		default:
			errs = append(errs, field.Invalid(fldPath, t, "must be a standard limit type or fully qualified"))
		}
	}
	return errs
}

// validateLimitResourceName validates a resource of a LimitRange item: pods and
// containers take container resources, other types (claims) any resource.
func validateLimitResourceName(t corev1.LimitType, name string, fldPath *field.Path) field.ErrorList {
	if t == corev1.LimitTypePod || t == corev1.LimitTypeContainer {
		return validateContainerResourceName(name, fldPath)
	}
	return validateResourceName(name, fldPath)
}

// ValidateLimitRange returns the field errors of a LimitRange (on create and update).
func ValidateLimitRange(lr *corev1.LimitRange) field.ErrorList {
	errs := validateMeta(&lr.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain)
	seen := map[corev1.LimitType]bool{}
	fldPath := field.NewPath("spec", "limits")
	for i := range lr.Spec.Limits {
		errs = append(errs, validateLimitRangeItem(&lr.Spec.Limits[i], seen, fldPath.Index(i))...)
	}
	return errs
}

func validateLimitRangeItem(item *corev1.LimitRangeItem, seen map[corev1.LimitType]bool, p *field.Path) field.ErrorList {
	errs := validateLimitTypeName(item.Type, p.Child("type"))
	if seen[item.Type] {
		errs = append(errs, field.Duplicate(p.Child("type"), item.Type))
	}
	seen[item.Type] = true
	keys := map[corev1.ResourceName]bool{}
	names := func(list corev1.ResourceList, child string) {
		for _, k := range sortedResourceNames(list) {
			errs = append(errs, validateLimitResourceName(item.Type, string(k), p.Child(child).Key(string(k)))...)
			keys[k] = true
		}
	}
	names(item.Max, "max")
	names(item.Min, "min")
	if item.Type == corev1.LimitTypePod {
		if len(item.Default) > 0 {
			errs = append(errs, field.Forbidden(p.Child("default"), "may not be specified when `type` is 'Pod'"))
		}
		if len(item.DefaultRequest) > 0 {
			errs = append(errs, field.Forbidden(p.Child("defaultRequest"), "may not be specified when `type` is 'Pod'"))
		}
	} else {
		names(item.Default, "default")
		names(item.DefaultRequest, "defaultRequest")
	}
	if item.Type == corev1.LimitTypePersistentVolumeClaim {
		_, hasMin := item.Min[corev1.ResourceStorage]
		_, hasMax := item.Max[corev1.ResourceStorage]
		if !hasMin && !hasMax {
			errs = append(errs, field.Required(p.Child("limits"), "either minimum or maximum storage value is required, but neither was provided"))
		}
	}
	names(item.MaxLimitRequestRatio, "maxLimitRequestRatio")
	sorted := make([]corev1.ResourceName, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	for _, k := range sorted {
		errs = append(errs, validateLimitRangeValues(item, k, p)...)
	}
	return errs
}

// validateLimitRangeValues checks that the min, max, defaults and ratio of one
// resource of an item are consistent.
func validateLimitRangeValues(item *corev1.LimitRangeItem, k corev1.ResourceName, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	key := string(k)
	minQ, hasMin := item.Min[k]
	maxQ, hasMax := item.Max[k]
	defQ, hasDef := item.Default[k]
	if item.Type == corev1.LimitTypePod {
		hasDef = false
	}
	reqQ, hasReq := item.DefaultRequest[k]
	if item.Type == corev1.LimitTypePod {
		hasReq = false
	}
	ratio, hasRatio := item.MaxLimitRequestRatio[k]
	if hasMin && hasMax && minQ.Cmp(maxQ) > 0 {
		errs = append(errs, field.Invalid(p.Child("min").Key(key), minQ, fmt.Sprintf("min value %s is greater than max value %s", minQ.String(), maxQ.String())))
	}
	if hasReq && hasMin && minQ.Cmp(reqQ) > 0 {
		errs = append(errs, field.Invalid(p.Child("defaultRequest").Key(key), reqQ, fmt.Sprintf("min value %s is greater than default request value %s", minQ.String(), reqQ.String())))
	}
	if hasReq && hasMax && reqQ.Cmp(maxQ) > 0 {
		errs = append(errs, field.Invalid(p.Child("defaultRequest").Key(key), reqQ, fmt.Sprintf("default request value %s is greater than max value %s", reqQ.String(), maxQ.String())))
	}
	if hasReq && hasDef && reqQ.Cmp(defQ) > 0 {
		errs = append(errs, field.Invalid(p.Child("defaultRequest").Key(key), reqQ, fmt.Sprintf("default request value %s is greater than default limit value %s", reqQ.String(), defQ.String())))
	}
	if hasDef && hasMin && minQ.Cmp(defQ) > 0 {
		errs = append(errs, field.Invalid(p.Child("default").Key(key), minQ, fmt.Sprintf("min value %s is greater than default value %s", minQ.String(), defQ.String())))
	}
	if hasDef && hasMax && defQ.Cmp(maxQ) > 0 {
		errs = append(errs, field.Invalid(p.Child("default").Key(key), maxQ, fmt.Sprintf("default value %s is greater than max value %s", defQ.String(), maxQ.String())))
	}
	if hasRatio && ratio.Cmp(*resource.NewQuantity(1, resource.DecimalSI)) < 0 {
		errs = append(errs, field.Invalid(p.Child("maxLimitRequestRatio").Key(key), ratio, fmt.Sprintf("ratio %s is less than 1", ratio.String())))
	}
	if hasRatio && hasMin && hasMax {
		r, lo, hi := float64(ratio.Value()), minQ.Value(), maxQ.Value()
		if ratio.Value() < resource.MaxMilliValue && lo < resource.MaxMilliValue && hi < resource.MaxMilliValue {
			r, lo, hi = float64(ratio.MilliValue())/1000, minQ.MilliValue(), maxQ.MilliValue()
		}
		limit := float64(hi) / float64(lo)
		if r > limit {
			errs = append(errs, field.Invalid(p.Child("maxLimitRequestRatio").Key(key), ratio, fmt.Sprintf("ratio %s is greater than max/min = %f", ratio.String(), limit)))
		}
	}
	if !isOvercommitAllowed(key) && hasDef && hasReq && defQ.Cmp(reqQ) != 0 {
		errs = append(errs, field.Invalid(p.Child("defaultRequest").Key(key), reqQ, fmt.Sprintf("default value %s must equal to defaultRequest value %s in %s", defQ.String(), reqQ.String(), key)))
	}
	return errs
}

// ValidateLimitRangeUpdate returns the field errors of an update of a LimitRange.
func ValidateLimitRangeUpdate(lr, old *corev1.LimitRange) field.ErrorList {
	errs := validateMetaUpdate(&lr.ObjectMeta, &old.ObjectMeta)
	spec := ValidateLimitRange(lr)
	for _, e := range spec {
		if !strings.HasPrefix(e.Field, "metadata.") {
			errs = append(errs, e)
		}
	}
	return errs
}

// The priority values upstream reserves.
const (
	// HighestUserDefinablePriority is the highest value of a class not named system-*.
	HighestUserDefinablePriority = int32(1000000000)
	// SystemCriticalPriority is the value of system-cluster-critical; system-node-critical
	// is 1000 more.
	SystemCriticalPriority = 2 * HighestUserDefinablePriority
	// SystemPriorityClassPrefix starts the names reserved for the system classes.
	SystemPriorityClassPrefix = "system-"
)

// SystemPriorityClasses returns new copies of the two classes every cluster has.
func SystemPriorityClasses() []*schedulingv1.PriorityClass {
	return []*schedulingv1.PriorityClass{
		{
			ObjectMeta:  metav1.ObjectMeta{Name: "system-node-critical"},
			Value:       SystemCriticalPriority + 1000,
			Description: "Used for system critical pods that must not be moved from their current node.",
		},
		{
			ObjectMeta:  metav1.ObjectMeta{Name: "system-cluster-critical"},
			Value:       SystemCriticalPriority,
			Description: "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
		},
	}
}

// knownSystemClass says why a system-* class is not one of the system classes.
func knownSystemClass(pc *schedulingv1.PriorityClass) error {
	for _, s := range SystemPriorityClasses() {
		if s.Name != pc.Name {
			continue
		}
		if s.Value != pc.Value {
			return fmt.Errorf("value of %v PriorityClass must be %v", s.Name, s.Value)
		}
		if s.GlobalDefault != pc.GlobalDefault {
			return fmt.Errorf("globalDefault of %v PriorityClass must be %v", s.Name, s.GlobalDefault)
		}
		return nil
	}
	return fmt.Errorf("%v is not a known system priority class", pc.Name)
}

// ValidatePriorityClass returns the field errors of a new PriorityClass.
func ValidatePriorityClass(pc *schedulingv1.PriorityClass) field.ErrorList {
	errs := validateMetaWith(&pc.ObjectMeta, false, apimachineryvalidation.NameIsDNSSubdomain, false)
	if strings.HasPrefix(pc.Name, SystemPriorityClassPrefix) {
		if err := knownSystemClass(pc); err != nil {
			errs = append(errs, field.Forbidden(field.NewPath("metadata", "name"),
				"priority class names with '"+SystemPriorityClassPrefix+"' prefix are reserved for system use only. error: "+err.Error()))
		}
	} else if pc.Value > HighestUserDefinablePriority {
		errs = append(errs, field.Forbidden(field.NewPath("value"), fmt.Sprintf("maximum allowed value of a user defined priority is %v", HighestUserDefinablePriority)))
	}
	errs = append(errs, validateOptionalEnum(pc.PreemptionPolicy, field.NewPath("preemptionPolicy"),
		corev1.PreemptLowerPriority, corev1.PreemptNever)...)
	return errs
}

// ValidatePriorityClassUpdate returns the field errors of an update of a PriorityClass:
// the value and the preemption policy may not change.
func ValidatePriorityClassUpdate(pc, old *schedulingv1.PriorityClass) field.ErrorList {
	errs := validateMetaUpdateWith(&pc.ObjectMeta, &old.ObjectMeta, false)
	if pc.Value != old.Value {
		errs = append(errs, field.Forbidden(field.NewPath("value"), "may not be changed in an update."))
	}
	return append(errs, validateImmutable(pc.PreemptionPolicy, old.PreemptionPolicy, field.NewPath("preemptionPolicy"))...)
}
