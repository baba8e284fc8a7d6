// Package admissioncel compiles and evaluates the CEL expressions of admission control:
// the validations, matchConditions, messageExpressions, auditAnnotations and variables
// of ValidatingAdmissionPolicies, and the matchConditions of admission webhooks. It
// declares the variables upstream's admission plugins declare (object, oldObject,
// request, params, namespaceObject, authorizer, authorizer.requestResource and the
// lazily evaluated variables of a policy) in upstream's CEL environment
// (k8s.io/apiserver/pkg/cel/environment with its libraries and cost estimator), so an
// expression compiles, costs and fails here as it does on an upstream API server.
//
// Compile an expression once with Compile (the Options say which variables exist and
// what it must evaluate to), then evaluate it per request with Program.Eval against an
// Activation built from the request by NewActivation. Compile errors are
// k8s.io/apiserver/pkg/cel Errors whose Detail is upstream's message; FieldError turns
// one into the field error of a 422.
package admissioncel

import (
	"github.com/google/cel-go/cel"

	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// The names of the variables an admission expression may use, as upstream's.
const (
	ObjectVar                    = "object"
	OldObjectVar                 = "oldObject"
	RequestVar                   = "request"
	ParamsVar                    = "params"
	NamespaceVar                 = "namespaceObject"
	AuthorizerVar                = "authorizer"
	RequestResourceAuthorizerVar = "authorizer.requestResource"
	VariablesVar                 = "variables"
)

// Cost limits, upstream's (k8s.io/apiserver/pkg/apis/cel).
const (
	// PerCallLimit is the most one evaluation of one expression may cost.
	PerCallLimit = celconfig.PerCallLimit
	// RuntimeCostBudget is what the expressions of one policy binding may cost
	// together for one request.
	RuntimeCostBudget = celconfig.RuntimeCELCostBudget
	// RuntimeCostBudgetMatchConditions is what the matchConditions of one webhook or
	// policy binding may cost together for one request.
	RuntimeCostBudgetMatchConditions = celconfig.RuntimeCELCostBudgetMatchConditions
	// MaxMessageExpressionLength is the longest message a messageExpression may give.
	MaxMessageExpressionLength = celconfig.MaxEvaluatedMessageExpressionSizeBytes
)

// The Kubernetes version whose CEL features new expressions may use (the
// NewExpressions environment); stored expressions may use every feature the libraries
// know.
const compatibilityMajor, compatibilityMinor = 1, 32

// Result types of the admission expressions, for Options.Returns.
var (
	// Bool is what validations and matchConditions evaluate to.
	Bool = []*cel.Type{cel.BoolType}
	// String is what messageExpressions evaluate to.
	String = []*cel.Type{cel.StringType}
	// StringOrNull is what auditAnnotations' valueExpressions evaluate to.
	StringOrNull = []*cel.Type{cel.StringType, cel.NullType}
	// Any is what variables evaluate to.
	Any = []*cel.Type{cel.AnyType}
)
