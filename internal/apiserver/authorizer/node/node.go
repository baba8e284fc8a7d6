// Package node is the Node authorizer, as upstream's plugin/pkg/auth/authorizer/node: a
// kubelet (user system:node:NAME in the group system:nodes) may read only the Secrets,
// ConfigMaps, PersistentVolumeClaims and PersistentVolumes of the pods bound to its node,
// create tokens only for their ServiceAccounts, read only its own Node and the pods bound
// to it, and use only its own Lease; the rest of what it may do is the system:node role's
// rules. Writes of Nodes and pods (the node's own object, mirror pods, pod status) are
// allowed here and narrowed by the NodeRestriction admission plugin, which sees the objects.
//
// Instead of upstream's graph kept by informers, relations are looked up in the API
// server's watch caches at each request: the pods of the object's namespace bound to the
// node, and whether one of them refers to the object.
package node

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/apiserver/filters"
)

// NodesGroup is the group of every kubelet.
const NodesGroup = "system:nodes"

// NodeUserPrefix starts a kubelet's user name; the node's name follows.
const NodeUserPrefix = "system:node:"

// Cluster reads current objects, as (*apiserver.Server).Get and List do.
type Cluster interface {
	Get(ctx context.Context, gr schema.GroupResource, namespace, name string) (runtime.Object, error)
	List(ctx context.Context, gr schema.GroupResource, namespace string) ([]runtime.Object, error)
}

// Authorizer is the Node authorizer.
type Authorizer struct {
	cluster Cluster
	rules   []rbacv1.PolicyRule
}

// New returns a Node authorizer reading the cluster, allowing kubelets the given static
// rules (the system:node role's) besides the related objects.
func New(c Cluster, nodeRules []rbacv1.PolicyRule) *Authorizer {
	return &Authorizer{cluster: c, rules: nodeRules}
}

// NodeIdentity returns the node a user is the kubelet of: isNode when the user is in
// system:nodes; name is "" when the user name does not name a node.
func NodeIdentity(u *filters.User) (name string, isNode bool) {
	if u == nil {
		return "", false
	}
	for _, g := range u.Groups {
		if g == NodesGroup {
			isNode = true
			break
		}
	}
	if !isNode || !strings.HasPrefix(u.Name, NodeUserPrefix) {
		return "", isNode
	}
	return strings.TrimPrefix(u.Name, NodeUserPrefix), true
}

var (
	podsGR     = schema.GroupResource{Resource: "pods"}
	pvcsGR     = schema.GroupResource{Resource: "persistentvolumeclaims"}
	pvsGR      = schema.GroupResource{Resource: "persistentvolumes"}
	secretsGR  = schema.GroupResource{Resource: "secrets"}
	cmsGR      = schema.GroupResource{Resource: "configmaps"}
	sasGR      = schema.GroupResource{Resource: "serviceaccounts"}
	nodesGR    = schema.GroupResource{Resource: "nodes"}
	leasesGR   = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	csiNodesGR = schema.GroupResource{Group: "storage.k8s.io", Resource: "csinodes"}
	vasGR      = schema.GroupResource{Group: "storage.k8s.io", Resource: "volumeattachments"}
)

// Authorize decides the requests of kubelets; it has no opinion on anyone else's.
func (z *Authorizer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	node, isNode := NodeIdentity(a.User)
	if !isNode {
		return authorizer.NoOpinion, "", nil
	}
	if node == "" {
		return authorizer.NoOpinion, fmt.Sprintf("unknown node for user %q", a.User.Name), nil
	}
	if a.ResourceRequest {
		switch (schema.GroupResource{Group: a.APIGroup, Resource: a.Resource}) {
		case secretsGR:
			return z.readNamespaced(ctx, node, a, referencesSecret)
		case cmsGR:
			return z.readNamespaced(ctx, node, a, referencesConfigMap)
		case pvcsGR:
			if a.Subresource == "status" {
				if a.Verb != "update" && a.Verb != "patch" {
					return authorizer.NoOpinion, "can only get/update/patch this type", nil
				}
				return z.related(ctx, node, a, referencesClaim)
			}
			if d, reason, ok := getOnly(a); !ok {
				return d, reason, nil
			}
			return z.related(ctx, node, a, referencesClaim)
		case pvsGR:
			if d, reason, ok := getOnly(a); !ok {
				return d, reason, nil
			}
			return z.volume(ctx, node, a)
		case vasGR:
			if d, reason, ok := getOnly(a); !ok {
				return d, reason, nil
			}
			return authorizer.NoOpinion, fmt.Sprintf("no relationship found between node '%s' and this object", node), nil
		case sasGR:
			if a.Verb != "create" || a.Name == "" {
				return authorizer.NoOpinion, "can only create tokens for individual service accounts", nil
			}
			if a.Subresource != "token" {
				return authorizer.NoOpinion, "can only create token subresource of serviceaccount", nil
			}
			return z.related(ctx, node, a, usesServiceAccount)
		case leasesGR:
			return ownObject(node, a, "a node lease", func() string {
				if a.Namespace != corev1.NamespaceNodeLease {
					return fmt.Sprintf("can only access leases in the %q system namespace", corev1.NamespaceNodeLease)
				}
				return ""
			})
		case csiNodesGR:
			return ownObject(node, a, "a CSINode", func() string {
				if a.Subresource != "" {
					return "cannot authorize CSINode subresources"
				}
				return ""
			})
		case nodesGR:
			return z.node(node, a)
		case podsGR:
			return z.pod(ctx, node, a)
		}
	}
	if RulesAllow(a, z.rules) {
		return authorizer.Allow, "", nil
	}
	return authorizer.NoOpinion, "", nil
}

// getOnly refuses anything but a get of an object (no subresource).
func getOnly(a authorizer.Attributes) (authorizer.Decision, string, bool) {
	if a.Verb != "get" {
		return authorizer.NoOpinion, "can only get individual resources of this type", false
	}
	if a.Subresource != "" {
		return authorizer.NoOpinion, "cannot get subresource", false
	}
	return authorizer.NoOpinion, "", true
}

// readNamespaced allows get, list and watch of one namespaced object referred to by a
// pod of the node.
func (z *Authorizer) readNamespaced(ctx context.Context, node string, a authorizer.Attributes, refers func(*corev1.Pod, string) bool) (authorizer.Decision, string, error) {
	switch a.Verb {
	case "get", "list", "watch":
	default:
		return authorizer.NoOpinion, "can only read resources of this type", nil
	}
	if a.Subresource != "" {
		return authorizer.NoOpinion, "cannot read subresource", nil
	}
	if a.Namespace == "" {
		return authorizer.NoOpinion, "can only read namespaced object of this type", nil
	}
	return z.related(ctx, node, a, refers)
}

// related allows the request when a pod bound to the node, in the object's namespace,
// refers to the named object.
func (z *Authorizer) related(ctx context.Context, node string, a authorizer.Attributes, refers func(*corev1.Pod, string) bool) (authorizer.Decision, string, error) {
	if a.Name == "" {
		return authorizer.NoOpinion, "No Object name found", nil
	}
	ok, err := z.podRefers(ctx, node, a.Namespace, a.Name, refers)
	if err != nil {
		return authorizer.NoOpinion, "", err
	}
	if !ok {
		return authorizer.NoOpinion, fmt.Sprintf("no relationship found between node '%s' and this object", node), nil
	}
	return authorizer.Allow, "", nil
}

func (z *Authorizer) podRefers(ctx context.Context, node, namespace, name string, refers func(*corev1.Pod, string) bool) (bool, error) {
	pods, err := z.cluster.List(ctx, podsGR, namespace)
	if err != nil {
		return false, fmt.Errorf("node authorizer: list pods: %w", err)
	}
	for _, o := range pods {
		if p, ok := o.(*corev1.Pod); ok && p.Spec.NodeName == node && refers(p, name) {
			return true, nil
		}
	}
	return false, nil
}

// volume allows a get of a PersistentVolume bound to a claim a pod of the node uses.
func (z *Authorizer) volume(ctx context.Context, node string, a authorizer.Attributes) (authorizer.Decision, string, error) {
	denied := fmt.Sprintf("no relationship found between node '%s' and this object", node)
	if a.Name == "" {
		return authorizer.NoOpinion, "No Object name found", nil
	}
	o, err := z.cluster.Get(ctx, pvsGR, "", a.Name)
	if err != nil {
		return authorizer.NoOpinion, denied, nil
	}
	pv, ok := o.(*corev1.PersistentVolume)
	if !ok || pv.Spec.ClaimRef == nil {
		return authorizer.NoOpinion, denied, nil
	}
	ok, err = z.podRefers(ctx, node, pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name, referencesClaim)
	if err != nil {
		return authorizer.NoOpinion, "", err
	}
	if !ok {
		return authorizer.NoOpinion, denied, nil
	}
	return authorizer.Allow, "", nil
}

// ownObject allows get, create, update, patch and delete of the object named as the
// node (create is not checked here: NodeRestriction sees the name).
func ownObject(node string, a authorizer.Attributes, what string, extra func() string) (authorizer.Decision, string, error) {
	switch a.Verb {
	case "get", "create", "update", "patch", "delete":
	default:
		return authorizer.NoOpinion, "can only get, create, update, patch, or delete " + what, nil
	}
	if reason := extra(); reason != "" {
		return authorizer.NoOpinion, reason, nil
	}
	if a.Verb != "create" && a.Name != node {
		return authorizer.NoOpinion, fmt.Sprintf("can only access %s with the same name as the requesting node", strings.TrimPrefix(strings.TrimPrefix(what, "a "), "node ")), nil
	}
	return authorizer.Allow, "", nil
}

// node allows a kubelet to read its own Node (by name, also before it exists) and to
// create, update and patch Nodes and Node status (NodeRestriction keeps it to its own).
func (z *Authorizer) node(node string, a authorizer.Attributes) (authorizer.Decision, string, error) {
	switch a.Subresource {
	case "":
		switch a.Verb {
		case "create", "update", "patch":
			return authorizer.Allow, "", nil
		case "get", "list", "watch":
			switch a.Name {
			case node:
				return authorizer.Allow, "", nil
			case "":
				return authorizer.NoOpinion, fmt.Sprintf("node '%s' cannot read all nodes, only its own Node object", node), nil
			default:
				return authorizer.NoOpinion, fmt.Sprintf("node '%s' cannot read '%s', only its own Node object", node, a.Name), nil
			}
		}
	case "status":
		if a.Verb == "update" || a.Verb == "patch" {
			return authorizer.Allow, "", nil
		}
	}
	return authorizer.NoOpinion, "", nil
}

// pod allows a kubelet to read the pods bound to it (a get of one, or a list or watch
// selecting spec.nodeName), to create and delete pods (mirror pods), to write pod status
// and to evict (NodeRestriction keeps these to its own pods).
func (z *Authorizer) pod(ctx context.Context, node string, a authorizer.Attributes) (authorizer.Decision, string, error) {
	bound := func(p *corev1.Pod, name string) bool { return p.Name == name }
	switch a.Subresource {
	case "":
		switch a.Verb {
		case "get":
			return z.related(ctx, node, a, bound)
		case "list", "watch":
			if sel, err := fields.ParseSelector(a.FieldSelector); err == nil {
				if v, ok := sel.RequiresExactMatch("spec.nodeName"); ok && v == node {
					return authorizer.Allow, "", nil
				}
			}
			if a.Name != "" {
				return z.related(ctx, node, a, bound)
			}
			return authorizer.NoOpinion, "can only list/watch pods with spec.nodeName field selector", nil
		case "create", "delete":
			return authorizer.Allow, "", nil
		}
	case "status":
		if a.Verb == "update" || a.Verb == "patch" {
			return authorizer.Allow, "", nil
		}
	case "eviction":
		if a.Verb == "create" {
			return authorizer.Allow, "", nil
		}
	}
	return authorizer.NoOpinion, "", nil
}
