package validation

import (
	"fmt"
	"regexp"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/jsonpath"

	"github.com/kubette/kubette/internal/admissioncel"
)

// Upstream's bounds on a policy's audit annotations.
const (
	maxPolicyAuditAnnotations            = 20
	maxAuditAnnotationValueExpressionLen = 5 * 1024
	maxPolicyMatchConditions             = 64
)

var (
	policyFailurePolicies = []string{string(admissionregistrationv1.Fail), string(admissionregistrationv1.Ignore)}
	policyMatchPolicies   = []string{string(admissionregistrationv1.Equivalent), string(admissionregistrationv1.Exact)}
	policyOperations      = []string{"*", "CONNECT", "CREATE", "DELETE", "UPDATE"}
	policyScopes          = []string{"*", "Cluster", "Namespaced"}
	policyReasons         = []string{string(metav1.StatusReasonForbidden), string(metav1.StatusReasonInvalid), string(metav1.StatusReasonRequestEntityTooLarge)}
	policyActions         = []string{string(admissionregistrationv1.Audit), string(admissionregistrationv1.Deny), string(admissionregistrationv1.Warn)}
)

// storedExpressions are the expressions an update keeps from the stored policy, by
// kind: they compile in CEL's StoredExpressions environment, as upstream's.
type storedExpressions struct {
	matchConditions, validations, messages, auditAnnotations sets.Set[string]
}

func storedExpressionsOf(p *admissionregistrationv1.ValidatingAdmissionPolicy) storedExpressions {
	s := storedExpressions{sets.New[string](), sets.New[string](), sets.New[string](), sets.New[string]()}
	if p == nil {
		return s
	}
	for _, m := range p.Spec.MatchConditions {
		s.matchConditions.Insert(m.Expression)
	}
	for _, v := range p.Spec.Validations {
		s.validations.Insert(v.Expression)
		if v.MessageExpression != "" {
			s.messages.Insert(v.MessageExpression)
		}
	}
	for _, a := range p.Spec.AuditAnnotations {
		s.auditAnnotations.Insert(a.ValueExpression)
	}
	return s
}

// ValidateValidatingAdmissionPolicy returns the field errors of a new
// ValidatingAdmissionPolicy, as upstream's: a failurePolicy, a paramKind that names a
// kind, matchConstraints with at least one resource rule, validations or audit
// annotations, and every CEL expression compiling to the type it must have.
func ValidateValidatingAdmissionPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) field.ErrorList {
	errs := validateMetaWith(&p.ObjectMeta, false, apimachineryvalidation.NameIsDNSSubdomain, false)
	return append(errs, validatePolicySpec(p, storedExpressionsOf(nil), false)...)
}

// ValidateValidatingAdmissionPolicyUpdate validates an updated policy as a new one,
// except that the expressions it keeps may use every CEL feature (they were accepted
// before) and unchanged matchConditions are not checked again.
func ValidateValidatingAdmissionPolicyUpdate(p, old *admissionregistrationv1.ValidatingAdmissionPolicy) field.ErrorList {
	errs := validateMetaUpdateWith(&p.ObjectMeta, &old.ObjectMeta, false)
	errs = append(errs, validateMetaWith(&p.ObjectMeta, false, apimachineryvalidation.NameIsDNSSubdomain, false)...)
	skipMatchConditions := apiequality.Semantic.DeepEqual(p.Spec.ParamKind, old.Spec.ParamKind) &&
		apiequality.Semantic.DeepEqual(p.Spec.MatchConditions, old.Spec.MatchConditions)
	return append(errs, validatePolicySpec(p, storedExpressionsOf(old), skipMatchConditions)...)
}

// ValidateValidatingAdmissionPolicyStatus checks the status the server writes: type
// checking warnings with a field reference in JSONPath, and well-formed conditions.
func ValidateValidatingAdmissionPolicyStatus(p, _ *admissionregistrationv1.ValidatingAdmissionPolicy) field.ErrorList {
	var errs field.ErrorList
	status := field.NewPath("status")
	if tc := p.Status.TypeChecking; tc != nil {
		for i, w := range tc.ExpressionWarnings {
			fp := status.Child("typeChecking", "expressionWarnings").Index(i)
			if w.Warning == "" {
				errs = append(errs, field.Required(fp.Child("warning"), ""))
			}
			errs = append(errs, validateFieldRef(w.FieldRef, fp.Child("fieldRef"))...)
		}
	}
	return append(errs, metav1validation.ValidateConditions(p.Status.Conditions, status.Child("conditions"))...)
}

func validateFieldRef(ref string, fp *field.Path) field.ErrorList {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return field.ErrorList{field.Required(fp, "")}
	}
	if err := jsonpath.New("spec").Parse(fmt.Sprintf("{%s}", ref)); err != nil {
		return field.ErrorList{field.Invalid(fp, ref, fmt.Sprintf("invalid JSONPath: %v", err))}
	}
	return nil
}

func validatePolicySpec(p *admissionregistrationv1.ValidatingAdmissionPolicy, stored storedExpressions, skipMatchConditions bool) field.ErrorList {
	var errs field.ErrorList
	spec, fp := &p.Spec, field.NewPath("spec")
	if spec.FailurePolicy == nil {
		errs = append(errs, field.Required(fp.Child("failurePolicy"), ""))
	} else if !contains(policyFailurePolicies, string(*spec.FailurePolicy)) {
		errs = append(errs, field.NotSupported(fp.Child("failurePolicy"), *spec.FailurePolicy, policyFailurePolicies))
	}
	hasParams := spec.ParamKind != nil
	if hasParams {
		errs = append(errs, validateParamKind(spec.ParamKind, fp.Child("paramKind"))...)
	}
	if spec.MatchConstraints == nil {
		errs = append(errs, field.Required(fp.Child("matchConstraints"), ""))
	} else {
		errs = append(errs, validateMatchResources(spec.MatchConstraints, fp.Child("matchConstraints"))...)
		if len(spec.MatchConstraints.ResourceRules) == 0 {
			errs = append(errs, field.Required(fp.Child("matchConstraints", "resourceRules"), ""))
		}
	}
	if !skipMatchConditions {
		errs = append(errs, ValidateCELMatchConditions(spec.MatchConditions, hasParams, stored.matchConditions, fp.Child("matchConditions"))...)
	}
	// The policy's variables, declared for its other expressions (but not its
	// matchConditions, which upstream compiles without them).
	var vars *admissioncel.Variables
	if len(spec.Variables) > 0 {
		v, err := admissioncel.NewVariables()
		if err != nil {
			return append(errs, field.InternalError(fp.Child("variables"), err))
		}
		vars = v
	}
	for i, v := range spec.Variables {
		vp := fp.Child("variables").Index(i)
		if strings.TrimSpace(v.Name) == "" {
			errs = append(errs, field.Required(vp.Child("name"), "name is not specified"))
		} else if !isCELIdentifier(v.Name) {
			errs = append(errs, field.Invalid(vp.Child("name"), v.Name, "name is not a valid CEL identifier"))
		}
		if strings.TrimSpace(v.Expression) == "" {
			errs = append(errs, field.Required(vp.Child("expression"), "expression is not specified"))
			continue
		}
		opts := admissioncel.Options{Params: hasParams, Authorizer: true, Stored: stored.validations.Has(v.Expression)}
		if _, err := vars.Add(v.Name, v.Expression, opts); err != nil {
			errs = append(errs, admissioncel.FieldError(vp.Child("expression"), v.Expression, err))
		}
	}
	if len(spec.Validations) == 0 && len(spec.AuditAnnotations) == 0 {
		msg := "validations or auditAnnotations must contain at least one item"
		return append(errs, field.Required(fp.Child("validations"), msg), field.Required(fp.Child("auditAnnotations"), msg))
	}
	for i, v := range spec.Validations {
		errs = append(errs, validatePolicyValidation(&v, hasParams, vars, stored, fp.Child("validations").Index(i))...)
	}
	if spec.AuditAnnotations != nil {
		ap := fp.Child("auditAnnotations")
		if len(spec.AuditAnnotations) > maxPolicyAuditAnnotations {
			errs = append(errs, field.Invalid(ap, spec.AuditAnnotations, fmt.Sprintf("must not have more than %d auditAnnotations", maxPolicyAuditAnnotations)))
		}
		keys := sets.New[string]()
		for i, a := range spec.AuditAnnotations {
			errs = append(errs, validateAuditAnnotation(p.Name, &a, hasParams, vars, stored, ap.Index(i))...)
			if keys.Has(a.Key) {
				errs = append(errs, field.Duplicate(ap.Index(i).Child("key"), a.Key))
			}
			keys.Insert(a.Key)
		}
	}
	return errs
}

func validateParamKind(k *admissionregistrationv1.ParamKind, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch gv := k.APIVersion; {
	case gv == "":
		errs = append(errs, field.Required(fp.Child("apiVersion"), ""))
	case strings.Count(gv, "/") > 1:
		errs = append(errs, field.Invalid(fp.Child("apiVersion"), gv, fmt.Sprintf("unexpected GroupVersion string: %v", gv)))
	default:
		group, version := "", gv
		if i := strings.Index(gv, "/"); i >= 0 {
			group, version = gv[:i], gv[i+1:]
		}
		if group != "" {
			if msgs := validation.IsDNS1123Subdomain(group); len(msgs) > 0 {
				errs = append(errs, field.Invalid(fp.Child("apiVersion"), group, strings.Join(msgs, ",")))
			}
		}
		if version == "" {
			errs = append(errs, field.Invalid(fp.Child("apiVersion"), gv, "version must be specified"))
		} else if msgs := validation.IsDNS1035Label(version); len(msgs) > 0 {
			errs = append(errs, field.Invalid(fp.Child("apiVersion"), version, strings.Join(msgs, ",")))
		}
	}
	if k.Kind == "" {
		errs = append(errs, field.Required(fp.Child("kind"), ""))
	} else if msgs := validation.IsDNS1035Label(strings.ToLower(k.Kind)); len(msgs) > 0 {
		errs = append(errs, field.Invalid(fp.Child("kind"), k.Kind, "may have mixed case, but should otherwise match: "+strings.Join(msgs, ",")))
	}
	return errs
}

func validateMatchResources(m *admissionregistrationv1.MatchResources, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m == nil {
		return nil
	}
	if m.MatchPolicy == nil {
		errs = append(errs, field.Required(fp.Child("matchPolicy"), ""))
	} else if !contains(policyMatchPolicies, string(*m.MatchPolicy)) {
		errs = append(errs, field.NotSupported(fp.Child("matchPolicy"), *m.MatchPolicy, policyMatchPolicies))
	}
	for _, s := range []struct {
		name string
		sel  *metav1.LabelSelector
	}{{"namespaceSelector", m.NamespaceSelector}, {"objectSelector", m.ObjectSelector}} {
		if s.sel == nil {
			errs = append(errs, field.Required(fp.Child(s.name), ""))
		} else {
			errs = append(errs, metav1validation.ValidateLabelSelector(s.sel, metav1validation.LabelSelectorValidationOptions{}, fp.Child(s.name))...)
		}
	}
	for i := range m.ResourceRules {
		errs = append(errs, validateNamedRule(&m.ResourceRules[i], fp.Child("resourceRules").Index(i))...)
	}
	for i := range m.ExcludeResourceRules {
		errs = append(errs, validateNamedRule(&m.ExcludeResourceRules[i], fp.Child("excludeResourceRules").Index(i))...)
	}
	return errs
}

func validateNamedRule(r *admissionregistrationv1.NamedRuleWithOperations, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, n := range r.ResourceNames {
		for _, msg := range path.ValidatePathSegmentName(n, false) {
			errs = append(errs, field.Invalid(fp.Child("resourceNames").Index(i), n, msg))
		}
		if names.Has(n) {
			errs = append(errs, field.Duplicate(fp.Child("resourceNames").Index(i), n))
		}
		names.Insert(n)
	}
	return append(errs, validateAdmissionRule(&r.RuleWithOperations, fp)...)
}

func policyHasWildcard[T ~string](list []T) bool {
	for _, x := range list {
		if x == "*" {
			return true
		}
	}
	return false
}

// validateAdmissionRule checks a rule of a webhook or a policy as upstream's validateRuleWithOperations
// (subresources allowed).
func validateAdmissionRule(r *admissionregistrationv1.RuleWithOperations, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.Operations) == 0 {
		errs = append(errs, field.Required(fp.Child("operations"), ""))
	}
	if len(r.Operations) > 1 && policyHasWildcard(r.Operations) {
		errs = append(errs, field.Invalid(fp.Child("operations"), r.Operations, "if '*' is present, must not specify other operations"))
	}
	for i, op := range r.Operations {
		if !contains(policyOperations, string(op)) {
			errs = append(errs, field.NotSupported(fp.Child("operations").Index(i), op, policyOperations))
		}
	}
	if len(r.APIGroups) == 0 {
		errs = append(errs, field.Required(fp.Child("apiGroups"), ""))
	}
	if len(r.APIGroups) > 1 && policyHasWildcard(r.APIGroups) {
		errs = append(errs, field.Invalid(fp.Child("apiGroups"), r.APIGroups, "if '*' is present, must not specify other API groups"))
	}
	if len(r.APIVersions) == 0 {
		errs = append(errs, field.Required(fp.Child("apiVersions"), ""))
	}
	if len(r.APIVersions) > 1 && policyHasWildcard(r.APIVersions) {
		errs = append(errs, field.Invalid(fp.Child("apiVersions"), r.APIVersions, "if '*' is present, must not specify other API versions"))
	}
	for i, v := range r.APIVersions {
		if v == "" {
			errs = append(errs, field.Required(fp.Child("apiVersions").Index(i), ""))
		}
	}
	errs = append(errs, validatePolicyResources(r.Resources, fp.Child("resources"))...)
	if r.Scope != nil && !contains(policyScopes, string(*r.Scope)) {
		errs = append(errs, field.NotSupported(fp.Child("scope"), *r.Scope, policyScopes))
	}
	return errs
}

// validatePolicyResources checks resources and resource/subresource pairs with their
// wildcards, as upstream's validateResources.
func validatePolicyResources(resources []string, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(resources) == 0 {
		errs = append(errs, field.Required(fp, ""))
	}
	wildSub, wildRes := sets.New[string](), sets.New[string]()
	doubleWild, singleWild, plain := false, false, false
	for i, rs := range resources {
		if rs == "" {
			errs = append(errs, field.Required(fp.Index(i), ""))
			continue
		}
		if rs == "*/*" {
			doubleWild = true
		}
		if rs == "*" {
			singleWild = true
		}
		res, sub, ok := strings.Cut(rs, "/")
		if !ok {
			plain = rs != "*"
			continue
		}
		if wildSub.Has(res) {
			errs = append(errs, field.Invalid(fp.Index(i), rs, fmt.Sprintf("if '%s/*' is present, must not specify %s", res, rs)))
		}
		if wildRes.Has(sub) {
			errs = append(errs, field.Invalid(fp.Index(i), rs, fmt.Sprintf("if '*/%s' is present, must not specify %s", sub, rs)))
		}
		if sub == "*" {
			wildSub.Insert(res)
		}
		if res == "*" {
			wildRes.Insert(sub)
		}
	}
	if len(resources) > 1 && doubleWild {
		errs = append(errs, field.Invalid(fp, resources, "if '*/*' is present, must not specify other resources"))
	}
	if singleWild && plain {
		errs = append(errs, field.Invalid(fp, resources, "if '*' is present, must not specify other resources without subresources"))
	}
	return errs
}

// ValidateCELMatchConditions checks matchConditions as upstream's: at most 64, each with
// a unique qualified name and an expression that compiles to bool (with params when
// the policy has a paramKind, and the authorizer). Expressions in stored compile in
// CEL's StoredExpressions environment.
func ValidateCELMatchConditions(conds []admissionregistrationv1.MatchCondition, params bool, stored sets.Set[string], fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(conds) > maxPolicyMatchConditions {
		errs = append(errs, field.TooMany(fp, len(conds), maxPolicyMatchConditions))
	}
	names := sets.New[string]()
	for i, c := range conds {
		cp := fp.Index(i)
		if expr := strings.TrimSpace(c.Expression); expr == "" {
			errs = append(errs, field.Required(cp.Child("expression"), ""))
		} else if _, err := admissioncel.Compile(expr, admissioncel.Options{Params: params, Authorizer: true,
			Returns: admissioncel.Bool, Stored: stored.Has(expr)}); err != nil {
			errs = append(errs, admissioncel.FieldError(cp.Child("expression"), expr, err))
		}
		if c.Name == "" {
			errs = append(errs, field.Required(cp.Child("name"), ""))
		} else {
			errs = append(errs, validateQualifiedName(c.Name, cp.Child("name"))...)
		}
		if c.Name != "" {
			if names.Has(c.Name) {
				errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
			}
			names.Insert(c.Name)
		}
	}
	return errs
}

var newlines = regexp.MustCompile(`[\n\r]+`)

func validatePolicyValidation(v *admissionregistrationv1.Validation, params bool, vars *admissioncel.Variables, stored storedExpressions, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if strings.TrimSpace(v.Expression) == "" {
		errs = append(errs, field.Required(fp.Child("expression"), "expression is not specified"))
	} else if _, err := admissioncel.Compile(v.Expression, admissioncel.Options{Params: params, Authorizer: true,
		Returns: admissioncel.Bool, Stored: stored.validations.Has(v.Expression), Variables: vars}); err != nil {
		errs = append(errs, admissioncel.FieldError(fp.Child("expression"), v.Expression, err))
	}
	if len(v.MessageExpression) > 0 && strings.TrimSpace(v.MessageExpression) == "" {
		errs = append(errs, field.Invalid(fp.Child("messageExpression"), v.MessageExpression, "must be non-empty if specified"))
	} else if strings.TrimSpace(v.MessageExpression) != "" {
		if _, err := admissioncel.Compile(v.MessageExpression, admissioncel.Options{Params: params,
			Returns: admissioncel.String, Stored: stored.messages.Has(v.MessageExpression), Variables: vars}); err != nil {
			errs = append(errs, admissioncel.FieldError(fp.Child("messageExpression"), v.MessageExpression, err))
		}
	}
	msg := strings.TrimSpace(v.Message)
	if len(v.Message) > 0 && msg == "" {
		errs = append(errs, field.Invalid(fp.Child("message"), v.Message, "message must be non-empty if specified"))
	} else if newlines.MatchString(msg) {
		errs = append(errs, field.Invalid(fp.Child("message"), v.Message, "message must not contain line breaks"))
	}
	if v.Reason != nil && !contains(policyReasons, string(*v.Reason)) {
		errs = append(errs, field.NotSupported(fp.Child("reason"), *v.Reason, policyReasons))
	}
	return errs
}

func validateAuditAnnotation(policy string, a *admissionregistrationv1.AuditAnnotation, params bool, vars *admissioncel.Variables, stored storedExpressions, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if policy != "" {
		errs = append(errs, validateQualifiedName(policy+"/"+a.Key, fp.Child("key"))...)
	} else {
		errs = append(errs, field.Invalid(fp.Child("key"), a.Key, "requires metadata.name be non-empty"))
	}
	expr := strings.TrimSpace(a.ValueExpression)
	switch {
	case expr == "":
		errs = append(errs, field.Required(fp.Child("valueExpression"), "valueExpression is not specified"))
	case len(expr) > maxAuditAnnotationValueExpressionLen:
		errs = append(errs, field.Required(fp.Child("valueExpression"), fmt.Sprintf("must not exceed %d bytes in length", maxAuditAnnotationValueExpressionLen)))
	default:
		if _, err := admissioncel.Compile(expr, admissioncel.Options{Params: params, Authorizer: true,
			Returns: admissioncel.StringOrNull, Stored: stored.auditAnnotations.Has(a.ValueExpression), Variables: vars}); err != nil {
			errs = append(errs, admissioncel.FieldError(fp.Child("valueExpression"), a.ValueExpression, err))
		}
	}
	return errs
}

var (
	celIdentifier = regexp.MustCompile(`^[_a-zA-Z][_a-zA-Z0-9]*$`)
	celReserved   = sets.New("true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function",
		"if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while")
)

func isCELIdentifier(name string) bool {
	return celIdentifier.MatchString(name) && !celReserved.Has(name)
}

// ValidateValidatingAdmissionPolicyBinding returns the field errors of a binding, as
// upstream's: a policy name, a paramRef with a name or a selector (not both) and a
// parameterNotFoundAction, valid matchResources, and validationActions.
func ValidateValidatingAdmissionPolicyBinding(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) field.ErrorList {
	errs := validateMetaWith(&b.ObjectMeta, false, apimachineryvalidation.NameIsDNSSubdomain, false)
	fp := field.NewPath("spec")
	if b.Spec.PolicyName == "" {
		errs = append(errs, field.Required(fp.Child("policyName"), ""))
	} else {
		errs = append(errs, validateName(apimachineryvalidation.NameIsDNSSubdomain, b.Spec.PolicyName, fp.Child("policyName"))...)
	}
	errs = append(errs, validateParamRef(b.Spec.ParamRef, fp.Child("paramRef"))...)
	errs = append(errs, validateMatchResources(b.Spec.MatchResources, fp.Child("matchResources"))...)
	return append(errs, validateValidationActions(b.Spec.ValidationActions, fp.Child("validationActions"))...)
}

// ValidateValidatingAdmissionPolicyBindingUpdate validates an updated binding as a new one.
func ValidateValidatingAdmissionPolicyBindingUpdate(b, old *admissionregistrationv1.ValidatingAdmissionPolicyBinding) field.ErrorList {
	return append(validateMetaUpdateWith(&b.ObjectMeta, &old.ObjectMeta, false), ValidateValidatingAdmissionPolicyBinding(b)...)
}

func validateParamRef(r *admissionregistrationv1.ParamRef, fp *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	if r.Name != "" {
		for _, msg := range path.ValidatePathSegmentName(r.Name, false) {
			errs = append(errs, field.Invalid(fp.Child("name"), r.Name, msg))
		}
		if r.Selector != nil {
			errs = append(errs, field.Forbidden(fp.Child("name"), `name and selector are mutually exclusive`))
		}
	}
	if r.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(r.Selector, metav1validation.LabelSelectorValidationOptions{}, fp.Child("selector"))...)
		if r.Name != "" {
			errs = append(errs, field.Forbidden(fp.Child("selector"), `name and selector are mutually exclusive`))
		}
	}
	if r.Name == "" && r.Selector == nil {
		errs = append(errs, field.Required(fp, `one of name or selector must be specified`))
	}
	if r.ParameterNotFoundAction == nil || *r.ParameterNotFoundAction == "" {
		errs = append(errs, field.Required(fp.Child("parameterNotFoundAction"), ""))
	} else if a := *r.ParameterNotFoundAction; a != admissionregistrationv1.DenyAction && a != admissionregistrationv1.AllowAction {
		errs = append(errs, field.NotSupported(fp.Child("parameterNotFoundAction"), r.ParameterNotFoundAction,
			[]string{string(admissionregistrationv1.DenyAction), string(admissionregistrationv1.AllowAction)}))
	}
	return errs
}

func validateValidationActions(actions []admissionregistrationv1.ValidationAction, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, a := range actions {
		if !contains(policyActions, string(a)) {
			errs = append(errs, field.NotSupported(fp.Index(i), a, policyActions))
		}
		if seen.Has(string(a)) {
			errs = append(errs, field.Duplicate(fp.Index(i), a))
		}
		seen.Insert(string(a))
	}
	if seen.Has(string(admissionregistrationv1.Deny)) && seen.Has(string(admissionregistrationv1.Warn)) {
		errs = append(errs, field.Invalid(fp, actions, "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"))
	}
	if seen.Len() == 0 {
		errs = append(errs, field.Required(fp, "at least one validation action is required"))
	}
	return errs
}
