package rbacpolicy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"k8s.io/client-go/kubernetes"
	"k8s.io/component-helpers/auth/rbac/reconciliation"
)

// Reconcile makes the cluster hold policy p, as upstream's bootstrap-roles post-start
// hook does: missing objects are created; an existing one whose autoupdate annotation
// is "true" (or absent) gets the rules, aggregation selectors, subjects, labels and
// annotations it lacks, keeping whatever a user added; one annotated "false" is left
// as it is. Every object is tried; the errors are joined.
func Reconcile(ctx context.Context, client kubernetes.Interface, p Policy, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	var errs []error
	changed := map[reconciliation.ReconcileOperation]int{}
	report := func(kind, ns, name string, op reconciliation.ReconcileOperation, protected bool, missing int, err error) {
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("reconcile %s %s: %w", kind, qualified(ns, name), err))
		case protected && op != reconciliation.ReconcileNone:
			log.Warn("default RBAC object differs from the default but is not updated (autoupdate is false)",
				"kind", kind, "name", qualified(ns, name), "missing", missing)
		case op != reconciliation.ReconcileNone:
			changed[op]++
			log.Debug("reconciled a default RBAC object", "kind", kind, "name", qualified(ns, name), "operation", string(op))
		}
	}
	defer func() {
		if len(changed) > 0 {
			log.Info("reconciled the default RBAC policy", "created", changed[reconciliation.ReconcileCreate],
				"updated", changed[reconciliation.ReconcileUpdate]+changed[reconciliation.ReconcileRecreate])
		}
	}()
	for i := range p.ClusterRoles {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		role := p.ClusterRoles[i].DeepCopy()
		res, err := (&reconciliation.ReconcileRoleOptions{
			Role:    reconciliation.ClusterRoleRuleOwner{ClusterRole: role},
			Client:  reconciliation.ClusterRoleModifier{Client: client.RbacV1().ClusterRoles()},
			Confirm: true,
		}).Run()
		reportRole(report, "ClusterRole", role.Namespace, role.Name, res, err)
	}
	for i := range p.ClusterRoleBindings {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		b := p.ClusterRoleBindings[i].DeepCopy()
		res, err := (&reconciliation.ReconcileRoleBindingOptions{
			RoleBinding: reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: b},
			Client:      reconciliation.ClusterRoleBindingClientAdapter{Client: client.RbacV1().ClusterRoleBindings()},
			Confirm:     true,
		}).Run()
		reportBinding(report, "ClusterRoleBinding", b.Namespace, b.Name, res, err)
	}
	for i := range p.Roles {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		role := p.Roles[i].DeepCopy()
		res, err := (&reconciliation.ReconcileRoleOptions{
			Role:    reconciliation.RoleRuleOwner{Role: role},
			Client:  reconciliation.RoleModifier{Client: client.RbacV1(), NamespaceClient: client.CoreV1().Namespaces()},
			Confirm: true,
		}).Run()
		reportRole(report, "Role", role.Namespace, role.Name, res, err)
	}
	for i := range p.RoleBindings {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		b := p.RoleBindings[i].DeepCopy()
		res, err := (&reconciliation.ReconcileRoleBindingOptions{
			RoleBinding: reconciliation.RoleBindingAdapter{RoleBinding: b},
			Client:      reconciliation.RoleBindingClientAdapter{Client: client.RbacV1(), NamespaceClient: client.CoreV1().Namespaces()},
			Confirm:     true,
		}).Run()
		reportBinding(report, "RoleBinding", b.Namespace, b.Name, res, err)
	}
	return errors.Join(errs...)
}

type reporter func(kind, ns, name string, op reconciliation.ReconcileOperation, protected bool, missing int, err error)

func reportRole(report reporter, kind, ns, name string, res *reconciliation.ReconcileClusterRoleResult, err error) {
	if err != nil || res == nil {
		report(kind, ns, name, reconciliation.ReconcileNone, false, 0, err)
		return
	}
	report(kind, ns, name, res.Operation, res.Protected, len(res.MissingRules)+len(res.MissingAggregationRuleSelectors), nil)
}

func reportBinding(report reporter, kind, ns, name string, res *reconciliation.ReconcileClusterRoleBindingResult, err error) {
	if err != nil || res == nil {
		report(kind, ns, name, reconciliation.ReconcileNone, false, 0, err)
		return
	}
	report(kind, ns, name, res.Operation, res.Protected, len(res.MissingSubjects), nil)
}

func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}
