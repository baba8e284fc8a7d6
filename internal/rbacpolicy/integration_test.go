package rbacpolicy_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/clusterroleaggregation"
	"github.com/kubette/kubette/internal/controllermanager"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// check is one request and whether the role allows it.
type check struct {
	what  string
	allow bool
	do    func(ctx context.Context, c kubernetes.Interface) error
}

func run(t *testing.T, user string, c kubernetes.Interface, checks []check) {
	t.Helper()
	ctx := context.Background()
	for _, ch := range checks {
		err := ch.do(ctx, c)
		switch {
		case ch.allow && err != nil:
			t.Errorf("%s: %s: %v, want it allowed", user, ch.what, err)
		case !ch.allow && !apierrors.IsForbidden(err):
			t.Errorf("%s: %s: %v, want 403", user, ch.what, err)
		}
	}
}

// TestDefaultRoles binds users to the default roles in one namespace and checks what
// each may and may not do, with the aggregation controller filling admin, edit and view.
func TestDefaultRoles(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = controllermanager.Run(ctx, controller.ManagerOptions{Config: env.Config, Enabled: []string{clusterroleaggregation.Name},
			ControllerConfig: env.ServiceAccountConfig})
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	admin := env.Client
	for _, ns := range []string{"team", "other"} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	users := map[string]kubernetes.Interface{}
	for _, role := range []string{"view", "edit", "admin", "nobody"} {
		user := role + "-user"
		if role != "nobody" {
			rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
			if _, err := admin.RbacV1().RoleBindings("team").Create(ctx, rb, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		cfg, err := env.ComponentConfig(user, user)
		if err != nil {
			t.Fatal(err)
		}
		if users[role], err = kubernetes.NewForConfig(cfg); err != nil {
			t.Fatal(err)
		}
	}
	// Wait for the aggregation: view and edit may list pods in team.
	poll.Until(t, "view aggregated", func() error {
		_, err := users["view"].CoreV1().Pods("team").List(ctx, metav1.ListOptions{})
		return err
	})
	// edit is aggregated on its own (the controller syncs each ClusterRole apart).
	poll.Until(t, "edit aggregated", func() error {
		_, err := users["edit"].CoreV1().Pods("team").List(ctx, metav1.ListOptions{})
		return err
	})
	poll.Until(t, "admin aggregated", func() error {
		_, err := users["admin"].RbacV1().Roles("team").List(ctx, metav1.ListOptions{})
		return err
	})

	listPods := func(ns string) func(context.Context, kubernetes.Interface) error {
		return func(ctx context.Context, c kubernetes.Interface) error {
			_, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err
		}
	}
	getSecret := func(ns string) func(context.Context, kubernetes.Interface) error {
		return func(ctx context.Context, c kubernetes.Interface) error {
			_, err := c.CoreV1().Secrets(ns).Get(ctx, "s", metav1.GetOptions{})
			return err
		}
	}
	createConfigMap := func(ns string) func(context.Context, kubernetes.Interface) error {
		n := 0
		return func(ctx context.Context, c kubernetes.Interface) error {
			n++
			_, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: fmt.Sprintf("cm%d-", n)}}, metav1.CreateOptions{})
			return err
		}
	}
	createRole := func(ctx context.Context, c kubernetes.Interface) error {
		_, err := c.RbacV1().Roles("team").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{GenerateName: "r-"},
			Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}, metav1.CreateOptions{})
		return err
	}
	listNamespaces := func(ctx context.Context, c kubernetes.Interface) error {
		_, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		return err
	}
	createQuota := func(ctx context.Context, c kubernetes.Interface) error {
		_, err := c.CoreV1().ResourceQuotas("team").Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{GenerateName: "q-"}}, metav1.CreateOptions{})
		return err
	}
	selfReview := func(ctx context.Context, c kubernetes.Interface) error {
		_, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods"}}}, metav1.CreateOptions{})
		return err
	}
	discovery := func(ctx context.Context, c kubernetes.Interface) error {
		_, err := c.Discovery().ServerGroups()
		return err
	}

	run(t, "view", users["view"], []check{
		{"list pods in its namespace", true, listPods("team")},
		{"list pods in another namespace", false, listPods("other")},
		{"list pods in every namespace", false, listPods("")},
		{"read a secret", false, getSecret("team")},
		{"create a config map", false, createConfigMap("team")},
		{"list namespaces", false, listNamespaces},
		{"discovery", true, discovery},
		{"a self subject access review", true, selfReview},
	})
	run(t, "edit", users["edit"], []check{
		{"list pods", true, listPods("team")},
		{"read a secret", true, getSecret("team")},
		{"read a secret in another namespace", false, getSecret("other")},
		{"create a config map", true, createConfigMap("team")},
		{"create a config map in another namespace", false, createConfigMap("other")},
		{"create a role", false, createRole},
		{"create a resource quota", false, createQuota},
	})
	run(t, "admin", users["admin"], []check{
		{"read a secret", true, getSecret("team")},
		{"create a config map", true, createConfigMap("team")},
		{"create a role", true, createRole},
		{"create a resource quota", false, createQuota},
		{"list pods in another namespace", false, listPods("other")},
		{"list namespaces", false, listNamespaces},
	})
	run(t, "basic-user", users["nobody"], []check{
		{"discovery", true, discovery},
		{"a self subject access review", true, selfReview},
		{"list pods", false, listPods("team")},
		{"list namespaces", false, listNamespaces},
	})
}
