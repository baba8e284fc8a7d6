package rbac

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/apiserver/filters"
)

// fakeSource serves fixed objects; rev, when set, makes it a Revisioner.
type fakeSource struct {
	objs  map[schema.GroupResource][]runtime.Object
	lists int
}

func (f *fakeSource) List(_ context.Context, gr schema.GroupResource, ns string) ([]runtime.Object, error) {
	f.lists++
	return f.objs[gr], nil
}

type revSource struct {
	*fakeSource
	rev int64
}

func (r *revSource) Revision(schema.GroupResource) int64 { return r.rev }

func rule(verbs, groups, resources []string, names ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources, ResourceNames: names}
}

func l(s ...string) []string { return s }

func clusterRole(name string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
}

func role(ns, name string, rules ...rbacv1.PolicyRule) *rbacv1.Role {
	return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
}

func user(n string) rbacv1.Subject {
	return rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: n}
}
func group(n string) rbacv1.Subject {
	return rbacv1.Subject{Kind: "Group", APIGroup: rbacv1.GroupName, Name: n}
}
func sa(ns, n string) rbacv1.Subject {
	return rbacv1.Subject{Kind: "ServiceAccount", Namespace: ns, Name: n}
}

func crb(name, roleName string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName}, Subjects: subjects}
}

func rb(ns, name, kind, roleName string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: roleName}, Subjects: subjects}
}

func fixture() *fakeSource {
	return &fakeSource{objs: map[schema.GroupResource][]runtime.Object{
		ClusterRoles: {
			clusterRole("view", rule(l("get", "list", "watch"), l(""), l("pods", "services", "pods/log"))),
			clusterRole("admin-all", rule(l("*"), l("*"), l("*")), rbacv1.PolicyRule{Verbs: l("*"), NonResourceURLs: l("*")}),
			clusterRole("status-reader", rule(l("get"), l("*"), l("*/status"))),
			clusterRole("named", rule(l("get", "list", "watch", "update"), l(""), l("configmaps"), "cm1")),
			clusterRole("healthz", rbacv1.PolicyRule{Verbs: l("get"), NonResourceURLs: l("/healthz", "/logs/*")}),
			clusterRole("deploy", rule(l("create"), l("apps"), l("deployments", "deployments/scale"))),
		},
		ClusterRoleBindings: {
			crb("ops", "admin-all", group("ops")),
			crb("status", "status-reader", user("carol")),
			crb("health", "healthz", group("system:authenticated")),
			crb("robot", "deploy", sa("ci", "builder")),
			crb("dangling", "missing", user("dave")),
		},
		Roles: {
			role("team", "cm-reader", rule(l("get"), l(""), l("configmaps"))),
		},
		RoleBindings: {
			rb("team", "bob-view", "ClusterRole", "view", user("bob")),
			rb("team", "named", "ClusterRole", "named", user("erin")),
			rb("team", "local", "Role", "cm-reader", group("readers")),
			rb("team", "sa-local", "ClusterRole", "view", rbacv1.Subject{Kind: "ServiceAccount", Name: "app"}),
			rb("team", "all-sas", "Role", "cm-reader", group("system:serviceaccounts:team")),
		},
	}}
}

func res(u *filters.User, verb, group, resource, sub, ns, name string) authorizer.Attributes {
	return authorizer.Attributes{User: u, Verb: verb, ResourceRequest: true, APIGroup: group, APIVersion: "v1",
		Resource: resource, Subresource: sub, Namespace: ns, Name: name}
}

func path(u *filters.User, verb, p string) authorizer.Attributes {
	return authorizer.Attributes{User: u, Verb: verb, Path: p}
}

func TestAuthorize(t *testing.T) {
	bob := &filters.User{Name: "bob", Groups: l("system:authenticated")}
	ops := &filters.User{Name: "olga", Groups: l("ops", "system:authenticated")}
	carol := &filters.User{Name: "carol"}
	erin := &filters.User{Name: "erin"}
	reader := &filters.User{Name: "rita", Groups: l("readers")}
	builder := &filters.User{Name: "system:serviceaccount:ci:builder", Groups: l("system:serviceaccounts", "system:serviceaccounts:ci")}
	app := &filters.User{Name: "system:serviceaccount:team:app"}
	otherApp := &filters.User{Name: "system:serviceaccount:other:app", Groups: l("system:serviceaccounts:other")}
	teamSA := &filters.User{Name: "system:serviceaccount:team:x", Groups: l("system:serviceaccounts", "system:serviceaccounts:team")}
	anon := &filters.User{Name: filters.Anonymous, Groups: l("system:unauthenticated")}
	cases := []struct {
		name  string
		a     authorizer.Attributes
		allow bool
	}{
		{"rolebinding to clusterrole in its namespace", res(bob, "list", "", "pods", "", "team", ""), true},
		{"get one pod", res(bob, "get", "", "pods", "", "team", "p1"), true},
		{"not elsewhere", res(bob, "list", "", "pods", "", "other", ""), false},
		{"not cluster-wide", res(bob, "list", "", "pods", "", "", ""), false},
		{"not another verb", res(bob, "delete", "", "pods", "", "team", "p1"), false},
		{"not secrets", res(bob, "list", "", "secrets", "", "team", ""), false},
		{"subresource named in rule", res(bob, "get", "", "pods", "log", "team", "p1"), true},
		{"subresource not in rule", res(bob, "get", "", "pods", "exec", "team", "p1"), false},
		{"wrong group", res(bob, "list", "apps", "pods", "", "team", ""), false},
		{"group wildcards", res(ops, "delete", "apps", "deployments", "", "x", "d"), true},
		{"wildcard resource covers subresources", res(ops, "create", "", "pods", "exec", "x", "p"), true},
		{"wildcard non-resource URL", path(ops, "get", "/metrics"), true},
		{"*/status", res(carol, "get", "apps", "deployments", "status", "x", "d"), true},
		{"*/status not the object", res(carol, "get", "apps", "deployments", "", "x", "d"), false},
		{"*/status not another subresource", res(carol, "get", "apps", "deployments", "scale", "x", "d"), false},
		{"resourceNames match", res(erin, "get", "", "configmaps", "", "team", "cm1"), true},
		{"resourceNames other name", res(erin, "get", "", "configmaps", "", "team", "cm2"), false},
		{"resourceNames no list of all", res(erin, "list", "", "configmaps", "", "team", ""), false},
		{"resourceNames list by metadata.name", res(erin, "list", "", "configmaps", "", "team", "cm1"), true},
		{"resourceNames watch by metadata.name", res(erin, "watch", "", "configmaps", "", "team", "cm1"), true},
		{"resourceNames no create", res(erin, "create", "", "configmaps", "", "team", ""), false},
		{"exact non-resource URL", path(bob, "get", "/healthz"), true},
		{"non-resource URL other verb", path(bob, "post", "/healthz"), false},
		{"non-resource prefix", path(bob, "get", "/logs/kubelet.log"), true},
		{"non-resource prefix is not its parent", path(bob, "get", "/logs"), false},
		{"non-resource other path", path(bob, "get", "/metrics"), false},
		{"unauthenticated has no system:authenticated", path(anon, "get", "/healthz"), false},
		{"role in binding namespace via group", res(reader, "get", "", "configmaps", "", "team", "c"), true},
		{"role not in other namespace", res(reader, "get", "", "configmaps", "", "other", "c"), false},
		{"serviceaccount subject of a clusterrolebinding", res(builder, "create", "apps", "deployments", "scale", "ns", "d"), true},
		{"serviceaccount subject without namespace is the binding's", res(app, "list", "", "services", "", "team", ""), true},
		{"same name other namespace", res(otherApp, "list", "", "services", "", "team", ""), false},
		{"serviceaccounts group of the namespace", res(teamSA, "get", "", "configmaps", "", "team", "c"), true},
		{"binding to a missing role grants nothing", res(&filters.User{Name: "dave"}, "get", "", "pods", "", "", ""), false},
		{"nil user", res(nil, "get", "", "pods", "", "team", ""), false},
	}
	z := New(fixture())
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, reason, err := z.Authorize(context.Background(), tc.a)
			if err != nil {
				t.Fatal(err)
			}
			if d == authorizer.Deny {
				t.Fatalf("RBAC denied: %s", reason)
			}
			if (d == authorizer.Allow) != tc.allow {
				t.Fatalf("decision %v (%s), want allow=%v", d, reason, tc.allow)
			}
		})
	}
}

func TestReasons(t *testing.T) {
	z := New(fixture())
	_, reason, _ := z.Authorize(context.Background(), res(&filters.User{Name: "bob"}, "list", "", "pods", "", "team", ""))
	if want := `RBAC: allowed by RoleBinding "bob-view/team" of ClusterRole "view" to User "bob"`; reason != want {
		t.Fatalf("reason %q, want %q", reason, want)
	}
	d, reason, _ := z.Authorize(context.Background(), res(&filters.User{Name: "bob"}, "list", "", "secrets", "", "team", ""))
	if d != authorizer.NoOpinion || reason != "" {
		t.Fatalf("got %v %q, want no opinion without a reason", d, reason)
	}
	_, reason, _ = z.Authorize(context.Background(), res(&filters.User{Name: "dave"}, "get", "", "pods", "", "", ""))
	if want := `RBAC: clusterrole.rbac.authorization.k8s.io "missing" not found`; reason != want {
		t.Fatalf("reason %q, want %q", reason, want)
	}
	_, reason, _ = z.Authorize(context.Background(), res(&filters.User{Name: "system:serviceaccount:team:app"}, "list", "", "pods", "", "team", ""))
	if want := `RBAC: allowed by RoleBinding "sa-local/team" of ClusterRole "view" to ServiceAccount "app/team"`; reason != want {
		t.Fatalf("reason %q, want %q", reason, want)
	}
}

func TestRulesFor(t *testing.T) {
	z := New(fixture())
	rules, err := z.RulesFor(context.Background(), &filters.User{Name: "bob", Groups: l("system:authenticated")}, "team")
	if err != nil {
		t.Fatal(err)
	}
	// healthz (cluster-wide, through system:authenticated) first, then view in team.
	if len(rules) != 2 || rules[0].NonResourceURLs[0] != "/healthz" || rules[1].Resources[0] != "pods" {
		t.Fatalf("rules %+v", rules)
	}
	if _, err := z.RulesFor(context.Background(), &filters.User{Name: "dave"}, ""); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("want the dangling binding's error, got %v", err)
	}
}

func TestIndexFollowsRevisions(t *testing.T) {
	f := fixture()
	src := &revSource{fakeSource: f, rev: 1}
	z := New(src)
	bob := &filters.User{Name: "bob"}
	a := res(bob, "list", "", "secrets", "", "team", "")
	for i := 0; i < 3; i++ {
		if d, _, _ := z.Authorize(context.Background(), a); d == authorizer.Allow {
			t.Fatal("allowed before the grant")
		}
	}
	if f.lists != 4 {
		t.Fatalf("%d lists for three requests at one revision, want one index build (4)", f.lists)
	}
	f.objs[ClusterRoleBindings] = append(f.objs[ClusterRoleBindings], crb("bob-admin", "admin-all", user("bob")))
	src.rev = 2
	if d, _, _ := z.Authorize(context.Background(), a); d != authorizer.Allow {
		t.Fatal("the new binding is not seen after the revision moved")
	}
}

func TestCovers(t *testing.T) {
	cases := []struct {
		name           string
		owner, servant []rbacv1.PolicyRule
		covered        bool
		missing        int
	}{
		{"same", []rbacv1.PolicyRule{rule(l("get", "list"), l(""), l("pods"))}, []rbacv1.PolicyRule{rule(l("get"), l(""), l("pods"))}, true, 0},
		{"more verbs", []rbacv1.PolicyRule{rule(l("get"), l(""), l("pods"))}, []rbacv1.PolicyRule{rule(l("get", "delete"), l(""), l("pods"))}, false, 1},
		{"star covers all", []rbacv1.PolicyRule{rule(l("*"), l("*"), l("*"))}, []rbacv1.PolicyRule{rule(l("get", "escalate"), l("x", ""), l("a", "b/c"), "n")}, true, 0},
		{"star is not every resource held", []rbacv1.PolicyRule{rule(l("get"), l(""), l("pods", "secrets"))}, []rbacv1.PolicyRule{rule(l("get"), l(""), l("*"))}, false, 1},
		{"*/sub covers x/sub", []rbacv1.PolicyRule{rule(l("get"), l(""), l("*/status"))}, []rbacv1.PolicyRule{rule(l("get"), l(""), l("pods/status"))}, true, 0},
		{"*/sub not x", []rbacv1.PolicyRule{rule(l("get"), l(""), l("*/status"))}, []rbacv1.PolicyRule{rule(l("get"), l(""), l("pods"))}, false, 1},
		{"names narrower", []rbacv1.PolicyRule{rule(l("get"), l(""), l("pods"))}, []rbacv1.PolicyRule{rule(l("get"), l(""), l("pods"), "a", "b")}, true, 0},
		{"names wider", []rbacv1.PolicyRule{rule(l("get"), l(""), l("pods"), "a")}, []rbacv1.PolicyRule{rule(l("get"), l(""), l("pods"))}, false, 1},
		{"names other", []rbacv1.PolicyRule{rule(l("get"), l(""), l("pods"), "a")}, []rbacv1.PolicyRule{rule(l("get"), l(""), l("pods"), "a", "b")}, false, 1},
		{"url prefix", []rbacv1.PolicyRule{{Verbs: l("get"), NonResourceURLs: l("/logs/*")}}, []rbacv1.PolicyRule{{Verbs: l("get"), NonResourceURLs: l("/logs/a", "/logs/*")}}, true, 0},
		{"url not covered", []rbacv1.PolicyRule{{Verbs: l("get"), NonResourceURLs: l("/healthz")}}, []rbacv1.PolicyRule{{Verbs: l("get"), NonResourceURLs: l("/metrics")}}, false, 1},
		{"nothing to grant", nil, nil, true, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ok, missing := Covers(tc.owner, tc.servant)
			if ok != tc.covered || len(missing) != tc.missing {
				t.Fatalf("covers %v missing %+v, want %v and %d", ok, missing, tc.covered, tc.missing)
			}
		})
	}
}

func TestEscalationMessage(t *testing.T) {
	_, missing := Covers(nil, []rbacv1.PolicyRule{rule(l("get", "list"), l(""), l("secrets")), {Verbs: l("get"), NonResourceURLs: l("/metrics")}})
	err := EscalationError(&filters.User{Name: "bob", Groups: l("system:authenticated")}, missing, nil)
	want := "user \"bob\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n" +
		"{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\"]}\n{NonResourceURLs:[\"/metrics\"], Verbs:[\"get\"]}"
	if err.Error() != want {
		t.Fatalf("message\n%s\nwant\n%s", err, want)
	}
}

func BenchmarkAuthorize(b *testing.B) {
	f := fixture()
	// A policy of upstream's size: ~70 ClusterRoles and ~60 ClusterRoleBindings.
	for i := 0; i < 70; i++ {
		name := "system:role-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		f.objs[ClusterRoles] = append(f.objs[ClusterRoles], clusterRole(name, rule(l("get", "list", "watch"), l("", "apps"), l("pods", "nodes", "deployments")),
			rule(l("create", "update"), l("coordination.k8s.io"), l("leases"))))
		f.objs[ClusterRoleBindings] = append(f.objs[ClusterRoleBindings], crb(name, name, user("system:component-"+name), group("system:group-"+name)))
	}
	z := New(&revSource{fakeSource: f, rev: 1})
	bob := &filters.User{Name: "bob", Groups: l("system:authenticated")}
	allowed := res(bob, "list", "", "pods", "", "team", "")
	denied := res(bob, "list", "", "secrets", "", "team", "")
	b.Run("allowed", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if d, _, _ := z.Authorize(context.Background(), allowed); d != authorizer.Allow {
				b.Fatal("not allowed")
			}
		}
	})
	b.Run("no-opinion", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if d, _, _ := z.Authorize(context.Background(), denied); d == authorizer.Allow {
				b.Fatal("allowed")
			}
		}
	})
}
