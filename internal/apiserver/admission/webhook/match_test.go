package webhook

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/admission"
)

// TestRuleMatches: operations, groups, versions, resource and subresource
// wildcards and scopes as upstream's matcher.
func TestRuleMatches(t *testing.T) {
	ns, cluster := admissionregistrationv1.NamespacedScope, admissionregistrationv1.ClusterScope
	rule := func(res string, scope *admissionregistrationv1.ScopeType, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.RuleWithOperations {
		return admissionregistrationv1.RuleWithOperations{Operations: ops,
			Rule: admissionregistrationv1.Rule{APIGroups: []string{"", "apps"}, APIVersions: []string{"*"}, Resources: []string{res}, Scope: scope}}
	}
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	attach := &admission.Attributes{Resource: pods, Subresource: "attach", Operation: admission.Connect, Namespace: "x"}
	create := &admission.Attributes{Resource: pods, Operation: admission.Create, Namespace: "x"}
	for _, tc := range []struct {
		rule admissionregistrationv1.RuleWithOperations
		a    *admission.Attributes
		want bool
	}{
		{rule("pods", nil, "CREATE"), create, true},
		{rule("pods", nil, "UPDATE"), create, false},
		{rule("pods", nil, "*"), create, true},
		{rule("*", nil, "*"), create, true},
		{rule("*", nil, "*"), attach, false},
		{rule("pods/attach", nil, "CONNECT"), attach, true},
		{rule("pods/*", nil, "CONNECT"), attach, true},
		{rule("*/attach", nil, "CONNECT"), attach, true},
		{rule("*/*", nil, "*"), attach, true},
		{rule("pods", &ns, "CREATE"), create, true},
		{rule("pods", &cluster, "CREATE"), create, false},
		{rule("deployments", nil, "CREATE"), create, false},
	} {
		if got := ruleMatches(tc.rule, tc.a, tc.a.Resource); got != tc.want {
			t.Errorf("%v on %s/%s %s: %v, want %v", tc.rule.Resources, tc.a.Resource.Resource, tc.a.Subresource, tc.a.Operation, got, tc.want)
		}
	}
}
