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
	hooks := make([]webhookFields, len(c.Webhooks))
	for i := range c.Webhooks {
		w := &c.Webhooks[i]
		hooks[i] = webhookFields{
			name: w.Name, rules: w.Rules, failurePolicy: w.FailurePolicy, matchPolicy: w.MatchPolicy, sideEffects: w.SideEffects,
			timeout: w.TimeoutSeconds, reviewVersions: w.AdmissionReviewVersions, namespaceSelector: w.NamespaceSelector,
			objectSelector: w.ObjectSelector, matchConditions: w.MatchConditions, clientConfig: &w.ClientConfig,
		}
	}
	return validateWebhookConfiguration(&c.ObjectMeta, hooks, stored)
}

// validateWebhookConfiguration checks the metadata of a configuration and each of
// its webhooks, whose names must be unique.
func validateWebhookConfiguration(m *metav1.ObjectMeta, hooks []webhookFields, stored sets.Set[string]) field.ErrorList {
	errs := validateMetaWith(m, false, apimachineryvalidation.NameIsDNSSubdomain, false)
	names := sets.New[string]()
	for i, w := range hooks {
		p := field.NewPath("webhooks").Index(i)
		errs = append(errs, validateWebhookName(w.name, names, p.Child("name"))...)
		errs = append(errs, validateWebhook(w, stored, p)...)
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
	hooks := make([]webhookFields, len(c.Webhooks))
	for i := range c.Webhooks {
		w := &c.Webhooks[i]
		hooks[i] = webhookFields{
			name: w.Name, rules: w.Rules, failurePolicy: w.FailurePolicy, matchPolicy: w.MatchPolicy, sideEffects: w.SideEffects,
			timeout: w.TimeoutSeconds, reviewVersions: w.AdmissionReviewVersions, namespaceSelector: w.NamespaceSelector,
			objectSelector: w.ObjectSelector, matchConditions: w.MatchConditions, clientConfig: &w.ClientConfig,
			reinvocation: w.ReinvocationPolicy,
		}
	}
	return validateWebhookConfiguration(&c.ObjectMeta, hooks, stored)
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
	name                              string
	reinvocation                      *admissionregistrationv1.ReinvocationPolicyType // mutating webhooks only
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
		errs = append(errs, validateAdmissionRule(&w.rules[i], p.Child("rules").Index(i))...)
	}
	errs = append(errs, validateOptionalEnum(w.failurePolicy, p.Child("failurePolicy"),
		admissionregistrationv1.Fail, admissionregistrationv1.Ignore)...)
	errs = append(errs, validateOptionalEnum(w.matchPolicy, p.Child("matchPolicy"),
		admissionregistrationv1.Equivalent, admissionregistrationv1.Exact)...)
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
	errs = append(errs, validateWebhookClientConfig(w.clientConfig, p.Child("clientConfig"))...)
	errs = append(errs, validateOptionalEnum(w.reinvocation, p.Child("reinvocationPolicy"),
		admissionregistrationv1.NeverReinvocationPolicy, admissionregistrationv1.IfNeededReinvocationPolicy)...)
	return errs
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
	if path == "" || path == "/" {
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
