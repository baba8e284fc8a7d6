// Package validatingadmissionpolicy is the ValidatingAdmissionPolicy admission plugin,
// as upstream's (k8s.io/apiserver/pkg/admission/plugin/policy/validating): every write
// that a policy's matchConstraints and a binding's matchResources match is checked
// by the policy's CEL expressions (package admissioncel) with the binding's params:
// matchConditions first, then validations, whose failures the binding's
// validationActions turn into a refusal (Deny, with upstream's message, reason and
// code), a Warning header (Warn) or an audit annotation (Audit); auditAnnotations are
// published on the request's audit event; errors follow the policy's failurePolicy.
//
// It reads policies, bindings, params and namespaces through the API server's watch
// caches, and compiles each policy once per resourceVersion.
package validatingadmissionpolicy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiservercel "k8s.io/apiserver/pkg/cel"

	"github.com/kubette/kubette/internal/admissioncel"
	"github.com/kubette/kubette/internal/apiserver/admission"
	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/apiserver/filters"
)

// Name is the plugin's name, as upstream's.
const Name = "ValidatingAdmissionPolicy"

var (
	policiesResource = schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies"}
	bindingsResource = schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicybindings"}
	errNotNamespace  = errors.New("not a Namespace")
)

// excluded are the resources upstream's expression-based admission never sees (the
// reviews, which are not stored).
var excluded = map[schema.GroupResource]bool{
	{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"}:       true,
	{Group: "authentication.k8s.io", Resource: "tokenreviews"}:             true,
	{Group: "authorization.k8s.io", Resource: "localsubjectaccessreviews"}: true,
	{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}:  true,
	{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"}:   true,
	{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}:      true,
}

// Reader reads the cluster: the API server's Get and List (typed objects for built-in
// kinds, unstructured ones for custom resources) and which resource serves a kind.
type Reader interface {
	Get(ctx context.Context, gr schema.GroupResource, namespace, name string) (runtime.Object, error)
	List(ctx context.Context, gr schema.GroupResource, namespace string) ([]runtime.Object, error)
	KindResource(gvk schema.GroupVersionKind) (gr schema.GroupResource, namespaced, ok bool)
}

// Plugin enforces ValidatingAdmissionPolicies.
type Plugin struct {
	reader Reader
	// authz returns the server's authorizer (built after the admission chain).
	authz func() authorizer.Authorizer
	cache cache
}

var _ admission.Validator = (*Plugin)(nil)

// New returns the plugin reading through r and authorizing the CEL authorizer's checks
// with authz().
func New(r Reader, authz func() authorizer.Authorizer) *Plugin {
	return &Plugin{reader: r, authz: authz}
}

// decision is one refusal to report, or a warning or audit entry.
type decision struct {
	policy, binding string
	message         string
	reason          metav1.StatusReason
}

// Validate checks the request against every policy that matches it.
func (p *Plugin) Validate(ctx context.Context, a *admission.Attributes) error {
	if excluded[a.Resource.GroupResource()] || excluded[schema.GroupResource{Group: a.Resource.Group, Resource: a.Resource.Resource + "/" + a.Subresource}] {
		return nil
	}
	policyObjs, err := p.reader.List(ctx, policiesResource, "")
	if err != nil || len(policyObjs) == 0 {
		return nil
	}
	bindingObjs, err := p.reader.List(ctx, bindingsResource, "")
	if err != nil || len(bindingObjs) == 0 {
		return nil
	}
	var policies []*admissionregistrationv1.ValidatingAdmissionPolicy
	for _, o := range policyObjs {
		if vp, ok := o.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok {
			policies = append(policies, vp)
		}
	}
	bindings := map[string][]*admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	for _, o := range bindingObjs {
		if b, ok := o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding); ok {
			bindings[b.Spec.PolicyName] = append(bindings[b.Spec.PolicyName], b)
		}
	}
	ev := &evaluation{plugin: p, attrs: a}
	for _, cp := range p.cache.policies(policies) {
		bs := bindings[cp.policy.Name]
		if len(bs) == 0 {
			continue
		}
		if err := ev.policy(ctx, cp, bs); err != nil {
			return err
		}
	}
	if len(ev.denied) == 0 {
		return nil
	}
	d := ev.denied[0]
	var msg string
	if d.binding != "" {
		msg = fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s", d.policy, d.binding, d.message)
	} else {
		msg = fmt.Sprintf("ValidatingAdmissionPolicy '%s' denied request: %s", d.policy, d.message)
	}
	refusal := admission.NewForbidden(a, errors.New(msg))
	var se *apierrors.StatusError
	if !errors.As(refusal, &se) {
		return refusal
	}
	reason := d.reason
	if reason == "" {
		reason = metav1.StatusReasonInvalid
	}
	se.ErrStatus.Reason, se.ErrStatus.Code = reason, reasonCode(reason)
	if se.ErrStatus.Details == nil {
		se.ErrStatus.Details = &metav1.StatusDetails{}
	}
	se.ErrStatus.Details.Causes = append(se.ErrStatus.Details.Causes, metav1.StatusCause{Message: msg})
	return se
}

// reasonCode is the HTTP code of a validation's reason, as upstream's.
func reasonCode(r metav1.StatusReason) int32 {
	switch r {
	case metav1.StatusReasonForbidden:
		return http.StatusForbidden
	case metav1.StatusReasonUnauthorized:
		return http.StatusUnauthorized
	case metav1.StatusReasonRequestEntityTooLarge:
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusUnprocessableEntity
}

// evaluation is the state of one request's checks.
type evaluation struct {
	plugin *Plugin
	attrs  *admission.Attributes
	denied []decision
	// input is the request's CEL input without params, built on first use.
	input *admissioncel.Input
}

func failurePolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) admissionregistrationv1.FailurePolicyType {
	if p.Spec.FailurePolicy == nil {
		return admissionregistrationv1.Fail
	}
	return *p.Spec.FailurePolicy
}

// configError applies the policy's failurePolicy to an error of its configuration.
func (e *evaluation) configError(p *admissionregistrationv1.ValidatingAdmissionPolicy, binding string, err error) {
	switch fp := failurePolicy(p); fp {
	case admissionregistrationv1.Ignore:
		return
	case admissionregistrationv1.Fail:
		msg := fmt.Sprintf("failed to configure policy: %v", err)
		if binding != "" {
			msg = fmt.Sprintf("failed to configure binding: %v", err)
		}
		e.denied = append(e.denied, decision{policy: p.Name, binding: binding, message: msg})
	default:
		e.denied = append(e.denied, decision{policy: p.Name, binding: binding, message: fmt.Sprintf("unrecognized failure policy: '%v'", fp)})
	}
}

// policy checks the request against one policy and its bindings.
func (e *evaluation) policy(ctx context.Context, cp *compiled, bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding) error {
	pol := cp.policy
	if pol.Spec.MatchConstraints == nil {
		e.configError(pol, "", errors.New("policy contained no match constraints, a required field"))
		return nil
	}
	ok, err := e.plugin.matches(ctx, e.attrs, pol.Spec.MatchConstraints)
	if err != nil {
		e.configError(pol, "", err)
		return nil
	}
	if !ok {
		return nil
	}
	if cp.err != nil {
		e.configError(pol, "", cp.err)
		return nil
	}
	annotations := map[string][]string{}
	var keys []string
	for _, b := range bindings {
		if b.Spec.MatchResources != nil {
			ok, err := e.plugin.matches(ctx, e.attrs, b.Spec.MatchResources)
			if err != nil {
				e.configError(pol, b.Name, err)
				continue
			}
			if !ok {
				continue
			}
		}
		params, err := e.params(ctx, pol, b)
		if err != nil {
			e.configError(pol, b.Name, err)
			continue
		}
		in, err := e.baseInput(ctx)
		if err != nil {
			return err
		}
		for _, param := range params {
			in := *in
			in.Params = param
			res := e.validate(ctx, cp, in)
			for i, d := range res.failures {
				for _, action := range b.Spec.ValidationActions {
					switch action {
					case admissionregistrationv1.Deny:
						e.denied = append(e.denied, decision{policy: pol.Name, binding: b.Name, message: d.message, reason: d.reason})
					case admissionregistrationv1.Warn:
						admission.AddWarning(ctx, fmt.Sprintf("Validation failed for ValidatingAdmissionPolicy '%s' with binding '%s': %s", pol.Name, b.Name, d.message))
					case admissionregistrationv1.Audit:
						publishFailure(ctx, b, res.indexes[i], d.message)
					}
				}
			}
			for _, d := range res.errors {
				e.denied = append(e.denied, decision{policy: pol.Name, binding: b.Name, message: d})
			}
			for _, kv := range res.annotations {
				if !containsString(annotations[kv[0]], kv[1]) {
					if annotations[kv[0]] == nil {
						keys = append(keys, kv[0])
					}
					annotations[kv[0]] = append(annotations[kv[0]], kv[1])
				}
			}
		}
	}
	for _, k := range keys {
		filters.AddAuditAnnotation(ctx, pol.Name+"/"+k, strings.Join(annotations[k], ", "))
	}
	return nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// validationFailureKey is the audit annotation of Audit failures, as upstream's.
const validationFailureKey = "validation.policy.admission.k8s.io/validation_failure"

func publishFailure(ctx context.Context, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, index int, message string) {
	value, err := json.Marshal([]struct {
		Message           string                                     `json:"message"`
		Policy            string                                     `json:"policy"`
		Binding           string                                     `json:"binding"`
		ExpressionIndex   int                                        `json:"expressionIndex"`
		ValidationActions []admissionregistrationv1.ValidationAction `json:"validationActions"`
	}{{Message: message, Policy: b.Spec.PolicyName, Binding: b.Name, ExpressionIndex: index, ValidationActions: b.Spec.ValidationActions}})
	if err == nil {
		filters.AddAuditAnnotation(ctx, validationFailureKey, string(value))
	}
}

// baseInput builds the request's CEL input (objects, request, namespace, authorizer).
func (e *evaluation) baseInput(ctx context.Context) (*admissioncel.Input, error) {
	if e.input != nil {
		return e.input, nil
	}
	a := e.attrs
	obj, err := objectMap(a.Object, a.Kind)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	old, err := objectMap(a.OldObject, a.Kind)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	in := &admissioncel.Input{Object: obj, OldObject: old, Request: admissionRequest(a), User: a.User}
	if z := e.plugin.authz; z != nil {
		in.Authorizer = z()
	}
	nsName := a.Namespace
	if a.Kind.Group == "" && a.Kind.Kind == "Namespace" {
		nsName = "" // a Namespace has itself as namespace; upstream leaves namespaceObject null
	}
	if nsName != "" {
		ns, err := e.plugin.namespace(ctx, nsName)
		if err != nil {
			return nil, err
		}
		in.Namespace = ns
	}
	e.input = in
	return in, nil
}

// objectMap is obj as CEL sees it, with its apiVersion and kind.
func objectMap(obj runtime.Object, gvk schema.GroupVersionKind) (map[string]any, error) {
	m, err := admissioncel.Unstructured(obj)
	if err != nil || m == nil {
		return m, err
	}
	if _, ok := m["kind"]; !ok {
		m["apiVersion"], m["kind"] = gvk.GroupVersion().String(), gvk.Kind
	}
	return m, nil
}

// admissionRequest is the request in admission.k8s.io/v1's shape.
func admissionRequest(a *admission.Attributes) *admissionv1.AdmissionRequest {
	gvk := metav1.GroupVersionKind{Group: a.Kind.Group, Version: a.Kind.Version, Kind: a.Kind.Kind}
	gvr := metav1.GroupVersionResource{Group: a.Resource.Group, Version: a.Resource.Version, Resource: a.Resource.Resource}
	dryRun := a.DryRun
	r := &admissionv1.AdmissionRequest{
		Kind: gvk, Resource: gvr, SubResource: a.Subresource,
		RequestKind: &gvk, RequestResource: &gvr, RequestSubResource: a.Subresource,
		Name: a.Name, Namespace: a.Namespace, Operation: admissionv1.Operation(a.Operation), DryRun: &dryRun,
	}
	if u := a.User; u != nil {
		r.UserInfo = authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
		for k, v := range u.Extra {
			if r.UserInfo.Extra == nil {
				r.UserInfo.Extra = map[string]authenticationv1.ExtraValue{}
			}
			r.UserInfo.Extra[k] = v
		}
	}
	return r
}

// params returns the binding's param objects: one nil without a paramKind or a
// paramRef; else the named object or those the selector picks, in the paramRef's
// namespace (the request's for a namespaced kind when it names none).
func (e *evaluation) params(ctx context.Context, pol *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) ([]map[string]any, error) {
	kind, ref := pol.Spec.ParamKind, b.Spec.ParamRef
	if kind == nil || ref == nil {
		return []map[string]any{nil}, nil
	}
	gv, err := schema.ParseGroupVersion(kind.APIVersion)
	if err != nil {
		return nil, err
	}
	gvk := gv.WithKind(kind.Kind)
	gr, namespaced, ok := e.plugin.reader.KindResource(gvk)
	if !ok {
		return nil, fmt.Errorf("paramKind kind `%v` not known", kind.String())
	}
	ns := ""
	if namespaced {
		ns = ref.Namespace
		if ns == "" {
			ns = e.attrs.Namespace
		}
		if ns == "" {
			return nil, errors.New("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources")
		}
	} else if ref.Namespace != "" {
		return nil, errors.New("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")
	}
	var objs []runtime.Object
	switch {
	case ref.Name != "":
		if ref.Selector != nil {
			return nil, errors.New("paramRef.name and paramRef.selector are mutually exclusive")
		}
		o, err := e.plugin.reader.Get(ctx, gr, ns, ref.Name)
		switch {
		case err == nil:
			objs = []runtime.Object{o}
		case !apierrors.IsNotFound(err):
			return nil, err
		}
	case ref.Selector != nil:
		sel, err := metav1.LabelSelectorAsSelector(ref.Selector)
		if err != nil {
			return nil, err
		}
		all, err := e.plugin.reader.List(ctx, gr, ns)
		if err != nil {
			return nil, err
		}
		for _, o := range all {
			if selected(o, sel) {
				objs = append(objs, o)
			}
		}
	default:
		return nil, errors.New("one of name or selector must be provided")
	}
	if len(objs) == 0 && ref.ParameterNotFoundAction != nil && *ref.ParameterNotFoundAction == admissionregistrationv1.DenyAction {
		return nil, errors.New("no params found for policy binding with `Deny` parameterNotFoundAction")
	}
	out := make([]map[string]any, 0, len(objs))
	for _, o := range objs {
		m, err := objectMap(o, gvk)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func selected(o runtime.Object, sel labels.Selector) bool {
	switch t := o.(type) {
	case *unstructured.Unstructured:
		return sel.Matches(labels.Set(t.GetLabels()))
	case metav1.Object:
		return sel.Matches(labels.Set(t.GetLabels()))
	}
	return false
}

// result is what one binding's evaluation with one param found.
type result struct {
	// failures are the failed validations (to be acted on by validationActions), with
	// their indexes in the policy.
	failures []decision
	indexes  []int
	// errors are the messages of evaluation errors under failurePolicy Fail (refusals
	// whatever the actions).
	errors []string
	// annotations are audit annotations to publish (key, value).
	annotations [][2]string
}

// validate runs matchConditions, validations and auditAnnotations for one param.
func (e *evaluation) validate(ctx context.Context, cp *compiled, in admissioncel.Input) result {
	var res result
	fail := failurePolicy(cp.policy) != admissionregistrationv1.Ignore
	failWith := func(msg string) result {
		if fail {
			res.errors = append(res.errors, msg)
		}
		return res
	}
	if len(cp.matchConditions) > 0 {
		mcIn := in
		mcIn.Namespace = nil
		act, err := admissioncel.NewActivation(mcIn, nil, admissioncel.RuntimeCostBudgetMatchConditions)
		if err != nil {
			return failWith(err.Error())
		}
		var errs []string
		for _, m := range cp.matchConditions {
			v, err := evalExpr(ctx, m.expr, act)
			if err != nil {
				errs = append(errs, err.Error())
				if errors.Is(err, apiservercel.ErrOutOfBudget) {
					break
				}
				continue
			}
			if v == types.False {
				return res
			}
		}
		if len(errs) > 0 {
			if len(errs) == 1 {
				return failWith(errs[0])
			}
			return failWith("[" + strings.Join(errs, ", ") + "]")
		}
	}
	act, err := admissioncel.NewActivation(in, cp.vars, admissioncel.RuntimeCostBudget)
	if err != nil {
		return failWith(err.Error())
	}
	for i, v := range cp.validations {
		val, err := evalExpr(ctx, v.expr, act)
		if err != nil {
			if fail {
				res.errors = append(res.errors, err.Error())
			}
			if errors.Is(err, apiservercel.ErrOutOfBudget) {
				break
			}
			continue
		}
		if val == types.True {
			continue
		}
		reason := metav1.StatusReasonInvalid
		if v.spec.Reason != nil {
			reason = *v.spec.Reason
		}
		res.failures = append(res.failures, decision{message: e.message(ctx, v, act), reason: reason})
		res.indexes = append(res.indexes, i)
	}
	if len(cp.auditAnns) > 0 {
		aact, err := admissioncel.NewActivation(in, cp.vars, admissioncel.RuntimeCostBudget)
		if err != nil {
			return failWith(err.Error())
		}
		for _, a := range cp.auditAnns {
			val, err := evalExpr(ctx, a.expr, aact)
			if err != nil {
				if fail {
					res.errors = append(res.errors, err.Error())
				}
				continue
			}
			switch val.Type() {
			case types.StringType:
				if s := strings.TrimSpace(val.Value().(string)); s != "" {
					if len(s) > maxAuditAnnotationValueLength {
						s = s[:maxAuditAnnotationValueLength]
					}
					res.annotations = append(res.annotations, [2]string{a.key, s})
				}
			case types.NullType:
			default:
				if fail {
					res.errors = append(res.errors, fmt.Sprintf("valueExpression '%v' resulted in unsupported return type: %v. Return type must be either string or null.",
						a.expr.source(), val.Type()))
				}
			}
		}
	}
	return res
}

// maxAuditAnnotationValueLength is upstream's bound on a published value.
const maxAuditAnnotationValueLength = 10 * 1024

func (x expression) source() string {
	if x.prog != nil {
		return x.prog.Expression()
	}
	return ""
}

// evalExpr evaluates x, reporting a compile error as upstream's evaluation does.
func evalExpr(ctx context.Context, x expression, act *admissioncel.Activation) (ref.Val, error) {
	if x.err != nil {
		return nil, fmt.Errorf("compilation error: %v", x.err)
	}
	return x.prog.Eval(ctx, act)
}

// message is a failed validation's message: its messageExpression's string when it
// gives one (trimmed, one line, at most 5 KiB), else its message, else "failed
// expression: ...".
func (e *evaluation) message(ctx context.Context, v validation, act *admissioncel.Activation) string {
	if v.message != nil && v.message.err == nil {
		if val, err := v.message.prog.Eval(ctx, act); err == nil {
			if s, ok := val.Value().(string); ok {
				s = strings.TrimSpace(s)
				if s != "" && len(s) <= admissioncel.MaxMessageExpressionLength && !strings.Contains(s, "\n") {
					return s
				}
			}
		}
	}
	if m := strings.TrimSpace(v.spec.Message); m != "" {
		return m
	}
	return "failed expression: " + strings.TrimSpace(v.spec.Expression)
}
