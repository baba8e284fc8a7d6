package validation

import (
	"fmt"
	"net/url"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// admissionReviewVersions are the AdmissionReview versions this server can send.
var admissionReviewVersions = []string{"v1", "v1beta1"}

// ValidateValidatingWebhookConfiguration returns the field errors of a
// ValidatingWebhookConfiguration, as upstream's v1 validation: every webhook named
// as a unique fully qualified name, with rules, a supported failurePolicy,
// matchPolicy and sideEffects, a timeout of 1-30 s, known admissionReviewVersions,
// valid selectors, match conditions and a client config with a URL or a Service.
func ValidateValidatingWebhookConfiguration(c *admissionregistrationv1.ValidatingWebhookConfiguration) field.ErrorList {
	return validateValidatingWebhookConfiguration(c, nil)
}

// validateValidatingWebhookConfiguration is the validation of c, where the
// matchConditions expressions in stored were already stored.
func validateValidatingWebhookConfiguration(c *admissionregistrationv1.ValidatingWebhookConfiguration, stored sets.Set[string]) field.ErrorList {
	errs := validateMetaWith(&c.ObjectMeta, false, apimachineryvalidation.NameIsDNSSubdomain, false)
	names := sets.New[string]()
	for i := range c.Webhooks {
		w := &c.Webhooks[i]
		p := field.NewPath("webhooks").Index(i)
		errs = append(errs, validateWebhookName(w.Name, names, p.Child("name"))...)
		errs = append(errs, validateWebhook(webhookFields{
			rules: w.Rules, failurePolicy: w.FailurePolicy, matchPolicy: w.MatchPolicy, sideEffects: w.SideEffects,
			timeout: w.TimeoutSeconds, reviewVersions: w.AdmissionReviewVersions, namespaceSelector: w.NamespaceSelector,
			objectSelector: w.ObjectSelector, matchConditions: w.MatchConditions, clientConfig: &w.ClientConfig,
		}, stored, p)...)
	}
	return errs
}

// ValidateValidatingWebhookConfigurationUpdate validates an update as a new object
// plus the metadata update rules (no field of the kind is immutable).
func ValidateValidatingWebhookConfigurationUpdate(c, old *admissionregistrationv1.ValidatingWebhookConfiguration) field.ErrorList {
	stored := sets.New[string]()
	for _, w := range old.Webhooks {
		stored.Insert(matchConditionExpressions(w.MatchConditions)...)
	}
	return append(validateMetaUpdateWith(&c.ObjectMeta, &old.ObjectMeta, false), validateValidatingWebhookConfiguration(c, stored)...)
}

// ValidateMutatingWebhookConfiguration returns the field errors of a
// MutatingWebhookConfiguration: those of a validating one, and a supported
// reinvocationPolicy.
func ValidateMutatingWebhookConfiguration(c *admissionregistrationv1.MutatingWebhookConfiguration) field.ErrorList {
	return validateMutatingWebhookConfiguration(c, nil)
}

func validateMutatingWebhookConfiguration(c *admissionregistrationv1.MutatingWebhookConfiguration, stored sets.Set[string]) field.ErrorList {
	errs := validateMetaWith(&c.ObjectMeta, false, apimachineryvalidation.NameIsDNSSubdomain, false)
	names := sets.New[string]()
	for i := range c.Webhooks {
		w := &c.Webhooks[i]
		p := field.NewPath("webhooks").Index(i)
		errs = append(errs, validateWebhookName(w.Name, names, p.Child("name"))...)
		errs = append(errs, validateWebhook(webhookFields{
			rules: w.Rules, failurePolicy: w.FailurePolicy, matchPolicy: w.MatchPolicy, sideEffects: w.SideEffects,
			timeout: w.TimeoutSeconds, reviewVersions: w.AdmissionReviewVersions, namespaceSelector: w.NamespaceSelector,
			objectSelector: w.ObjectSelector, matchConditions: w.MatchConditions, clientConfig: &w.ClientConfig,
		}, stored, p)...)
		if w.ReinvocationPolicy != nil {
			switch *w.ReinvocationPolicy {
			case admissionregistrationv1.NeverReinvocationPolicy, admissionregistrationv1.IfNeededReinvocationPolicy:
			default:
				errs = append(errs, field.NotSupported(p.Child("reinvocationPolicy"), *w.ReinvocationPolicy,
					[]string{string(admissionregistrationv1.NeverReinvocationPolicy), string(admissionregistrationv1.IfNeededReinvocationPolicy)}))
			}
		}
	}
	return errs
}

// ValidateMutatingWebhookConfigurationUpdate validates an update as a new object
// plus the metadata update rules.
func ValidateMutatingWebhookConfigurationUpdate(c, old *admissionregistrationv1.MutatingWebhookConfiguration) field.ErrorList {
	stored := sets.New[string]()
	for _, w := range old.Webhooks {
		stored.Insert(matchConditionExpressions(w.MatchConditions)...)
	}
	return append(validateMetaUpdateWith(&c.ObjectMeta, &old.ObjectMeta, false), validateMutatingWebhookConfiguration(c, stored)...)
}

// webhookFields are the fields validating and mutating webhooks share.
type webhookFields struct {
	rules                             []admissionregistrationv1.RuleWithOperations
	failurePolicy                     *admissionregistrationv1.FailurePolicyType
	matchPolicy                       *admissionregistrationv1.MatchPolicyType
	sideEffects                       *admissionregistrationv1.SideEffectClass
	timeout                           *int32
	reviewVersions                    []string
	namespaceSelector, objectSelector *metav1.LabelSelector
	matchConditions                   []admissionregistrationv1.MatchCondition
	clientConfig                      *admissionregistrationv1.WebhookClientConfig
}

// validateWebhookName checks a webhook's name: a fully qualified domain name (three
// segments or more), unique in its configuration.
func validateWebhookName(name string, seen sets.Set[string], p *field.Path) field.ErrorList {
	errs := utilvalidation.IsFullyQualifiedName(p, name)
	if seen.Has(name) {
		errs = append(errs, field.Duplicate(p, name))
	}
	seen.Insert(name)
	return errs
}

func validateWebhook(w webhookFields, stored sets.Set[string], p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range w.rules {
		errs = append(errs, ValidateRuleWithOperations(&w.rules[i], p.Child("rules").Index(i))...)
	}
	if w.failurePolicy != nil {
		switch *w.failurePolicy {
		case admissionregistrationv1.Fail, admissionregistrationv1.Ignore:
		default:
			errs = append(errs, field.NotSupported(p.Child("failurePolicy"), *w.failurePolicy,
				[]string{string(admissionregistrationv1.Fail), string(admissionregistrationv1.Ignore)}))
		}
	}
	if w.matchPolicy != nil {
		switch *w.matchPolicy {
		case admissionregistrationv1.Exact, admissionregistrationv1.Equivalent:
		default:
			errs = append(errs, field.NotSupported(p.Child("matchPolicy"), *w.matchPolicy,
				[]string{string(admissionregistrationv1.Equivalent), string(admissionregistrationv1.Exact)}))
		}
	}
	switch {
	case w.sideEffects == nil:
		errs = append(errs, field.Required(p.Child("sideEffects"), fmt.Sprintf("must specify one of %v",
			strings.Join([]string{string(admissionregistrationv1.SideEffectClassNone), string(admissionregistrationv1.SideEffectClassNoneOnDryRun)}, ", "))))
	case *w.sideEffects != admissionregistrationv1.SideEffectClassNone && *w.sideEffects != admissionregistrationv1.SideEffectClassNoneOnDryRun:
		errs = append(errs, field.NotSupported(p.Child("sideEffects"), *w.sideEffects,
			[]string{string(admissionregistrationv1.SideEffectClassNone), string(admissionregistrationv1.SideEffectClassNoneOnDryRun)}))
	}
	if w.timeout != nil && (*w.timeout < 1 || *w.timeout > 30) {
		errs = append(errs, field.Invalid(p.Child("timeoutSeconds"), *w.timeout, "the timeout value must be between 1 and 30 seconds"))
	}
	errs = append(errs, validateAdmissionReviewVersions(w.reviewVersions, p.Child("admissionReviewVersions"))...)
	if w.namespaceSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(w.namespaceSelector, metav1validation.LabelSelectorValidationOptions{}, p.Child("namespaceSelector"))...)
	}
	if w.objectSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(w.objectSelector, metav1validation.LabelSelectorValidationOptions{}, p.Child("objectSelector"))...)
	}
	if stored == nil {
		stored = sets.New[string]()
	}
	errs = append(errs, ValidateCELMatchConditions(w.matchConditions, false, stored, p.Child("matchConditions"))...)
	return append(errs, validateWebhookClientConfig(w.clientConfig, p.Child("clientConfig"))...)
}

// validateAdmissionReviewVersions: at least one version this server speaks, each a
// DNS-1035 label, none twice.
func validateAdmissionReviewVersions(versions []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(versions) == 0 {
		return field.ErrorList{field.Required(p, fmt.Sprintf("must specify one of %v", strings.Join(admissionReviewVersions, ", ")))}
	}
	seen, known := sets.New[string](), false
	for i, v := range versions {
		for _, msg := range utilvalidation.IsDNS1035Label(v) {
			errs = append(errs, field.Invalid(p.Index(i), v, msg))
		}
		if seen.Has(v) {
			errs = append(errs, field.Invalid(p.Index(i), v, "duplicate version"))
		}
		seen.Insert(v)
		for _, k := range admissionReviewVersions {
			known = known || v == k
		}
	}
	if !known {
		errs = append(errs, field.Invalid(p, versions, fmt.Sprintf("must include at least one of %v", strings.Join(admissionReviewVersions, ", "))))
	}
	return errs
}

// matchConditionExpressions lists the expressions of conds.
func matchConditionExpressions(conds []admissionregistrationv1.MatchCondition) []string {
	out := make([]string, 0, len(conds))
	for _, c := range conds {
		out = append(out, c.Expression)
	}
	return out
}

// admissionOperations are the operations a rule may name besides "*".
var admissionOperations = []string{
	string(admissionregistrationv1.Create), string(admissionregistrationv1.Update),
	string(admissionregistrationv1.Delete), string(admissionregistrationv1.Connect),
}

// ValidateRuleWithOperations checks an admission rule: operations (all of them as "*"
// alone, or known ones) and the rule itself.
func ValidateRuleWithOperations(r *admissionregistrationv1.RuleWithOperations, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.Operations) == 0 {
		errs = append(errs, field.Required(p.Child("operations"), ""))
	}
	if len(r.Operations) > 1 && hasWildcardOp(r.Operations) {
		errs = append(errs, field.Invalid(p.Child("operations"), r.Operations, "if '*' is present, must not specify other operations"))
	}
	for i, op := range r.Operations {
		if op == admissionregistrationv1.OperationAll {
			continue
		}
		if !sets.New(admissionOperations...).Has(string(op)) {
			errs = append(errs, field.NotSupported(p.Child("operations").Index(i), op, admissionOperations))
		}
	}
	return append(errs, ValidateRule(&r.Rule, p)...)
}

func hasWildcardOp(ops []admissionregistrationv1.OperationType) bool {
	for _, op := range ops {
		if op == admissionregistrationv1.OperationAll {
			return true
		}
	}
	return false
}

// ValidateRule checks apiGroups, apiVersions, resources and scope of a rule, as
// upstream: none empty, "*" alone, resources with upstream's wildcard rules.
func ValidateRule(r *admissionregistrationv1.Rule, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.APIGroups) == 0 {
		errs = append(errs, field.Required(p.Child("apiGroups"), ""))
	}
	if len(r.APIGroups) > 1 && hasString(r.APIGroups, "*") {
		errs = append(errs, field.Invalid(p.Child("apiGroups"), r.APIGroups, "if '*' is present, must not specify other API groups"))
	}
	if len(r.APIVersions) == 0 {
		errs = append(errs, field.Required(p.Child("apiVersions"), ""))
	}
	if len(r.APIVersions) > 1 && hasString(r.APIVersions, "*") {
		errs = append(errs, field.Invalid(p.Child("apiVersions"), r.APIVersions, "if '*' is present, must not specify other API versions"))
	}
	for i, v := range r.APIVersions {
		if v == "" {
			errs = append(errs, field.Required(p.Child("apiVersions").Index(i), ""))
		}
	}
	errs = append(errs, validateRuleResources(r.Resources, p.Child("resources"))...)
	if r.Scope != nil {
		switch *r.Scope {
		case admissionregistrationv1.AllScopes, admissionregistrationv1.ClusterScope, admissionregistrationv1.NamespacedScope:
		default:
			errs = append(errs, field.NotSupported(p.Child("scope"), *r.Scope, []string{
				string(admissionregistrationv1.ClusterScope), string(admissionregistrationv1.NamespacedScope), string(admissionregistrationv1.AllScopes)}))
		}
	}
	return errs
}

// validateRuleResources applies upstream's rules to "resource/subresource" entries:
// "*/*" alone; "*" only beside entries with subresources; "*/x" excludes "y/x"; "y/*"
// excludes "y/x".
func validateRuleResources(resources []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(resources) == 0 {
		return field.ErrorList{field.Required(p, "")}
	}
	res := sets.New[string]()
	subs := map[string]sets.Set[string]{} // subresource -> resources naming it
	for i, r := range resources {
		if r == "" {
			errs = append(errs, field.Required(p.Index(i), ""))
			continue
		}
		if r == "*/*" && len(resources) > 1 {
			errs = append(errs, field.Invalid(p.Index(i), resources, "if '*/*' is present, must not specify other resources"))
		}
		resource, sub, hasSub := strings.Cut(r, "/")
		if !hasSub {
			res.Insert(resource)
			continue
		}
		if subs[sub] == nil {
			subs[sub] = sets.New[string]()
		}
		subs[sub].Insert(resource)
	}
	if res.Has("*") && res.Len() > 1 {
		errs = append(errs, field.Invalid(p, resources, "if '*' is present, must not specify other resources without subresources"))
	}
	for sub, names := range subs {
		if names.Has("*") && names.Len() > 1 {
			errs = append(errs, field.Invalid(p, resources, fmt.Sprintf("if '*/%s' is present, must not specify %s", sub, strings.Join(sets.List(names.Delete("*")), ", "))))
		}
	}
	for _, r := range resources {
		resource, sub, hasSub := strings.Cut(r, "/")
		if !hasSub || sub == "*" || resource == "*" {
			continue
		}
		if wild := subs["*"]; wild != nil && wild.Has(resource) {
			errs = append(errs, field.Invalid(p, resources, fmt.Sprintf("if '%s/*' is present, must not specify %s", resource, r)))
		}
	}
	return errs
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// validateWebhookClientConfig: exactly one of url and service; an https URL with a
// host and no user, query or fragment; a Service with a name, a namespace, a path
// starting with "/" and a valid port.
func validateWebhookClientConfig(cc *admissionregistrationv1.WebhookClientConfig, p *field.Path) field.ErrorList {
	switch {
	case (cc.URL == nil) == (cc.Service == nil):
		return field.ErrorList{field.Required(p, "exactly one of url or service is required")}
	case cc.URL != nil:
		return validateWebhookURL(p.Child("url"), *cc.URL)
	}
	var errs field.ErrorList
	s := cc.Service
	sp := p.Child("service")
	if s.Name == "" {
		errs = append(errs, field.Required(sp.Child("name"), "service name is required"))
	}
	if s.Namespace == "" {
		errs = append(errs, field.Required(sp.Child("namespace"), "service namespace is required"))
	}
	if s.Port != nil {
		for _, msg := range utilvalidation.IsValidPortNum(int(*s.Port)) {
			errs = append(errs, field.Invalid(sp.Child("port"), *s.Port, "port is not valid: "+msg))
		}
	}
	if s.Path == nil {
		return errs
	}
	path := *s.Path
	pp := sp.Child("path")
	if path == "/" {
		return errs
	}
	if !strings.HasPrefix(path, "/") {
		return append(errs, field.Invalid(pp, path, "must start with a '/'"))
	}
	for i, seg := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		if seg == "" {
			errs = append(errs, field.Invalid(pp, path, fmt.Sprintf("segment[%d] may not be empty", i)))
			continue
		}
		for _, msg := range utilvalidation.IsDNS1123Subdomain(seg) {
			errs = append(errs, field.Invalid(pp, path, fmt.Sprintf("segment[%d]: %v", i, msg)))
		}
	}
	return errs
}

func validateWebhookURL(p *field.Path, raw string) field.ErrorList {
	u, err := url.Parse(raw)
	if err != nil {
		return field.ErrorList{field.Invalid(p, raw, "url must be a valid URL: "+err.Error())}
	}
	var errs field.ErrorList
	if u.Scheme != "https" {
		errs = append(errs, field.Invalid(p, u.Scheme, "'https' is the only allowed URL scheme"))
	}
	if u.Host == "" {
		errs = append(errs, field.Invalid(p, u.Host, "host must be specified"))
	}
	if u.User != nil {
		errs = append(errs, field.Invalid(p, u.User.String(), "user information is not permitted in the URL"))
	}
	if u.Fragment != "" {
		errs = append(errs, field.Invalid(p, u.Fragment, "fragments are not permitted in the URL"))
	}
	if u.RawQuery != "" {
		errs = append(errs, field.Invalid(p, u.RawQuery, "query parameters are not permitted in the URL"))
	}
	return errs
}
