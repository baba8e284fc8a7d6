package admissioncel

import (
	"context"
	"fmt"
	"math"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/lazy"
	"k8s.io/apiserver/pkg/cel/library"

	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/apiserver/filters"
)

// Input is what the variables of one evaluation are bound to.
type Input struct {
	// Object and OldObject are the object of the request and the stored one, as
	// unstructured maps (Unstructured converts a runtime.Object); nil is null.
	Object, OldObject map[string]any
	// Params is the binding's parameter object as an unstructured map; nil is null.
	Params map[string]any
	// Request is the request, in the admission.k8s.io/v1 shape (without uid and the
	// objects).
	Request *admissionv1.AdmissionRequest
	// Namespace is the namespace of a namespaced object; nil for cluster-scoped ones.
	Namespace *corev1.Namespace
	// Authorizer, when set, backs authorizer and authorizer.requestResource, asked as
	// User (the requesting user).
	Authorizer authorizer.Authorizer
	User       *filters.User
}

// Activation binds the variables for the evaluation of one request's expressions,
// and keeps what they may still cost. It is used by one goroutine.
type Activation struct {
	object, oldObject, params, request, namespace any
	authorizer, requestResource                   any
	variables                                     *lazy.MapValue
	// ctx is the context of the evaluation running now (for variables read by it).
	ctx context.Context
	// remaining is the budget left; pending is what variables cost while the current
	// expression ran.
	remaining, pending int64
}

// NewActivation binds in (and vars, the policy's variables, or nil) with budget the
// cost the evaluations may spend together (RuntimeCostBudget for a policy binding's
// expressions, RuntimeCostBudgetMatchConditions for matchConditions).
func NewActivation(in Input, vars *Variables, budget int64) (*Activation, error) {
	a := &Activation{remaining: budget}
	if in.Object != nil {
		a.object = in.Object
	}
	if in.OldObject != nil {
		a.oldObject = in.OldObject
	}
	if in.Params != nil {
		a.params = in.Params
	}
	if in.Request != nil {
		r, err := runtime.DefaultUnstructuredConverter.ToUnstructured(in.Request)
		if err != nil {
			return nil, fmt.Errorf("failed to prepare request variable for evaluation: %w", err)
		}
		a.request = r
	}
	if in.Namespace != nil {
		ns, err := runtime.DefaultUnstructuredConverter.ToUnstructured(namespaceObject(in.Namespace))
		if err != nil {
			return nil, fmt.Errorf("failed to prepare namespace variable for evaluation: %w", err)
		}
		a.namespace = ns
	}
	if in.Authorizer != nil {
		u := userInfo(in.User)
		z := authorizerAdapter{in.Authorizer}
		a.authorizer = library.NewAuthorizerVal(u, z)
		if in.Request != nil {
			a.requestResource = library.NewResourceAuthorizerVal(u, z, requestResource{in.Request})
		}
	}
	a.variables = lazy.NewMapValue(types.NewObjectType(variablesTypeName))
	if vars != nil {
		for _, v := range vars.list {
			v := v
			a.variables.Append(v.name, func(*lazy.MapValue) ref.Val { return a.evalVariable(v) })
		}
	}
	return a, nil
}

// namespaceObject is the part of a namespace expressions see, as upstream's.
func namespaceObject(ns *corev1.Namespace) *corev1.Namespace {
	return &corev1.Namespace{
		Spec: ns.Spec, Status: ns.Status,
		ObjectMeta: metav1.ObjectMeta{
			Name: ns.Name, GenerateName: ns.GenerateName, Namespace: ns.Namespace, UID: ns.UID,
			ResourceVersion: ns.ResourceVersion, Generation: ns.Generation, CreationTimestamp: ns.CreationTimestamp,
			DeletionTimestamp: ns.DeletionTimestamp, DeletionGracePeriodSeconds: ns.DeletionGracePeriodSeconds,
			Labels: ns.Labels, Annotations: ns.Annotations, Finalizers: ns.Finalizers,
		},
	}
}

// Remaining returns the budget left.
func (a *Activation) Remaining() int64 { return a.remaining }

// ResolveName implements interpreter.Activation.
func (a *Activation) ResolveName(name string) (any, bool) {
	switch name {
	case ObjectVar:
		return a.object, true
	case OldObjectVar:
		return a.oldObject, true
	case ParamsVar:
		return a.params, true
	case RequestVar:
		return a.request, true
	case NamespaceVar:
		return a.namespace, true
	case AuthorizerVar:
		return a.authorizer, a.authorizer != nil
	case RequestResourceAuthorizerVar:
		return a.requestResource, a.requestResource != nil
	case VariablesVar:
		return a.variables, true
	}
	return nil, false
}

// Parent implements interpreter.Activation: there is none.
func (a *Activation) Parent() interpreter.Activation { return nil }

var _ interpreter.Activation = (*Activation)(nil)

// evalVariable evaluates a variable that an expression reads for the first time.
func (a *Activation) evalVariable(v variable) ref.Val {
	if v.err != nil {
		return types.NewErr("composited variable %q fails to compile: %v", v.name, v.err)
	}
	ctx := a.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	val, details, err := v.prog.prog.ContextEval(ctx, a)
	if details == nil || details.ActualCost() == nil {
		return types.NewErr("unable to get evaluation details of variable %q", v.name)
	}
	a.pending = addCost(a.pending, *details.ActualCost())
	if err != nil {
		return types.NewErr("composited variable %q fails to evaluate: %v", v.name, err)
	}
	return val
}

func addCost(sum int64, c uint64) int64 {
	if c > math.MaxInt64 || sum > math.MaxInt64-int64(c) {
		return math.MaxInt64
	}
	return sum + int64(c)
}

// OutOfBudget is upstream's message for an evaluation that exhausts the budget.
const OutOfBudget = "validation failed due to running out of cost budget, no further validation rules will be run"

// Eval evaluates p against a and charges its cost (with the variables it read first)
// to a's budget. Errors are *apiservercel.Error with upstream's messages: an
// exhausted budget wraps apiservercel.ErrOutOfBudget and means no further expression
// may be evaluated; an error of the expression itself ("expression '...' resulted in
// error: ...") leaves the activation usable.
func (p *Program) Eval(ctx context.Context, a *Activation) (ref.Val, error) {
	a.ctx, a.pending = ctx, 0
	val, details, err := p.prog.ContextEval(ctx, a)
	a.ctx = nil
	if a.pending > a.remaining {
		a.remaining = -1
		return nil, &apiservercel.Error{Type: apiservercel.ErrorTypeInvalid, Detail: OutOfBudget, Cause: apiservercel.ErrOutOfBudget}
	}
	a.remaining -= a.pending
	if details == nil || details.ActualCost() == nil {
		a.remaining = -1
		return nil, &apiservercel.Error{Type: apiservercel.ErrorTypeInvalid, Cause: apiservercel.ErrOutOfBudget,
			Detail: fmt.Sprintf("runtime cost could not be calculated for expression: %v, no further expression will be run", p.expr)}
	}
	if c := *details.ActualCost(); c > math.MaxInt64 || int64(c) > a.remaining {
		a.remaining = -1
		return nil, &apiservercel.Error{Type: apiservercel.ErrorTypeInvalid, Detail: OutOfBudget, Cause: apiservercel.ErrOutOfBudget}
	} else {
		a.remaining -= int64(c)
	}
	if err != nil {
		return nil, &apiservercel.Error{Type: apiservercel.ErrorTypeInvalid,
			Detail: fmt.Sprintf("expression '%v' resulted in error: %v", p.expr, err)}
	}
	return val, nil
}

// Unstructured converts obj (a typed k8s.io/api object or an unstructured one) to
// the map expressions see; nil stays nil. A typed object without apiVersion and kind
// gets gvk's.
func Unstructured(obj runtime.Object) (map[string]any, error) {
	if obj == nil {
		return nil, nil
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if u == nil {
			return nil, nil
		}
		return u.Object, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert %T for CEL: %w", obj, err)
	}
	return m, nil
}
