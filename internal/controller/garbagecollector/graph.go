package garbagecollector

import (
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// objectReference names an object as an owner reference does (apiVersion, kind, name, uid),
// plus the namespace needed to address it. For an owner known only from a reference (a
// virtual node) the namespace is the dependent's: the reference itself does not say
// whether the owner's kind is namespaced.
type objectReference struct {
	APIVersion string
	Kind       string
	Name       string
	UID        types.UID
	Namespace  string
}

// String is used in logs.
func (r objectReference) String() string {
	return fmt.Sprintf("%s/%s, namespace: %q, name: %q, uid: %s", r.APIVersion, r.Kind, r.Namespace, r.Name, r.UID)
}

// refIdentity is the identity an owner reference gives, seen from a dependent in namespace ns.
func refIdentity(ref metav1.OwnerReference, ns string) objectReference {
	return objectReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID, Namespace: ns}
}

// matchesCoordinates reports whether ref names the same apiVersion, kind, name and uid as id.
func matchesCoordinates(ref metav1.OwnerReference, id objectReference) bool {
	return ref.UID == id.UID && ref.Name == id.Name && ref.Kind == id.Kind && ref.APIVersion == id.APIVersion
}

// node is one object in the dependency graph. Its fields are guarded by graph.mu: the
// graph builder is the only writer; workers read through graph.view and graph.dependents,
// which return copies.
type node struct {
	identity objectReference
	// owners are the object's ownerReferences as last observed.
	owners []metav1.OwnerReference
	// dependents are the nodes whose ownerReferences name this node's UID.
	dependents map[*node]struct{}
	// virtual is true while the object is known only from other objects' ownerReferences
	// and has not been observed through an informer.
	virtual bool
	// beingDeleted records a deletionTimestamp (a one-way trip).
	beingDeleted bool
	// deletingDependents records a deletionTimestamp together with the foregroundDeletion finalizer.
	deletingDependents bool
}

// nodeView is a copy of a node's state handed to workers.
type nodeView struct {
	identity           objectReference
	owners             []metav1.OwnerReference
	virtual            bool
	beingDeleted       bool
	deletingDependents bool
}

func (n *node) view() nodeView {
	return nodeView{
		identity:           n.identity,
		owners:             append([]metav1.OwnerReference(nil), n.owners...),
		virtual:            n.virtual,
		beingDeleted:       n.beingDeleted,
		deletingDependents: n.deletingDependents,
	}
}

func (n *node) dependentList() []*node {
	out := make([]*node, 0, len(n.dependents))
	for d := range n.dependents {
		out = append(out, d)
	}
	return out
}

// graph is the dependency graph: every object the monitors observed plus virtual owners,
// indexed by UID.
type graph struct {
	mu    sync.RWMutex
	nodes map[types.UID]*node
}

func newGraph() *graph {
	return &graph{nodes: make(map[types.UID]*node)}
}

// view returns a copy of the node with the given UID.
func (g *graph) view(uid types.UID) (nodeView, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	n, ok := g.nodes[uid]
	if !ok {
		return nodeView{}, false
	}
	return n.view(), true
}

// dependents returns copies of the dependents of the node with the given UID.
func (g *graph) dependents(uid types.UID) []nodeView {
	g.mu.RLock()
	defer g.mu.RUnlock()
	n, ok := g.nodes[uid]
	if !ok {
		return nil
	}
	out := make([]nodeView, 0, len(n.dependents))
	for d := range n.dependents {
		out = append(out, d.view())
	}
	return out
}

// has reports whether the graph holds the UID (for tests and debugging).
func (g *graph) has(uid types.UID) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	_, ok := g.nodes[uid]
	return ok
}
