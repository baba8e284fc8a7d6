// Package rbacescalation is the admission plugin that keeps RBAC from being a way up,
// as upstream's policy-based RBAC storage: a user may create or update a Role or
// ClusterRole only with every rule it grants (or the escalate verb on it), and a
// RoleBinding or ClusterRoleBinding only to a role whose rules they hold (or with the
// bind verb on it). Members of system:masters may do anything.
package rbacescalation

import (
	"context"
	"errors"
	"reflect"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/admission"
	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/apiserver/authorizer/rbac"
	"github.com/kubette/kubette/internal/apiserver/filters"
)

// Name is the plugin's name.
const Name = "RBACEscalation"

// Resolver resolves the rules a user holds and those of a role reference (the RBAC
// authorizer does both).
type Resolver interface {
	RulesFor(ctx context.Context, u *filters.User, namespace string) ([]rbacv1.PolicyRule, error)
	RoleRefRules(ctx context.Context, ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error)
}

// Plugin is the escalation check.
type Plugin struct {
	// Authorizer decides the escalate and bind verbs: the server's whole authorizer.
	Authorizer func() authorizer.Authorizer
	Rules      Resolver
}

// fullAuthority is what setting an aggregationRule needs: it can gather anything.
var fullAuthority = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

// Validate refuses a write of an RBAC object that grants more than its writer holds.
func (p *Plugin) Validate(ctx context.Context, a *admission.Attributes) error {
	if a.Resource.Group != rbacv1.GroupName || a.Subresource != "" || (a.Operation != admission.Create && a.Operation != admission.Update) {
		return nil
	}
	u := a.User
	if u == nil {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, errors.New("no user on request"))
	}
	for _, g := range u.Groups {
		if g == "system:masters" {
			return nil
		}
	}
	if a.Operation == admission.Update && onlyGCFields(a.Object, a.OldObject) {
		return nil
	}
	gr := a.Resource.GroupResource()
	switch o := a.Object.(type) {
	case *rbacv1.Role:
		if p.allowed(ctx, u, "escalate", gr.Resource, a.Namespace, a.Name) {
			return nil
		}
		return p.confirm(ctx, u, a.Namespace, gr, a.Name, o.Rules)
	case *rbacv1.ClusterRole:
		if p.allowed(ctx, u, "escalate", gr.Resource, "", a.Name) {
			return nil
		}
		if err := p.confirm(ctx, u, "", gr, a.Name, o.Rules); err != nil {
			return err
		}
		old, _ := a.OldObject.(*rbacv1.ClusterRole)
		if aggregates(o) || (old != nil && aggregates(old)) {
			if err := p.confirm(ctx, u, "", gr, a.Name, fullAuthority); err != nil {
				return apierrors.NewForbidden(gr, a.Name, errors.New("must have cluster-admin privileges to use the aggregationRule"))
			}
		}
		return nil
	case *rbacv1.RoleBinding:
		return p.checkBinding(ctx, u, gr, a.Name, o.RoleRef, a.Namespace)
	case *rbacv1.ClusterRoleBinding:
		return p.checkBinding(ctx, u, gr, a.Name, o.RoleRef, "")
	}
	return nil
}

func (p *Plugin) checkBinding(ctx context.Context, u *filters.User, gr schema.GroupResource, name string, ref rbacv1.RoleRef, namespace string) error {
	var resource string
	switch ref.Kind {
	case "ClusterRole":
		resource = "clusterroles"
	case "Role":
		resource = "roles"
	}
	if resource != "" && p.allowedGroup(ctx, u, "bind", ref.APIGroup, resource, namespace, ref.Name) {
		return nil
	}
	rules, err := p.Rules.RoleRefRules(ctx, ref, namespace)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return apierrors.NewNotFound(schema.GroupResource{Group: rbacv1.GroupName, Resource: resource}, ref.Name)
		}
		return err
	}
	return p.confirm(ctx, u, namespace, gr, name, rules)
}

// confirm refuses rules the user does not hold in namespace, listing them as upstream.
func (p *Plugin) confirm(ctx context.Context, u *filters.User, namespace string, gr schema.GroupResource, name string, rules []rbacv1.PolicyRule) error {
	owner, resolveErr := p.Rules.RulesFor(ctx, u, namespace)
	ok, missing := rbac.Covers(owner, rules)
	if ok {
		return nil
	}
	return apierrors.NewForbidden(gr, name, rbac.EscalationError(u, missing, resolveErr))
}

func (p *Plugin) allowed(ctx context.Context, u *filters.User, verb, resource, namespace, name string) bool {
	return p.allowedGroup(ctx, u, verb, rbacv1.GroupName, resource, namespace, name)
}

func (p *Plugin) allowedGroup(ctx context.Context, u *filters.User, verb, group, resource, namespace, name string) bool {
	if p.Authorizer == nil {
		return false
	}
	z := p.Authorizer()
	if z == nil {
		return false
	}
	d, _, _ := z.Authorize(ctx, authorizer.Attributes{User: u, Verb: verb, ResourceRequest: true, APIGroup: group, APIVersion: "*",
		Resource: resource, Namespace: namespace, Name: name})
	return d == authorizer.Allow
}

func aggregates(r *rbacv1.ClusterRole) bool {
	return r.AggregationRule != nil && len(r.AggregationRule.ClusterRoleSelectors) > 0
}

// onlyGCFields reports whether an update changes nothing but what the garbage collector
// writes (owner references, finalizers), which needs no escalation check.
func onlyGCFields(obj, old runtime.Object) bool {
	if obj == nil || old == nil || reflect.ValueOf(old).IsNil() {
		return false
	}
	c := obj.DeepCopyObject()
	cm, err1 := meta.Accessor(c)
	om, err2 := meta.Accessor(old)
	if err1 != nil || err2 != nil {
		return false
	}
	cm.SetOwnerReferences(om.GetOwnerReferences())
	cm.SetFinalizers(om.GetFinalizers())
	cm.SetSelfLink(om.GetSelfLink())
	cm.SetManagedFields(om.GetManagedFields())
	cm.SetResourceVersion(om.GetResourceVersion())
	return equality.Semantic.DeepEqual(c, old)
}
