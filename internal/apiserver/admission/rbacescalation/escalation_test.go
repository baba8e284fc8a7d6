package rbacescalation

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/admission"
	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/apiserver/authorizer/rbac"
	"github.com/kubette/kubette/internal/apiserver/filters"
)

type source map[schema.GroupResource][]runtime.Object

func (s source) List(_ context.Context, gr schema.GroupResource, _ string) ([]runtime.Object, error) {
	return s[gr], nil
}

func pol(verbs, groups, resources []string, names ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources, ResourceNames: names}
}

func l(s ...string) []string { return s }

func TestEscalation(t *testing.T) {
	ref := func(kind, name string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name}
	}
	bob := []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "bob"}}
	src := source{
		rbac.ClusterRoles: {
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "pods"}, Rules: []rbacv1.PolicyRule{pol(l("get", "list"), l(""), l("pods"))}},
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "secrets"}, Rules: []rbacv1.PolicyRule{pol(l("get"), l(""), l("secrets"))}},
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "escalator"}, Rules: []rbacv1.PolicyRule{pol(l("escalate"), l(rbacv1.GroupName), l("roles"), "free")}},
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "binder"}, Rules: []rbacv1.PolicyRule{pol(l("bind"), l(rbacv1.GroupName), l("clusterroles"), "secrets")}},
		},
		rbac.RoleBindings: {
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "a"}, RoleRef: ref("ClusterRole", "pods"), Subjects: bob},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "b"}, RoleRef: ref("ClusterRole", "escalator"), Subjects: bob},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "c"}, RoleRef: ref("ClusterRole", "binder"), Subjects: bob},
		},
	}
	z := rbac.New(src)
	p := &Plugin{Authorizer: func() authorizer.Authorizer { return z }, Rules: z}
	u := &filters.User{Name: "bob", Groups: l("system:authenticated")}
	roles := schema.GroupVersionResource{Group: rbacv1.GroupName, Version: "v1", Resource: "roles"}
	bindings := schema.GroupVersionResource{Group: rbacv1.GroupName, Version: "v1", Resource: "rolebindings"}
	crbs := schema.GroupVersionResource{Group: rbacv1.GroupName, Version: "v1", Resource: "clusterrolebindings"}
	role := func(name string, rules ...rbacv1.PolicyRule) *rbacv1.Role {
		return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name}, Rules: rules}
	}
	cases := []struct {
		name    string
		a       admission.Attributes
		message string // "" allows
	}{
		{"role within held rules", admission.Attributes{Resource: roles, Namespace: "team", Name: "r", Operation: admission.Create, User: u,
			Object: role("r", pol(l("get"), l(""), l("pods")))}, ""},
		{"role beyond held rules", admission.Attributes{Resource: roles, Namespace: "team", Name: "r", Operation: admission.Create, User: u,
			Object: role("r", pol(l("get", "delete"), l(""), l("pods")))},
			`roles.rbac.authorization.k8s.io "r" is forbidden: user "bob" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:` + "\n" + `{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}`},
		{"held rules are per namespace", admission.Attributes{Resource: roles, Namespace: "other", Name: "r", Operation: admission.Create, User: u,
			Object: role("r", pol(l("get"), l(""), l("pods")))}, "attempting to grant"},
		{"escalate verb", admission.Attributes{Resource: roles, Namespace: "team", Name: "free", Operation: admission.Create, User: u,
			Object: role("free", pol(l("*"), l("*"), l("*")))}, ""},
		{"system:masters", admission.Attributes{Resource: roles, Namespace: "x", Name: "r", Operation: admission.Create, User: &filters.User{Name: "root", Groups: l("system:masters")},
			Object: role("r", pol(l("*"), l("*"), l("*")))}, ""},
		{"update of GC fields only", admission.Attributes{Resource: roles, Namespace: "other", Name: "r", Operation: admission.Update, User: u,
			Object:    &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "r", Finalizers: l("x/y")}, Rules: []rbacv1.PolicyRule{pol(l("*"), l("*"), l("*"))}},
			OldObject: &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "r"}, Rules: []rbacv1.PolicyRule{pol(l("*"), l("*"), l("*"))}}}, ""},
		{"binding to a held role", admission.Attributes{Resource: bindings, Namespace: "team", Name: "x", Operation: admission.Create, User: u,
			Object: &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "x"}, RoleRef: ref("ClusterRole", "pods")}}, ""},
		{"binding with bind", admission.Attributes{Resource: bindings, Namespace: "team", Name: "x", Operation: admission.Create, User: u,
			Object: &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "x"}, RoleRef: ref("ClusterRole", "secrets")}}, ""},
		{"cluster binding, bind only in a namespace", admission.Attributes{Resource: crbs, Name: "x", Operation: admission.Create, User: u,
			Object: &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "x"}, RoleRef: ref("ClusterRole", "secrets")}}, `{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`},
		{"binding to a missing role", admission.Attributes{Resource: bindings, Namespace: "team", Name: "x", Operation: admission.Create, User: u,
			Object: &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "x"}, RoleRef: ref("Role", "nope")}}, `roles.rbac.authorization.k8s.io "nope" not found`},
		{"other groups pass", admission.Attributes{Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Operation: admission.Create, User: u}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Validate(context.Background(), &tc.a)
			if tc.message == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("error %v, want %q", err, tc.message)
			}
			if strings.Contains(tc.message, "not found") {
				if !apierrors.IsNotFound(err) {
					t.Fatalf("want 404, got %v", err)
				}
			} else if !apierrors.IsForbidden(err) {
				t.Fatalf("want 403, got %v", err)
			}
		})
	}
}

func TestAggregationRuleNeedsFullAuthority(t *testing.T) {
	z := rbac.New(source{})
	p := &Plugin{Authorizer: func() authorizer.Authorizer { return z }, Rules: z}
	err := p.Validate(context.Background(), &admission.Attributes{Resource: schema.GroupVersionResource{Group: rbacv1.GroupName, Version: "v1", Resource: "clusterroles"},
		Name: "agg", Operation: admission.Create, User: &filters.User{Name: "bob"},
		Object: &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "agg"}, AggregationRule: &rbacv1.AggregationRule{
			ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"a": "b"}}}}}})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "must have cluster-admin privileges to use the aggregationRule") {
		t.Fatalf("got %v", err)
	}
}
