package webhook

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/cel-go/common/types"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/kubette/kubette/internal/admissioncel"
	"github.com/kubette/kubette/internal/apiserver/admission"
)

// condition is a compiled matchCondition.
type condition struct {
	name string
	prog *admissioncel.Program
}

// compileConditions compiles a stored webhook's matchConditions (in CEL's
// StoredExpressions environment: they passed validation when written).
func compileConditions(conds []admissionregistrationv1.MatchCondition) ([]condition, error) {
	out := make([]condition, 0, len(conds))
	for _, c := range conds {
		p, err := admissioncel.Compile(c.Expression, admissioncel.Options{Authorizer: true, Returns: admissioncel.Bool, Stored: true})
		if err != nil {
			return nil, fmt.Errorf("matchCondition %q: %w", c.Name, err)
		}
		out = append(out, condition{name: c.Name, prog: p})
	}
	return out, nil
}

// matchesConditions evaluates the matchConditions as upstream: any false skips
// the webhook; else an error is the webhook's failure (its failurePolicy decides);
// else it is called.
func (p *Plugin) matchesConditions(ctx context.Context, h *compiledWebhook, inv *invocation, a *admission.Attributes) (bool, error) {
	if len(h.conditions) == 0 {
		return true, nil
	}
	review, _, err := p.review(inv, a, a.Object, a.OldObject)
	if err != nil {
		return false, err
	}
	req := review.Request.DeepCopy()
	req.Object.Raw, req.OldObject.Raw, req.UID = nil, nil, ""
	in := admissioncel.Input{Request: req, User: a.User}
	if p.authorizer != nil {
		in.Authorizer = p.authorizer()
	}
	if in.Object, err = admissioncel.Unstructured(a.Object); err != nil {
		return false, err
	}
	if in.OldObject, err = admissioncel.Unstructured(a.OldObject); err != nil {
		return false, err
	}
	act, err := admissioncel.NewActivation(in, nil, admissioncel.RuntimeCostBudgetMatchConditions)
	if err != nil {
		return false, err
	}
	var errs []error
	for _, c := range h.conditions {
		v, err := c.prog.Eval(ctx, act)
		if err != nil {
			errs = append(errs, fmt.Errorf("matchCondition %q: %w", c.name, err))
			continue
		}
		if b, ok := v.(types.Bool); ok && !bool(b) {
			return false, nil
		}
	}
	if len(errs) > 0 {
		return false, errors.Join(errs...)
	}
	return true, nil
}
