package admissioncel

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apiservercel "k8s.io/apiserver/pkg/cel"

	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/apiserver/filters"
)

func mustCompile(t *testing.T, expr string, opts Options) *Program {
	t.Helper()
	p, err := Compile(expr, opts)
	if err != nil {
		t.Fatalf("compile %q: %v", expr, err)
	}
	return p
}

func deployment(replicas int64) map[string]any {
	return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "default", "labels": map[string]any{"app": "web"}},
		"spec":     map[string]any{"replicas": replicas}}
}

func request() *admissionv1.AdmissionRequest {
	return &admissionv1.AdmissionRequest{
		Kind:     metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		Resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		Name:     "web", Namespace: "default", Operation: admissionv1.Create,
		UserInfo: authUser("alice", "devs"),
	}
}

func authUser(name string, groups ...string) (u authenticationv1.UserInfo) {
	u.Username, u.Groups = name, groups
	return u
}

func TestCompileErrors(t *testing.T) {
	cases := []struct {
		expr string
		opts Options
		want string
	}{
		{"object.spec.replicas <", Options{Returns: Bool}, "compilation failed: ERROR: <input>:1:23: Syntax error"},
		{"1 + 1", Options{Returns: Bool}, "must evaluate to bool but got int"},
		{"true", Options{Returns: StringOrNull}, "must evaluate to one of [string null_type] but got bool"},
		{"params.x == 1", Options{Returns: Bool}, "compilation failed: ERROR: <input>:1:1: undeclared reference to 'params'"},
		{"authorizer.path('/healthz').check('get').allowed()", Options{Returns: Bool}, "undeclared reference to 'authorizer'"},
		{"variables.foo", Options{}, "undeclared reference to 'variables'"},
		// Introduced in 1.33: only for stored expressions.
		{"isSemver('1.0.0')", Options{Returns: Bool}, "undeclared reference to 'isSemver'"},
	}
	for _, c := range cases {
		_, err := Compile(c.expr, c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Compile(%q) = %v, want an error with %q", c.expr, err, c.want)
			continue
		}
		if !errors.Is(err, apiservercel.ErrInvalid) {
			t.Errorf("Compile(%q): %v is not an invalid-expression error", c.expr, err)
		}
		fe := FieldError(field.NewPath("spec", "validations").Index(0).Child("expression"), c.expr, err)
		if fe.Type != field.ErrorTypeInvalid || fe.BadValue != c.expr || fe.Field != "spec.validations[0].expression" {
			t.Errorf("FieldError: %#v", fe)
		}
	}
	mustCompile(t, "isSemver('1.0.0')", Options{Returns: Bool, Stored: true})
	mustCompile(t, "params == null", Options{Returns: Bool, Params: true})
}

func TestEvalObjectParamsRequestNamespace(t *testing.T) {
	p := mustCompile(t, `object.spec.replicas <= int(params.data.max) && request.operation == "CREATE" &&
		request.userInfo.username == "alice" && namespaceObject.metadata.labels.env == "prod" && oldObject == null`,
		Options{Returns: Bool, Params: true})
	for _, c := range []struct {
		replicas int64
		want     bool
	}{{3, true}, {6, false}} {
		a, err := NewActivation(Input{
			Object:    deployment(c.replicas),
			Params:    map[string]any{"data": map[string]any{"max": "5"}},
			Request:   request(),
			Namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"env": "prod"}}},
		}, nil, RuntimeCostBudget)
		if err != nil {
			t.Fatal(err)
		}
		v, err := p.Eval(context.Background(), a)
		if err != nil {
			t.Fatal(err)
		}
		if v != types.Bool(c.want) {
			t.Errorf("replicas %d: %v, want %v", c.replicas, v, c.want)
		}
		if a.Remaining() >= RuntimeCostBudget {
			t.Errorf("no cost charged: %d left", a.Remaining())
		}
	}
}

func TestEvalError(t *testing.T) {
	p := mustCompile(t, "object.spec.missing == 1", Options{Returns: Bool})
	a, err := NewActivation(Input{Object: deployment(1), Request: request()}, nil, RuntimeCostBudget)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Eval(context.Background(), a)
	want := "expression 'object.spec.missing == 1' resulted in error: no such key: missing"
	if err == nil || err.Error() != want {
		t.Fatalf("Eval: %v, want %q", err, want)
	}
	if errors.Is(err, apiservercel.ErrOutOfBudget) {
		t.Fatalf("an expression error is not out of budget")
	}
}

func TestVariables(t *testing.T) {
	vars, err := NewVariables()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vars.Add("replicas", "object.spec.replicas", Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := vars.Add("double", "variables.replicas * 2", Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := vars.Add("broken", "object.spec.(", Options{}); err == nil {
		t.Fatal("a variable with a syntax error compiled")
	}
	// The type of a variable is its expression's: int, so a string comparison is a
	// compile error.
	if _, err := Compile(`variables.double == "x"`, Options{Returns: Bool, Variables: vars}); err == nil ||
		!strings.Contains(err.Error(), "found no matching overload for '_==_' applied to '(int, string)'") {
		t.Fatalf("typed variable: %v", err)
	}
	p := mustCompile(t, "variables.double == 6", Options{Returns: Bool, Variables: vars})
	a, err := NewActivation(Input{Object: deployment(3), Request: request()}, vars, RuntimeCostBudget)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := p.Eval(context.Background(), a); err != nil || v != types.True {
		t.Fatalf("variables.double == 6: %v, %v", v, err)
	}
	b := mustCompile(t, "variables.broken == 1", Options{Returns: Bool, Variables: vars})
	_, err = b.Eval(context.Background(), a)
	if err == nil || !strings.Contains(err.Error(), `composited variable "broken" fails to compile`) {
		t.Fatalf("broken variable: %v", err)
	}
}

func TestVariablesEvaluatedLazilyAndOnce(t *testing.T) {
	vars, err := NewVariables()
	if err != nil {
		t.Fatal(err)
	}
	// An expensive variable: its cost shows whether it was evaluated.
	if _, err := vars.Add("sum", "object.items.map(x, x * 2).size()", Options{}); err != nil {
		t.Fatal(err)
	}
	items := make([]any, 1000)
	for i := range items {
		items[i] = int64(i)
	}
	in := Input{Object: map[string]any{"items": items}, Request: request()}
	cheap := mustCompile(t, "true", Options{Returns: Bool, Variables: vars})
	uses := mustCompile(t, "variables.sum == 1000", Options{Returns: Bool, Variables: vars})

	a, _ := NewActivation(in, vars, RuntimeCostBudget)
	if _, err := cheap.Eval(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	unread := RuntimeCostBudget - a.Remaining()
	if _, err := uses.Eval(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	first := RuntimeCostBudget - a.Remaining() - unread
	before := a.Remaining()
	if _, err := uses.Eval(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	second := before - a.Remaining()
	if first < 1000 || second >= first/10 {
		t.Fatalf("cost of the first read %d, of the second %d: want the variable charged once", first, second)
	}
}

func TestCostLimits(t *testing.T) {
	items := make([]any, 2000)
	for i := range items {
		items[i] = int64(i)
	}
	in := Input{Object: map[string]any{"items": items}, Request: request()}
	// One evaluation over the per-call limit is cancelled by CEL.
	p := mustCompile(t, "object.items.all(x, object.items.all(y, x + y >= 0))", Options{Returns: Bool})
	a, _ := NewActivation(in, nil, RuntimeCostBudget)
	if _, err := p.Eval(context.Background(), a); err == nil || !strings.Contains(err.Error(), "operation cancelled: actual cost limit exceeded") {
		t.Fatalf("over the per-call limit: %v", err)
	}
	// The budget of the activation is shared by the evaluations.
	q := mustCompile(t, "object.items.all(x, x >= 0)", Options{Returns: Bool})
	a, _ = NewActivation(in, nil, 10000)
	var err error
	for i := 0; i < 10 && err == nil; i++ {
		_, err = q.Eval(context.Background(), a)
	}
	if err == nil || err.Error() != OutOfBudget || !errors.Is(err, apiservercel.ErrOutOfBudget) {
		t.Fatalf("over the budget: %v", err)
	}
}

// allowOnly allows only what it lists, as "verb group/resource namespace user".
type allowOnly map[string]bool

func (z allowOnly) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	key := a.Verb + " " + a.APIGroup + "/" + a.Resource + " " + a.Namespace + " " + a.User.Name
	if z[key] {
		return authorizer.Allow, "", nil
	}
	return authorizer.NoOpinion, "not listed", nil
}

func TestAuthorizer(t *testing.T) {
	z := allowOnly{
		"create apps/deployments default alice":                         true,
		"get /secrets kube-system system:serviceaccount:kube-system:sa": true,
	}
	in := Input{Object: deployment(1), Request: request(), Authorizer: z, User: &filters.User{Name: "alice", Groups: []string{"devs"}}}
	for expr, want := range map[string]bool{
		"authorizer.requestResource.check('create').allowed()":                                                                         true,
		"authorizer.requestResource.check('delete').allowed()":                                                                         false,
		"authorizer.group('apps').resource('deployments').namespace('default').check('create').allowed()":                              true,
		"authorizer.group('').resource('secrets').namespace('kube-system').check('get').allowed()":                                     false,
		"authorizer.serviceAccount('kube-system', 'sa').group('').resource('secrets').namespace('kube-system').check('get').allowed()": true,
		"authorizer.group('apps').resource('deployments').check('delete').reason() == 'not listed'":                                    true,
	} {
		p := mustCompile(t, expr, Options{Returns: Bool, Authorizer: true})
		a, err := NewActivation(in, nil, RuntimeCostBudget)
		if err != nil {
			t.Fatal(err)
		}
		v, err := p.Eval(context.Background(), a)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if v != types.Bool(want) {
			t.Errorf("%s = %v, want %v", expr, v, want)
		}
	}
}

func TestLibraries(t *testing.T) {
	// Libraries of upstream's base environment: quantity, regex, lists, urls, ip,
	// cidr, format, strings, sets.
	for _, expr := range []string{
		"quantity('1Gi').isGreaterThan(quantity('1Mi'))",
		"'abc'.find('b.') == 'bc'",
		"[1, 2, 3].isSorted()",
		"url('https://example.com/x').getHost() == 'example.com'",
		"ip('10.0.0.1').family() == 4",
		"cidr('10.0.0.0/8').containsIP(ip('10.1.2.3'))",
		"format.dns1123Label().validate('Bad_Name').hasValue()",
		"'a,b'.split(',').size() == 2",
		"sets.contains([1, 2], [1])",
	} {
		p := mustCompile(t, expr, Options{Returns: Bool})
		a, _ := NewActivation(Input{Request: request()}, nil, RuntimeCostBudget)
		if v, err := p.Eval(context.Background(), a); err != nil || v != types.True {
			t.Errorf("%s: %v, %v", expr, v, err)
		}
	}
}

func TestTypeCheck(t *testing.T) {
	spec := apiservercel.NewObjectType("Spec", map[string]*apiservercel.DeclField{
		"replicas": apiservercel.NewDeclField("replicas", apiservercel.IntType, false, nil, nil)})
	obj := apiservercel.NewObjectType("Deployment", map[string]*apiservercel.DeclField{
		"spec": apiservercel.NewDeclField("spec", spec, false, nil, nil)})
	types := CheckTypes{Object: obj}
	if err := TypeCheck("object.spec.replicas > 1", nil, types); err != nil {
		t.Fatalf("well typed: %v", err)
	}
	for expr, want := range map[string]string{
		"object.spec.replicas > '1'":    "found no matching overload for '_>_' applied to '(int, string)'",
		"'got ' + object.spec.replicas": "found no matching overload for '_+_' applied to '(string, int)'",
		"object.spec.maxRetries < 10":   "undefined field 'maxRetries'",
		"variables.r == 'x'":            "found no matching overload for '_==_' applied to '(int, string)'",
	} {
		err := TypeCheck(expr, []NamedExpression{{Name: "r", Expression: "object.spec.replicas"}}, types)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", expr, err, want)
		}
	}
}
