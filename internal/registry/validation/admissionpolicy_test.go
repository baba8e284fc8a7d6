package validation

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/registry/defaults"
)

func policy(mutate func(*admissionregistrationv1.ValidatingAdmissionPolicy)) *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "replicas"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{"CREATE", "UPDATE"},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.spec.replicas <= 5"}},
		},
	}
	if mutate != nil {
		mutate(p)
	}
	defaults.ValidatingAdmissionPolicy(p)
	return p
}

func TestValidatingAdmissionPolicy(t *testing.T) {
	if errs := ValidateValidatingAdmissionPolicy(policy(nil)); len(errs) != 0 {
		t.Fatalf("a valid policy: %v", errs)
	}
	cases := map[string]struct {
		mutate func(*admissionregistrationv1.ValidatingAdmissionPolicy)
		want   string
	}{
		"syntax": {func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.Validations[0].Expression = "object.spec.replicas <"
		},
			`spec.validations[0].expression: Invalid value: "object.spec.replicas <": compilation failed: ERROR: <input>:1:23: Syntax error`},
		"type": {func(p *admissionregistrationv1.ValidatingAdmissionPolicy) { p.Spec.Validations[0].Expression = "'x'" },
			`spec.validations[0].expression: Invalid value: "'x'": must evaluate to bool but got string`},
		"params without paramKind": {func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.Validations[0].Expression = "params.x == 1"
		}, "undeclared reference to 'params'"},
		"messageExpression": {func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.Validations[0].MessageExpression = "1"
		},
			`spec.validations[0].messageExpression: Invalid value: "1": must evaluate to string but got int`},
		"nothing to do": {func(p *admissionregistrationv1.ValidatingAdmissionPolicy) { p.Spec.Validations = nil },
			"spec.validations: Required value: validations or auditAnnotations must contain at least one item"},
		"no rules": {func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.MatchConstraints.ResourceRules = nil
		},
			"spec.matchConstraints.resourceRules: Required value"},
		"variable name": {func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.Variables = []admissionregistrationv1.Variable{{Name: "in", Expression: "1"}}
		}, `spec.variables[0].name: Invalid value: "in": name is not a valid CEL identifier`},
		"variable type": {func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.Variables = []admissionregistrationv1.Variable{{Name: "n", Expression: "'x'"}}
			p.Spec.Validations[0].Expression = "variables.n > 1"
		}, "found no matching overload for '_>_' applied to '(string, int)'"},
		"matchCondition": {func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "a", Expression: "1"}, {Name: "a", Expression: "true"}}
		}, `spec.matchConditions[1].name: Duplicate value: "a"`},
		"auditAnnotation": {func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{{Key: "k", ValueExpression: "true"}}
		}, `spec.auditAnnotations[0].valueExpression: Invalid value: "true": must evaluate to one of [string null_type] but got bool`},
		"paramKind": {func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1"}
		}, "spec.paramKind.kind: Required value"},
	}
	for name, c := range cases {
		errs := ValidateValidatingAdmissionPolicy(policy(c.mutate))
		if !strings.Contains(errs.ToAggregate().Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, errs, c.want)
		}
	}
	// Variables declared for validations may be used there.
	ok := policy(func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
		p.Spec.Variables = []admissionregistrationv1.Variable{{Name: "n", Expression: "object.spec.replicas"}}
		p.Spec.Validations[0].Expression = "variables.n <= 5"
		p.Spec.Validations[0].MessageExpression = "'too many: ' + string(variables.n)"
	})
	if errs := ValidateValidatingAdmissionPolicy(ok); len(errs) != 0 {
		t.Fatalf("variables: %v", errs)
	}
}

func TestValidatingAdmissionPolicyBinding(t *testing.T) {
	deny := admissionregistrationv1.DenyAction
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "b"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p",
			ParamRef:          &admissionregistrationv1.ParamRef{Name: "limits", ParameterNotFoundAction: &deny},
			ValidationActions: []admissionregistrationv1.ValidationAction{"Deny"}},
	}
	if errs := ValidateValidatingAdmissionPolicyBinding(b); len(errs) != 0 {
		t.Fatalf("a valid binding: %v", errs)
	}
	b.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{"Deny", "Warn"}
	b.Spec.ParamRef.ParameterNotFoundAction = nil
	b.Spec.ParamRef.Selector = &metav1.LabelSelector{}
	got := ValidateValidatingAdmissionPolicyBinding(b).ToAggregate().Error()
	for _, want := range []string{
		"spec.paramRef.parameterNotFoundAction: Required value",
		"spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
		`spec.validationActions: Invalid value: ["Deny","Warn"]: must not contain both Deny and Warn`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("%s\nwant %q", got, want)
		}
	}
}
