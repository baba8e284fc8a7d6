// Package rbacpolicy is the default RBAC policy: upstream's bootstrap ClusterRoles,
// ClusterRoleBindings, and the Roles and RoleBindings of kube-system and kube-public
// (as of Kubernetes v1.32), plus the roles of kubette's own components (DNS, ingress)
// written in the same style. The API server creates and reconciles them at start
// (Reconcile), as upstream's "rbac/bootstrap-roles" post-start hook does.
package rbacpolicy

import (
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// AutoUpdateAnnotation on a default object tells whether it is reconciled at start
	// ("true", the default) or left as a user changed it ("false").
	AutoUpdateAnnotation = "rbac.authorization.kubernetes.io/autoupdate"
	// BootstrapLabel marks every default object (value "rbac-defaults").
	BootstrapLabel = "kubernetes.io/bootstrapping"
	// aggregatePrefix is the prefix of the labels ClusterRoles are aggregated by.
	aggregatePrefix = "rbac.authorization.k8s.io/"
)

// Policy is a set of RBAC objects.
type Policy struct {
	ClusterRoles        []rbacv1.ClusterRole
	ClusterRoleBindings []rbacv1.ClusterRoleBinding
	Roles               []rbacv1.Role
	RoleBindings        []rbacv1.RoleBinding
}

// Default is the whole default policy: upstream's (Upstream) and kubette's own
// components' (Kubette).
func Default() Policy {
	p := Upstream()
	k := Kubette()
	p.ClusterRoles = append(p.ClusterRoles, k.ClusterRoles...)
	p.ClusterRoleBindings = append(p.ClusterRoleBindings, k.ClusterRoleBindings...)
	p.Roles = append(p.Roles, k.Roles...)
	p.RoleBindings = append(p.RoleBindings, k.RoleBindings...)
	return p
}

// Upstream is upstream's bootstrap policy: the cluster roles, the controllers' roles
// (system:controller:NAME bound to the ServiceAccount kube-system/NAME), and the
// namespaced roles, each with its bindings.
func Upstream() Policy {
	p := Policy{}
	for _, d := range clusterRoleDefs() {
		p.ClusterRoles = append(p.ClusterRoles, d.build())
	}
	for _, d := range controllerRoleDefs() {
		role := d
		role.name = ControllerRolePrefix + d.name
		p.ClusterRoles = append(p.ClusterRoles, role.build())
		p.ClusterRoleBindings = append(p.ClusterRoleBindings,
			clusterRoleBinding(role.name, role.name, serviceAccount("kube-system", d.name)))
	}
	p.ClusterRoleBindings = append(p.ClusterRoleBindings, clusterRoleBindings()...)
	for _, d := range namespaceRoleDefs() {
		p.Roles = append(p.Roles, d.buildRole())
	}
	p.RoleBindings = namespaceRoleBindings()
	return p
}

// ControllerRolePrefix starts the names of the controllers' roles and bindings.
const ControllerRolePrefix = "system:controller:"

// rule is a compact policy rule: space-separated verbs, API groups ("core" is the
// legacy group "") and resources, or non-resource URLs.
type rule struct {
	verbs, groups, resources, names, urls []string
}

// r is a resource rule. The verb "read" stands for get, list and watch.
func r(verbs, groups, resources string) rule {
	var g []string
	for _, x := range strings.Fields(groups) {
		if x == "core" {
			x = ""
		}
		g = append(g, x)
	}
	return rule{verbs: expandVerbs(verbs), groups: g, resources: strings.Fields(resources)}
}

// named restricts a rule to objects of the given space-separated names.
func (x rule) named(names string) rule {
	x.names = strings.Fields(names)
	return x
}

// urls is a non-resource rule.
func urls(verbs, paths string) rule {
	return rule{verbs: expandVerbs(verbs), urls: strings.Fields(paths)}
}

// eventsRule is what every component that reports Events holds, in both Event APIs.
func eventsRule() rule {
	return r("create patch update", "core events.k8s.io", "events")
}

func expandVerbs(verbs string) []string {
	var out []string
	for _, v := range strings.Fields(verbs) {
		if v == "read" {
			out = append(out, "get", "list", "watch")
			continue
		}
		out = append(out, v)
	}
	return out
}

func (x rule) policyRule() rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: x.verbs, APIGroups: x.groups, Resources: x.resources,
		ResourceNames: x.names, NonResourceURLs: x.urls}
}

// roleDef is a ClusterRole (no namespace) or a Role.
type roleDef struct {
	namespace, name string
	// aggregate makes the ClusterRole aggregate the ClusterRoles labelled
	// rbac.authorization.k8s.io/<aggregate>: "true".
	aggregate string
	// aggregateTo labels the ClusterRole rbac.authorization.k8s.io/<aggregateTo>: "true".
	aggregateTo string
	rules       []rule
}

func meta(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name,
		Labels:      map[string]string{BootstrapLabel: "rbac-defaults"},
		Annotations: map[string]string{AutoUpdateAnnotation: "true"}}
}

func (d roleDef) policyRules() []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, x := range d.rules {
		out = append(out, x.policyRule())
	}
	return out
}

func (d roleDef) build() rbacv1.ClusterRole {
	c := rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: meta("", d.name), Rules: d.policyRules()}
	if d.aggregateTo != "" {
		c.Labels[aggregatePrefix+d.aggregateTo] = "true"
	}
	if d.aggregate != "" {
		c.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
			{MatchLabels: map[string]string{aggregatePrefix + d.aggregate: "true"}}}}
	}
	return c
}

func (d roleDef) buildRole() rbacv1.Role {
	return rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: meta(d.namespace, d.name), Rules: d.policyRules()}
}

func group(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

func user(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

func serviceAccount(namespace, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}
}

func clusterRoleBinding(name, role string, subjects ...rbacv1.Subject) rbacv1.ClusterRoleBinding {
	return rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: meta("", name), RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: subjects}
}

func roleBinding(namespace, name, role string, subjects ...rbacv1.Subject) rbacv1.RoleBinding {
	return rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: meta(namespace, name), RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role},
		Subjects: subjects}
}

// NodeRules are the rules of the system:node ClusterRole: what the Node authorizer lets
// every kubelet do besides its checks of the objects related to its node.
func NodeRules() []rbacv1.PolicyRule {
	for _, d := range clusterRoleDefs() {
		if d.name == "system:node" {
			return d.policyRules()
		}
	}
	return nil
}
