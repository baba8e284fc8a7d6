// Package storage defines the key-value store the API server persists objects in.
//
// The store deals in encoded bytes and revisions only; the API server owns the
// codecs. Every write gets a new, strictly increasing revision from the store,
// and an object's metadata.resourceVersion is the revision of its last write
// (its mod revision). Updates and deletes are compare-and-swap on that revision.
package storage

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors returned (possibly wrapped) by every Store implementation.
var (
	// ErrNotFound means the key does not exist.
	ErrNotFound = errors.New("key not found")
	// ErrExists means a create found the key already present.
	ErrExists = errors.New("key already exists")
	// ErrConflict means the expected revision of a compare-and-swap did not match.
	ErrConflict = errors.New("revision conflict")
	// ErrCompacted means the requested revision is older than the oldest one the store keeps.
	ErrCompacted = errors.New("revision has been compacted")
	// ErrFutureRevision means the requested revision is newer than the store's current revision.
	ErrFutureRevision = errors.New("revision is in the future")
)

// KeyValue is one stored object.
type KeyValue struct {
	Key   string
	Value []byte
	// ModRevision is the revision of the last write to the key.
	ModRevision int64
	// CreateRevision is the revision of the write that created the key.
	CreateRevision int64
}

// ListOptions narrows a List.
type ListOptions struct {
	// Revision reads the range as of this revision; 0 reads the latest.
	Revision int64
	// Limit caps the number of items returned; 0 means no limit.
	Limit int64
	// StartKey, when set, starts the range at this key (inclusive) instead of at the prefix.
	// It must lie within the prefix. Used to continue a paginated list.
	StartKey string
}

// ListResult is what a List returns.
type ListResult struct {
	// Items are sorted by key.
	Items []KeyValue
	// Revision is the store revision the list was read at.
	Revision int64
	// More reports that items beyond Limit remain in the range.
	More bool
	// Remaining counts the items beyond those returned, when known (0 otherwise).
	Remaining int64
}

// EventType says what happened to a key.
type EventType int

const (
	// EventPut is a create or an update.
	EventPut EventType = iota
	// EventDelete is a deletion.
	EventDelete
)

// String returns "PUT" or "DELETE".
func (t EventType) String() string {
	if t == EventDelete {
		return "DELETE"
	}
	return "PUT"
}

// Event is one change seen by a watch.
type Event struct {
	Type EventType
	Key  string
	// Value is the new value for EventPut and nil for EventDelete.
	Value []byte
	// PrevValue is the value before the change: nil for a create, the deleted value for EventDelete.
	PrevValue []byte
	// Revision is the revision of the write (the key's new mod revision, or the delete's revision).
	Revision int64
	// Created reports that an EventPut created the key.
	Created bool
	// More reports that the next result of the watch is another event of the same revision:
	// one write changed several keys (the expiry of a lease shared by keys written with
	// WithTTL deletes them all at once). A consumer that tracks revisions applies the
	// events of a revision together.
	More bool
}

// WatchResult is an item on a watch channel: either an Event or a terminal error.
type WatchResult struct {
	Event Event
	// Err, when set, ends the watch (ErrCompacted when the start revision is gone).
	Err error
	// ProgressRevision, when non-zero and Event is empty, reports that the watch has seen
	// every change up to this revision (a progress notification).
	ProgressRevision int64
}

// Store is a revisioned key-value store with compare-and-swap and watches.
// Implementations must be safe for concurrent use.
type Store interface {
	// Get reads one key. It returns ErrNotFound when the key is absent.
	Get(ctx context.Context, key string) (KeyValue, error)
	// List reads every key under prefix, sorted by key.
	List(ctx context.Context, prefix string, opts ListOptions) (ListResult, error)
	// Count returns how many keys lie under prefix.
	Count(ctx context.Context, prefix string) (int64, error)
	// Create writes a key that must not exist yet and returns the new revision (ErrExists otherwise).
	// WithTTL makes the key expire (see WithTTL).
	Create(ctx context.Context, key string, value []byte, opts ...WriteOption) (int64, error)
	// Update overwrites a key whose mod revision equals expectedRevision and returns the new
	// revision. It returns ErrNotFound when the key is absent and ErrConflict (wrapped in a
	// *ConflictError carrying the current value) when the revision differs. The options apply
	// to this write only: an update without WithTTL makes an expiring key permanent again.
	Update(ctx context.Context, key string, value []byte, expectedRevision int64, opts ...WriteOption) (int64, error)
	// Delete removes a key. When expectedRevision is non-zero the delete only happens if the
	// key's mod revision equals it (ErrConflict otherwise). It returns the deleted value and
	// the revision of the delete.
	Delete(ctx context.Context, key string, expectedRevision int64) (KeyValue, int64, error)
	// Watch streams every change under prefix with a revision greater than afterRevision
	// (0: changes after the current revision), in revision order, until ctx is done.
	// A start revision that is compacted yields a single WatchResult with ErrCompacted.
	Watch(ctx context.Context, prefix string, afterRevision int64) (<-chan WatchResult, error)
	// CurrentRevision returns the store's latest revision.
	CurrentRevision(ctx context.Context) (int64, error)
	// Close releases the store's connections.
	Close() error
}

// WriteOption modifies one Create or Update. Build it with WithTTL.
type WriteOption struct {
	ttl time.Duration
}

// WithTTL makes the store delete the written key on its own, no sooner than ttl after the
// write (as upstream's --event-ttl). The store may keep it somewhat longer: etcd counts in
// whole seconds, has a minimum lease TTL (1 s for the embedded etcd, 2 s for etcd's default
// timing) and shares one lease among the keys written within a reuse window, up to
// min(60 s, 5 % of ttl) longer. The deletion reaches watchers as an EventDelete. A
// non-positive ttl means no expiry.
func WithTTL(ttl time.Duration) WriteOption { return WriteOption{ttl: ttl} }

// TTL returns the time to live the options ask for, 0 when none (the last WithTTL wins).
func TTL(opts []WriteOption) time.Duration {
	var ttl time.Duration
	for _, o := range opts {
		ttl = o.ttl
	}
	if ttl < 0 {
		return 0
	}
	return ttl
}

// ConflictError is returned by Update and Delete when the expected revision does not match.
// It carries the key's current value so that callers can retry without another read.
type ConflictError struct {
	Current KeyValue
}

// Error describes the conflict.
func (e *ConflictError) Error() string {
	return "revision conflict on " + e.Current.Key
}

// Unwrap makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// Compactor is implemented by stores that keep old revisions until told to drop them
// (etcd): the API server compacts them periodically, as upstream's.
type Compactor interface {
	// Compact discards every revision older than rev; reads and watches at them then fail
	// with ErrCompacted. A rev that is already compacted yields ErrCompacted.
	Compact(ctx context.Context, rev int64) error
}

// ProgressRequester is implemented by stores whose watches can be asked to report how
// far they have seen (etcd's progress requests). A watch cache uses it to catch up to a
// revision when no change under its prefix would otherwise tell it.
type ProgressRequester interface {
	// RequestProgress makes every watch of the store send a WatchResult with ProgressRevision.
	RequestProgress(ctx context.Context) error
}

// PrevlessWatcher is implemented by stores that can watch without the previous values:
// the events of WatchWithoutPrev carry no PrevValue, for puts and deletes alike. A
// consumer that keeps the last state of every key (a watch cache) needs none of them,
// and each previous value costs etcd a read of the key's older revision per watcher.
type PrevlessWatcher interface {
	// WatchWithoutPrev is Watch whose events have a nil PrevValue.
	WatchWithoutPrev(ctx context.Context, prefix string, afterRevision int64) (<-chan WatchResult, error)
}
