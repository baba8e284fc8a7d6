package watchcache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubette/kubette/internal/storage"
	"github.com/kubette/kubette/internal/storage/etcd"
)

// Timeouts of the tests. Waits poll or block with these deadlines; nothing sleeps a fixed time
// to let events arrive.
const (
	waitTimeout  = 10 * time.Second
	pollInterval = 2 * time.Millisecond
)

// sharedEtcd is one embedded etcd for the whole package; every test works under its own prefix.
var sharedEtcd *etcd.Embedded

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "watchcache-etcd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "temp dir:", err)
		os.Exit(1)
	}
	e, err := etcd.StartEmbedded(context.Background(), etcd.EmbeddedConfig{DataDir: dir, UnsafeNoFsync: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start embedded etcd:", err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	sharedEtcd = e
	code := m.Run()
	e.Close()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

var prefixSeq atomic.Int64

// fixture is one test's store, key prefix and helpers.
type fixture struct {
	t       *testing.T
	store   *etcd.Store
	prefix  string
	markers int // marker changes written by quiet
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	s, err := sharedEtcd.Store()
	if err != nil {
		t.Fatalf("Embedded.Store: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Store.Close: %v", err)
		}
	})
	name := strings.ReplaceAll(t.Name(), "/", "_")
	return &fixture{t: t, store: s, prefix: fmt.Sprintf("/registry/watchcache-test/%s-%d/", name, prefixSeq.Add(1))}
}

// decodeConfigMap is the tests' Decoder: the stored bytes are the JSON of a ConfigMap.
func decodeConfigMap(key string, value []byte, rev int64) (kruntime.Object, error) {
	cm := &corev1.ConfigMap{}
	if err := json.Unmarshal(value, cm); err != nil {
		return nil, fmt.Errorf("decode %s: %w", key, err)
	}
	cm.ResourceVersion = strconv.FormatInt(rev, 10)
	return cm, nil
}

// testWriter sends the cache's log lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// running is a cache whose Run goroutine the test controls.
type running struct {
	*Cache
	cancel context.CancelFunc
	done   chan struct{}
}

// start runs a cache over the fixture's prefix and waits until it is ready. The cache stops
// (and Run must return) when the test ends.
func (f *fixture) start(cfg Config) *running {
	f.t.Helper()
	cfg.Prefix, cfg.Store, cfg.Decode = f.prefix, f.store, decodeConfigMap
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{f.t}, nil))
	}
	c := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Cache: c, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		c.Run(ctx)
	}()
	f.t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(waitTimeout):
			f.t.Errorf("Run did not return %v after its context was cancelled", waitTimeout)
		}
	})
	wctx, wcancel := context.WithTimeout(context.Background(), waitTimeout)
	defer wcancel()
	if err := c.WaitReady(wctx); err != nil {
		f.t.Fatalf("WaitReady: %v", err)
	}
	return r
}

func (f *fixture) key(ns, name string) string { return f.prefix + ns + "/" + name }

// short strips the fixture's prefix from a key.
func (f *fixture) short(key string) string { return strings.TrimPrefix(key, f.prefix) }

func configMap(ns, name string, labels map[string]string, v string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Data:       map[string]string{"v": v},
	}
}

// tryPut creates or updates ns/name and returns the revision of the write. It is safe to call from
// any goroutine; errors are returned rather than reported.
func (f *fixture) tryPut(ns, name string, labels map[string]string, v string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	key := f.key(ns, name)
	data, err := json.Marshal(configMap(ns, name, labels, v))
	if err != nil {
		return 0, err
	}
	kv, err := f.store.Get(ctx, key)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return f.store.Create(ctx, key, data)
	case err != nil:
		return 0, err
	}
	return f.store.Update(ctx, key, data, kv.ModRevision)
}

func (f *fixture) put(ns, name string, labels map[string]string, v string) int64 {
	f.t.Helper()
	rev, err := f.tryPut(ns, name, labels, v)
	if err != nil {
		f.t.Fatalf("put %s/%s: %v", ns, name, err)
	}
	return rev
}

func (f *fixture) tryDel(ns, name string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	_, rev, err := f.store.Delete(ctx, f.key(ns, name), 0)
	return rev, err
}

func (f *fixture) del(ns, name string) int64 {
	f.t.Helper()
	rev, err := f.tryDel(ns, name)
	if err != nil {
		f.t.Fatalf("delete %s/%s: %v", ns, name, err)
	}
	return rev
}

// waitRev polls until the cache has applied every change up to rev.
func (f *fixture) waitRev(c *running, rev int64) {
	f.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for c.Revision() < rev {
		if time.Now().After(deadline) {
			f.t.Fatalf("cache at revision %d, want >= %d after %v", c.Revision(), rev, waitTimeout)
		}
		time.Sleep(pollInterval)
	}
}

// watch starts a watcher that the test stops when it ends.
func (f *fixture) watch(c *running, opts WatchOptions) *Watcher {
	f.t.Helper()
	w, err := c.Watch(f.t.Context(), opts)
	if err != nil {
		f.t.Fatalf("Watch(%+v): %v", opts, err)
	}
	f.t.Cleanup(w.Stop)
	return w
}

// next returns the watcher's next event, failing the test when none comes in time.
func (f *fixture) next(w *Watcher) Event {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ev, ok := w.Next(ctx)
	if !ok {
		f.t.Fatalf("watcher closed or no event within %v", waitTimeout)
	}
	return ev
}

// describe renders an event as "TYPE ns/name v=V rv=RV rev=REV" (bookmarks: "BOOKMARK key rev=REV").
func (f *fixture) describe(ev Event) string {
	if ev.Type == watch.Bookmark {
		return fmt.Sprintf("BOOKMARK %s rev=%d", ev.Key, ev.Revision)
	}
	return fmt.Sprintf("%s %s %s rev=%d", ev.Type, f.short(ev.Key), describeObject(ev.Object), ev.Revision)
}

func describeObject(obj kruntime.Object) string {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return fmt.Sprintf("<%T>", obj)
	}
	return fmt.Sprintf("v=%s rv=%s", cm.Data["v"], cm.ResourceVersion)
}

func ev(typ watch.EventType, key, v string, rv, rev int64) string {
	return fmt.Sprintf("%s %s v=%s rv=%d rev=%d", typ, key, v, rv, rev)
}

// expect reads len(want) events and compares them with want.
func (f *fixture) expect(w *Watcher, want ...string) []Event {
	f.t.Helper()
	got := make([]Event, 0, len(want))
	for i, wantEv := range want {
		e := f.next(w)
		got = append(got, e)
		if d := f.describe(e); d != wantEv {
			f.t.Fatalf("event %d: got %q, want %q", i, d, wantEv)
		}
	}
	return got
}

// quiet writes a marker change (key marker/m, labelled team=x) and checks that it is the next
// event each watcher sees: nothing else was queued before it. It returns the marker's revision.
func (f *fixture) quiet(ws ...*Watcher) int64 {
	f.t.Helper()
	f.markers++
	v := strconv.Itoa(f.markers)
	rev := f.put("marker", "m", labelX, v)
	typ := watch.Modified
	if f.markers == 1 {
		typ = watch.Added
	}
	for _, w := range ws {
		f.expect(w, ev(typ, "marker/m", v, rev, rev))
	}
	return rev
}

func keysOf(objs []kruntime.Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		cm := o.(*corev1.ConfigMap)
		out[i] = cm.Namespace + "/" + cm.Name + "@" + cm.ResourceVersion
	}
	return out
}

func teamX(_ string, obj kruntime.Object) bool {
	return obj.(*corev1.ConfigMap).Labels["team"] == "x"
}

var labelX = map[string]string{"team": "x"}

func TestListSortedPrefixAndFilter(t *testing.T) {
	f := newFixture(t)
	rB2 := f.put("ns2", "b", labelX, "1")
	rC1 := f.put("ns1", "c", nil, "1")
	rA1 := f.put("ns1", "a", labelX, "1")
	rA2 := f.put("ns2", "a", nil, "1")
	rX := f.put("ns10", "x", labelX, "1") // "ns1/" must not match it
	c := f.start(Config{})
	ctx := t.Context()

	check := func(prefix string, filter Filter, want ...string) {
		t.Helper()
		objs, rev, err := c.List(ctx, prefix, filter)
		if err != nil {
			t.Fatalf("List(%q): %v", prefix, err)
		}
		if got := keysOf(objs); !slices.Equal(got, want) {
			t.Errorf("List(%q) = %v, want %v", f.short(prefix), got, want)
		}
		if rev < rX {
			t.Errorf("List(%q) revision %d, want >= %d", f.short(prefix), rev, rX)
		}
	}
	s := func(k string, rev int64) string { return k + "@" + strconv.FormatInt(rev, 10) }
	check(f.prefix, nil, s("ns1/a", rA1), s("ns1/c", rC1), s("ns10/x", rX), s("ns2/a", rA2), s("ns2/b", rB2))
	check(f.prefix+"ns1/", nil, s("ns1/a", rA1), s("ns1/c", rC1))
	check(f.prefix+"ns2/", nil, s("ns2/a", rA2), s("ns2/b", rB2))
	check(f.prefix+"none/", nil)
	check(f.prefix, teamX, s("ns1/a", rA1), s("ns10/x", rX), s("ns2/b", rB2))
	check(f.prefix+"ns2/", teamX, s("ns2/b", rB2))
	check(f.prefix+"ns1/c", nil, s("ns1/c", rC1))

	// Live changes reach lists.
	rC2 := f.put("ns1", "c", labelX, "2")
	rDel := f.del("ns2", "a")
	f.waitRev(c, rDel)
	check(f.prefix, teamX, s("ns1/a", rA1), s("ns1/c", rC2), s("ns10/x", rX), s("ns2/b", rB2))
	check(f.prefix+"ns2/", nil, s("ns2/b", rB2))

	if _, _, ok, err := c.Get(ctx, f.key("ns2", "a")); err != nil || ok {
		t.Errorf("Get of deleted key: ok=%v err=%v", ok, err)
	}
	obj, rev, ok, err := c.Get(ctx, f.key("ns1", "c"))
	if err != nil || !ok {
		t.Fatalf("Get ns1/c: ok=%v err=%v", ok, err)
	}
	if d := describeObject(obj); d != fmt.Sprintf("v=2 rv=%d", rC2) || rev < rDel {
		t.Errorf("Get ns1/c = %s at %d, want v=2 rv=%d at >= %d", d, rev, rC2, rDel)
	}
}

func TestWatchFromNowThenLive(t *testing.T) {
	f := newFixture(t)
	rB := f.put("ns", "b", nil, "1")
	rA := f.put("ns", "a", nil, "1")
	c := f.start(Config{})
	snap := c.Revision()
	if snap < rA {
		t.Fatalf("cache revision %d after WaitReady, want >= %d", snap, rA)
	}
	w := f.watch(c, WatchOptions{})
	initial := f.expect(w,
		ev(watch.Added, "ns/a", "1", rA, snap),
		ev(watch.Added, "ns/b", "1", rB, snap),
	)
	for _, e := range initial {
		if e.PrevObject != nil {
			t.Errorf("initial event %s has a PrevObject", f.describe(e))
		}
	}

	rC := f.put("ns", "c", nil, "1")
	rA2 := f.put("ns", "a", nil, "2")
	rDel := f.del("ns", "b")
	got := f.expect(w,
		ev(watch.Added, "ns/c", "1", rC, rC),
		ev(watch.Modified, "ns/a", "2", rA2, rA2),
		// Deleted carries the last state with the revision of the delete.
		ev(watch.Deleted, "ns/b", "1", rDel, rDel),
	)
	if got[0].PrevObject != nil {
		t.Errorf("Added has PrevObject %s", describeObject(got[0].PrevObject))
	}
	if d := describeObject(got[1].PrevObject); d != fmt.Sprintf("v=1 rv=%d", rA) {
		t.Errorf("Modified PrevObject = %s, want v=1 rv=%d", d, rA)
	}
	if d := describeObject(got[2].PrevObject); d != fmt.Sprintf("v=1 rv=%d", rB) {
		t.Errorf("Deleted PrevObject = %s, want v=1 rv=%d", d, rB)
	}
	f.quiet(w)
}

func TestWatchResume(t *testing.T) {
	f := newFixture(t)
	c := f.start(Config{})
	r0 := c.Revision()
	r1 := f.put("ns", "a", nil, "1")
	r2 := f.put("ns", "b", nil, "1")
	r3 := f.put("ns", "a", nil, "2")
	r4 := f.del("ns", "b")
	r5 := f.put("ns", "c", nil, "1")
	f.waitRev(c, r5)
	history := []struct {
		rev int64
		ev  string
	}{
		{r1, ev(watch.Added, "ns/a", "1", r1, r1)},
		{r2, ev(watch.Added, "ns/b", "1", r2, r2)},
		{r3, ev(watch.Modified, "ns/a", "2", r3, r3)},
		{r4, ev(watch.Deleted, "ns/b", "1", r4, r4)},
		{r5, ev(watch.Added, "ns/c", "1", r5, r5)},
	}
	var watchers []*Watcher
	for _, after := range []int64{r0, r1, r2, r3, r4, r5} {
		var want []string
		for _, h := range history {
			if h.rev > after {
				want = append(want, h.ev)
			}
		}
		w := f.watch(c, WatchOptions{AfterRevision: after})
		if w.Pending() != len(want) {
			t.Errorf("resume after %d: %d events pending, want %d", after, w.Pending(), len(want))
		}
		f.expect(w, want...)
		watchers = append(watchers, w)
	}
	// Every resumed watcher goes on with live events, and had nothing more queued.
	r6 := f.put("ns", "c", nil, "2")
	for _, w := range watchers {
		f.expect(w, ev(watch.Modified, "ns/c", "2", r6, r6))
	}
	f.quiet(watchers...)

	// A resume within a namespace replays only that namespace.
	rz1 := f.put("other", "z", nil, "1")
	w := f.watch(c, WatchOptions{AfterRevision: r2, Prefix: f.prefix + "other/"})
	rz2 := f.put("other", "z", nil, "2")
	f.expect(w, ev(watch.Added, "other/z", "1", rz1, rz1), ev(watch.Modified, "other/z", "2", rz2, rz2))
}

func TestWatchTooOld(t *testing.T) {
	f := newFixture(t)
	c := f.start(Config{Capacity: 4})
	r0 := c.Revision()
	revs := make([]int64, 10)
	for i := range revs {
		revs[i] = f.put("ns", "k", nil, strconv.Itoa(i))
	}
	f.waitRev(c, revs[9])

	// The window holds the last four events (revs[6..9]); revs[5] was the last one evicted, so a
	// resume must start at revs[5] or later.
	for _, after := range []int64{r0, revs[0], revs[4]} {
		w, err := c.Watch(t.Context(), WatchOptions{AfterRevision: after})
		if !errors.Is(err, ErrTooOld) {
			if w != nil {
				w.Stop()
			}
			t.Errorf("Watch after %d (window after %d): err = %v, want ErrTooOld", after, revs[5], err)
		}
	}
	var resumed []*Watcher
	for _, start := range []int{5, 8, 9} {
		w := f.watch(c, WatchOptions{AfterRevision: revs[start]})
		var want []string
		for i := start + 1; i < len(revs); i++ {
			want = append(want, ev(watch.Modified, "ns/k", strconv.Itoa(i), revs[i], revs[i]))
		}
		f.expect(w, want...)
		resumed = append(resumed, w)
	}
	m := f.quiet(resumed...)
	// A watch from "now" is never too old.
	w := f.watch(c, WatchOptions{})
	snap := c.Revision()
	f.expect(w, ev(watch.Added, "marker/m", "1", m, snap), ev(watch.Added, "ns/k", "9", revs[9], snap))
}

func TestWatchFilterTransitions(t *testing.T) {
	f := newFixture(t)
	c := f.start(Config{})
	r0 := c.Revision()
	w := f.watch(c, WatchOptions{Filter: teamX})
	all := f.watch(c, WatchOptions{})

	f.put("ns", "p", nil, "1")
	f.put("ns", "q", nil, "1")
	rp2 := f.put("ns", "p", labelX, "2") // gains the label
	f.put("ns", "q", map[string]string{"team": "y"}, "2")
	rp3 := f.put("ns", "p", labelX, "3") // changes while labelled
	rp4 := f.put("ns", "p", nil, "4")    // loses the label
	f.del("ns", "q")
	f.del("ns", "p") // deleted while not matching
	rz1 := f.put("ns", "z", labelX, "1")
	rz2 := f.del("ns", "z")
	f.waitRev(c, rz2)

	check := func(w *Watcher) {
		t.Helper()
		f.expect(w,
			ev(watch.Added, "ns/p", "2", rp2, rp2),
			ev(watch.Modified, "ns/p", "3", rp3, rp3),
		)
		// The object leaving the filter is seen as Deleted, as upstream: with the last content that
		// matched the filter and the revision of the change.
		out := f.expect(w, ev(watch.Deleted, "ns/p", "3", rp4, rp4))[0]
		if l := out.Object.(*corev1.ConfigMap).Labels; l["team"] != "x" {
			t.Errorf("Deleted object has labels %v, want the ones that matched", l)
		}
		// The cached states are not modified.
		if d := describeObject(out.PrevObject); d != fmt.Sprintf("v=3 rv=%d", rp3) {
			t.Errorf("Deleted PrevObject = %s, want v=3 rv=%d", d, rp3)
		}
		f.expect(w,
			ev(watch.Added, "ns/z", "1", rz1, rz1),
			ev(watch.Deleted, "ns/z", "1", rz2, rz2),
		)
	}
	check(w)
	// The same translation applies to events replayed from the window.
	replayed := f.watch(c, WatchOptions{Filter: teamX, AfterRevision: r0})
	check(replayed)

	// The unfiltered watcher saw all ten changes.
	for i := range 10 {
		if e := f.next(all); e.Type == watch.Bookmark {
			t.Fatalf("event %d is a bookmark", i)
		}
	}
	f.quiet(w, replayed, all)
}

func TestSendInitialEvents(t *testing.T) {
	f := newFixture(t)
	rA := f.put("ns", "a", labelX, "1")
	f.put("ns", "c", nil, "1")
	rB := f.put("ns", "b", labelX, "1")
	c := f.start(Config{})
	snap := c.Revision()

	now := f.watch(c, WatchOptions{Filter: teamX, SendInitialEvents: true})
	// SendInitialEvents sends the current state whatever AfterRevision says.
	old := f.watch(c, WatchOptions{Filter: teamX, SendInitialEvents: true, AfterRevision: rA})
	empty := f.watch(c, WatchOptions{Prefix: f.prefix + "empty/", SendInitialEvents: true})
	for _, w := range []*Watcher{now, old} {
		f.expect(w,
			ev(watch.Added, "ns/a", "1", rA, snap),
			ev(watch.Added, "ns/b", "1", rB, snap),
			fmt.Sprintf("BOOKMARK %s rev=%d", InitialEventsEnd, snap),
		)
	}
	// No matching object: only the end bookmark.
	f.expect(empty, fmt.Sprintf("BOOKMARK %s rev=%d", InitialEventsEnd, snap))

	// Then live events.
	rC := f.put("ns", "c", labelX, "2")
	rE := f.put("empty", "e", nil, "1")
	for _, w := range []*Watcher{now, old} {
		f.expect(w, ev(watch.Added, "ns/c", "2", rC, rC))
	}
	f.expect(empty, ev(watch.Added, "empty/e", "1", rE, rE))
	f.quiet(now, old)
}

func TestBookmarks(t *testing.T) {
	f := newFixture(t)
	c := f.start(Config{BookmarkInterval: 50 * time.Millisecond})
	wb := f.watch(c, WatchOptions{Bookmarks: true})
	wn := f.watch(c, WatchOptions{})

	const writes = 30
	lastRev := make(chan int64, 1)
	var writer sync.WaitGroup
	t.Cleanup(writer.Wait) // before the store closes
	writer.Go(func() {
		var rev int64
		for i := range writes {
			r, err := f.tryPut("ns", "k", nil, strconv.Itoa(i))
			if err != nil {
				t.Errorf("put: %v", err)
				break
			}
			rev = r
			time.Sleep(10 * time.Millisecond) // spread the writes over several bookmark intervals
		}
		lastRev <- rev
	})

	var (
		maxRev, lastBookmark int64
		bookmarks, events    int
		final                int64 = -1
	)
	for events < writes || bookmarks < 5 {
		e := f.next(wb)
		switch e.Type {
		case watch.Bookmark:
			bookmarks++
			if e.Key != "" {
				t.Errorf("periodic bookmark has key %q", e.Key)
			}
			if e.Revision < maxRev {
				t.Fatalf("bookmark at %d after an event at %d", e.Revision, maxRev)
			}
			if e.Revision < lastBookmark {
				t.Errorf("bookmark at %d after a bookmark at %d", e.Revision, lastBookmark)
			}
			lastBookmark = e.Revision
		default:
			events++
			if e.Revision <= maxRev {
				t.Errorf("event at %d after one at %d", e.Revision, maxRev)
			}
			maxRev = e.Revision
		}
		if final < 0 && events == writes {
			final = <-lastRev
			if maxRev != final {
				t.Errorf("last event at %d, want %d", maxRev, final)
			}
		}
	}
	if final < 0 {
		final = <-lastRev
	}
	// While idle, bookmarks carry the cache's revision.
	deadline := time.Now().Add(waitTimeout)
	for {
		e := f.next(wb)
		if e.Type != watch.Bookmark {
			t.Fatalf("unexpected event %s", f.describe(e))
		}
		if e.Revision >= final {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle bookmarks at %d, want the cache revision %d", e.Revision, final)
		}
	}

	// The watcher without bookmarks saw exactly the writes, none of the bookmarks.
	for i := range writes {
		e := f.next(wn)
		if e.Type == watch.Bookmark {
			t.Fatalf("watcher without Bookmarks got %s", f.describe(e))
		}
		if e.Object.(*corev1.ConfigMap).Data["v"] != strconv.Itoa(i) {
			t.Fatalf("event %d: %s", i, f.describe(e))
		}
	}
	f.quiet(wn)
}

func TestSlowWatcherIsClosed(t *testing.T) {
	f := newFixture(t)
	c := f.start(Config{WatcherBuffer: 2})
	slow := f.watch(c, WatchOptions{})
	fast := f.watch(c, WatchOptions{})
	revs := make([]int64, 20)
	for i := range revs {
		revs[i] = f.put("ns", "k", nil, strconv.Itoa(i))
		typ := watch.Modified
		if i == 0 {
			typ = watch.Added
		}
		// The fast watcher keeps up: it reads each change before the next one is made.
		f.expect(fast, ev(typ, "ns/k", strconv.Itoa(i), revs[i], revs[i]))
	}
	// The slow watcher gets what fit in its buffer, then the end.
	f.expect(slow,
		ev(watch.Added, "ns/k", "0", revs[0], revs[0]),
		ev(watch.Modified, "ns/k", "1", revs[1], revs[1]),
	)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if e, ok := slow.Next(ctx); ok {
		t.Fatalf("slow watcher still open after its buffer overflowed: %s", f.describe(e))
	}
	if ctx.Err() != nil {
		t.Fatal("Next on the closed watcher waited for its context")
	}
	// The fast watcher is unaffected, and the slow one can resume where it stopped.
	r := f.put("ns", "k", nil, "20")
	f.expect(fast, ev(watch.Modified, "ns/k", "20", r, r))
	resumed := f.watch(c, WatchOptions{AfterRevision: revs[1]})
	for i := 2; i < len(revs); i++ {
		f.expect(resumed, ev(watch.Modified, "ns/k", strconv.Itoa(i), revs[i], revs[i]))
	}
	f.expect(resumed, ev(watch.Modified, "ns/k", "20", r, r))
}

// expectClosed drains w and fails unless Next reports the end before the deadline.
func (f *fixture) expectClosed(w *Watcher, what string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for {
		if _, ok := w.Next(ctx); !ok {
			if ctx.Err() != nil {
				f.t.Fatalf("%s: watcher not closed within %v", what, waitTimeout)
			}
			return
		}
	}
}

func TestStopAndCancel(t *testing.T) {
	f := newFixture(t)
	c := f.start(Config{})
	f.put("ns", "a", nil, "1")

	// Stop ends a watcher, also one with events in flight; a second Stop is harmless.
	stopped := f.watch(c, WatchOptions{})
	r2 := f.put("ns", "a", nil, "2")
	stopped.Stop()
	stopped.Stop()
	f.expectClosed(stopped, "Stop")

	// Cancelling the watch's context ends it.
	wctx, wcancel := context.WithCancel(context.Background())
	cancelled, err := c.Watch(wctx, WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wcancel()
	f.expectClosed(cancelled, "context cancelled")

	// A cancelled Next context only ends that call.
	w := f.watch(c, WatchOptions{AfterRevision: r2})
	done, cancelNext := context.WithCancel(context.Background())
	cancelNext()
	if e, ok := w.Next(done); ok {
		t.Fatalf("Next with a done context returned %s", f.describe(e))
	}
	r := f.put("ns", "a", nil, "3")
	f.expect(w, ev(watch.Modified, "ns/a", "3", r, r))

	// Watchers leave no goroutine behind once stopped or cancelled.
	before := runtime.NumGoroutine()
	const n = 100
	ws := make([]*Watcher, n)
	ctx, cancelAll := context.WithCancel(context.Background())
	for i := range ws {
		wctx := context.Background()
		if i%2 == 1 {
			wctx = ctx
		}
		if ws[i], err = c.Watch(wctx, WatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i += 2 {
		ws[i].Stop()
	}
	cancelAll()
	for i, w := range ws {
		f.expectClosed(w, fmt.Sprintf("watcher %d", i))
	}
	deadline := time.Now().Add(waitTimeout)
	for runtime.NumGoroutine() > before+10 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after stopping %d watchers, %d before", runtime.NumGoroutine(), n, before)
		}
		time.Sleep(pollInterval)
	}

	// Cancelling Run's context closes every watcher, and Run returns.
	w1 := f.watch(c, WatchOptions{})
	w2 := f.watch(c, WatchOptions{Bookmarks: true, Filter: teamX})
	c.cancel()
	select {
	case <-c.done:
	case <-time.After(waitTimeout):
		t.Fatalf("Run did not return within %v of its context being cancelled", waitTimeout)
	}
	f.expectClosed(w1, "Run stopped")
	f.expectClosed(w2, "Run stopped")
}

func TestConcurrentWritersAndWatchers(t *testing.T) {
	f := newFixture(t)
	c := f.start(Config{WatcherBuffer: 4096})
	const (
		writers  = 8
		updates  = 50
		watchers = 20
	)
	nsOf := func(i int) string { return fmt.Sprintf("ns%d", i%2) }
	nameOf := func(i int) string { return fmt.Sprintf("w%d", i) }

	// Watchers: every other one watches a single namespace; every fourth one filters on the label
	// the writers toggle; they all start before the writers.
	type result struct {
		last   map[string]Event // by short key
		counts map[string]int
		err    error
	}
	type watcherSpec struct {
		opts WatchOptions
		ns   string
	}
	specs := make([]watcherSpec, watchers)
	for i := range specs {
		if i%2 == 1 {
			specs[i].ns = "ns1"
			specs[i].opts.Prefix = f.prefix + "ns1/"
		}
		if i%4 == 2 {
			specs[i].opts.Filter = teamX
		}
	}
	ws := make([]*Watcher, watchers)
	for i := range ws {
		ws[i] = f.watch(c, specs[i].opts)
	}

	// Writers: each owns one key, creates it, updates it (toggling the label) and, for some,
	// deletes it. final is the last event each key should show.
	finals := make([]string, writers)
	finalRevs := make([]int64, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			ns, name := nsOf(i), nameOf(i)
			var rev int64
			var err error
			for u := 0; u <= updates; u++ {
				labels := map[string]string{"team": "y"}
				if u%3 == 0 || u >= updates-1 { // labelled for the last two writes
					labels = labelX
				}
				if rev, err = f.tryPut(ns, name, labels, strconv.Itoa(u)); err != nil {
					t.Errorf("writer %d: %v", i, err)
					return
				}
			}
			finals[i] = ev(watch.Modified, ns+"/"+name, strconv.Itoa(updates), rev, rev)
			if i%4 == 3 {
				if rev, err = f.tryDel(ns, name); err != nil {
					t.Errorf("writer %d: delete: %v", i, err)
					return
				}
				finals[i] = ev(watch.Deleted, ns+"/"+name, strconv.Itoa(updates), rev, rev)
			}
			finalRevs[i] = rev
		})
	}

	// Readers run while the writers write; each stops at the marker written once the writers are
	// done, which every watcher sees (namespace ns1, label team=x).
	const markerKey = "ns1/zz-marker"
	results := make([]result, watchers)
	var rg sync.WaitGroup
	for wi, w := range ws {
		rg.Go(func() {
			res := result{last: map[string]Event{}, counts: map[string]int{}}
			defer func() { results[wi] = res }()
			var prevRev int64
			for {
				ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
				e, ok := w.Next(ctx)
				cancel()
				if !ok {
					res.err = fmt.Errorf("watcher closed or idle for %v", waitTimeout)
					return
				}
				k := f.short(e.Key)
				if e.Revision < prevRev {
					res.err = fmt.Errorf("event %s after revision %d", f.describe(e), prevRev)
					return
				}
				prevRev = e.Revision
				if l, seen := res.last[k]; seen && e.Revision <= l.Revision {
					res.err = fmt.Errorf("%s after %s", f.describe(e), f.describe(l))
					return
				}
				if specs[wi].ns != "" && !strings.HasPrefix(k, specs[wi].ns+"/") {
					res.err = fmt.Errorf("event %s outside namespace %s", f.describe(e), specs[wi].ns)
					return
				}
				if k == markerKey {
					return
				}
				res.last[k], res.counts[k] = e, res.counts[k]+1
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	markerRev := f.put("ns1", "zz-marker", labelX, "end")
	if markerRev <= slices.Max(finalRevs) {
		t.Fatalf("marker at %d, before the last write at %d", markerRev, slices.Max(finalRevs))
	}
	rg.Wait()

	for wi, res := range results {
		if res.err != nil {
			t.Errorf("watcher %d: %v", wi, res.err)
			continue
		}
		for i := range writers {
			k := nsOf(i) + "/" + nameOf(i)
			l, seen := res.last[k]
			if specs[wi].ns != "" && nsOf(i) != specs[wi].ns {
				if seen {
					t.Errorf("watcher %d saw %s outside its namespace", wi, k)
				}
				continue
			}
			if !seen {
				t.Errorf("watcher %d never saw %s", wi, k)
				continue
			}
			if got := f.describe(l); got != finals[i] {
				t.Errorf("watcher %d: last event of %s is %s, want %s", wi, k, got, finals[i])
			}
			if specs[wi].opts.Filter == nil && res.counts[k] != updates+1+i%4/3 {
				t.Errorf("watcher %d: %d events for %s, want %d", wi, res.counts[k], k, updates+1+i%4/3)
			}
		}
	}

	// The cache's final state matches the store.
	f.waitRev(c, markerRev)
	objs, _, err := c.List(t.Context(), f.prefix, nil)
	if err != nil {
		t.Fatal(err)
	}
	lr, err := f.store.List(t.Context(), f.prefix, storage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, kv := range lr.Items {
		obj, err := decodeConfigMap(kv.Key, kv.Value, kv.ModRevision)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, f.short(kv.Key)+" "+describeObject(obj))
	}
	var got []string
	for _, o := range objs {
		cm := o.(*corev1.ConfigMap)
		got = append(got, cm.Namespace+"/"+cm.Name+" "+describeObject(o))
	}
	if !slices.Equal(got, want) {
		t.Errorf("cache list:\n%s\nstore list:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestEncodedOncePerEvent checks that the watchers of one change share its
// serialisation per key, and that an object made for one watcher (the last state of
// an object leaving its filter) is serialised for that watcher alone.
func TestEncodedOncePerEvent(t *testing.T) {
	f := newFixture(t)
	c := f.start(Config{})
	a := f.watch(c, WatchOptions{})
	b := f.watch(c, WatchOptions{})
	x := f.watch(c, WatchOptions{Filter: teamX})
	f.put("ns", "p", labelX, "1")
	rev := f.put("ns", "p", nil, "2") // leaves x's filter
	f.waitRev(c, rev)

	var calls int
	encode := func(key string) func() ([]byte, error) {
		return func() ([]byte, error) {
			calls++
			return []byte(key), nil
		}
	}
	for i := range 2 {
		ea, eb := f.next(a), f.next(b)
		for _, key := range []string{"json", "protobuf"} {
			calls = 0
			for _, e := range []Event{ea, eb, ea} {
				d, err := e.Encoded(key, encode(key))
				if err != nil || string(d) != key {
					t.Fatalf("event %d: Encoded(%s) = %q, %v", i, key, d, err)
				}
			}
			if calls != 1 {
				t.Fatalf("event %d, %s: encoded %d times for two watchers, want once", i, key, calls)
			}
		}
	}
	calls = 0
	f2 := f.next(x) // Added
	if _, err := f2.Encoded("json", encode("json")); err != nil || calls != 0 {
		t.Fatalf("x's Added event shares a's and b's serialisation: %d encodes, err %v", calls, err)
	}
	gone := f.next(x) // Deleted, with the last matching state made for x
	if gone.Type != watch.Deleted {
		t.Fatalf("got %s, want Deleted", gone.Type)
	}
	if _, err := gone.Encoded("json", encode("json")); err != nil || calls != 1 {
		t.Fatalf("x's Deleted event carries its own object: %d encodes, want 1 (err %v)", calls, err)
	}
	if _, err := gone.Encoded("json", encode("json")); err != nil || calls != 2 {
		t.Fatalf("an object made for one watcher is not cached: %d encodes, want 2 (err %v)", calls, err)
	}
	f.quiet(a, b, x)
}

// TestPeek checks that Peek never waits: nothing before the first list, then the
// cached object.
func TestPeek(t *testing.T) {
	f := newFixture(t)
	rev := f.put("ns", "a", nil, "1")
	if _, ok := New(Config{Prefix: f.prefix, Store: f.store, Decode: decodeConfigMap}).Peek(f.key("ns", "a")); ok {
		t.Fatal("Peek on a cache that never loaded found an object")
	}
	c := f.start(Config{})
	f.waitRev(c, rev)
	obj, ok := c.Peek(f.key("ns", "a"))
	if !ok || describeObject(obj) != fmt.Sprintf("v=1 rv=%d", rev) {
		t.Fatalf("Peek = %v, %v", obj, ok)
	}
	if _, ok := c.Peek(f.key("ns", "b")); ok {
		t.Fatal("Peek found a key never written")
	}
}

// gatedStore is the fixture's store whose watch is a channel the test feeds by hand.
type gatedStore struct {
	*etcd.Store
	ch chan storage.WatchResult
}

// Watch returns the test's channel.
func (g *gatedStore) Watch(context.Context, string, int64) (<-chan storage.WatchResult, error) {
	return g.ch, nil
}

// WatchWithoutPrev returns the test's channel too (the etcd Store's would be promoted).
func (g *gatedStore) WatchWithoutPrev(context.Context, string, int64) (<-chan storage.WatchResult, error) {
	return g.ch, nil
}

// TestRevisionAppliedWhole feeds the cache the deletions of four keys at one revision
// (as a lease's expiry sends them, More on all but the last) and checks that neither a
// list nor the revision shows the revision partly applied, and that a watcher gets all
// four deletions. The channel is unbuffered: once a send returns, the cache has finished
// with the event before, and works on the one sent, which applies nothing while More.
func TestRevisionAppliedWhole(t *testing.T) {
	f := newFixture(t)
	names := []string{"a", "b", "c", "d"}
	var last int64
	for _, n := range names {
		last = f.put("ns", n, nil, "1")
	}
	g := &gatedStore{Store: f.store, ch: make(chan storage.WatchResult)} // unbuffered: a send returns once the cache took the previous one
	c := New(Config{Prefix: f.prefix, Store: g, Decode: decodeConfigMap, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	wctx, wcancel := context.WithTimeout(t.Context(), waitTimeout)
	defer wcancel()
	if err := c.WaitReady(wctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	r := &running{Cache: c}
	w := f.watch(r, WatchOptions{Prefix: f.prefix, AfterRevision: last})

	rev := last + 1
	send := func(n string, more bool) {
		t.Helper()
		prev, err := json.Marshal(configMap("ns", n, nil, "1"))
		if err != nil {
			t.Fatal(err)
		}
		select {
		case g.ch <- storage.WatchResult{Event: storage.Event{Type: storage.EventDelete, Key: f.key("ns", n), PrevValue: prev, Revision: rev, More: more}}:
		case <-time.After(waitTimeout):
			t.Fatalf("the cache did not take the deletion of %s within %v", n, waitTimeout)
		}
	}
	check := func(what string) {
		t.Helper()
		objs, listRev, err := c.List(t.Context(), f.prefix, nil)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if len(objs) != 4 || listRev != last || c.Revision() != last {
			t.Fatalf("%s: list of %v at revision %d (cache at %d), want all four at %d", what, keysOf(objs), listRev, c.Revision(), last)
		}
	}
	send("a", true)
	send("b", true) // returns once the cache has taken a's deletion in
	check("after the first of three deletions")
	send("c", true) // returns once the cache has taken b's deletion in
	check("after the second of three deletions")
	send("d", false) // the last: the cache applies the four now
	f.waitRev(r, rev)
	if objs, listRev, err := c.List(t.Context(), f.prefix, nil); err != nil || len(objs) != 0 || listRev != rev {
		t.Fatalf("List after the revision: %v at %d (%v), want none at %d", keysOf(objs), listRev, err, rev)
	}
	f.expect(w,
		ev(watch.Deleted, "ns/a", "1", rev, rev),
		ev(watch.Deleted, "ns/b", "1", rev, rev),
		ev(watch.Deleted, "ns/c", "1", rev, rev),
		ev(watch.Deleted, "ns/d", "1", rev, rev))
}

// droppingStore is a store whose watches the test can end, as etcd's client ends its
// streams when it re-establishes a connection. It hides the store's PrevlessWatcher so
// that every watch goes through Watch.
type droppingStore struct {
	storage.Store
	mu      sync.Mutex
	drops   []context.CancelFunc
	watches atomic.Int64
}

// Watch starts a store watch that ends (its channel closes) when drop is called.
func (d *droppingStore) Watch(ctx context.Context, prefix string, after int64) (<-chan storage.WatchResult, error) {
	wctx, cancel := context.WithCancel(ctx)
	ch, err := d.Store.Watch(wctx, prefix, after)
	if err != nil {
		cancel()
		return nil, err
	}
	d.mu.Lock()
	d.drops = append(d.drops, cancel)
	d.mu.Unlock()
	d.watches.Add(1)
	return ch, nil
}

// drop ends every watch started so far.
func (d *droppingStore) drop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, cancel := range d.drops {
		cancel()
	}
	d.drops = nil
}

func TestStorageWatchDropResumesWithoutRelist(t *testing.T) {
	f := newFixture(t)
	ds := &droppingStore{Store: f.store}
	cfg := Config{Prefix: f.prefix, Store: ds, Decode: decodeConfigMap,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	c := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	wctx, wcancel := context.WithTimeout(context.Background(), waitTimeout)
	defer wcancel()
	if err := c.WaitReady(wctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	r0 := c.Revision()
	r1 := f.put("ns", "a", nil, "1")
	f.waitRev(&running{Cache: c}, r1)
	w := f.watch(&running{Cache: c}, WatchOptions{AfterRevision: r0})
	f.expect(w, ev(watch.Added, "ns/a", "1", r1, r1))

	ds.drop()
	// Changes made while the cache has no storage watch reach it once it resumes, once
	// each, and the open watcher is not closed.
	r2 := f.put("ns", "a", nil, "2")
	r3 := f.put("ns", "b", nil, "1")
	f.waitRev(&running{Cache: c}, r3)
	f.expect(w, ev(watch.Modified, "ns/a", "2", r2, r2), ev(watch.Added, "ns/b", "1", r3, r3))
	if n := ds.watches.Load(); n < 2 {
		t.Fatalf("storage watches started: %d, want a second one after the drop", n)
	}
	// The window survived: a watch from before the drop replays all of it.
	old := f.watch(&running{Cache: c}, WatchOptions{AfterRevision: r0})
	f.expect(old, ev(watch.Added, "ns/a", "1", r1, r1), ev(watch.Modified, "ns/a", "2", r2, r2), ev(watch.Added, "ns/b", "1", r3, r3))
	f.quiet(w, old)
}
