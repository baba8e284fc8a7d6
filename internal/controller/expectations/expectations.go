// Package expectations remembers, per controller key, how many creations and
// deletions a controller issued and has not yet seen in its informer cache,
// as upstream's ControllerExpectations and UIDTrackingControllerExpectations
// (k8s.io/kubernetes pkg/controller/controller_utils.go). A controller does not
// act on a key whose expectations are unsatisfied, so a lagging cache never
// makes it create or delete twice; expectations older than Timeout are
// considered satisfied so that a lost watch event cannot stall it forever.
//
// All methods are safe for concurrent use.
package expectations

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
)

// Timeout is how long expectations are waited for before a controller syncs anyway.
const Timeout = 5 * time.Minute

// entry holds the outstanding creations and deletions of one controller.
type entry struct {
	add, del  int64
	timestamp time.Time
}

func (e *entry) fulfilled() bool { return e.add <= 0 && e.del <= 0 }

// ControllerExpectations counts outstanding creations and deletions per
// controller key (usually "namespace/name").
type ControllerExpectations struct {
	clock clock.PassiveClock

	mu      sync.Mutex
	entries map[string]*entry
}

// NewControllerExpectations returns empty expectations on the real clock.
func NewControllerExpectations() *ControllerExpectations {
	return NewControllerExpectationsWithClock(clock.RealClock{})
}

// NewControllerExpectationsWithClock returns empty expectations that measure
// their Timeout on c.
func NewControllerExpectationsWithClock(c clock.PassiveClock) *ControllerExpectations {
	return &ControllerExpectations{clock: c, entries: make(map[string]*entry)}
}

// GetExpectations returns the outstanding creations and deletions of key, and
// whether key has expectations at all.
func (r *ControllerExpectations) GetExpectations(key string) (add, del int64, exists bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[key]
	if !ok {
		return 0, 0, false
	}
	return e.add, e.del, true
}

// SatisfiedExpectations reports whether the controller of key may sync: it
// has no expectations, they were all observed, or they were set more than
// Timeout ago.
func (r *ControllerExpectations) SatisfiedExpectations(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[key]
	if !ok {
		return true
	}
	return e.fulfilled() || r.clock.Since(e.timestamp) > Timeout
}

// DeleteExpectations forgets key's expectations (its controller was deleted).
func (r *ControllerExpectations) DeleteExpectations(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.entries, key)
}

// SetExpectations replaces key's expectations with add creations and del
// deletions, starting a new Timeout.
func (r *ControllerExpectations) SetExpectations(key string, add, del int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries[key] = &entry{add: int64(add), del: int64(del), timestamp: r.clock.Now()}
}

// ExpectCreations replaces key's expectations with adds creations.
func (r *ControllerExpectations) ExpectCreations(key string, adds int) {
	r.SetExpectations(key, adds, 0)
}

// ExpectDeletions replaces key's expectations with dels deletions.
func (r *ControllerExpectations) ExpectDeletions(key string, dels int) {
	r.SetExpectations(key, 0, dels)
}

// LowerExpectations decrements key's outstanding counts, if it has expectations.
func (r *ControllerExpectations) LowerExpectations(key string, add, del int) {
	r.adjust(key, -int64(add), -int64(del))
}

// RaiseExpectations increments key's outstanding counts, if it has expectations.
func (r *ControllerExpectations) RaiseExpectations(key string, add, del int) {
	r.adjust(key, int64(add), int64(del))
}

func (r *ControllerExpectations) adjust(key string, add, del int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.entries[key]; ok {
		e.add += add
		e.del += del
	}
}

// CreationObserved records that one expected creation for key was seen (or
// will never happen because it was not attempted or failed).
func (r *ControllerExpectations) CreationObserved(key string) {
	r.LowerExpectations(key, 1, 0)
}

// DeletionObserved records that one expected deletion for key was seen.
func (r *ControllerExpectations) DeletionObserved(key string) {
	r.LowerExpectations(key, 0, 1)
}

// UIDTrackingControllerExpectations are ControllerExpectations that also
// remember which objects (by key, "namespace/name") a controller deletes, so
// that a deletion is counted exactly once whether it is first seen as an
// update setting the deletionTimestamp or as the delete itself.
type UIDTrackingControllerExpectations struct {
	counts *ControllerExpectations

	mu   sync.Mutex
	uids map[string]sets.Set[string]
}

// NewUIDTrackingControllerExpectations wraps counts with deletion tracking.
func NewUIDTrackingControllerExpectations(counts *ControllerExpectations) *UIDTrackingControllerExpectations {
	return &UIDTrackingControllerExpectations{counts: counts, uids: make(map[string]sets.Set[string])}
}

// GetExpectations returns the outstanding creations and deletions of key.
func (u *UIDTrackingControllerExpectations) GetExpectations(key string) (add, del int64, exists bool) {
	return u.counts.GetExpectations(key)
}

// SatisfiedExpectations reports whether the controller of key may sync.
func (u *UIDTrackingControllerExpectations) SatisfiedExpectations(key string) bool {
	return u.counts.SatisfiedExpectations(key)
}

// ExpectCreations replaces key's expectations with adds creations.
func (u *UIDTrackingControllerExpectations) ExpectCreations(key string, adds int) {
	u.counts.ExpectCreations(key, adds)
}

// CreationObserved records that one expected creation for key was seen.
func (u *UIDTrackingControllerExpectations) CreationObserved(key string) {
	u.counts.CreationObserved(key)
}

// LowerExpectations decrements key's outstanding counts.
func (u *UIDTrackingControllerExpectations) LowerExpectations(key string, add, del int) {
	u.counts.LowerExpectations(key, add, del)
}

// RaiseExpectations increments key's outstanding counts.
func (u *UIDTrackingControllerExpectations) RaiseExpectations(key string, add, del int) {
	u.counts.RaiseExpectations(key, add, del)
}

// ExpectDeletions replaces key's expectations with the deletion of each of
// deletedKeys (object keys, "namespace/name").
func (u *UIDTrackingControllerExpectations) ExpectDeletions(key string, deletedKeys []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	expected := sets.New(deletedKeys...)
	u.uids[key] = expected
	u.counts.ExpectDeletions(key, expected.Len())
}

// DeletionObserved records that the object deletedKey, which the controller
// of key expected to delete, is gone or being deleted. It counts once per
// object; objects the controller did not expect to delete are ignored.
func (u *UIDTrackingControllerExpectations) DeletionObserved(key, deletedKey string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if s := u.uids[key]; s.Has(deletedKey) {
		u.counts.DeletionObserved(key)
		s.Delete(deletedKey)
	}
}

// GetUIDs returns a copy of the object keys the controller of key still
// expects to see deleted, or nil.
func (u *UIDTrackingControllerExpectations) GetUIDs(key string) sets.Set[string] {
	u.mu.Lock()
	defer u.mu.Unlock()
	if s, ok := u.uids[key]; ok {
		return s.Clone()
	}
	return nil
}

// DeleteExpectations forgets key's expectations and tracked deletions.
func (u *UIDTrackingControllerExpectations) DeleteExpectations(key string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.counts.DeleteExpectations(key)
	delete(u.uids, key)
}
