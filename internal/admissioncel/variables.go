package admissioncel

import (
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/traits"

	"k8s.io/apimachinery/pkg/util/version"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// variablesTypeName is the CEL type of the variables object, as upstream's.
const variablesTypeName = "kubernetes.variables"

// Variables are the composited variables of one policy (spec.variables): each is an
// expression of its own, which later variables and the policy's other expressions use
// as variables.<name>, with the type its expression was found to have. A variable is
// evaluated when an expression first reads it, at most once per Activation, and its
// cost counts against the activation's budget.
//
// Add and Compile with a Variables must not run concurrently; the Programs they return
// may then be evaluated concurrently.
type Variables struct {
	// object is the type of the variables object; Add gives it a field per variable
	// (the environments read the fields when they check an expression).
	object *apiservercel.DeclType
	base   *environment.EnvSet
	envs   map[envKey]*environment.EnvSet
	list   []variable
}

// variable is one compiled variable, or the error of its compilation.
type variable struct {
	name string
	prog *Program
	err  error
}

// NewVariables returns an empty set of variables (declaring `variables` with no fields).
func NewVariables() (*Variables, error) {
	object := apiservercel.NewObjectType(variablesTypeName, map[string]*apiservercel.DeclField{})
	base, err := baseEnvSet().Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        []cel.EnvOption{cel.Variable(VariablesVar, object.CelType())},
		DeclTypes:         []*apiservercel.DeclType{object},
	})
	if err != nil {
		return nil, fmt.Errorf("variables CEL environment: %w", err)
	}
	return &Variables{object: object, base: base, envs: map[envKey]*environment.EnvSet{}}, nil
}

func (v *Variables) envFor(k envKey) (*environment.EnvSet, error) {
	if e, ok := v.envs[k]; ok {
		return e, nil
	}
	e, err := withOptional(v.base, k)
	if err != nil {
		return nil, err
	}
	v.envs[k] = e
	return e, nil
}

// Add compiles the variable name (its expression may use the variables added before
// it) and declares it. A variable that does not compile is still declared, as dyn, so
// that the expressions using it compile; reading it at run time is an error. The error
// returned is Compile's.
func (v *Variables) Add(name, expr string, opts Options) (*Program, error) {
	opts.Variables = v
	opts.Returns = nil
	prog, err := Compile(expr, opts)
	var t *cel.Type
	if prog != nil {
		t = prog.OutputType
	}
	v.object.Fields[name] = apiservercel.NewDeclField(name, declTypeOf(t), true, nil, nil)
	v.list = append(v.list, variable{name: name, prog: prog, err: err})
	return prog, err
}

// declTypeOf is the declared type of a CEL type, for the type provider and the cost
// estimator: lists and maps keep their element types, anything else unknown is dyn.
func declTypeOf(t *cel.Type) *apiservercel.DeclType {
	if t == nil {
		return apiservercel.DynType
	}
	switch t {
	case cel.AnyType:
		return apiservercel.AnyType
	case cel.BoolType:
		return apiservercel.BoolType
	case cel.BytesType:
		return apiservercel.BytesType
	case cel.DoubleType:
		return apiservercel.DoubleType
	case cel.DurationType:
		return apiservercel.DurationType
	case cel.IntType:
		return apiservercel.IntType
	case cel.NullType:
		return apiservercel.NullType
	case cel.StringType:
		return apiservercel.StringType
	case cel.TimestampType:
		return apiservercel.TimestampType
	case cel.UintType:
		return apiservercel.UintType
	}
	if t.HasTrait(traits.ContainerType) && t.HasTrait(traits.IndexerType) {
		switch p := t.Parameters(); len(p) {
		case 1:
			return apiservercel.NewListType(declTypeOf(p[0]), -1)
		case 2:
			return apiservercel.NewMapType(declTypeOf(p[0]), declTypeOf(p[1]), -1)
		}
	}
	return apiservercel.DynType
}
