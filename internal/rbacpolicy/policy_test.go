package rbacpolicy

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// upstreamTestdata is where upstream's expected bootstrap policy lives in the module cache.
func upstreamTestdata(t *testing.T) string {
	t.Helper()
	home, _ := os.UserHomeDir()
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		gopath = filepath.Join(home, "go")
	}
	dir := filepath.Join(gopath, "pkg/mod/k8s.io/kubernetes@v1.32.13/plugin/pkg/auth/authorizer/rbac/bootstrappolicy/testdata")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("upstream's bootstrap policy testdata is not in the module cache (%s): nothing to compare with", dir)
	}
	return dir
}

func readList[T any](t *testing.T, dir string, files ...string) []T {
	t.Helper()
	var out []T
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			metav1.TypeMeta `json:",inline"`
			Metadata        metav1.ListMeta `json:"metadata"`
			Items           []T             `json:"items"`
		}
		if err := yaml.UnmarshalStrict(data, &list); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, list.Items...)
	}
	return out
}

// key renders a normalized object: rules with sorted fields, in sorted order, and the
// metadata that matters (name, namespace, labels, annotations).
func normRules(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		s := func(x []string) string {
			y := append([]string(nil), x...)
			sort.Strings(y)
			return strings.Join(y, ",")
		}
		out = append(out, fmt.Sprintf("verbs=%s groups=%s resources=%s names=%s urls=%s",
			s(r.Verbs), s(r.APIGroups), s(r.Resources), s(r.ResourceNames), s(r.NonResourceURLs)))
	}
	sort.Strings(out)
	return out
}

func normMeta(m metav1.ObjectMeta) string {
	return fmt.Sprintf("%s/%s labels=%v annotations=%v", m.Namespace, m.Name, m.Labels, m.Annotations)
}

func compare[T any](t *testing.T, what string, got, want []T, norm func(T) (string, []string)) {
	t.Helper()
	index := func(xs []T) map[string][]string {
		m := map[string][]string{}
		for _, x := range xs {
			k, v := norm(x)
			if _, dup := m[k]; dup {
				t.Errorf("%s: %s twice", what, k)
			}
			m[k] = v
		}
		return m
	}
	g, w := index(got), index(want)
	for k, wv := range w {
		gv, ok := g[k]
		if !ok {
			t.Errorf("%s: missing %s", what, k)
			continue
		}
		if !reflect.DeepEqual(gv, wv) {
			t.Errorf("%s %s:\n got  %q\n want %q", what, k, gv, wv)
		}
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			t.Errorf("%s: %s is not upstream's", what, k)
		}
	}
}

// TestUpstream compares the policy with upstream's expected output, object by object.
func TestUpstream(t *testing.T) {
	dir := upstreamTestdata(t)
	p := Upstream()
	compare(t, "ClusterRole", p.ClusterRoles, readList[rbacv1.ClusterRole](t, dir, "cluster-roles.yaml", "controller-roles.yaml"),
		func(c rbacv1.ClusterRole) (string, []string) {
			k := normMeta(c.ObjectMeta)
			if c.AggregationRule != nil {
				k += fmt.Sprintf(" aggregate=%v", c.AggregationRule.ClusterRoleSelectors)
			}
			return k, normRules(c.Rules)
		})
	compare(t, "Role", p.Roles, readList[rbacv1.Role](t, dir, "namespace-roles.yaml"),
		func(c rbacv1.Role) (string, []string) { return normMeta(c.ObjectMeta), normRules(c.Rules) })
	subjects := func(ref rbacv1.RoleRef, s []rbacv1.Subject) []string {
		out := []string{fmt.Sprintf("ref=%+v", ref)}
		for _, x := range s {
			out = append(out, fmt.Sprintf("%+v", x))
		}
		return out
	}
	compare(t, "ClusterRoleBinding", p.ClusterRoleBindings,
		readList[rbacv1.ClusterRoleBinding](t, dir, "cluster-role-bindings.yaml", "controller-role-bindings.yaml"),
		func(b rbacv1.ClusterRoleBinding) (string, []string) {
			return normMeta(b.ObjectMeta), subjects(b.RoleRef, b.Subjects)
		})
	compare(t, "RoleBinding", p.RoleBindings, readList[rbacv1.RoleBinding](t, dir, "namespace-role-bindings.yaml"),
		func(b rbacv1.RoleBinding) (string, []string) {
			return normMeta(b.ObjectMeta), subjects(b.RoleRef, b.Subjects)
		})
}

// TestDefault checks kubette's additions: each component role is bound to its user,
// and no name is defined twice.
func TestDefault(t *testing.T) {
	p := Default()
	roles := map[string]bool{}
	for _, c := range p.ClusterRoles {
		if roles[c.Name] {
			t.Errorf("ClusterRole %s twice", c.Name)
		}
		roles[c.Name] = true
	}
	for _, b := range p.ClusterRoleBindings {
		if !roles[b.RoleRef.Name] {
			t.Errorf("ClusterRoleBinding %s refers to the unknown ClusterRole %s", b.Name, b.RoleRef.Name)
		}
	}
	for _, name := range []string{DNSUser, IngressUser} {
		if !roles[name] {
			t.Errorf("no ClusterRole %s", name)
		}
	}
}

// TestMetricsReader: metrics-server's aggregated role is in the default policy, read-only
// on metrics.k8s.io nodes and pods and aggregated into view, edit and admin.
func TestMetricsReader(t *testing.T) {
	for _, c := range Default().ClusterRoles {
		if c.Name != MetricsReaderRole {
			continue
		}
		for _, to := range []string{"view", "edit", "admin"} {
			if c.Labels["rbac.authorization.k8s.io/aggregate-to-"+to] != "true" {
				t.Errorf("not aggregated to %s: %v", to, c.Labels)
			}
		}
		want := []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"metrics.k8s.io"}, Resources: []string{"pods", "nodes"}}}
		if !reflect.DeepEqual(c.Rules, want) {
			t.Errorf("rules = %+v, want %+v", c.Rules, want)
		}
		return
	}
	t.Errorf("no %s", MetricsReaderRole)
}
