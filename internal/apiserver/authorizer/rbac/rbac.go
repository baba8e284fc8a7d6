// Package rbac is the RBAC authorizer, as upstream's: a request is allowed when a rule
// of a role bound to the user (directly, through one of the user's groups, or as a
// ServiceAccount) matches it; ClusterRoleBindings grant everywhere, RoleBindings in their
// namespace. RBAC never denies: when nothing allows, it has no opinion. It also resolves
// the rules a user holds (for SelfSubjectRulesReview and the escalation check) and
// compares rule sets (Covers), as upstream's rule resolver and policy comparator.
package rbac

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/apiserver/filters"
)

// The RBAC resources the authorizer reads.
var (
	ClusterRoleBindings = schema.GroupResource{Group: rbacv1.GroupName, Resource: "clusterrolebindings"}
	ClusterRoles        = schema.GroupResource{Group: rbacv1.GroupName, Resource: "clusterroles"}
	RoleBindings        = schema.GroupResource{Group: rbacv1.GroupName, Resource: "rolebindings"}
	Roles               = schema.GroupResource{Group: rbacv1.GroupName, Resource: "roles"}
)

var resources = [4]schema.GroupResource{ClusterRoleBindings, ClusterRoles, RoleBindings, Roles}

// Source reads the cluster's objects: the API server (its watch caches), or a fake in tests.
type Source interface {
	// List returns the objects of a resource in namespace ("" for all namespaces).
	List(ctx context.Context, gr schema.GroupResource, namespace string) ([]runtime.Object, error)
}

// Revisioner, when the Source implements it, tells how far its view of a resource has
// come; the authorizer then keeps its index of the RBAC objects until one of the four
// revisions moves, instead of reading them on each request. 0 means unknown.
type Revisioner interface {
	Revision(gr schema.GroupResource) int64
}

// Authorizer is the RBAC authorizer.
type Authorizer struct {
	src  Source
	mu   sync.Mutex // serialises index rebuilds
	snap atomic.Pointer[snapshot]
}

// New returns an RBAC authorizer reading its objects from src.
func New(src Source) *Authorizer { return &Authorizer{src: src} }

var _ authorizer.Authorizer = (*Authorizer)(nil)

// Authorize allows a request a bound rule matches; otherwise it has no opinion, with the
// errors met resolving the user's roles (a binding to a missing role) as the reason.
func (z *Authorizer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	var errs []error
	reason := ""
	allowed := false
	z.VisitRulesFor(ctx, a.User, a.Namespace, func(source fmt.Stringer, rule *rbacv1.PolicyRule, err error) bool {
		if rule != nil && RuleAllows(a, rule) {
			allowed, reason = true, "RBAC: allowed by "+source.String()
			return false
		}
		if err != nil {
			errs = append(errs, err)
		}
		return true
	})
	if allowed {
		return authorizer.Allow, reason, nil
	}
	if len(errs) > 0 {
		return authorizer.NoOpinion, "RBAC: " + aggregate(errs), nil
	}
	return authorizer.NoOpinion, "", nil
}

// RulesFor returns every rule that applies to u in namespace (the cluster-wide ones when
// namespace is ""), and the errors met resolving them: the rules are then incomplete.
func (z *Authorizer) RulesFor(ctx context.Context, u *filters.User, namespace string) ([]rbacv1.PolicyRule, error) {
	var rules []rbacv1.PolicyRule
	var errs []error
	z.VisitRulesFor(ctx, u, namespace, func(_ fmt.Stringer, rule *rbacv1.PolicyRule, err error) bool {
		if rule != nil {
			rules = append(rules, *rule)
		}
		if err != nil {
			errs = append(errs, err)
		}
		return true
	})
	if len(errs) > 0 {
		return rules, errors.New(aggregate(errs))
	}
	return rules, nil
}

// RoleRefRules returns the rules of the role a binding in namespace refers to.
func (z *Authorizer) RoleRefRules(ctx context.Context, ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	s, err := z.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	return s.roleRefRules(ref, namespace)
}

// VisitRulesFor calls visit with each rule that applies to u in namespace, with the
// binding it comes from (its String is upstream's wording, e.g. `ClusterRoleBinding "x" of
// ClusterRole "y" to User "z"`, made only when asked: most visits never need it), and with
// each error met (source nil); visit returns false to stop.
// ClusterRoleBindings come first, then the namespace's RoleBindings, each in name order.
func (z *Authorizer) VisitRulesFor(ctx context.Context, u *filters.User, namespace string, visit func(source fmt.Stringer, rule *rbacv1.PolicyRule, err error) bool) {
	if u == nil {
		return
	}
	s, err := z.snapshot(ctx)
	if err != nil {
		visit(nil, nil, err)
		return
	}
	if !s.visit(s.cluster, u, visit) {
		return
	}
	if namespace != "" {
		if idx := s.namespaced[namespace]; idx != nil {
			s.visit(idx, u, visit)
		}
	}
}

// snapshot returns the current index, rebuilding it when the source's objects moved.
func (z *Authorizer) snapshot(ctx context.Context) (*snapshot, error) {
	rev, ok := z.src.(Revisioner)
	if !ok {
		return build(ctx, z.src, [4]int64{})
	}
	var revs [4]int64
	for i, gr := range resources {
		if revs[i] = rev.Revision(gr); revs[i] == 0 {
			return build(ctx, z.src, revs)
		}
	}
	if s := z.snap.Load(); s != nil && s.revs == revs {
		return s, nil
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if s := z.snap.Load(); s != nil && s.revs == revs {
		return s, nil
	}
	s, err := build(ctx, z.src, revs)
	if err != nil {
		return nil, err
	}
	z.snap.Store(s)
	return s, nil
}

// snapshot is an index of the RBAC objects at some revisions: the bindings by subject,
// each with the rules of its role resolved.
type snapshot struct {
	revs         [4]int64
	clusterRoles map[string]*rbacv1.ClusterRole
	roles        map[string]*rbacv1.Role // by namespace/name
	cluster      *bindingIndex
	namespaced   map[string]*bindingIndex
}

// bindingIndex holds the bindings of one scope (cluster, or one namespace) by subject.
type bindingIndex struct {
	bindings []resolved
	users    map[string][]int
	groups   map[string][]int
	sas      map[string][]int // by namespace/name
}

// resolved is one binding with its role's rules (or why they could not be had).
type resolved struct {
	kind     string // ClusterRoleBinding or RoleBinding
	name     string // name, or name/namespace for RoleBindings (as upstream describes them)
	ns       string
	ref      rbacv1.RoleRef
	subjects []rbacv1.Subject
	rules    []rbacv1.PolicyRule
	err      error
}

func build(ctx context.Context, src Source, revs [4]int64) (*snapshot, error) {
	s := &snapshot{revs: revs, clusterRoles: map[string]*rbacv1.ClusterRole{}, roles: map[string]*rbacv1.Role{},
		cluster: newIndex(), namespaced: map[string]*bindingIndex{}}
	var lists [4][]runtime.Object
	for i, gr := range resources {
		objs, err := src.List(ctx, gr, "")
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", gr, err)
		}
		lists[i] = objs
	}
	for _, o := range lists[1] {
		if r, ok := o.(*rbacv1.ClusterRole); ok {
			s.clusterRoles[r.Name] = r
		}
	}
	for _, o := range lists[3] {
		if r, ok := o.(*rbacv1.Role); ok {
			s.roles[r.Namespace+"/"+r.Name] = r
		}
	}
	for _, o := range lists[0] {
		b, ok := o.(*rbacv1.ClusterRoleBinding)
		if !ok {
			continue
		}
		rules, err := s.roleRefRules(b.RoleRef, "")
		s.cluster.add(resolved{kind: "ClusterRoleBinding", name: b.Name, ref: b.RoleRef, subjects: b.Subjects, rules: rules, err: err})
	}
	for _, o := range lists[2] {
		b, ok := o.(*rbacv1.RoleBinding)
		if !ok {
			continue
		}
		idx := s.namespaced[b.Namespace]
		if idx == nil {
			idx = newIndex()
			s.namespaced[b.Namespace] = idx
		}
		rules, err := s.roleRefRules(b.RoleRef, b.Namespace)
		idx.add(resolved{kind: "RoleBinding", name: b.Name + "/" + b.Namespace, ns: b.Namespace, ref: b.RoleRef, subjects: b.Subjects, rules: rules, err: err})
	}
	return s, nil
}

// roleRefRules returns the rules of a role reference, with the NotFound errors of
// upstream's listers (clusterrole.rbac.authorization.k8s.io "x" not found) when the role
// is missing.
func (s *snapshot) roleRefRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "ClusterRole":
		r, ok := s.clusterRoles[ref.Name]
		if !ok {
			return nil, apierrors.NewNotFound(schema.GroupResource{Group: rbacv1.GroupName, Resource: "clusterrole"}, ref.Name)
		}
		return r.Rules, nil
	case "Role":
		r, ok := s.roles[namespace+"/"+ref.Name]
		if !ok {
			return nil, apierrors.NewNotFound(schema.GroupResource{Group: rbacv1.GroupName, Resource: "role"}, ref.Name)
		}
		return r.Rules, nil
	}
	return nil, fmt.Errorf("unsupported role reference kind: %q", ref.Kind)
}

func newIndex() *bindingIndex {
	return &bindingIndex{users: map[string][]int{}, groups: map[string][]int{}, sas: map[string][]int{}}
}

func (x *bindingIndex) add(b resolved) {
	i := len(x.bindings)
	x.bindings = append(x.bindings, b)
	for _, sub := range b.subjects {
		switch sub.Kind {
		case rbacv1.UserKind:
			x.users[sub.Name] = appendOnce(x.users[sub.Name], i)
		case rbacv1.GroupKind:
			x.groups[sub.Name] = appendOnce(x.groups[sub.Name], i)
		case rbacv1.ServiceAccountKind:
			// A subject without a namespace is a ServiceAccount of the binding's namespace.
			ns := sub.Namespace
			if ns == "" {
				ns = b.ns
			}
			if ns != "" {
				x.sas[ns+"/"+sub.Name] = appendOnce(x.sas[ns+"/"+sub.Name], i)
			}
		}
	}
}

func appendOnce(s []int, i int) []int {
	if n := len(s); n > 0 && s[n-1] == i {
		return s
	}
	return append(s, i)
}

// ServiceAccountPrefix starts the user name of a ServiceAccount: system:serviceaccount:NS:NAME.
const ServiceAccountPrefix = "system:serviceaccount:"

// splitServiceAccount returns the namespace and name of a ServiceAccount's user name.
func splitServiceAccount(user string) (string, string, bool) {
	if !strings.HasPrefix(user, ServiceAccountPrefix) {
		return "", "", false
	}
	ns, name, ok := strings.Cut(user[len(ServiceAccountPrefix):], ":")
	if !ok || ns == "" || name == "" || strings.Contains(name, ":") {
		return "", "", false
	}
	return ns, name, true
}

// visit calls fn with the rules of the bindings of x that apply to u, in binding order;
// it returns false when fn stopped.
func (s *snapshot) visit(x *bindingIndex, u *filters.User, fn func(fmt.Stringer, *rbacv1.PolicyRule, error) bool) bool {
	var hits []int
	hits = append(hits, x.users[u.Name]...)
	for _, g := range u.Groups {
		hits = append(hits, x.groups[g]...)
	}
	if ns, name, ok := splitServiceAccount(u.Name); ok {
		hits = append(hits, x.sas[ns+"/"+name]...)
	}
	if len(hits) == 0 {
		return true
	}
	sort.Ints(hits)
	last := -1
	for _, i := range hits {
		if i == last {
			continue
		}
		last = i
		b := &x.bindings[i]
		if b.err != nil {
			if !fn(nil, nil, b.err) {
				return false
			}
			continue
		}
		source := &bindingSource{b: b, u: u}
		for j := range b.rules {
			if !fn(source, &b.rules[j], nil) {
				return false
			}
		}
	}
	return true
}

// bindingSource is the binding a visited rule comes from, described when asked.
type bindingSource struct {
	b *resolved
	u *filters.User
}

// String names the binding and the subject that made it apply (describe).
func (s *bindingSource) String() string { return s.b.describe(s.u) }

// describe names a binding and the subject that made it apply to u, as upstream.
func (b *resolved) describe(u *filters.User) string {
	for _, sub := range b.subjects {
		if appliesTo(u, sub, b.ns) {
			who := fmt.Sprintf("%s %q", sub.Kind, sub.Name)
			if sub.Kind == rbacv1.ServiceAccountKind {
				ns := sub.Namespace
				if ns == "" {
					ns = b.ns
				}
				who = fmt.Sprintf("%s %q", sub.Kind, sub.Name+"/"+ns)
			}
			return fmt.Sprintf("%s %q of %s %q to %s", b.kind, b.name, b.ref.Kind, b.ref.Name, who)
		}
	}
	return fmt.Sprintf("%s %q of %s %q", b.kind, b.name, b.ref.Kind, b.ref.Name)
}

func appliesTo(u *filters.User, sub rbacv1.Subject, bindingNamespace string) bool {
	switch sub.Kind {
	case rbacv1.UserKind:
		return u.Name == sub.Name
	case rbacv1.GroupKind:
		for _, g := range u.Groups {
			if g == sub.Name {
				return true
			}
		}
	case rbacv1.ServiceAccountKind:
		ns := sub.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		return ns != "" && u.Name == ServiceAccountPrefix+ns+":"+sub.Name
	}
	return false
}

// aggregate joins errors as upstream's utilerrors aggregate: one error alone, several
// in brackets.
func aggregate(errs []error) string {
	if len(errs) == 1 {
		return errs[0].Error()
	}
	msgs := make([]string, 0, len(errs))
	seen := map[string]bool{}
	for _, e := range errs {
		if m := e.Error(); !seen[m] {
			seen[m] = true
			msgs = append(msgs, m)
		}
	}
	if len(msgs) == 1 {
		return msgs[0]
	}
	return "[" + strings.Join(msgs, ", ") + "]"
}
