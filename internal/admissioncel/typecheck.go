package admissioncel

import (
	"errors"
	"fmt"

	"github.com/google/cel-go/cel"

	"k8s.io/apimachinery/pkg/util/version"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
)

// NamedExpression is a policy's variable, for TypeCheck.
type NamedExpression struct {
	Name, Expression string
}

// CheckTypes are the declared types TypeCheck checks against: object and oldObject of
// a kind's schema (nil: dyn), params of the paramKind's (nil: no params).
type CheckTypes struct {
	Object, Params *apiservercel.DeclType
	// HasParams declares params (dyn when Params is nil).
	HasParams bool
}

// TypeCheck checks expr, with the policy's variables, against typed object, oldObject
// and params, as upstream's type checker for a ValidatingAdmissionPolicy's status: the
// error is the checker's issues (for example "found no matching overload for '_>_'
// applied to '(int, string)'"), nil when it type checks. The result type is not
// checked and no program is built.
func TypeCheck(expr string, variables []NamedExpression, types CheckTypes) error {
	request, namespace := requestType(), namespaceType()
	vars := apiservercel.NewObjectType(variablesTypeName, map[string]*apiservercel.DeclField{})
	objType := cel.DynType
	decls := []*apiservercel.DeclType{namespace, request, vars}
	if types.Object != nil {
		objType = types.Object.CelType()
		decls = append(decls, types.Object)
	}
	opts := []cel.EnvOption{
		cel.Variable(ObjectVar, objType), cel.Variable(OldObjectVar, objType),
		cel.Variable(NamespaceVar, namespace.CelType()), cel.Variable(RequestVar, request.CelType()),
		cel.Variable(AuthorizerVar, library.AuthorizerType),
		cel.Variable(VariablesVar, vars.CelType()),
	}
	if types.Params != nil {
		opts = append(opts, cel.Variable(ParamsVar, types.Params.CelType()))
		decls = append(decls, types.Params)
	} else if types.HasParams {
		opts = append(opts, cel.Variable(ParamsVar, cel.DynType))
	}
	set, err := baseEnvSet().Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0), EnvOptions: opts, DeclTypes: decls,
	})
	if err != nil {
		return fmt.Errorf("fail to build env: %w", err)
	}
	env := set.StoredExpressionsEnv()
	for _, v := range variables {
		var t *cel.Type
		if ast, iss := env.Compile(v.Expression); iss == nil || iss.Err() == nil {
			t = ast.OutputType()
		}
		vars.Fields[v.Name] = apiservercel.NewDeclField(v.Name, declTypeOf(t), true, nil, nil)
	}
	if _, iss := env.Compile(expr); iss != nil && iss.Err() != nil {
		return errors.New(iss.String())
	}
	return nil
}
