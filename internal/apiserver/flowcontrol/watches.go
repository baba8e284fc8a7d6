package flowcontrol

import (
	"sync"

	"k8s.io/apimachinery/pkg/fields"

	"github.com/kubette/kubette/internal/apiserver/authorizer"
)

// watchKey groups the watches that receive the same events, as upstream's watch
// tracker: a resource, and the namespace and name they are limited to ("" for all).
type watchKey struct {
	group, resource, namespace, name string
}

// watchTracker counts the open watches that came through the filter, for the
// estimate of a write's fan-out.
type watchTracker struct {
	mu     sync.RWMutex
	counts map[watchKey]int
}

// register counts a watch in and returns its key for forget; ok is false for a watch
// not counted: as upstream, a watch of pods on one node (the watch cache indexes them
// by spec.nodeName) is taken not to see the writes of other nodes' pods.
func (t *watchTracker) register(a *authorizer.Attributes) (watchKey, bool) {
	if a.Resource == "pods" && a.APIGroup == "" && a.FieldSelector != "" {
		if sel, err := fields.ParseSelector(a.FieldSelector); err == nil {
			if node, ok := sel.RequiresExactMatch("spec.nodeName"); ok && node != "" {
				return watchKey{}, false
			}
		}
	}
	k := watchKey{group: a.APIGroup, resource: a.Resource, namespace: a.Namespace, name: a.Name}
	t.mu.Lock()
	if t.counts == nil {
		t.counts = map[watchKey]int{}
	}
	t.counts[k]++
	t.mu.Unlock()
	return k, true
}

// forget counts a watch out when it ends.
func (t *watchTracker) forget(k watchKey) {
	t.mu.Lock()
	if t.counts[k]--; t.counts[k] <= 0 {
		delete(t.counts, k)
	}
	t.mu.Unlock()
}

// interested returns how many watches may receive the event of a write: those of the
// whole resource, of its namespace, and of the object by name.
func (t *watchTracker) interested(a *authorizer.Attributes) int {
	k := watchKey{group: a.APIGroup, resource: a.Resource}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if len(t.counts) == 0 {
		return 0
	}
	n := t.counts[k]
	if a.Namespace != "" {
		k.namespace = a.Namespace
		n += t.counts[k]
	}
	if a.Name != "" {
		k.name = a.Name
		n += t.counts[k]
	}
	return n
}
