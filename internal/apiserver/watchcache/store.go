package watchcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubette/kubette/internal/storage"
)

// storeWatcherBuffer is the channel size of a watcher fed by the store: one watcher
// per store watch, so a small buffer only smooths the decoding ahead of the client.
const storeWatcherBuffer = 64

// WatchStore starts a watcher of a resource that has no cache: its initial state (when
// opts asks for one) is a list of the store and its changes come from a watch of the
// store on opts.Prefix, decoded for this watcher alone, as upstream's API server watches
// etcd for a resource whose watch cache is disabled. cfg gives the Store, Decode and
// Logger (its Prefix, Capacity and intervals are not used). The watcher sends no
// periodic bookmarks; it sends the bookmark that ends the initial events when
// opts.SendInitialEvents asks for them. A start revision that the store compacted ends
// the watcher at once, with an error from Err that wraps ErrTooOld. The watcher runs
// until ctx is done, Stop is called or the store's watch ends.
func WatchStore(ctx context.Context, cfg Config, opts WatchOptions) (*Watcher, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	w := &Watcher{prefix: opts.Prefix, filter: opts.Filter, bookmarks: opts.Bookmarks,
		ch: make(chan Event, storeWatcherBuffer), done: make(chan struct{}), minRev: opts.AfterRevision}
	if opts.SendInitialEvents || opts.AfterRevision == 0 {
		rev, err := w.listStore(ctx, cfg, opts.SendInitialEvents)
		if err != nil {
			return nil, err
		}
		w.minRev = rev
	}
	wctx, cancel := context.WithCancel(ctx)
	results, err := cfg.Store.Watch(wctx, opts.Prefix, w.minRev)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watch %s: %w", opts.Prefix, err)
	}
	go func() {
		defer cancel()
		defer close(w.ch)
		if err := w.feed(wctx, cfg, results); err != nil {
			w.ended.Store(&err)
		}
	}()
	return w, nil
}

// listStore reads the current state under the watcher's prefix into its initial events
// (Added, sorted by key) and returns the revision they are at.
func (w *Watcher) listStore(ctx context.Context, cfg Config, endBookmark bool) (int64, error) {
	var rev int64
	startKey := ""
	for {
		res, err := cfg.Store.List(ctx, w.prefix, storage.ListOptions{Revision: rev, Limit: 10000, StartKey: startKey})
		if err != nil {
			return 0, fmt.Errorf("list %s: %w", w.prefix, err)
		}
		rev = res.Revision
		for _, kv := range res.Items {
			obj, err := cfg.Decode(kv.Key, kv.Value, kv.ModRevision)
			if err != nil {
				cfg.Logger.Error("store watch: undecodable object skipped", "key", kv.Key, "err", err)
				continue
			}
			if w.visible(kv.Key, obj) {
				w.initial = append(w.initial, Event{Type: watch.Added, Key: kv.Key, Object: obj, Revision: rev})
			}
		}
		if !res.More || len(res.Items) == 0 {
			break
		}
		startKey = res.Items[len(res.Items)-1].Key + "\x00"
	}
	// The initial events carry the list's revision, as the cache's do.
	for i := range w.initial {
		w.initial[i].Revision = rev
	}
	if endBookmark {
		w.initial = append(w.initial, Event{Type: watch.Bookmark, Revision: rev, Key: InitialEventsEnd})
	}
	return rev, nil
}

// feed decodes the store's changes and hands those the watcher sees to its channel until
// ctx is done, the watcher is stopped or the store's watch ends; it returns why the
// store's watch ended (nil when ctx or Stop ended it).
func (w *Watcher) feed(ctx context.Context, cfg Config, results <-chan storage.WatchResult) error {
	for {
		var r storage.WatchResult
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case <-w.done:
			return nil
		case r, ok = <-results:
		}
		switch {
		case !ok:
			return errors.New("storage watch closed")
		case r.Err != nil:
			if errors.Is(r.Err, storage.ErrCompacted) {
				return fmt.Errorf("%w: %d: %w", ErrTooOld, w.minRev, r.Err)
			}
			return fmt.Errorf("storage watch: %w", r.Err)
		case r.Event.Key == "":
			continue // a progress notification: nothing to send without bookmarks
		}
		ev, err := w.fromStore(cfg.Decode, r.Event)
		if err != nil {
			cfg.Logger.Error("store watch: undecodable event skipped", "key", r.Event.Key, "err", err)
			continue
		}
		out, ok := w.translate(ev)
		if !ok {
			continue
		}
		select {
		case w.ch <- out:
		case <-ctx.Done():
			return nil
		case <-w.done:
			return nil
		}
	}
}

// fromStore turns a change from the store into an event for translate. Without a filter
// only the new state is decoded: the prefix alone decides what the watcher sees, and it
// sees every change under it as it is.
func (w *Watcher) fromStore(decode Decoder, se storage.Event) (Event, error) {
	ev := Event{Key: se.Key, Revision: se.Revision}
	var err error
	switch se.Type {
	case storage.EventPut:
		if ev.Object, err = decode(se.Key, se.Value, se.Revision); err != nil {
			return Event{}, err
		}
		ev.Type = watch.Modified
		if se.Created {
			ev.Type = watch.Added
			return ev, nil
		}
		ev.PrevObject = ev.Object
		if w.filter != nil && se.PrevValue != nil {
			var prev runtime.Object
			if prev, err = decode(se.Key, se.PrevValue, se.Revision); err != nil {
				return Event{}, err
			}
			ev.PrevObject = prev
		}
	case storage.EventDelete:
		if se.PrevValue == nil {
			return Event{}, fmt.Errorf("delete of %s at %d without its last value", se.Key, se.Revision)
		}
		if ev.Object, err = decode(se.Key, se.PrevValue, se.Revision); err != nil {
			return Event{}, err
		}
		ev.Type, ev.PrevObject = watch.Deleted, ev.Object
	}
	return ev, nil
}

// Err returns why a watcher fed by the store ended (wrapping ErrTooOld when its start
// revision was compacted), once Next reported the end; nil for a watcher that ended
// because its context or Stop ended it, and for watchers of a Cache.
func (w *Watcher) Err() error {
	if err := w.ended.Load(); err != nil {
		return *err
	}
	return nil
}
