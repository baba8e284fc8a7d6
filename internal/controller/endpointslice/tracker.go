package endpointslice

import (
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// deletionExpected marks a slice the controller deleted and whose deletion it
// has not seen yet.
const deletionExpected = -1

// sliceTracker remembers the EndpointSlices the controller wrote, per Service,
// so that a sync never acts on an informer cache that has not caught up with
// its own writes (which would duplicate slices), and so that the watch events
// of its own writes do not trigger syncs. It plays the part of upstream's
// EndpointSliceTracker.
//
// Upstream compares metadata.generation, which its API server bumps on every
// change of a slice's content. kubette's API server bumps generation only for
// kinds with a spec, so EndpointSlices keep generation 0; the tracker orders
// versions by resourceVersion instead, which kubette's API server issues as
// increasing etcd revisions (see version).
type sliceTracker struct {
	mu sync.Mutex
	// byService maps a Service to the versions of its slices, by slice UID.
	byService map[types.NamespacedName]map[types.UID]int64
}

func newSliceTracker() *sliceTracker {
	return &sliceTracker{byService: make(map[types.NamespacedName]map[types.UID]int64)}
}

// version orders the states of one slice: its resourceVersion as a number
// (0 when it is not one, as in fake clientsets).
func version(s *discoveryv1.EndpointSlice) int64 {
	v, err := strconv.ParseInt(s.ResourceVersion, 10, 64)
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// serviceOf names the Service a slice belongs to, by its service-name label.
func serviceOf(s *discoveryv1.EndpointSlice) types.NamespacedName {
	return types.NamespacedName{Namespace: s.Namespace, Name: s.Labels[discoveryv1.LabelServiceName]}
}

// has reports whether the slice is tracked.
func (t *sliceTracker) has(s *discoveryv1.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.byService[serviceOf(s)][s.UID]
	return ok
}

// shouldSync reports whether a watched state of the slice is not one the
// controller wrote: an untracked slice, or a version newer than its own write.
func (t *sliceTracker) shouldSync(s *discoveryv1.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.byService[serviceOf(s)][s.UID]
	return !ok || version(s) > v
}

// stale reports whether the cached slices of svc are older than what the
// controller wrote: a slice older than its write, a slice it deleted, or a
// slice it wrote that is missing.
func (t *sliceTracker) stale(svc *corev1.Service, slices []*discoveryv1.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	tracked := t.byService[types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}]
	seen := make(map[types.UID]bool, len(slices))
	for _, s := range slices {
		seen[s.UID] = true
		if v, ok := t.byService[serviceOf(s)][s.UID]; ok && (v == deletionExpected || v > version(s)) {
			return true
		}
	}
	for uid, v := range tracked {
		if v != deletionExpected && !seen[uid] {
			return true
		}
	}
	return false
}

// update records a state of the slice the controller wrote.
func (t *sliceTracker) update(s *discoveryv1.EndpointSlice) {
	t.mu.Lock()
	defer t.mu.Unlock()
	svc := serviceOf(s)
	if t.byService[svc] == nil {
		t.byService[svc] = make(map[types.UID]int64)
	}
	t.byService[svc][s.UID] = version(s)
}

// expectDeletion records that the controller deleted the slice.
func (t *sliceTracker) expectDeletion(s *discoveryv1.EndpointSlice) {
	t.mu.Lock()
	defer t.mu.Unlock()
	svc := serviceOf(s)
	if t.byService[svc] == nil {
		t.byService[svc] = make(map[types.UID]int64)
	}
	t.byService[svc][s.UID] = deletionExpected
}

// handleDeletion forgets a deleted slice and reports whether the deletion
// was unexpected (not the controller's own), so the Service needs a sync.
func (t *sliceTracker) handleDeletion(s *discoveryv1.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	slices, ok := t.byService[serviceOf(s)]
	if !ok {
		return true
	}
	v, ok := slices[s.UID]
	delete(slices, s.UID)
	return !ok || v != deletionExpected
}

// deleteService forgets every slice of the Service namespace/name.
func (t *sliceTracker) deleteService(namespace, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.byService, types.NamespacedName{Namespace: namespace, Name: name})
}
