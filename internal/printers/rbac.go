package printers

import (
	"fmt"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// createdAtPrinter prints kinds upstream has no printer for (Roles, ClusterRoles) as
// upstream's default table does: NAME, CREATED AT (RFC 3339, UTC).
func createdAtPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{nameColumn(), {Name: "Created At", Type: "date", Description: objectMetaDoc()["creationTimestamp"]}},
		Row: func(obj runtime.Object, _ time.Time) ([]interface{}, error) {
			m, err := meta.Accessor(obj)
			if err != nil {
				return nil, fmt.Errorf("printers: %T has no object metadata: %w", obj, err)
			}
			return []interface{}{m.GetName(), m.GetCreationTimestamp().UTC().Format(time.RFC3339)}, nil
		},
	}
}

// bindingColumns are the columns of RoleBindings and ClusterRoleBindings: NAME, ROLE,
// AGE, and with -o wide USERS, GROUPS, SERVICEACCOUNTS.
func bindingColumns(kind string) []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		column("Role", "string", 0, rbacv1.RoleBinding{}.SwaggerDoc()["roleRef"]),
		ageColumn(),
		column("Users", "string", 1, "Users in the "+kind),
		column("Groups", "string", 1, "Groups in the "+kind),
		column("ServiceAccounts", "string", 1, "ServiceAccounts in the "+kind),
	}
}

// bindingCells are the cells of a binding's row.
func bindingCells(name string, ref rbacv1.RoleRef, created metav1.Time, subjects []rbacv1.Subject, now time.Time) []interface{} {
	var users, groups, sas []string
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			sas = append(sas, s.Namespace+"/"+s.Name)
		case rbacv1.UserKind:
			users = append(users, s.Name)
		case rbacv1.GroupKind:
			groups = append(groups, s.Name)
		}
	}
	return []interface{}{name, fmt.Sprintf("%s/%s", ref.Kind, ref.Name), translateTimestampSince(created, now),
		strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(sas, ", ")}
}

func roleBindingPrinter() Printer {
	return Printer{
		Columns: bindingColumns("roleBinding"),
		Row: rowFor(func(b *rbacv1.RoleBinding, now time.Time) []interface{} {
			return bindingCells(b.Name, b.RoleRef, b.CreationTimestamp, b.Subjects, now)
		}),
	}
}

func clusterRoleBindingPrinter() Printer {
	return Printer{
		Columns: bindingColumns("clusterRoleBinding"),
		Row: rowFor(func(b *rbacv1.ClusterRoleBinding, now time.Time) []interface{} {
			return bindingCells(b.Name, b.RoleRef, b.CreationTimestamp, b.Subjects, now)
		}),
	}
}
