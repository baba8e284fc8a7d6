package watchcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubette/kubette/internal/storage"
)

// watchStore starts a watcher fed by the fixture's store (under the fixture's prefix
// unless opts names one); the test stops it when it ends.
func (f *fixture) watchStore(store storage.Store, opts WatchOptions) *Watcher {
	f.t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = f.prefix
	}
	w, err := WatchStore(f.t.Context(), Config{Store: store, Decode: decodeConfigMap,
		Logger: slog.New(slog.NewTextHandler(testWriter{f.t}, nil))}, opts)
	if err != nil {
		f.t.Fatalf("WatchStore(%+v): %v", opts, err)
	}
	f.t.Cleanup(w.Stop)
	return w
}

// TestWatchStoreSeesWhatACacheWatcherSees runs a watcher of a cache and one of the store
// side by side, unfiltered and filtered, from now and resumed, and compares what they get.
func TestWatchStoreSeesWhatACacheWatcherSees(t *testing.T) {
	f := newFixture(t)
	f.put("ns", "a", labelX, "1")
	f.put("ns", "b", nil, "1")
	c := f.start(Config{})
	r0 := c.Revision()

	pairs := []struct {
		name          string
		cache, direct *Watcher
	}{
		{"from now", f.watch(c, WatchOptions{}), f.watchStore(f.store, WatchOptions{})},
		{"filtered from now", f.watch(c, WatchOptions{Filter: teamX}), f.watchStore(f.store, WatchOptions{Filter: teamX})},
		{"resumed", f.watch(c, WatchOptions{AfterRevision: r0}), f.watchStore(f.store, WatchOptions{AfterRevision: r0})},
		{"filtered resumed", f.watch(c, WatchOptions{Filter: teamX, AfterRevision: r0}),
			f.watchStore(f.store, WatchOptions{Filter: teamX, AfterRevision: r0})},
		{"namespace", f.watch(c, WatchOptions{Prefix: f.prefix + "other/"}),
			f.watchStore(f.store, WatchOptions{Prefix: f.prefix + "other/"})},
	}

	f.put("ns", "c", nil, "1")
	f.put("ns", "b", labelX, "2") // gains the label
	f.put("ns", "b", labelX, "3") // changes while labelled
	f.put("ns", "b", nil, "4")    // loses the label
	f.put("other", "o", labelX, "1")
	f.del("ns", "a") // deleted while labelled
	f.del("ns", "c") // deleted while not
	f.del("other", "o")
	// The last write, which every watcher sees: the end of the comparison.
	end := f.put("other", "end", labelX, "1")

	for _, p := range pairs {
		var want []string
		for {
			e := f.next(p.cache)
			want = append(want, f.describe(e))
			if e.Revision == end {
				break
			}
		}
		for i, w := range want {
			if got := f.describe(f.next(p.direct)); got != w {
				t.Fatalf("%s: event %d of the store watcher: %q, the cache watcher's: %q", p.name, i, got, w)
			}
		}
		if len(want) < 2 {
			t.Errorf("%s: only %d events", p.name, len(want))
		}
	}
	var ws []*Watcher
	for _, p := range pairs[:4] {
		ws = append(ws, p.cache, p.direct)
	}
	f.quiet(ws...)
}

// TestWatchStoreTranslation checks the store watcher's events one by one: the initial
// state, a label gained and lost under a filter (Added, Deleted with the last matching
// content and the revision of the change), deletions with the last content.
func TestWatchStoreTranslation(t *testing.T) {
	f := newFixture(t)
	rA := f.put("ns", "a", labelX, "1")
	rB := f.put("ns", "b", nil, "1")
	all := f.watchStore(f.store, WatchOptions{})
	x := f.watchStore(f.store, WatchOptions{Filter: teamX})
	// The initial events carry the list's revision; their objects keep their own.
	first := f.next(all)
	snap := first.Revision
	if d, want := f.describe(first), ev(watch.Added, "ns/a", "1", rA, snap); d != want {
		t.Fatalf("first initial event %q, want %q", d, want)
	}
	f.expect(all, ev(watch.Added, "ns/b", "1", rB, snap))
	f.expect(x, ev(watch.Added, "ns/a", "1", rA, snap))

	rB2 := f.put("ns", "b", labelX, "2")
	rB3 := f.put("ns", "b", nil, "3")
	rA2 := f.del("ns", "a")
	f.expect(all,
		ev(watch.Modified, "ns/b", "2", rB2, rB2),
		ev(watch.Modified, "ns/b", "3", rB3, rB3),
		ev(watch.Deleted, "ns/a", "1", rA2, rA2),
	)
	f.expect(x, ev(watch.Added, "ns/b", "2", rB2, rB2))
	out := f.expect(x, ev(watch.Deleted, "ns/b", "2", rB3, rB3))[0]
	if l := out.Object.(*corev1.ConfigMap).Labels; l["team"] != "x" {
		t.Errorf("Deleted object has labels %v, want the ones that matched", l)
	}
	f.expect(x, ev(watch.Deleted, "ns/a", "1", rA2, rA2))
	f.quiet(all, x)
}

func TestWatchStoreSendInitialEvents(t *testing.T) {
	f := newFixture(t)
	rA := f.put("ns", "a", labelX, "1")
	f.put("ns", "c", nil, "1")
	// SendInitialEvents sends the current state whatever AfterRevision says.
	w := f.watchStore(f.store, WatchOptions{Filter: teamX, SendInitialEvents: true, AfterRevision: rA})
	empty := f.watchStore(f.store, WatchOptions{Prefix: f.prefix + "empty/", SendInitialEvents: true})
	first := f.next(w)
	snap := first.Revision
	if d, want := f.describe(first), ev(watch.Added, "ns/a", "1", rA, snap); d != want {
		t.Fatalf("first event %q, want %q", d, want)
	}
	f.expect(w, fmt.Sprintf("BOOKMARK %s rev=%d", InitialEventsEnd, snap))
	if e := f.next(empty); e.Type != watch.Bookmark || e.Key != InitialEventsEnd || e.Revision < snap {
		t.Fatalf("empty prefix: first event %s, want the end bookmark at >= %d", f.describe(e), snap)
	}
	rC := f.put("ns", "c", labelX, "2")
	rE := f.put("empty", "e", nil, "1")
	f.expect(w, ev(watch.Added, "ns/c", "2", rC, rC))
	f.expect(empty, ev(watch.Added, "empty/e", "1", rE, rE))
	f.quiet(w)
}

// compactedStore is the fixture's store whose watches report at once that their start
// revision was compacted.
type compactedStore struct{ storage.Store }

// Watch returns a channel holding one ErrCompacted result.
func (compactedStore) Watch(context.Context, string, int64) (<-chan storage.WatchResult, error) {
	ch := make(chan storage.WatchResult, 1)
	ch <- storage.WatchResult{Err: fmt.Errorf("etcd watch: %w", storage.ErrCompacted)}
	close(ch)
	return ch, nil
}

func TestWatchStoreCompacted(t *testing.T) {
	f := newFixture(t)
	rev := f.put("ns", "a", nil, "1")
	w := f.watchStore(compactedStore{f.store}, WatchOptions{AfterRevision: rev})
	f.expectClosed(w, "compacted start")
	if err := w.Err(); !errors.Is(err, ErrTooOld) || !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("Err() = %v, want ErrTooOld wrapping ErrCompacted", err)
	}
}

func TestWatchStoreStopAndCancel(t *testing.T) {
	f := newFixture(t)
	f.put("ns", "a", nil, "1")
	stopped := f.watchStore(f.store, WatchOptions{AfterRevision: f.put("ns", "a", nil, "2")})
	stopped.Stop()
	f.expectClosed(stopped, "Stop")

	ctx, cancel := context.WithCancel(context.Background())
	cancelled, err := WatchStore(ctx, Config{Store: f.store, Decode: decodeConfigMap}, WatchOptions{Prefix: f.prefix})
	if err != nil {
		cancel()
		t.Fatalf("WatchStore: %v", err)
	}
	rA3 := f.put("ns", "a", nil, "3")
	first := f.next(cancelled) // the initial state
	f.expect(cancelled, ev(watch.Modified, "ns/a", "3", rA3, rA3))
	if first.Type != watch.Added {
		t.Errorf("first event %s, want the initial Added", f.describe(first))
	}
	cancel()
	f.expectClosed(cancelled, "cancel")
	for _, w := range []*Watcher{stopped, cancelled} {
		if err := w.Err(); err != nil {
			t.Errorf("Err() after Stop or cancel = %v, want nil", err)
		}
	}
}
