package admissioncel

import (
	"errors"
	"fmt"

	"github.com/google/cel-go/cel"

	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// Options say how to compile one expression.
type Options struct {
	// Params declares the params variable (a policy with a paramKind).
	Params bool
	// Authorizer declares authorizer and authorizer.requestResource.
	Authorizer bool
	// Returns lists the types the expression may evaluate to (Bool, String,
	// StringOrNull, Any); empty means any.
	Returns []*cel.Type
	// Stored compiles in upstream's StoredExpressions environment: for expressions
	// already persisted (an update that keeps them, or evaluation at run time), which
	// may use every CEL feature the libraries know. Otherwise the expression may use
	// only the features of the compatibility version (NewExpressions), as a create
	// must.
	Stored bool
	// Variables declares the variables of a policy (spec.variables); nil declares none.
	Variables *Variables
}

// Program is a compiled expression. It may be evaluated by many goroutines at once.
type Program struct {
	expr string
	prog cel.Program
	// OutputType is the type the checker found for the expression.
	OutputType *cel.Type
}

// Expression returns the source of the program.
func (p *Program) Expression() string { return p.expr }

// Compile compiles expr with the variables opts declares and checks its result type.
// The error is an *apiservercel.Error whose Detail is upstream's message ("compilation
// failed: ...", "must evaluate to bool but got string").
func Compile(expr string, opts Options) (*Program, error) {
	k := envKey{params: opts.Params, authorizer: opts.Authorizer}
	var set *environment.EnvSet
	if opts.Variables != nil {
		s, err := opts.Variables.envFor(k)
		if err != nil {
			return nil, internal(fmt.Sprintf("unexpected error loading CEL environment: %v", err))
		}
		set = s
	} else {
		envs, err := baseEnvs()
		if err != nil {
			return nil, internal(fmt.Sprintf("unexpected error loading CEL environment: %v", err))
		}
		set = envs[k]
	}
	envType := environment.NewExpressions
	if opts.Stored {
		envType = environment.StoredExpressions
	}
	env, err := set.Env(envType)
	if err != nil {
		return nil, internal(fmt.Sprintf("unexpected error loading CEL environment: %v", err))
	}
	ast, issues := env.Compile(expr)
	if issues != nil && issues.Err() != nil {
		return nil, &apiservercel.Error{Type: apiservercel.ErrorTypeInvalid, Detail: "compilation failed: " + issues.String(),
			Cause: apiservercel.NewCompilationError(issues)}
	}
	if len(opts.Returns) > 0 {
		ok := false
		for _, t := range opts.Returns {
			if ast.OutputType().IsExactType(t) || cel.AnyType.IsExactType(t) {
				ok = true
				break
			}
		}
		if !ok {
			var reason string
			if len(opts.Returns) == 1 {
				reason = fmt.Sprintf("must evaluate to %v but got %v", opts.Returns[0].String(), ast.OutputType().String())
			} else {
				reason = fmt.Sprintf("must evaluate to one of %v but got %v", opts.Returns, ast.OutputType().String())
			}
			return nil, &apiservercel.Error{Type: apiservercel.ErrorTypeInvalid, Detail: reason}
		}
	}
	prog, err := env.Program(ast, cel.InterruptCheckFrequency(celconfig.CheckFrequency))
	if err != nil {
		return nil, internal("program instantiation failed: " + err.Error())
	}
	return &Program{expr: expr, prog: prog, OutputType: ast.OutputType()}, nil
}

func internal(detail string) error {
	return &apiservercel.Error{Type: apiservercel.ErrorTypeInternal, Detail: detail}
}

// FieldError is the field error of a 422 for err, an error of Compile for the
// expression expr at path, as upstream's validation reports it: Invalid with the
// expression as the value, Required, or Internal.
func FieldError(path *field.Path, expr string, err error) *field.Error {
	var ce *apiservercel.Error
	if errors.As(err, &ce) {
		switch ce.Type {
		case apiservercel.ErrorTypeRequired:
			return field.Required(path, ce.Detail)
		case apiservercel.ErrorTypeInvalid:
			return field.Invalid(path, expr, ce.Detail)
		case apiservercel.ErrorTypeInternal:
			return field.InternalError(path, ce)
		}
	}
	return field.InternalError(path, fmt.Errorf("unsupported error type: %w", err))
}
