// Package watchcache keeps an in-memory copy of one resource's objects and a
// window of its recent changes, fed by a single storage watch. It serves
// resourceVersion=0 lists, resumed watches and any number of watchers without
// each of them reaching etcd, as the upstream API server's watch cache does.
package watchcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubette/kubette/internal/storage"
)

// ErrTooOld is returned by Watch when the requested revision has left the window.
var ErrTooOld = errors.New("too old resource version")

// Event is one change delivered to watchers.
type Event struct {
	// Type is Added, Modified, Deleted or Bookmark.
	Type watch.EventType
	Key  string
	// Object is the new state (the last state for Deleted, carrying the delete's revision).
	Object runtime.Object
	// PrevObject is the state before the change (nil for Added and Bookmark).
	PrevObject runtime.Object
	// Revision is the store revision of the change (for a bookmark: everything up to it was sent).
	Revision int64

	// enc holds the serialisations of Object shared by every watcher that receives
	// this event with this Object (nil for objects made for one watcher).
	enc *encodings
}

// Encoded returns Object serialised under key (an encoding and version, e.g.
// "protobuf"), calling encode only for the first watcher that asks: as upstream's
// cachingObject, one event fanned out to many watchers is serialised once per key.
// encode must depend only on key and Object; the result must not be modified.
func (e Event) Encoded(key string, encode func() ([]byte, error)) ([]byte, error) {
	if e.enc == nil {
		return encode()
	}
	return e.enc.get(key, encode)
}

// encodings caches an event object's serialisations by key.
type encodings struct {
	mu   sync.Mutex
	keys []string
	vals [][]byte
}

func (c *encodings) get(key string, encode func() ([]byte, error)) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, k := range c.keys {
		if k == key {
			return c.vals[i], nil
		}
	}
	data, err := encode()
	if err != nil {
		return nil, err
	}
	c.keys, c.vals = append(c.keys, key), append(c.vals, data)
	return data, nil
}

// Decoder turns a stored value into an object whose resourceVersion is rev.
type Decoder func(key string, value []byte, rev int64) (runtime.Object, error)

// Config configures a Cache.
type Config struct {
	// Prefix is the storage prefix of the resource, ending in "/".
	Prefix string
	Store  storage.Store
	Decode Decoder
	// Capacity is the number of recent events kept for resumed watches (default 4096).
	Capacity int
	// WatcherBuffer is each watcher's channel size; a watcher that falls this far behind is
	// closed and must resume (default 1024).
	WatcherBuffer int
	// BookmarkInterval is how often watchers that asked for bookmarks get one (default 1m).
	BookmarkInterval time.Duration
	Logger           *slog.Logger
}

// Filter decides whether an object is visible to a watcher or list.
type Filter func(key string, obj runtime.Object) bool

// Cache is the watch cache of one resource.
type Cache struct {
	cfg Config

	mu       sync.RWMutex
	ready    bool
	readyCh  chan struct{}
	revCh    chan struct{} // closed and replaced whenever rev advances
	items    map[string]runtime.Object
	rev      int64   // every change up to rev is applied
	oldest   int64   // watches may resume from any revision >= oldest
	window   []Event // ring buffer
	start, n int
	watchers map[int]*Watcher
	nextID   int
}

// New returns a cache; call Run to fill it.
func New(cfg Config) *Cache {
	if cfg.Capacity <= 0 {
		cfg.Capacity = 4096
	}
	if cfg.WatcherBuffer <= 0 {
		cfg.WatcherBuffer = 1024
	}
	if cfg.BookmarkInterval <= 0 {
		cfg.BookmarkInterval = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Cache{cfg: cfg, readyCh: make(chan struct{}), revCh: make(chan struct{}), items: map[string]runtime.Object{},
		window: make([]Event, cfg.Capacity), watchers: map[int]*Watcher{}}
	return c
}

// Run lists and watches the prefix until ctx is done, relisting after errors.
func (c *Cache) Run(ctx context.Context) {
	defer c.closeAll()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := c.listAndWatch(ctx)
		if ctx.Err() != nil {
			return
		}
		c.cfg.Logger.Warn("watch cache restarting", "prefix", c.cfg.Prefix, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff < 5*time.Second {
			backoff *= 2
		}
	}
}

func (c *Cache) listAndWatch(ctx context.Context) error {
	items := map[string]runtime.Object{}
	var rev int64
	startKey := ""
	for {
		res, err := c.cfg.Store.List(ctx, c.cfg.Prefix, storage.ListOptions{Revision: rev, Limit: 10000, StartKey: startKey})
		if err != nil {
			return fmt.Errorf("list %s: %w", c.cfg.Prefix, err)
		}
		rev = res.Revision
		for _, kv := range res.Items {
			obj, err := c.cfg.Decode(kv.Key, kv.Value, kv.ModRevision)
			if err != nil {
				c.cfg.Logger.Error("watch cache: undecodable object skipped", "key", kv.Key, "err", err)
				continue
			}
			items[kv.Key] = obj
		}
		if !res.More || len(res.Items) == 0 {
			break
		}
		startKey = res.Items[len(res.Items)-1].Key + "\x00"
	}
	c.replace(items, rev)
	// A storage watch that ends for any reason but compaction (etcd's client drops its
	// streams when a connection is re-established) is resumed from the revision the cache
	// has applied, keeping the window, as upstream's reflector re-watches without a list:
	// watchers of the cache see no gap and no 410. Compaction needs the relist.
	for {
		err := c.watchFrom(ctx, c.revision())
		if ctx.Err() != nil || errors.Is(err, storage.ErrCompacted) {
			return err
		}
		c.cfg.Logger.Info("watch cache resuming its storage watch", "prefix", c.cfg.Prefix, "rev", c.revision(), "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// revision returns the revision up to which the cache has applied every change.
func (c *Cache) revision() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.rev
}

// watchFrom applies the store's changes after rev until the storage watch ends or ctx is
// done, and returns why it ended.
func (c *Cache) watchFrom(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The cache keeps every key's last state, so it needs no previous values from the
	// store (each costs etcd a read of the key's older revision).
	watchStore := c.cfg.Store.Watch
	if pw, ok := c.cfg.Store.(storage.PrevlessWatcher); ok {
		watchStore = pw.WatchWithoutPrev
	}
	ch, err := watchStore(wctx, c.cfg.Prefix, rev)
	if err != nil {
		return fmt.Errorf("watch %s: %w", c.cfg.Prefix, err)
	}

	ticker := time.NewTicker(c.cfg.BookmarkInterval)
	defer ticker.Stop()
	// group holds the decoded events of a revision whose last event has not come yet;
	// when the watch ends mid-revision the group is dropped and the resumed watch sends
	// the whole revision again.
	var group []Event
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
			c.bookmark()
		case r, ok := <-ch:
			if !ok {
				return errors.New("storage watch closed")
			}
			if r.Err != nil {
				return fmt.Errorf("storage watch: %w", r.Err)
			}
			if r.ProgressRevision != 0 && r.Event.Key == "" {
				c.progress(r.ProgressRevision)
				continue
			}
			ev, err := c.decode(r.Event)
			if err != nil {
				c.cfg.Logger.Error("watch cache: undecodable event skipped", "key", r.Event.Key, "err", err)
			} else {
				group = append(group, ev)
			}
			if r.Event.More {
				continue
			}
			if len(group) > 0 {
				c.apply(group)
			}
			clear(group)
			group = group[:0]
		}
	}
}

// replace installs a fresh snapshot; existing watchers are closed (they resume and may get 410).
func (c *Cache) replace(items map[string]runtime.Object, rev int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items = items
	c.rev, c.oldest = rev, rev
	c.advanced()
	c.start, c.n = 0, 0
	for id, w := range c.watchers {
		w.stop()
		delete(c.watchers, id)
	}
	if !c.ready {
		c.ready = true
		close(c.readyCh)
	}
}

// decode turns a change from the store into a cache event, against the cache's current
// copy of the key (the events of one revision touch distinct keys).
func (c *Cache) decode(se storage.Event) (Event, error) {
	ev := Event{Key: se.Key, Revision: se.Revision, enc: &encodings{}}
	c.mu.RLock()
	prev := c.items[se.Key]
	c.mu.RUnlock()
	switch se.Type {
	case storage.EventPut:
		obj, err := c.cfg.Decode(se.Key, se.Value, se.Revision)
		if err != nil {
			return Event{}, err
		}
		ev.Object, ev.PrevObject = obj, prev
		ev.Type = watch.Modified
		if prev == nil {
			ev.Type = watch.Added
		}
	case storage.EventDelete:
		// The deleted object is its last state at the revision of the delete: the store's
		// previous value when it sent one, else the cache's copy with that revision.
		var obj runtime.Object
		var err error
		if se.PrevValue != nil {
			obj, err = c.cfg.Decode(se.Key, se.PrevValue, se.Revision)
		} else if prev != nil {
			obj, err = withResourceVersion(prev, se.Revision)
		}
		if err != nil || obj == nil {
			if prev == nil {
				return Event{}, fmt.Errorf("delete of unknown key %s", se.Key)
			}
			obj = prev
		}
		ev.Type, ev.Object, ev.PrevObject = watch.Deleted, obj, prev
	}
	return ev, nil
}

// apply installs the events of one revision at once (one, or several when one write
// changed several keys, as a lease's expiry does): no list, consistent read or new
// watcher sees the revision half applied.
func (c *Cache) apply(group []Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ev := range group {
		if ev.Type == watch.Deleted {
			delete(c.items, ev.Key)
		} else {
			c.items[ev.Key] = ev.Object
		}
		// The window keeps the event without its serialisations: they live only as long as
		// the watchers that were sent the event hold it, not for the window's whole span.
		kept := ev
		kept.enc = nil
		c.push(kept)
	}
	c.rev = group[len(group)-1].Revision
	c.advanced()
	for _, ev := range group {
		c.dispatch(ev)
	}
}

func (c *Cache) push(ev Event) {
	capacity := len(c.window)
	if c.n == capacity {
		c.oldest = c.window[c.start].Revision
		c.start = (c.start + 1) % capacity
		c.n--
	}
	c.window[(c.start+c.n)%capacity] = ev
	c.n++
}

func (c *Cache) progress(rev int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rev > c.rev {
		c.rev = rev
		c.advanced()
	}
}

// advanced wakes everyone waiting for the revision to move; the caller holds c.mu.
func (c *Cache) advanced() {
	close(c.revCh)
	c.revCh = make(chan struct{})
}

// WaitFresh blocks until the cache has seen every change up to rev, asking the store
// for progress notifications when it supports them (a quiet prefix would otherwise never
// advance). It gives up after timeout.
func (c *Cache) WaitFresh(ctx context.Context, rev int64, timeout time.Duration) error {
	if err := c.WaitReady(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pr, _ := c.cfg.Store.(storage.ProgressRequester)
	for {
		c.mu.RLock()
		cur, ch := c.rev, c.revCh
		c.mu.RUnlock()
		if cur >= rev {
			return nil
		}
		if pr != nil {
			if err := pr.RequestProgress(ctx); err != nil && ctx.Err() == nil {
				c.cfg.Logger.Debug("watch cache: progress request failed", "err", err)
			}
		}
		select {
		case <-ch:
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("%w: watch cache %s at revision %d, waiting for %d", ErrNotFresh, c.cfg.Prefix, cur, rev)
		}
	}
}

// ErrNotFresh is returned by WaitFresh when the cache did not catch up in time.
var ErrNotFresh = errors.New("watch cache is not fresh enough")

func (c *Cache) bookmark() {
	c.mu.Lock()
	defer c.mu.Unlock()
	ev := Event{Type: watch.Bookmark, Revision: c.rev}
	for _, w := range c.watchers {
		// A bookmark below where the watcher resumed would move its client backwards;
		// one that finds the buffer full is simply skipped.
		if w.bookmarks && c.rev >= w.minRev {
			w.send(ev)
		}
	}
}

// dispatch hands ev to every interested watcher; the caller holds c.mu.
func (c *Cache) dispatch(ev Event) {
	for id, w := range c.watchers {
		out, ok := w.translate(ev)
		if !ok {
			continue
		}
		if !w.send(out) {
			w.stop()
			delete(c.watchers, id)
		}
	}
}

// WaitReady blocks until the first list has been loaded.
func (c *Cache) WaitReady(ctx context.Context) error {
	select {
	case <-c.readyCh:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("watch cache %s not ready: %w", c.cfg.Prefix, ctx.Err())
	}
}

// Revision returns the revision the cache has caught up to.
func (c *Cache) Revision() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.rev
}

// Len returns how many objects the cache holds (0 before its first list loaded).
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.items)
}

// List returns the objects under prefix (a sub-prefix of the cache's) that pass filter, sorted by key,
// and the revision the snapshot is at.
func (c *Cache) List(ctx context.Context, prefix string, filter Filter) ([]runtime.Object, int64, error) {
	if err := c.WaitReady(ctx); err != nil {
		return nil, 0, err
	}
	c.mu.RLock()
	keys := make([]string, 0, len(c.items))
	for k, obj := range c.items {
		if len(k) >= len(prefix) && k[:len(prefix)] == prefix && (filter == nil || filter(k, obj)) {
			keys = append(keys, k)
		}
	}
	out := make([]runtime.Object, len(keys))
	sort.Strings(keys)
	for i, k := range keys {
		out[i] = c.items[k]
	}
	rev := c.rev
	c.mu.RUnlock()
	return out, rev, nil
}

// Get returns the cached object at key.
func (c *Cache) Get(ctx context.Context, key string) (runtime.Object, int64, bool, error) {
	if err := c.WaitReady(ctx); err != nil {
		return nil, 0, false, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	obj, ok := c.items[key]
	return obj, c.rev, ok, nil
}

// Peek returns the cached object at key without waiting: ok is false when the cache
// has not loaded yet or holds no such key.
func (c *Cache) Peek(key string) (runtime.Object, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.ready {
		return nil, false
	}
	obj, ok := c.items[key]
	return obj, ok
}

// WatchOptions configures a watcher.
type WatchOptions struct {
	// Prefix restricts the watch to keys under it (a namespace).
	Prefix string
	// Filter selects objects (labels, fields); an object moving out of it is seen as Deleted.
	Filter Filter
	// AfterRevision resumes after this revision. Zero starts "now" with the current state sent first.
	AfterRevision int64
	// SendInitialEvents sends the current state as Added events, then a bookmark that marks
	// their end (InitialEventsEnd), whatever AfterRevision says about history.
	SendInitialEvents bool
	// Bookmarks asks for periodic bookmark events.
	Bookmarks bool
}

// Watch starts a watcher. It returns ErrTooOld (wrapped) when AfterRevision left the window.
func (c *Cache) Watch(ctx context.Context, opts WatchOptions) (*Watcher, error) {
	if err := c.WaitReady(ctx); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &Watcher{prefix: opts.Prefix, filter: opts.Filter, bookmarks: opts.Bookmarks,
		ch: make(chan Event, c.cfg.WatcherBuffer), done: make(chan struct{}), minRev: opts.AfterRevision}
	switch {
	case opts.SendInitialEvents || opts.AfterRevision == 0:
		keys := make([]string, 0, len(c.items))
		for k, obj := range c.items {
			if w.visible(k, obj) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		w.initial = make([]Event, 0, len(keys)+1)
		for _, k := range keys {
			w.initial = append(w.initial, Event{Type: watch.Added, Key: k, Object: c.items[k], Revision: c.rev})
		}
		if opts.SendInitialEvents {
			w.initial = append(w.initial, Event{Type: watch.Bookmark, Revision: c.rev, Key: InitialEventsEnd})
		}
		w.minRev = c.rev
	case opts.AfterRevision < c.oldest:
		return nil, fmt.Errorf("%w: %d (%d)", ErrTooOld, opts.AfterRevision, c.oldest)
	default:
		capacity := len(c.window)
		for i := 0; i < c.n; i++ {
			ev := c.window[(c.start+i)%capacity]
			if ev.Revision <= opts.AfterRevision {
				continue
			}
			if out, ok := w.translate(ev); ok {
				w.initial = append(w.initial, out)
			}
		}
	}
	c.nextID++
	id := c.nextID
	c.watchers[id] = w
	go func() {
		select {
		case <-ctx.Done():
		case <-w.done:
		}
		c.mu.Lock()
		if c.watchers[id] == w {
			delete(c.watchers, id)
			w.stop()
		}
		c.mu.Unlock()
	}()
	return w, nil
}

func (c *Cache) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, w := range c.watchers {
		w.stop()
		delete(c.watchers, id)
	}
}

// InitialEventsEnd is the Key of the bookmark that ends the initial events of a watch.
const InitialEventsEnd = "k8s.io/initial-events-end"

// Watcher receives the events of one watch.
type Watcher struct {
	prefix    string
	filter    Filter
	bookmarks bool
	minRev    int64
	initial   []Event
	ch        chan Event
	done      chan struct{}
	stopped   bool
	// ended holds why a watcher fed by the store ended (see Err).
	ended atomic.Pointer[error]
}

// Next returns the next event; ok is false when the watcher was closed (too slow, cache
// restarted or context done) and the client must resume.
func (w *Watcher) Next(ctx context.Context) (Event, bool) {
	if len(w.initial) > 0 {
		ev := w.initial[0]
		w.initial[0] = Event{}
		w.initial = w.initial[1:]
		return ev, true
	}
	select {
	case ev, ok := <-w.ch:
		return ev, ok
	case <-ctx.Done():
		return Event{}, false
	}
}

// Pending returns how many events are ready to be read without waiting.
func (w *Watcher) Pending() int { return len(w.initial) + len(w.ch) }

// Stop ends the watcher.
func (w *Watcher) Stop() {
	select {
	case <-w.done:
	default:
		close(w.done)
	}
}

// stop closes the event channel; the caller holds the cache lock.
func (w *Watcher) stop() {
	if !w.stopped {
		w.stopped = true
		close(w.ch)
	}
}

func (w *Watcher) send(ev Event) bool {
	if w.stopped {
		return false
	}
	select {
	case w.ch <- ev:
		return true
	default:
		return false
	}
}

func (w *Watcher) visible(key string, obj runtime.Object) bool {
	if len(key) < len(w.prefix) || key[:len(w.prefix)] != w.prefix {
		return false
	}
	return w.filter == nil || w.filter(key, obj)
}

// translate turns a cache event into what this watcher sees: objects moving into its filter
// are Added, objects moving out are Deleted.
func (w *Watcher) translate(ev Event) (Event, bool) {
	if ev.Revision <= w.minRev {
		return Event{}, false
	}
	if ev.Type == watch.Bookmark {
		return ev, w.bookmarks
	}
	cur := w.visible(ev.Key, ev.Object)
	prev := ev.PrevObject != nil && w.visible(ev.Key, ev.PrevObject)
	switch ev.Type {
	case watch.Added:
		return ev, cur
	case watch.Deleted:
		return ev, prev || cur
	default:
		switch {
		case cur && prev:
			return ev, true
		case cur:
			ev.Type = watch.Added
			return ev, true
		case prev:
			// As upstream: the last state the watcher could see, at the revision of the change.
			ev.Type = watch.Deleted
			if last, err := withResourceVersion(ev.PrevObject, ev.Revision); err == nil {
				ev.Object, ev.enc = last, nil
			}
			return ev, true
		}
		return Event{}, false
	}
}

// withResourceVersion returns a copy of obj whose resourceVersion is rev.
func withResourceVersion(obj runtime.Object, rev int64) (runtime.Object, error) {
	out := obj.DeepCopyObject()
	m, err := meta.Accessor(out)
	if err != nil {
		return nil, err
	}
	m.SetResourceVersion(strconv.FormatInt(rev, 10))
	return out, nil
}
