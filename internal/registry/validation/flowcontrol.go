package validation

import (
	"fmt"
	"math"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	flowcontrolv1beta3 "k8s.io/api/flowcontrol/v1beta3"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubette/kubette/internal/apiserver/flowcontrol/bootstrap"
)

// flowcontrolVerbs are the verbs a FlowSchema rule may name besides "*".
var flowcontrolVerbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "proxy", "update", "watch"}

// maxQueues is upstream's bound on a priority level's queues (10^7).
const maxQueues = 10 * 1000 * 1000

// maxHashBits is the shuffle-sharding entropy a hand may use, as upstream's.
const maxHashBits = 60

// ValidateFlowSchema returns the field errors of a FlowSchema, as upstream's: positive
// matchingPrecedence up to 10000 (1 only for "exempt"), a known distinguisher, a
// priority level name, rules with subjects and at least one resource or non-resource
// rule, and the fixed spec of the mandatory schemas.
func ValidateFlowSchema(fs *flowcontrolv1.FlowSchema) field.ErrorList {
	errs := validateMetaWith(&fs.ObjectMeta, false, apimachineryvalidation.NameIsDNSSubdomain, false)
	spec := field.NewPath("spec")
	errs = append(errs, validateFlowSchemaSpec(fs.Name, &fs.Spec, spec)...)
	if mand, ok := bootstrap.MandatoryFlowSchema(fs.Name); ok && !apiequality.Semantic.DeepEqual(fs.Spec, mand.Spec) {
		errs = append(errs, field.Invalid(spec, fs.Spec, fmt.Sprintf("spec of '%s' must equal the fixed value", fs.Name)))
	}
	return append(errs, ValidateFlowSchemaStatus(fs, nil)...)
}

// ValidateFlowSchemaUpdate validates an updated FlowSchema as a new one (upstream
// has no immutable fields here) plus the metadata update rules.
func ValidateFlowSchemaUpdate(fs, old *flowcontrolv1.FlowSchema) field.ErrorList {
	return append(validateMetaUpdateWith(&fs.ObjectMeta, &old.ObjectMeta, false), ValidateFlowSchema(fs)...)
}

// ValidateFlowSchemaStatus checks the conditions: each has a type, and no type twice.
func ValidateFlowSchemaStatus(fs, _ *flowcontrolv1.FlowSchema) field.ErrorList {
	types := make([]string, 0, len(fs.Status.Conditions))
	for _, c := range fs.Status.Conditions {
		types = append(types, string(c.Type))
	}
	return validateConditionTypes(types, field.NewPath("status", "conditions"))
}

func validateConditionTypes(types []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, t := range types {
		if seen[t] {
			errs = append(errs, field.Duplicate(path.Index(i).Child("type"), t))
		}
		seen[t] = true
		if t == "" {
			errs = append(errs, field.Required(path.Index(i).Child("type"), "must not be empty"))
		}
	}
	return errs
}

func validateFlowSchemaSpec(name string, spec *flowcontrolv1.FlowSchemaSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	mp := path.Child("matchingPrecedence")
	if spec.MatchingPrecedence <= 0 {
		errs = append(errs, field.Invalid(mp, spec.MatchingPrecedence, "must be a positive value"))
	}
	if spec.MatchingPrecedence > flowcontrolv1.FlowSchemaMaxMatchingPrecedence {
		errs = append(errs, field.Invalid(mp, spec.MatchingPrecedence, fmt.Sprintf("must not be greater than %v", flowcontrolv1.FlowSchemaMaxMatchingPrecedence)))
	}
	if spec.MatchingPrecedence == 1 && name != flowcontrolv1.FlowSchemaNameExempt {
		errs = append(errs, field.Invalid(mp, spec.MatchingPrecedence, "only the schema named 'exempt' may have matchingPrecedence 1"))
	}
	if dm := spec.DistinguisherMethod; dm != nil && dm.Type != flowcontrolv1.FlowDistinguisherMethodByUserType && dm.Type != flowcontrolv1.FlowDistinguisherMethodByNamespaceType {
		errs = append(errs, field.NotSupported(path.Child("distinguisherMethod", "type"), dm,
			[]string{string(flowcontrolv1.FlowDistinguisherMethodByNamespaceType), string(flowcontrolv1.FlowDistinguisherMethodByUserType)}))
	}
	plPath := path.Child("priorityLevelConfiguration", "name")
	if spec.PriorityLevelConfiguration.Name == "" {
		errs = append(errs, field.Required(plPath, "must reference a priority level"))
	} else {
		errs = append(errs, validateName(apimachineryvalidation.NameIsDNSSubdomain, spec.PriorityLevelConfiguration.Name, plPath)...)
	}
	for i := range spec.Rules {
		errs = append(errs, validatePolicyRulesWithSubjects(&spec.Rules[i], path.Child("rules").Index(i))...)
	}
	return errs
}

func validatePolicyRulesWithSubjects(rule *flowcontrolv1.PolicyRulesWithSubjects, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(rule.Subjects) == 0 {
		errs = append(errs, field.Required(path.Child("subjects"), "subjects must contain at least one value"))
	}
	for i := range rule.Subjects {
		errs = append(errs, validateFlowSubject(&rule.Subjects[i], path.Child("subjects").Index(i))...)
	}
	if len(rule.ResourceRules) == 0 && len(rule.NonResourceRules) == 0 {
		errs = append(errs, field.Required(path, "at least one of resourceRules and nonResourceRules has to be non-empty"))
	}
	for i := range rule.ResourceRules {
		errs = append(errs, validateResourcePolicyRule(&rule.ResourceRules[i], path.Child("resourceRules").Index(i))...)
	}
	for i := range rule.NonResourceRules {
		errs = append(errs, validateNonResourcePolicyRule(&rule.NonResourceRules[i], path.Child("nonResourceRules").Index(i))...)
	}
	return errs
}

func validateFlowSubject(s *flowcontrolv1.Subject, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	forbid := func(set bool, child, msg string) {
		if set {
			errs = append(errs, field.Forbidden(path.Child(child), msg))
		}
	}
	notUser := "user is forbidden when subject kind is not 'User'"
	notGroup := "group is forbidden when subject kind is not 'Group'"
	notSA := "serviceAccount is forbidden when subject kind is not 'ServiceAccount'"
	switch s.Kind {
	case flowcontrolv1.SubjectKindServiceAccount:
		p := path.Child("serviceAccount")
		if sa := s.ServiceAccount; sa == nil {
			errs = append(errs, field.Required(p, "serviceAccount is required when subject kind is 'ServiceAccount'"))
		} else {
			if sa.Name == "" {
				errs = append(errs, field.Required(p.Child("name"), ""))
			} else if sa.Name != flowcontrolv1.NameAll {
				errs = append(errs, validateName(apimachineryvalidation.ValidateServiceAccountName, sa.Name, p.Child("name"))...)
			}
			if sa.Namespace == "" {
				errs = append(errs, field.Required(p.Child("namespace"), "must specify namespace for service account"))
			} else {
				errs = append(errs, validateName(apimachineryvalidation.ValidateNamespaceName, sa.Namespace, p.Child("namespace"))...)
			}
		}
		forbid(s.User != nil, "user", notUser)
		forbid(s.Group != nil, "group", notGroup)
	case flowcontrolv1.SubjectKindUser:
		if s.User == nil {
			errs = append(errs, field.Required(path.Child("user"), "user is required when subject kind is 'User'"))
		} else if s.User.Name == "" {
			errs = append(errs, field.Required(path.Child("user", "name"), ""))
		}
		forbid(s.ServiceAccount != nil, "serviceAccount", notSA)
		forbid(s.Group != nil, "group", notGroup)
	case flowcontrolv1.SubjectKindGroup:
		if s.Group == nil {
			errs = append(errs, field.Required(path.Child("group"), "group is required when subject kind is 'Group'"))
		} else if s.Group.Name == "" {
			errs = append(errs, field.Required(path.Child("group", "name"), ""))
		}
		forbid(s.ServiceAccount != nil, "serviceAccount", notSA)
		forbid(s.User != nil, "user", notUser)
	default:
		errs = append(errs, field.NotSupported(path.Child("kind"), s.Kind, []string{
			string(flowcontrolv1.SubjectKindGroup), string(flowcontrolv1.SubjectKindServiceAccount), string(flowcontrolv1.SubjectKindUser)}))
	}
	return errs
}

func hasStar(list []string) bool {
	for _, s := range list {
		if s == "*" {
			return true
		}
	}
	return false
}

func validateFlowVerbs(verbs []string, path *field.Path) field.ErrorList {
	switch {
	case len(verbs) == 0:
		return field.ErrorList{field.Required(path, "verbs must contain at least one value")}
	case hasStar(verbs):
		if len(verbs) > 1 {
			return field.ErrorList{field.Invalid(path, verbs, "if '*' is present, must not specify other verbs")}
		}
		return nil
	}
	for _, v := range verbs {
		known := false
		for _, k := range flowcontrolVerbs {
			known = known || k == v
		}
		if !known {
			return field.ErrorList{field.NotSupported(path, verbs, flowcontrolVerbs)}
		}
	}
	return nil
}

func validateNonResourcePolicyRule(rule *flowcontrolv1.NonResourcePolicyRule, path *field.Path) field.ErrorList {
	errs := validateFlowVerbs(rule.Verbs, path.Child("verbs"))
	urls := path.Child("nonResourceURLs")
	switch {
	case len(rule.NonResourceURLs) == 0:
		errs = append(errs, field.Required(urls, "nonResourceURLs must contain at least one value"))
	case hasStar(rule.NonResourceURLs):
		if len(rule.NonResourceURLs) > 1 {
			errs = append(errs, field.Invalid(urls, rule.NonResourceURLs, "if '*' is present, must not specify other non-resource URLs"))
		}
	default:
		for i, u := range rule.NonResourceURLs {
			if msg := nonResourceURLProblem(u); msg != "" {
				errs = append(errs, field.Invalid(urls.Index(i), u, msg))
			}
		}
	}
	return errs
}

// nonResourceURLProblem says what is wrong with a rule's non-resource path, or "".
func nonResourceURLProblem(p string) string {
	switch {
	case p == "":
		return "must not be empty"
	case p == "/":
		return ""
	case !strings.HasPrefix(p, "/"):
		return "must start with slash"
	case strings.Contains(p, " "):
		return "must not contain white-space"
	case strings.Contains(p, "//"):
		return "must not contain double slash"
	}
	if n := strings.Count(p, "*"); n > 1 || (n == 1 && !strings.HasSuffix(p, "/*")) {
		return "wildcard can only do suffix matching"
	}
	return ""
}

func validateResourcePolicyRule(rule *flowcontrolv1.ResourcePolicyRule, path *field.Path) field.ErrorList {
	errs := validateFlowVerbs(rule.Verbs, path.Child("verbs"))
	if len(rule.APIGroups) == 0 {
		errs = append(errs, field.Required(path.Child("apiGroups"), "resource rules must supply at least one api group"))
	} else if len(rule.APIGroups) > 1 && hasStar(rule.APIGroups) {
		errs = append(errs, field.Invalid(path.Child("apiGroups"), rule.APIGroups, "if '*' is present, must not specify other api groups"))
	}
	if len(rule.Resources) == 0 {
		errs = append(errs, field.Required(path.Child("resources"), "resource rules must supply at least one resource"))
	} else if len(rule.Resources) > 1 && hasStar(rule.Resources) {
		errs = append(errs, field.Invalid(path.Child("resources"), rule.Resources, "if '*' is present, must not specify other resources"))
	}
	ns := path.Child("namespaces")
	switch {
	case len(rule.Namespaces) == 0 && !rule.ClusterScope:
		errs = append(errs, field.Required(ns, "resource rules that are not cluster scoped must supply at least one namespace"))
	case hasStar(rule.Namespaces):
		if len(rule.Namespaces) > 1 {
			errs = append(errs, field.Invalid(ns, rule.Namespaces, "if '*' is present, must not specify other namespaces"))
		}
	default:
		for i, n := range rule.Namespaces {
			for _, msg := range apimachineryvalidation.ValidateNamespaceName(n, false) {
				errs = append(errs, field.Invalid(ns.Index(i), n, "each member of this list must be '*' or a DNS-1123 label; "+msg))
			}
		}
	}
	return errs
}

// ValidatePriorityLevelConfiguration returns the field errors of a priority level, as
// upstream's: Exempt if and only if named "exempt", a Limited level's shares, limit
// response and queuing (hand size within the queues and 60 bits of entropy), lendable
// and borrowing percentages, and the fixed spec of the mandatory levels (exempt's
// spec.exempt excepted).
func ValidatePriorityLevelConfiguration(pl *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
	errs := validateMetaWith(&pl.ObjectMeta, false, apimachineryvalidation.NameIsDNSSubdomain, false)
	if _, ok := pl.Annotations[flowcontrolv1beta3.PriorityLevelPreserveZeroConcurrencySharesKey]; ok {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations"),
			fmt.Sprintf("annotation '%s' is forbidden", flowcontrolv1beta3.PriorityLevelPreserveZeroConcurrencySharesKey)))
	}
	spec := field.NewPath("spec")
	errs = append(errs, validatePriorityLevelSpec(pl.Name, &pl.Spec, spec)...)
	if mand, ok := bootstrap.MandatoryPriorityLevelConfiguration(pl.Name); ok {
		have := pl.Spec.DeepCopy()
		msg := fmt.Sprintf("spec of '%s' must equal the fixed value", pl.Name)
		if pl.Name == flowcontrolv1.PriorityLevelConfigurationNameExempt {
			have.Exempt = mand.Spec.Exempt
			msg = fmt.Sprintf("spec of '%s' except the 'spec.exempt' field must equal the fixed value", pl.Name)
		}
		if !apiequality.Semantic.DeepEqual(&mand.Spec, have) {
			errs = append(errs, field.Invalid(spec, pl.Spec, msg))
		}
	}
	return append(errs, ValidatePriorityLevelConfigurationStatus(pl, nil)...)
}

// ValidatePriorityLevelConfigurationUpdate validates an updated priority level as a
// new one plus the metadata update rules.
func ValidatePriorityLevelConfigurationUpdate(pl, old *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
	return append(validateMetaUpdateWith(&pl.ObjectMeta, &old.ObjectMeta, false), ValidatePriorityLevelConfiguration(pl)...)
}

// ValidatePriorityLevelConfigurationStatus checks the conditions: each has a type, and
// no type twice.
func ValidatePriorityLevelConfigurationStatus(pl, _ *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
	types := make([]string, 0, len(pl.Status.Conditions))
	for _, c := range pl.Status.Conditions {
		types = append(types, string(c.Type))
	}
	return validateConditionTypes(types, field.NewPath("status", "conditions"))
}

func validatePriorityLevelSpec(name string, spec *flowcontrolv1.PriorityLevelConfigurationSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if (name == flowcontrolv1.PriorityLevelConfigurationNameExempt) != (spec.Type == flowcontrolv1.PriorityLevelEnablementExempt) {
		errs = append(errs, field.Invalid(path.Child("type"), spec.Type, "type must be 'Exempt' if and only if name is 'exempt'"))
	}
	switch spec.Type {
	case flowcontrolv1.PriorityLevelEnablementExempt:
		if spec.Limited != nil {
			errs = append(errs, field.Forbidden(path.Child("limited"), "must be nil if the type is not Limited"))
		}
		if e := spec.Exempt; e != nil {
			p := path.Child("exempt")
			if e.NominalConcurrencyShares != nil && *e.NominalConcurrencyShares < 0 {
				errs = append(errs, field.Invalid(p.Child("nominalConcurrencyShares"), *e.NominalConcurrencyShares, "must be a non-negative integer"))
			}
			errs = append(errs, validatePercent(e.LendablePercent, p.Child("lendablePercent"))...)
		}
	case flowcontrolv1.PriorityLevelEnablementLimited:
		if spec.Exempt != nil {
			errs = append(errs, field.Forbidden(path.Child("exempt"), "must be nil if the type is Limited"))
		}
		if spec.Limited == nil {
			errs = append(errs, field.Required(path.Child("limited"), "must not be empty when type is Limited"))
		} else {
			errs = append(errs, validateLimited(spec.Limited, path.Child("limited"))...)
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("type"), spec.Type, []string{
			string(flowcontrolv1.PriorityLevelEnablementExempt), string(flowcontrolv1.PriorityLevelEnablementLimited)}))
	}
	return errs
}

func validatePercent(v *int32, path *field.Path) field.ErrorList {
	if v != nil && (*v < 0 || *v > 100) {
		return field.ErrorList{field.Invalid(path, *v, "must be between 0 and 100, inclusive")}
	}
	return nil
}

func validateLimited(l *flowcontrolv1.LimitedPriorityLevelConfiguration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if l.NominalConcurrencyShares != nil && *l.NominalConcurrencyShares < 0 {
		errs = append(errs, field.Invalid(path.Child("nominalConcurrencyShares"), *l.NominalConcurrencyShares, "must be a non-negative integer"))
	}
	lr := path.Child("limitResponse")
	switch l.LimitResponse.Type {
	case flowcontrolv1.LimitResponseTypeReject:
		if l.LimitResponse.Queuing != nil {
			errs = append(errs, field.Forbidden(lr.Child("queuing"), "must be nil if limited.limitResponse.type is not Limited"))
		}
	case flowcontrolv1.LimitResponseTypeQueue:
		if q := l.LimitResponse.Queuing; q == nil {
			errs = append(errs, field.Required(lr.Child("queuing"), "must not be empty if limited.limitResponse.type is Limited"))
		} else {
			errs = append(errs, validateQueuing(q, lr.Child("queuing"))...)
		}
	default:
		errs = append(errs, field.NotSupported(lr.Child("type"), l.LimitResponse.Type, []string{
			string(flowcontrolv1.LimitResponseTypeQueue), string(flowcontrolv1.LimitResponseTypeReject)}))
	}
	errs = append(errs, validatePercent(l.LendablePercent, path.Child("lendablePercent"))...)
	if b := l.BorrowingLimitPercent; b != nil && *b < 0 {
		errs = append(errs, field.Invalid(path.Child("borrowingLimitPercent"), *b, "if specified, must be a non-negative integer"))
	}
	return errs
}

func validateQueuing(q *flowcontrolv1.QueuingConfiguration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if q.QueueLengthLimit <= 0 {
		errs = append(errs, field.Invalid(path.Child("queueLengthLimit"), q.QueueLengthLimit, "must be positive"))
	}
	if q.Queues <= 0 {
		errs = append(errs, field.Invalid(path.Child("queues"), q.Queues, "must be positive"))
	} else if q.Queues > maxQueues {
		errs = append(errs, field.Invalid(path.Child("queues"), q.Queues, fmt.Sprintf("must not be greater than %d", maxQueues)))
	}
	hs := path.Child("handSize")
	switch {
	case q.HandSize <= 0:
		errs = append(errs, field.Invalid(hs, q.HandSize, "must be positive"))
	case q.HandSize > q.Queues:
		errs = append(errs, field.Invalid(hs, q.HandSize, fmt.Sprintf("should not be greater than queues (%d)", q.Queues)))
	case entropyBits(q.Queues, q.HandSize) > maxHashBits:
		errs = append(errs, field.Invalid(hs, q.HandSize, fmt.Sprintf("required entropy bits of deckSize %d and handSize %d should not be greater than %d", q.Queues, q.HandSize, maxHashBits)))
	}
	return errs
}

// entropyBits is how many bits of a hash dealing a hand from a deck uses.
func entropyBits(deck, hand int32) int {
	return int(math.Ceil(math.Log2(float64(deck)) * float64(hand)))
}
