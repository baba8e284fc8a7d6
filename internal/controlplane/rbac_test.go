package controlplane_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubette/kubette/internal/controlplane"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// rbacServer starts an API server that authorizes with RBAC alone, with static tokens
// for bob and alice, and returns the admin's client and a client per token user.
func rbacServer(t *testing.T) (admin *kubernetes.Clientset, adminCfg *rest.Config, users map[string]*rest.Config) {
	t.Helper()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte("bob-token,bob,1001,devs\nalice-token,alice,1002\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cp, err := controlplane.Start(ctx, controlplane.Config{DataDir: filepath.Join(dir, "data"), Listener: loopbackListener(t),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), TokenAuthFile: tokens, AuthorizationModes: []string{"RBAC"}})
	if err != nil {
		cancel()
		t.Fatalf("start API server: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := cp.Wait(); err != nil {
			t.Errorf("API server stopped with: %v", err)
		}
	})
	adminCfg, err = clientcmd.BuildConfigFromFlags("", cp.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	users = map[string]*rest.Config{}
	for _, u := range []string{"bob", "alice"} {
		users[u] = &rest.Config{Host: cp.URL, BearerToken: u + "-token", TLSClientConfig: rest.TLSClientConfig{CAData: cp.CA().CertPEM}}
	}
	return kubernetes.NewForConfigOrDie(adminCfg), adminCfg, users
}

func canI(ctx context.Context, c kubernetes.Interface, verb, resource, ns string) (bool, error) {
	group, resource, _ := strings.Cut(resource, ".")
	if resource != "" {
		group, resource = resource, group
	} else {
		group, resource = "", group
	}
	r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: verb, Group: group, Resource: resource, Namespace: ns}}}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return r.Status.Allowed, nil
}

func wantForbidden(t *testing.T, err error, msg string) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Fatalf("want 403, got %v", err)
	}
	if !strings.Contains(err.Error(), msg) {
		t.Fatalf("message %q does not contain %q", err.Error(), msg)
	}
}

func TestRBACViewInOneNamespace(t *testing.T) {
	admin, adminCfg, users := rbacServer(t)
	ctx := context.Background()
	for _, ns := range []string{"team", "other"} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Upstream's system:basic-user, which the bootstrap policy will create: everyone may
	// ask what they may do.
	basic := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "basic-user"}, Rules: []rbacv1.PolicyRule{
		{Verbs: []string{"create"}, APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}},
		{Verbs: []string{"create"}, APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"selfsubjectreviews"}}}}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, basic, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "basic-user"},
		RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "basic-user"}, Subjects: []rbacv1.Subject{{Kind: "Group", Name: "system:authenticated"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	view := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "pod-viewer"}, Rules: []rbacv1.PolicyRule{
		{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods", "configmaps"}}}}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, view, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bob-view", Namespace: "team"},
		RoleRef:  rbacv1.RoleRef{Kind: "ClusterRole", Name: "pod-viewer"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "bob"}}}
	created, err := admin.RbacV1().RoleBindings("team").Create(ctx, binding, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.RoleRef.APIGroup != rbacv1.GroupName || created.Subjects[0].APIGroup != rbacv1.GroupName {
		t.Fatalf("defaults not applied: %+v", created)
	}
	bob := kubernetes.NewForConfigOrDie(users["bob"])
	poll.Until(t, "bob may list pods in team", poll.Check(func() (bool, error) { return canI(ctx, bob, "list", "pods", "team") }))

	if _, err := bob.CoreV1().Pods("team").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("bob lists pods in team: %v", err)
	}
	_, err = bob.CoreV1().Secrets("team").List(ctx, metav1.ListOptions{})
	wantForbidden(t, err, `secrets is forbidden: User "bob" cannot list resource "secrets" in API group "" in the namespace "team"`)
	_, err = bob.CoreV1().Pods("other").List(ctx, metav1.ListOptions{})
	wantForbidden(t, err, `User "bob" cannot list resource "pods" in API group "" in the namespace "other"`)
	_, err = bob.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	wantForbidden(t, err, `User "bob" cannot list resource "pods" in API group "" at the cluster scope`)
	if ok, err := canI(ctx, bob, "list", "secrets", "team"); err != nil || ok {
		t.Fatalf("can-i list secrets: %v %v", ok, err)
	}

	t.Run("SubjectAccessReview", func(t *testing.T) {
		r, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "bob", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods", Namespace: "team", Name: "x"}}}, metav1.CreateOptions{})
		if err != nil || !r.Status.Allowed || !strings.Contains(r.Status.Reason, `RoleBinding "bob-view/team"`) {
			t.Fatalf("review %+v, %v", r, err)
		}
		_, err = admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods"}}}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "at least one of user or group must be specified") {
			t.Fatalf("want 422 without user, got %v", err)
		}
		lr, err := admin.AuthorizationV1().LocalSubjectAccessReviews("team").Create(ctx, &authorizationv1.LocalSubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: "bob", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods", Namespace: "team"}}}, metav1.CreateOptions{})
		if err != nil || !lr.Status.Allowed {
			t.Fatalf("local review %+v, %v", lr, err)
		}
		_, err = admin.AuthorizationV1().LocalSubjectAccessReviews("team").Create(ctx, &authorizationv1.LocalSubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: "bob", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods", Namespace: "other"}}}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "must match metadata.namespace") {
			t.Fatalf("want 422 for another namespace, got %v", err)
		}
		// bob may not ask about others.
		_, err = bob.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "alice", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods"}}}, metav1.CreateOptions{})
		wantForbidden(t, err, `User "bob" cannot create resource "subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope`)
	})

	t.Run("SelfSubjectRulesReview", func(t *testing.T) {
		r, err := bob.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
			Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "team"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, rr := range r.Status.ResourceRules {
			found = found || (len(rr.Resources) == 2 && rr.Resources[0] == "pods")
		}
		if !found || r.Status.Incomplete {
			t.Fatalf("rules %+v", r.Status)
		}
	})

	t.Run("Impersonation", func(t *testing.T) {
		as := rest.CopyConfig(adminCfg)
		as.Impersonate = rest.ImpersonationConfig{UserName: "bob"}
		asBob := kubernetes.NewForConfigOrDie(as)
		if _, err := asBob.CoreV1().Pods("team").List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("admin as bob lists pods: %v", err)
		}
		_, err := asBob.CoreV1().Secrets("team").List(ctx, metav1.ListOptions{})
		wantForbidden(t, err, `User "bob" cannot list resource "secrets"`)

		bobAs := rest.CopyConfig(users["bob"])
		bobAs.Impersonate = rest.ImpersonationConfig{UserName: "alice"}
		_, err = kubernetes.NewForConfigOrDie(bobAs).CoreV1().Pods("team").List(ctx, metav1.ListOptions{})
		wantForbidden(t, err, `users "alice" is forbidden: User "bob" cannot impersonate resource "users" in API group "" at the cluster scope`)

		// Who the server thinks an impersonated user is.
		as.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:team:app"}
		r, err := kubernetes.NewForConfigOrDie(as).AuthenticationV1().SelfSubjectReviews().Create(ctx, nil, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		{
			got := strings.Join(r.Status.UserInfo.Groups, ",")
			if r.Status.UserInfo.Username != "system:serviceaccount:team:app" || got != "system:serviceaccounts,system:serviceaccounts:team,system:authenticated" {
				t.Fatalf("impersonated %+v", r.Status.UserInfo)
			}
		}
	})

	t.Run("Escalation", func(t *testing.T) {
		// bob may write roles and rolebindings in team, and holds only the viewer rules.
		writer := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "rbac-writer", Namespace: "team"}, Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"create", "update", "get"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles", "rolebindings"}}}}
		if _, err := admin.RbacV1().Roles("team").Create(ctx, writer, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.RbacV1().RoleBindings("team").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bob-writer", Namespace: "team"},
			RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "rbac-writer"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "bob"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, "bob may create roles in team", poll.Check(func() (bool, error) { return canI(ctx, bob, "create", "roles.rbac.authorization.k8s.io", "team") }))

		held := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pods-reader", Namespace: "team"}, Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}
		if _, err := bob.RbacV1().Roles("team").Create(ctx, held, metav1.CreateOptions{}); err != nil {
			t.Fatalf("bob grants what he holds: %v", err)
		}
		more := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "secrets-reader", Namespace: "team"}, Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"secrets"}}}}
		_, err := bob.RbacV1().Roles("team").Create(ctx, more, metav1.CreateOptions{})
		wantForbidden(t, err, `roles.rbac.authorization.k8s.io "secrets-reader" is forbidden: user "bob" (groups=["devs" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:`+"\n"+`{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}`)

		if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "secret-admin"}, Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"*"}, APIGroups: []string{""}, Resources: []string{"secrets"}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err = bob.RbacV1().RoleBindings("team").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bob-secrets", Namespace: "team"},
			RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "secret-admin"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "bob"}}}, metav1.CreateOptions{})
		wantForbidden(t, err, `is attempting to grant RBAC permissions not currently held`)
		if _, err := bob.RbacV1().RoleBindings("team").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice-view", Namespace: "team"},
			RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "pod-viewer"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("bob binds a role he holds: %v", err)
		}

		// With bind on the ClusterRole, bob may bind it though he does not hold it.
		if _, err := admin.RbacV1().Roles("team").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "binder", Namespace: "team"}, Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"bind"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, ResourceNames: []string{"secret-admin"}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.RbacV1().RoleBindings("team").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bob-binder", Namespace: "team"},
			RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "binder"}, Subjects: []rbacv1.Subject{{Kind: "Group", Name: "devs"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, "bob may bind secret-admin", poll.Check(func() (bool, error) {
			_, err := bob.RbacV1().RoleBindings("team").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bob-secrets", Namespace: "team"},
				RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "secret-admin"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "bob"}}}, metav1.CreateOptions{})
			if apierrors.IsForbidden(err) {
				return false, nil
			}
			return err == nil, err
		}))
	})

	t.Run("Validation", func(t *testing.T) {
		odd := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "odd", Namespace: "team"}, Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"frobnicate"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}
		got, err := admin.RbacV1().Roles("team").Create(ctx, odd, metav1.CreateOptions{})
		if err != nil || got.Rules[0].Verbs[0] != "frobnicate" {
			t.Fatalf("a role with an unknown verb is kept: %+v %v", got, err)
		}
		b, err := admin.RbacV1().RoleBindings("team").Get(ctx, "bob-view", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b.RoleRef.Name = "other"
		_, err = admin.RbacV1().RoleBindings("team").Update(ctx, b, metav1.UpdateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "roleRef: Invalid value") || !strings.Contains(err.Error(), "cannot change roleRef") {
			t.Fatalf("want 422 for a changed roleRef, got %v", err)
		}
		_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
			RoleRef:  rbacv1.RoleRef{Kind: "Role", Name: "x"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default"}}}, metav1.CreateOptions{})
		for _, want := range []string{`roleRef.kind: Unsupported value: "Role"`, `subjects[0].namespace: Required value`} {
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
				t.Fatalf("want 422 with %q, got %v", want, err)
			}
		}
		_, err = admin.RbacV1().Roles("team").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "url", Namespace: "team"}, Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}}}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "namespaced rules cannot apply to non-resource URLs") {
			t.Fatalf("want 422 for a namespaced URL rule, got %v", err)
		}
	})
}
