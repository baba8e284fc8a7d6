package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestRBACWithKubectl drives RBAC with the real kubectl against `kubette apiserver
// --authorization-mode=RBAC`: roles and bindings made with kubectl create, kubectl auth
// can-i (also --as and --list), and upstream's 403 for a user bound to a viewer role in
// one namespace only.
func TestRBACWithKubectl(t *testing.T) {
	requireTools(t)
	t.Parallel()
	c := startControlPlane(t, "apiserver", "--authorization-mode=RBAC")

	c.expectOutput(t, "yes", "auth", "can-i", "delete", "secrets", "--all-namespaces")
	for _, ns := range []string{"team", "other"} {
		c.must(t, "create", "namespace", ns)
	}
	// Upstream's system:basic-user, until the bootstrap policy creates it: anyone may ask
	// what they may do.
	c.must(t, "create", "clusterrole", "basic-user", "--verb=create",
		"--resource=selfsubjectaccessreviews.authorization.k8s.io,selfsubjectrulesreviews.authorization.k8s.io")
	c.must(t, "create", "clusterrolebinding", "basic-user", "--clusterrole=basic-user", "--group=system:authenticated")
	c.must(t, "create", "clusterrole", "pod-viewer", "--verb=get,list,watch", "--resource=pods,configmaps")
	c.must(t, "create", "rolebinding", "bob-view", "-n", "team", "--clusterrole=pod-viewer", "--user=bob", "--serviceaccount=team:app")
	c.must(t, "create", "role", "cm-editor", "-n", "team", "--verb=update", "--resource=configmaps", "--resource-name=settings")

	if !poll(30*time.Second, func() bool {
		r := c.kubectl(t, "auth", "can-i", "list", "pods", "-n", "team", "--as=bob")
		return r.err == nil && strings.TrimSpace(r.stdout) == "yes"
	}) {
		t.Fatalf("bob never may list pods in team: %s", c.kubectl(t, "auth", "can-i", "list", "pods", "-n", "team", "--as=bob"))
	}
	r := c.kubectl(t, "auth", "can-i", "list", "secrets", "-n", "team", "--as=bob")
	if r.err == nil || strings.TrimSpace(r.stdout) != "no" {
		t.Fatalf("can-i list secrets as bob: %s", r)
	}
	// kubectl auth can-i answers "no" with exit status 1.
	if r := c.kubectl(t, "auth", "can-i", "list", "pods", "-n", "other", "--as=bob"); r.err == nil || strings.TrimSpace(r.stdout) != "no" {
		t.Fatalf("can-i list pods in other as bob: %s", r)
	}
	c.expectOutput(t, "yes", "auth", "can-i", "get", "pods", "-n", "team", "--as=system:serviceaccount:team:app")

	c.must(t, "get", "pods", "-n", "team", "--as=bob")
	r = c.mustFail(t, "get", "secrets", "-n", "team", "--as=bob")
	if want := `Error from server (Forbidden): secrets is forbidden: User "bob" cannot list resource "secrets" in API group "" in the namespace "team"`; !strings.Contains(r.stderr, want) {
		t.Fatalf("want %q: %s", want, r)
	}

	list := c.must(t, "auth", "can-i", "--list", "-n", "team", "--as=bob")
	found := false
	for _, row := range tableRows(list) {
		found = found || (len(row) > 0 && row[0] == "pods")
	}
	if !found {
		t.Fatalf("auth can-i --list as bob shows no pods row:\n%s", list)
	}

	wide := c.must(t, "get", "rolebindings", "-n", "team", "-o", "wide")
	rows := tableRows(wide)
	if len(rows) != 2 || strings.Join(rows[0], " ") != "NAME ROLE AGE USERS GROUPS SERVICEACCOUNTS" ||
		rows[1][0] != "bob-view" || rows[1][1] != "ClusterRole/pod-viewer" || rows[1][3] != "bob" || rows[1][4] != "team/app" {
		t.Fatalf("kubectl get rolebindings -o wide:\n%s", wide)
	}
	if out := c.must(t, "get", "roles", "-n", "team"); !strings.Contains(out, "CREATED AT") || !strings.Contains(out, "cm-editor") {
		t.Fatalf("kubectl get roles:\n%s", out)
	}
	if out := c.must(t, "api-resources", "--api-group=rbac.authorization.k8s.io", "-o", "name"); !strings.Contains(out, "rolebindings.rbac.authorization.k8s.io") {
		t.Fatalf("api-resources:\n%s", out)
	}
}

// TestViewRoleAndServiceAccountToken: with the default authorization of kubette up
// (Node,RBAC and the default policy, view's rules aggregated by the controller), a user and a ServiceAccount bound to upstream's view role in one
// namespace read there and nothing else; the ServiceAccount's token from kubectl create
// token works from its own kubeconfig until the ServiceAccount is deleted.
func TestViewRoleAndServiceAccountToken(t *testing.T) {
	requireTools(t)
	t.Parallel()
	c := startCluster(t)
	for _, ns := range []string{"team", "other"} {
		c.must(t, "create", "namespace", ns)
	}
	c.must(t, "create", "serviceaccount", "app", "-n", "team")
	c.must(t, "create", "configmap", "settings", "-n", "team", "--from-literal=a=b")
	c.must(t, "create", "rolebinding", "team-view", "-n", "team", "--clusterrole=view", "--user=carol", "--serviceaccount=team:app")

	if !poll(30*time.Second, func() bool {
		r := c.kubectl(t, "get", "configmaps", "-n", "team", "--as=carol")
		return r.err == nil && strings.Contains(r.stdout, "settings")
	}) {
		t.Fatalf("carol never lists configmaps in team: %s", c.kubectl(t, "get", "configmaps", "-n", "team", "--as=carol"))
	}
	for _, args := range [][]string{
		{"get", "secrets", "-n", "team"}, // view does not read Secrets
		{"get", "configmaps", "-n", "other"},
		{"get", "nodes"},
		{"create", "configmap", "x", "-n", "team"},
	} {
		c.mustFail(t, append(args, "--as=carol")...)
	}

	token := strings.TrimSpace(c.must(t, "create", "token", "app", "-n", "team", "--duration=10m"))
	if strings.Count(token, ".") != 2 {
		t.Fatalf("kubectl create token printed %q, want a JWT", token)
	}
	admin, err := clientcmd.LoadFromFile(c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kctx := admin.Contexts[admin.CurrentContext]
	sa := clientcmdapi.NewConfig()
	sa.Clusters["c"] = admin.Clusters[kctx.Cluster]
	sa.AuthInfos["app"] = &clientcmdapi.AuthInfo{Token: token}
	sa.Contexts["app"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "app"}
	sa.CurrentContext = "app"
	saConfig := filepath.Join(t.TempDir(), "app.kubeconfig")
	if err := clientcmd.WriteToFile(*sa, saConfig); err != nil {
		t.Fatal(err)
	}
	if out := c.must(t, "--kubeconfig", saConfig, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"); out != "system:serviceaccount:team:app" {
		t.Fatalf("auth whoami with the token: %q", out)
	}
	c.must(t, "--kubeconfig", saConfig, "get", "configmaps", "-n", "team")
	r := c.mustFail(t, "--kubeconfig", saConfig, "get", "configmaps", "-n", "other")
	if want := `User "system:serviceaccount:team:app" cannot list resource "configmaps" in API group "" in the namespace "other"`; !strings.Contains(r.stderr, want) {
		t.Fatalf("want %q: %s", want, r)
	}

	c.must(t, "delete", "serviceaccount", "app", "-n", "team")
	if !poll(30*time.Second, func() bool {
		r := c.kubectl(t, "--kubeconfig", saConfig, "get", "configmaps", "-n", "team")
		return r.err != nil && strings.Contains(r.stderr, "Unauthorized")
	}) {
		t.Fatalf("the deleted ServiceAccount's token still works: %s", c.kubectl(t, "--kubeconfig", saConfig, "get", "configmaps", "-n", "team"))
	}
}
