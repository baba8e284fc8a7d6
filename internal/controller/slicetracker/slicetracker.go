// Package slicetracker remembers the EndpointSlices a controller wrote, per Service,
// as upstream's EndpointSliceTracker (k8s.io/endpointslice/util) does for the
// EndpointSlice and EndpointSliceMirroring controllers: so that a sync never acts on
// an informer cache that has not caught up with the controller's own writes (which
// would duplicate slices), and so that the watch events of its own writes do not
// trigger syncs.
package slicetracker

import (
	"strconv"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// deletionExpected marks a slice the controller deleted and whose deletion it
// has not seen yet.
const deletionExpected = -1

// Tracker remembers the EndpointSlices one controller wrote, per Service (the
// slices' service-name label). It is safe for concurrent use.
//
// Upstream compares metadata.generation, which its API server bumps on every
// change of a slice's content. kubette's API server bumps generation only for
// kinds with a spec, so EndpointSlices keep generation 0; the tracker orders
// versions by resourceVersion instead, which kubette's API server issues as
// increasing etcd revisions (see version).
type Tracker struct {
	mu sync.Mutex
	// byService maps a Service to the versions of its slices, by slice UID.
	byService map[types.NamespacedName]map[types.UID]int64
}

// New returns an empty Tracker.
func New() *Tracker {
	return &Tracker{byService: make(map[types.NamespacedName]map[types.UID]int64)}
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

// Has reports whether the slice is tracked.
func (t *Tracker) Has(s *discoveryv1.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.byService[serviceOf(s)][s.UID]
	return ok
}

// ShouldSync reports whether a watched state of the slice is not one the
// controller wrote: an untracked slice, or a version newer than its own write.
func (t *Tracker) ShouldSync(s *discoveryv1.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.byService[serviceOf(s)][s.UID]
	return !ok || version(s) > v
}

// Stale reports whether the cached slices of svc are older than what the
// controller wrote: a slice older than its write, a slice it deleted, or a
// slice it wrote that is missing.
func (t *Tracker) Stale(svc types.NamespacedName, slices []*discoveryv1.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	tracked := t.byService[svc]
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

// Update records a state of the slice the controller wrote.
func (t *Tracker) Update(s *discoveryv1.EndpointSlice) {
	t.mu.Lock()
	defer t.mu.Unlock()
	svc := serviceOf(s)
	if t.byService[svc] == nil {
		t.byService[svc] = make(map[types.UID]int64)
	}
	t.byService[svc][s.UID] = version(s)
}

// ExpectDeletion records that the controller deleted the slice.
func (t *Tracker) ExpectDeletion(s *discoveryv1.EndpointSlice) {
	t.mu.Lock()
	defer t.mu.Unlock()
	svc := serviceOf(s)
	if t.byService[svc] == nil {
		t.byService[svc] = make(map[types.UID]int64)
	}
	t.byService[svc][s.UID] = deletionExpected
}

// HandleDeletion forgets a deleted slice and reports whether the deletion
// was unexpected (not the controller's own), so the Service needs a sync.
func (t *Tracker) HandleDeletion(s *discoveryv1.EndpointSlice) bool {
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

// DeleteService forgets every slice of the Service namespace/name.
func (t *Tracker) DeleteService(namespace, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.byService, types.NamespacedName{Namespace: namespace, Name: name})
}
