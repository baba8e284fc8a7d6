package clusterroleaggregation

import (
	"context"
	"fmt"
	"sync"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/testenv/poll"
)

func role(name string, labels map[string]string, agg []string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Rules: rules}
	if agg != nil {
		cr.AggregationRule = &rbacv1.AggregationRule{}
		for _, l := range agg {
			cr.AggregationRule.ClusterRoleSelectors = append(cr.AggregationRule.ClusterRoleSelectors,
				metav1.LabelSelector{MatchLabels: map[string]string{l: "true"}})
		}
	}
	return cr
}

func rule(verb, resource string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{""}, Resources: []string{resource}}
}

// TestAggregation runs the controller against a fake API: the aggregating roles get
// the union of their selected roles' rules (each once, in name order), follow changes
// of the selected roles and of the selection, and chain (edit into admin).
func TestAggregation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset(
		role("admin", nil, []string{"to-admin"}),
		role("edit", map[string]string{"to-admin": "true"}, []string{"to-edit"}),
		role("b-edit", map[string]string{"to-edit": "true"}, nil, rule("create", "pods"), rule("get", "pods")),
		role("a-edit", map[string]string{"to-edit": "true"}, nil, rule("get", "pods"), rule("delete", "pods")),
		role("unrelated", nil, nil, rule("get", "secrets")),
	)
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(controller.Deps{Client: client, Informers: factory})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { c.Run(ctx, 2) })
	t.Cleanup(func() { cancel(); wg.Wait(); factory.Shutdown() })

	wait := func(name string, want ...rbacv1.PolicyRule) {
		t.Helper()
		poll.Until(t, "rules of "+name, func() error {
			cr, err := client.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !equalRules(cr.Rules, want) {
				return fmt.Errorf("rules %v, want %v", cr.Rules, want)
			}
			return nil
		})
	}
	wait("edit", rule("get", "pods"), rule("delete", "pods"), rule("create", "pods"))
	wait("admin", rule("get", "pods"), rule("delete", "pods"), rule("create", "pods"))

	// A new role joins edit by its label.
	if _, err := client.RbacV1().ClusterRoles().Create(ctx, role("c-edit", map[string]string{"to-edit": "true"}, nil, rule("list", "pods")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("admin", rule("get", "pods"), rule("delete", "pods"), rule("create", "pods"), rule("list", "pods"))

	// A role that loses its label leaves; a deleted one too.
	b, _ := client.RbacV1().ClusterRoles().Get(ctx, "b-edit", metav1.GetOptions{})
	b.Labels = nil
	if _, err := client.RbacV1().ClusterRoles().Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.RbacV1().ClusterRoles().Delete(ctx, "c-edit", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("edit", rule("get", "pods"), rule("delete", "pods"))
	wait("admin", rule("get", "pods"), rule("delete", "pods"))

	// Rules written by hand into an aggregated role are replaced.
	e, _ := client.RbacV1().ClusterRoles().Get(ctx, "edit", metav1.GetOptions{})
	e.Rules = []rbacv1.PolicyRule{rule("*", "*")}
	if _, err := client.RbacV1().ClusterRoles().Update(ctx, e, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("edit", rule("get", "pods"), rule("delete", "pods"))
	wait("unrelated", rule("get", "secrets"))
}
