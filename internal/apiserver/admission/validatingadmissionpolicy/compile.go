package validatingadmissionpolicy

import (
	"fmt"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/kubette/kubette/internal/admissioncel"
)

// expression is one compiled expression, or why it did not compile.
type expression struct {
	prog *admissioncel.Program
	err  error
}

func compileOne(expr string, opts admissioncel.Options) expression {
	p, err := admissioncel.Compile(expr, opts)
	return expression{prog: p, err: err}
}

// validation is one of a policy's validations, compiled.
type validation struct {
	spec    admissionregistrationv1.Validation
	expr    expression
	message *expression // nil without a messageExpression
}

// auditAnnotation is one of a policy's audit annotations, compiled.
type auditAnnotation struct {
	key  string
	expr expression
}

// matchCondition is one compiled matchCondition.
type matchCondition struct {
	name string
	expr expression
}

// compiled is a policy with its expressions compiled, as stored (in CEL's
// StoredExpressions environment: the policy was validated when it was written).
type compiled struct {
	policy          *admissionregistrationv1.ValidatingAdmissionPolicy
	vars            *admissioncel.Variables
	matchConditions []matchCondition
	validations     []validation
	auditAnns       []auditAnnotation
	// err is a configuration error that fails every request the policy matches.
	err error
}

func compilePolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) *compiled {
	c := &compiled{policy: p}
	params := p.Spec.ParamKind != nil
	vars, err := admissioncel.NewVariables()
	if err != nil {
		c.err = fmt.Errorf("failed to compile variables: %w", err)
		return c
	}
	c.vars = vars
	for _, v := range p.Spec.Variables {
		// A variable that does not compile fails the expressions that read it.
		_, _ = vars.Add(v.Name, v.Expression, admissioncel.Options{Params: params, Authorizer: true, Stored: true})
	}
	for _, m := range p.Spec.MatchConditions {
		c.matchConditions = append(c.matchConditions, matchCondition{name: m.Name,
			expr: compileOne(m.Expression, admissioncel.Options{Params: params, Authorizer: true, Returns: admissioncel.Bool, Stored: true})})
	}
	for _, v := range p.Spec.Validations {
		cv := validation{spec: v, expr: compileOne(v.Expression, admissioncel.Options{Params: params, Authorizer: true,
			Returns: admissioncel.Bool, Stored: true, Variables: vars})}
		if v.MessageExpression != "" {
			m := compileOne(v.MessageExpression, admissioncel.Options{Params: params, Returns: admissioncel.String, Stored: true, Variables: vars})
			cv.message = &m
		}
		c.validations = append(c.validations, cv)
	}
	for _, a := range p.Spec.AuditAnnotations {
		c.auditAnns = append(c.auditAnns, auditAnnotation{key: a.Key,
			expr: compileOne(a.ValueExpression, admissioncel.Options{Params: params, Authorizer: true,
				Returns: admissioncel.StringOrNull, Stored: true, Variables: vars})})
	}
	return c
}

// cache keeps each policy compiled once per resourceVersion.
type cache struct {
	mu     sync.Mutex
	byName map[string]*compiled
}

// policies returns the compiled form of each of ps, compiling those that are new or
// changed and forgetting those that are gone.
func (c *cache) policies(ps []*admissionregistrationv1.ValidatingAdmissionPolicy) []*compiled {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := make(map[string]*compiled, len(ps))
	out := make([]*compiled, 0, len(ps))
	for _, p := range ps {
		cp, ok := c.byName[p.Name]
		if !ok || cp.policy.ResourceVersion != p.ResourceVersion || cp.policy.UID != p.UID {
			cp = compilePolicy(p)
		}
		next[p.Name] = cp
		out = append(out, cp)
	}
	c.byName = next
	return out
}
