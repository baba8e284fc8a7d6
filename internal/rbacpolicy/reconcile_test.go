package rbacpolicy

import (
	"context"
	"log/slog"
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestReconcile(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	p := Default()
	quiet := slog.New(slog.DiscardHandler)
	if err := Reconcile(ctx, client, p, quiet); err != nil {
		t.Fatal(err)
	}
	crs, err := client.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(crs.Items) != len(p.ClusterRoles) {
		t.Fatalf("%d ClusterRoles created, want %d", len(crs.Items), len(p.ClusterRoles))
	}
	roles, err := client.RbacV1().Roles("kube-system").List(ctx, metav1.ListOptions{})
	if err != nil || len(roles.Items) == 0 {
		t.Fatalf("no Roles in kube-system (%v)", err)
	}

	crAPI := client.RbacV1().ClusterRoles()
	// A user's addition to an auto-updated role stays; a removed default rule comes back.
	disc, _ := crAPI.Get(ctx, "system:discovery", metav1.GetOptions{})
	extra := rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/metrics"}}
	disc.Rules = []rbacv1.PolicyRule{extra}
	if _, err := crAPI.Update(ctx, disc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A role annotated autoupdate=false is left as the user made it.
	basic, _ := crAPI.Get(ctx, "system:basic-user", metav1.GetOptions{})
	basic.Annotations[AutoUpdateAnnotation] = "false"
	basic.Rules = nil
	if _, err := crAPI.Update(ctx, basic, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A deleted one is created again.
	if err := crAPI.Delete(ctx, "system:kube-dns", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A binding keeps a user's subject and gets its default subjects back.
	crbAPI := client.RbacV1().ClusterRoleBindings()
	b, _ := crbAPI.Get(ctx, "system:discovery", metav1.GetOptions{})
	alice := rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: "alice"}
	b.Subjects = []rbacv1.Subject{alice}
	if _, err := crbAPI.Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := Reconcile(ctx, client, p, quiet); err != nil {
		t.Fatal(err)
	}
	disc, _ = crAPI.Get(ctx, "system:discovery", metav1.GetOptions{})
	if len(disc.Rules) < 2 || !reflect.DeepEqual(disc.Rules[0], extra) {
		t.Errorf("system:discovery after reconcile: %+v, want the user's rule and the default ones", disc.Rules)
	}
	basic, _ = crAPI.Get(ctx, "system:basic-user", metav1.GetOptions{})
	if len(basic.Rules) != 0 {
		t.Errorf("system:basic-user (autoupdate=false) was changed: %+v", basic.Rules)
	}
	if _, err := crAPI.Get(ctx, "system:kube-dns", metav1.GetOptions{}); err != nil {
		t.Errorf("system:kube-dns was not created again: %v", err)
	}
	b, _ = crbAPI.Get(ctx, "system:discovery", metav1.GetOptions{})
	if len(b.Subjects) != 2 || b.Subjects[0] != alice || b.Subjects[1].Name != "system:authenticated" {
		t.Errorf("system:discovery binding after reconcile: %+v", b.Subjects)
	}
}
