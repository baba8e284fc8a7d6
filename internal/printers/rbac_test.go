package printers

import (
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestRBACRows(t *testing.T) {
	subjects := []rbacv1.Subject{{Kind: "User", Name: "bob"}, {Kind: "User", Name: "alice"}, {Kind: "Group", Name: "devs"},
		{Kind: "ServiceAccount", Namespace: "ns", Name: "app"}}
	rb := &rbacv1.RoleBinding{ObjectMeta: objMeta("b"), RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}, Subjects: subjects}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "c", CreationTimestamp: created}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "admin"}}
	role := &rbacv1.Role{ObjectMeta: objMeta("r")}
	cases := []struct {
		gr    schema.GroupResource
		obj   runtime.Object
		cols  []string
		cells []interface{}
	}{
		{schema.GroupResource{Group: rbacv1.GroupName, Resource: "rolebindings"}, rb,
			[]string{"Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"},
			[]interface{}{"b", "ClusterRole/view", "10m", "bob, alice", "devs", "ns/app"}},
		{schema.GroupResource{Group: rbacv1.GroupName, Resource: "clusterrolebindings"}, crb,
			[]string{"Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"},
			[]interface{}{"c", "ClusterRole/admin", "10m", "", "", ""}},
		{schema.GroupResource{Group: rbacv1.GroupName, Resource: "roles"}, role,
			[]string{"Name", "Created At"}, []interface{}{"r", created.UTC().Format("2006-01-02T15:04:05Z")}},
	}
	for _, tc := range cases {
		p := mustFor(t, tc.gr)
		var cols []string
		for _, c := range p.Columns {
			cols = append(cols, c.Name)
		}
		if !reflect.DeepEqual(cols, tc.cols) {
			t.Fatalf("%v columns %v, want %v", tc.gr, cols, tc.cols)
		}
		if len(p.Columns) == 6 && (p.Columns[3].Priority != 1 || p.Columns[1].Priority != 0) {
			t.Fatalf("%v: USERS etc. are -o wide only", tc.gr)
		}
		cells, err := p.Row(tc.obj, now)
		if err != nil || !reflect.DeepEqual(cells, tc.cells) {
			t.Fatalf("%v cells %v (%v), want %v", tc.gr, cells, err, tc.cells)
		}
	}
}
