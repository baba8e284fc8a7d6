// Package storagetest is a conformance suite for storage.Store implementations.
//
// An implementation's test calls Run with a constructor; every subtest works
// under its own key prefix, so one store may serve all of them.
package storagetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kubette/kubette/internal/storage"
)

// Compactor is implemented by stores that can discard old revisions. The
// suite's compaction tests run only when the store implements it.
type Compactor interface {
	// Compact discards every revision older than rev.
	Compact(ctx context.Context, rev int64) error
}

// Timeouts of the suite.
const (
	// testTimeout bounds each subtest.
	testTimeout = 30 * time.Second
	// watchTimeout bounds the wait for one watch result.
	watchTimeout = 10 * time.Second
	// quietPeriod is how long a watch must stay silent when no event is expected.
	quietPeriod = 200 * time.Millisecond
	// shortTTL is the time to live of the keys the TTL test writes: etcd's smallest lease.
	shortTTL = time.Second
	// expiryTimeout bounds the wait for keys written with shortTTL to go. etcd may round a
	// TTL up to its minimum lease TTL (2 s with its default timing) and looks for expired
	// leases every 500 ms; the rest is room for a loaded machine.
	expiryTimeout = 25 * time.Second
)

// Run runs the conformance suite. newStore is called once per subtest and
// may return the same store every time; it is responsible for closing what it
// returns (for example with t.Cleanup). Subtests run one after another
// because some compact the store.
func Run(t *testing.T, newStore func(t *testing.T) storage.Store) {
	run := rand.Text()
	tests := []struct {
		name string
		fn   func(*fixture)
	}{
		{"CreateAndGet", testCreateAndGet},
		{"CreateExisting", testCreateExisting},
		{"GetNotFound", testGetNotFound},
		{"UpdateWithCurrentRevision", testUpdateWithCurrentRevision},
		{"UpdateWithStaleRevision", testUpdateWithStaleRevision},
		{"UpdateMissingKey", testUpdateMissingKey},
		{"UpdateDeletedKey", testUpdateDeletedKey},
		{"DeleteUnconditional", testDeleteUnconditional},
		{"DeleteWithExpectedRevision", testDeleteWithExpectedRevision},
		{"DeleteWithStaleRevision", testDeleteWithStaleRevision},
		{"DeleteMissingKey", testDeleteMissingKey},
		{"RecreateAfterDelete", testRecreateAfterDelete},
		{"ListSortedByKey", testListSortedByKey},
		{"ListEmpty", testListEmpty},
		{"ListAtOldRevision", testListAtOldRevision},
		{"ListPaginated", testListPaginated},
		{"ListLimitCoversAll", testListLimitCoversAll},
		{"ListFutureRevision", testListFutureRevision},
		{"ListCompactedRevision", testListCompactedRevision},
		{"PrefixIsolation", testPrefixIsolation},
		{"Count", testCount},
		{"WatchFromZero", testWatchFromZero},
		{"WatchReplay", testWatchReplay},
		{"WatchFromRevision", testWatchFromRevision},
		{"WatchCompactedRevision", testWatchCompactedRevision},
		{"WatchEndsOnCancel", testWatchEndsOnCancel},
		{"ConcurrentCompareAndSwap", testConcurrentCompareAndSwap},
		{"RevisionsIncrease", testRevisionsIncrease},
		{"TTLExpires", testTTLExpires},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			tc.fn(&fixture{
				T:      t,
				ctx:    ctx,
				store:  newStore(t),
				prefix: "/storagetest/" + run + "/" + t.Name() + "/",
			})
		})
	}
}

// fixture is what each subtest works with.
type fixture struct {
	*testing.T
	ctx   context.Context
	store storage.Store
	// prefix is unique to the subtest and ends in "/".
	prefix string
}

// key returns the full key of name under the subtest's prefix.
func (f *fixture) key(name string) string { return f.prefix + name }

func (f *fixture) create(key string, value string) int64 {
	f.Helper()
	rev, err := f.store.Create(f.ctx, key, []byte(value))
	if err != nil {
		f.Fatalf("Create(%q): %v", key, err)
	}
	if rev <= 0 {
		f.Fatalf("Create(%q) returned revision %d, want > 0", key, rev)
	}
	return rev
}

func (f *fixture) update(key string, value string, expected int64) int64 {
	f.Helper()
	rev, err := f.store.Update(f.ctx, key, []byte(value), expected)
	if err != nil {
		f.Fatalf("Update(%q, rev %d): %v", key, expected, err)
	}
	if rev <= expected {
		f.Fatalf("Update(%q, rev %d) returned revision %d, want > %d", key, expected, rev, expected)
	}
	return rev
}

func (f *fixture) delete(key string, expected int64) (storage.KeyValue, int64) {
	f.Helper()
	kv, rev, err := f.store.Delete(f.ctx, key, expected)
	if err != nil {
		f.Fatalf("Delete(%q, rev %d): %v", key, expected, err)
	}
	return kv, rev
}

func (f *fixture) get(key string) storage.KeyValue {
	f.Helper()
	kv, err := f.store.Get(f.ctx, key)
	if err != nil {
		f.Fatalf("Get(%q): %v", key, err)
	}
	return kv
}

func (f *fixture) currentRevision() int64 {
	f.Helper()
	rev, err := f.store.CurrentRevision(f.ctx)
	if err != nil {
		f.Fatalf("CurrentRevision: %v", err)
	}
	return rev
}

func (f *fixture) list(prefix string, opts storage.ListOptions) storage.ListResult {
	f.Helper()
	res, err := f.store.List(f.ctx, prefix, opts)
	if err != nil {
		f.Fatalf("List(%q, %+v): %v", prefix, opts, err)
	}
	return res
}

func (f *fixture) compactor() Compactor {
	f.Helper()
	c, ok := f.store.(Compactor)
	if !ok {
		f.Skipf("%T does not implement storagetest.Compactor", f.store)
	}
	return c
}

func (f *fixture) compact(rev int64) {
	f.Helper()
	if err := f.compactor().Compact(f.ctx, rev); err != nil {
		f.Fatalf("Compact(%d): %v", rev, err)
	}
}

func (f *fixture) expectNotFound(key string) {
	f.Helper()
	if kv, err := f.store.Get(f.ctx, key); !errors.Is(err, storage.ErrNotFound) {
		f.Fatalf("Get(%q) = %+v, %v; want ErrNotFound", key, kv, err)
	}
}

// expectKV checks a KeyValue's key, value and revisions (a zero revision is not checked).
func (f *fixture) expectKV(what string, got storage.KeyValue, key, value string, modRev, createRev int64) {
	f.Helper()
	if got.Key != key || !bytes.Equal(got.Value, []byte(value)) {
		f.Fatalf("%s = {%q: %q}, want {%q: %q}", what, got.Key, got.Value, key, value)
	}
	if modRev != 0 && got.ModRevision != modRev {
		f.Fatalf("%s: ModRevision = %d, want %d", what, got.ModRevision, modRev)
	}
	if createRev != 0 && got.CreateRevision != createRev {
		f.Fatalf("%s: CreateRevision = %d, want %d", what, got.CreateRevision, createRev)
	}
}

// expectConflict checks that err is a *storage.ConflictError carrying the current value.
func (f *fixture) expectConflict(what string, err error, key, value string, modRev int64) {
	f.Helper()
	if !errors.Is(err, storage.ErrConflict) {
		f.Fatalf("%s: error %v, want ErrConflict", what, err)
	}
	var ce *storage.ConflictError
	if !errors.As(err, &ce) {
		f.Fatalf("%s: error %v (%T) does not wrap a *storage.ConflictError", what, err, err)
	}
	f.expectKV(what+": ConflictError.Current", ce.Current, key, value, modRev, 0)
}

// watch starts a watch that ends with the subtest.
func (f *fixture) watch(prefix string, after int64) <-chan storage.WatchResult {
	f.Helper()
	ch, err := f.store.Watch(f.ctx, prefix, after)
	if err != nil {
		f.Fatalf("Watch(%q, %d): %v", prefix, after, err)
	}
	return ch
}

// nextEvent returns the next event of a watch, skipping progress notifications.
func (f *fixture) nextEvent(ch <-chan storage.WatchResult) storage.Event {
	f.Helper()
	timeout := time.After(watchTimeout)
	for {
		select {
		case r, ok := <-ch:
			if !ok {
				f.Fatal("watch channel closed, want an event")
			}
			if r.Err != nil {
				f.Fatalf("watch error %v, want an event", r.Err)
			}
			if r.ProgressRevision != 0 && r.Event.Key == "" && r.Event.Revision == 0 {
				continue
			}
			return r.Event
		case <-timeout:
			f.Fatalf("no watch event within %v", watchTimeout)
		}
	}
}

// expectQuiet checks that a watch delivers no event for a short while.
func (f *fixture) expectQuiet(ch <-chan storage.WatchResult) {
	f.Helper()
	timeout := time.After(quietPeriod)
	for {
		select {
		case r, ok := <-ch:
			if !ok {
				f.Fatal("watch channel closed unexpectedly")
			}
			if r.Err != nil || r.ProgressRevision == 0 {
				f.Fatalf("unexpected watch result %+v", r)
			}
		case <-timeout:
			return
		}
	}
}

type wantEvent struct {
	typ       storage.EventType
	key       string
	value     string
	prevValue string
	revision  int64
	created   bool
}

func (f *fixture) expectEvent(got storage.Event, want wantEvent) {
	f.Helper()
	var wantValue []byte
	if want.typ == storage.EventPut {
		wantValue = []byte(want.value)
	}
	if got.Type != want.typ || got.Key != want.key || got.Revision != want.revision || got.Created != want.created ||
		!bytes.Equal(got.Value, wantValue) || !bytes.Equal(got.PrevValue, []byte(want.prevValue)) {
		f.Fatalf("event = {%v %q value=%q prev=%q rev=%d created=%v}, want {%v %q value=%q prev=%q rev=%d created=%v}",
			got.Type, got.Key, got.Value, got.PrevValue, got.Revision, got.Created,
			want.typ, want.key, wantValue, want.prevValue, want.revision, want.created)
	}
	if want.typ == storage.EventDelete && got.Value != nil {
		f.Fatalf("delete event carries value %q, want nil", got.Value)
	}
}

func keysOf(items []storage.KeyValue) []string {
	keys := make([]string, len(items))
	for i, kv := range items {
		keys[i] = kv.Key
	}
	return keys
}

func testCreateAndGet(f *fixture) {
	for _, tc := range []struct{ name, value string }{
		{"text", "hello"},
		{"binary", "\x00\x01\xfe\xff"},
		{"empty", ""},
	} {
		key := f.key(tc.name)
		rev := f.create(key, tc.value)
		f.expectKV("Get after Create", f.get(key), key, tc.value, rev, rev)
	}
}

func testCreateExisting(f *fixture) {
	key := f.key("a")
	rev := f.create(key, "one")
	_, err := f.store.Create(f.ctx, key, []byte("two"))
	if !errors.Is(err, storage.ErrExists) {
		f.Fatalf("second Create: error %v, want ErrExists", err)
	}
	f.expectKV("Get after failed Create", f.get(key), key, "one", rev, rev)
}

func testGetNotFound(f *fixture) {
	f.expectNotFound(f.key("missing"))
	// A key that merely shares the name as a prefix is not a match.
	f.create(f.key("missingx"), "v")
	f.expectNotFound(f.key("missing"))
}

func testUpdateWithCurrentRevision(f *fixture) {
	key := f.key("a")
	created := f.create(key, "v1")
	rev2 := f.update(key, "v2", created)
	f.expectKV("Get after Update", f.get(key), key, "v2", rev2, created)
	rev3 := f.update(key, "v3", rev2)
	f.expectKV("Get after second Update", f.get(key), key, "v3", rev3, created)
}

func testUpdateWithStaleRevision(f *fixture) {
	key := f.key("a")
	rev1 := f.create(key, "v1")
	rev2 := f.update(key, "v2", rev1)
	_, err := f.store.Update(f.ctx, key, []byte("stale"), rev1)
	f.expectConflict("Update with stale revision", err, key, "v2", rev2)
	f.expectKV("Get after failed Update", f.get(key), key, "v2", rev2, rev1)
	// The conflict carries what is needed to retry.
	var ce *storage.ConflictError
	errors.As(err, &ce)
	rev3 := f.update(key, "v3", ce.Current.ModRevision)
	f.expectKV("Get after retried Update", f.get(key), key, "v3", rev3, rev1)
}

func testUpdateMissingKey(f *fixture) {
	key := f.key("missing")
	for _, expected := range []int64{0, 1, f.currentRevision()} {
		_, err := f.store.Update(f.ctx, key, []byte("v"), expected)
		if !errors.Is(err, storage.ErrNotFound) {
			f.Fatalf("Update of a missing key with revision %d: error %v, want ErrNotFound", expected, err)
		}
		f.expectNotFound(key)
	}
}

func testUpdateDeletedKey(f *fixture) {
	key := f.key("a")
	rev := f.create(key, "v1")
	f.delete(key, 0)
	_, err := f.store.Update(f.ctx, key, []byte("v2"), rev)
	if !errors.Is(err, storage.ErrNotFound) {
		f.Fatalf("Update of a deleted key: error %v, want ErrNotFound", err)
	}
	f.expectNotFound(key)
}

func testDeleteUnconditional(f *fixture) {
	key := f.key("a")
	created := f.create(key, "v1")
	rev := f.update(key, "v2", created)
	kv, delRev := f.delete(key, 0)
	f.expectKV("deleted value", kv, key, "v2", rev, created)
	if delRev <= rev {
		f.Fatalf("delete revision %d, want > %d", delRev, rev)
	}
	if cur := f.currentRevision(); cur < delRev {
		f.Fatalf("CurrentRevision %d after a delete at %d", cur, delRev)
	}
	f.expectNotFound(key)
	if _, _, err := f.store.Delete(f.ctx, key, 0); !errors.Is(err, storage.ErrNotFound) {
		f.Fatalf("second Delete: error %v, want ErrNotFound", err)
	}
}

func testDeleteWithExpectedRevision(f *fixture) {
	key := f.key("a")
	rev := f.create(key, "v1")
	kv, delRev := f.delete(key, rev)
	f.expectKV("deleted value", kv, key, "v1", rev, rev)
	if delRev <= rev {
		f.Fatalf("delete revision %d, want > %d", delRev, rev)
	}
	f.expectNotFound(key)
}

func testDeleteWithStaleRevision(f *fixture) {
	key := f.key("a")
	rev1 := f.create(key, "v1")
	rev2 := f.update(key, "v2", rev1)
	_, _, err := f.store.Delete(f.ctx, key, rev1)
	f.expectConflict("Delete with stale revision", err, key, "v2", rev2)
	f.expectKV("Get after failed Delete", f.get(key), key, "v2", rev2, rev1)
}

func testDeleteMissingKey(f *fixture) {
	key := f.key("missing")
	for _, expected := range []int64{0, 1, f.currentRevision()} {
		if _, _, err := f.store.Delete(f.ctx, key, expected); !errors.Is(err, storage.ErrNotFound) {
			f.Fatalf("Delete of a missing key with revision %d: error %v, want ErrNotFound", expected, err)
		}
	}
}

func testRecreateAfterDelete(f *fixture) {
	key := f.key("a")
	rev1 := f.create(key, "v1")
	_, delRev := f.delete(key, rev1)
	rev2 := f.create(key, "v2")
	if rev2 <= delRev {
		f.Fatalf("re-create revision %d, want > delete revision %d", rev2, delRev)
	}
	f.expectKV("Get after re-create", f.get(key), key, "v2", rev2, rev2)
}

func testListSortedByKey(f *fixture) {
	names := []string{"m", "b", "z", "a", "b0", "a/nested", "y"}
	var last int64
	for _, n := range names {
		last = f.create(f.key(n), "value-"+n)
	}
	res := f.list(f.prefix, storage.ListOptions{})
	want := make([]string, len(names))
	for i, n := range names {
		want[i] = f.key(n)
	}
	slices.Sort(want)
	if got := keysOf(res.Items); !slices.Equal(got, want) {
		f.Fatalf("List keys = %q, want %q", got, want)
	}
	for _, kv := range res.Items {
		if string(kv.Value) != "value-"+kv.Key[len(f.prefix):] || kv.ModRevision <= 0 || kv.CreateRevision != kv.ModRevision {
			f.Fatalf("List item %+v is wrong", kv)
		}
	}
	if res.Revision < last {
		f.Fatalf("List revision %d, want >= %d", res.Revision, last)
	}
	if res.More || res.Remaining != 0 {
		f.Fatalf("List without limit: More=%v Remaining=%d", res.More, res.Remaining)
	}
}

func testListEmpty(f *fixture) {
	res := f.list(f.prefix, storage.ListOptions{})
	if len(res.Items) != 0 || res.More || res.Remaining != 0 {
		f.Fatalf("List of an empty prefix = %+v", res)
	}
	if res.Revision <= 0 {
		f.Fatalf("List of an empty prefix has revision %d, want > 0", res.Revision)
	}
}

func testListAtOldRevision(f *fixture) {
	a, b := f.key("a"), f.key("b")
	r1 := f.create(a, "a1")
	r2 := f.create(b, "b1")
	r3 := f.update(a, "a2", r1)
	_, r4 := f.delete(b, r2)

	check := func(rev int64, want map[string]string) {
		f.Helper()
		res := f.list(f.prefix, storage.ListOptions{Revision: rev})
		if rev != 0 && res.Revision != rev {
			f.Fatalf("List at %d reports revision %d", rev, res.Revision)
		}
		got := map[string]string{}
		for _, kv := range res.Items {
			got[kv.Key] = string(kv.Value)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			f.Fatalf("List at %d = %v, want %v", rev, got, want)
		}
	}
	check(r1, map[string]string{a: "a1"})
	check(r2, map[string]string{a: "a1", b: "b1"})
	check(r3, map[string]string{a: "a2", b: "b1"})
	check(r4, map[string]string{a: "a2"})
	check(0, map[string]string{a: "a2"})

	res := f.list(f.prefix, storage.ListOptions{Revision: r2})
	f.expectKV("item a at r2", res.Items[0], a, "a1", r1, r1)
}

func testListPaginated(f *fixture) {
	var want []string
	for i := range 7 {
		k := f.key(fmt.Sprintf("k%02d", i))
		f.create(k, strconv.Itoa(i))
		want = append(want, k)
	}
	var (
		got       []string
		opts      = storage.ListOptions{Limit: 3}
		remaining = []int64{4, 1, 0}
	)
	for page := 0; ; page++ {
		res := f.list(f.prefix, opts)
		if page >= len(remaining) {
			f.Fatalf("more pages than expected: %+v", res)
		}
		if int64(len(res.Items)) > opts.Limit {
			f.Fatalf("page %d has %d items, limit %d", page, len(res.Items), opts.Limit)
		}
		if res.Remaining != remaining[page] || res.More != (remaining[page] > 0) {
			f.Fatalf("page %d: More=%v Remaining=%d, want More=%v Remaining=%d",
				page, res.More, res.Remaining, remaining[page] > 0, remaining[page])
		}
		got = append(got, keysOf(res.Items)...)
		if page == 0 {
			// Later pages read at the first page's revision: this key must not show up.
			f.create(f.key("k00a-late"), "late")
			opts.Revision = res.Revision
		} else if res.Revision != opts.Revision {
			f.Fatalf("page %d read at %d, want %d", page, res.Revision, opts.Revision)
		}
		if !res.More {
			break
		}
		opts.StartKey = res.Items[len(res.Items)-1].Key + "\x00"
	}
	if !slices.Equal(got, want) {
		f.Fatalf("paginated keys = %q, want each of %q exactly once", got, want)
	}
}

func testListLimitCoversAll(f *fixture) {
	for _, n := range []string{"a", "b", "c"} {
		f.create(f.key(n), n)
	}
	for _, limit := range []int64{3, 4, 100} {
		res := f.list(f.prefix, storage.ListOptions{Limit: limit})
		if len(res.Items) != 3 || res.More || res.Remaining != 0 {
			f.Fatalf("List with limit %d: %d items, More=%v Remaining=%d; want 3, false, 0",
				limit, len(res.Items), res.More, res.Remaining)
		}
	}
	res := f.list(f.prefix, storage.ListOptions{StartKey: f.key("b")})
	if got, want := keysOf(res.Items), []string{f.key("b"), f.key("c")}; !slices.Equal(got, want) {
		f.Fatalf("List from start key %q = %q, want %q", f.key("b"), got, want)
	}
}

func testListFutureRevision(f *fixture) {
	f.create(f.key("a"), "v")
	rev := f.currentRevision() + 1000
	_, err := f.store.List(f.ctx, f.prefix, storage.ListOptions{Revision: rev})
	if !errors.Is(err, storage.ErrFutureRevision) {
		f.Fatalf("List at future revision %d: error %v, want ErrFutureRevision", rev, err)
	}
}

func testListCompactedRevision(f *fixture) {
	f.compactor()
	key := f.key("a")
	r1 := f.create(key, "v1")
	r2 := f.update(key, "v2", r1)
	f.compact(r2)
	_, err := f.store.List(f.ctx, f.prefix, storage.ListOptions{Revision: r1})
	if !errors.Is(err, storage.ErrCompacted) {
		f.Fatalf("List at compacted revision %d: error %v, want ErrCompacted", r1, err)
	}
	res := f.list(f.prefix, storage.ListOptions{Revision: r2})
	if len(res.Items) != 1 {
		f.Fatalf("List at the compaction revision = %+v, want the key", res.Items)
	}
	f.expectKV("item at compaction revision", res.Items[0], key, "v2", r2, r1)
}

func testPrefixIsolation(f *fixture) {
	pods := f.key("registry/pods/")
	f.create(f.key("registry/pods"), "bare")
	f.create(f.key("registry/podsx"), "sibling")
	f.create(f.key("registry/podsx/a"), "sibling child")
	f.create(f.key("registry/pods0"), "after slash")
	f.create(f.key("registry/pods.a"), "before slash")
	inside := f.create(pods+"a", "in")
	ch := f.watch(pods, inside)

	res := f.list(pods, storage.ListOptions{})
	if got, want := keysOf(res.Items), []string{pods + "a"}; !slices.Equal(got, want) {
		f.Fatalf("List(%q) = %q, want %q", pods, got, want)
	}
	if n, err := f.store.Count(f.ctx, pods); err != nil || n != 1 {
		f.Fatalf("Count(%q) = %d, %v; want 1", pods, n, err)
	}
	// Paging stops at the prefix's end too.
	res = f.list(pods, storage.ListOptions{Limit: 1})
	if len(res.Items) != 1 || res.More || res.Remaining != 0 {
		f.Fatalf("List(%q, limit 1) = %+v, want one item and no more", pods, res)
	}

	f.create(f.key("registry/podsx/b"), "sibling")
	f.create(f.key("registry/pods1"), "neighbour")
	rev := f.create(pods+"b", "in")
	f.expectEvent(f.nextEvent(ch), wantEvent{typ: storage.EventPut, key: pods + "b", value: "in", revision: rev, created: true})
}

func testCount(f *fixture) {
	count := func() int64 {
		f.Helper()
		n, err := f.store.Count(f.ctx, f.prefix)
		if err != nil {
			f.Fatalf("Count(%q): %v", f.prefix, err)
		}
		return n
	}
	if n := count(); n != 0 {
		f.Fatalf("Count of an empty prefix = %d", n)
	}
	for i := range 5 {
		f.create(f.key(strconv.Itoa(i)), "v")
	}
	if n := count(); n != 5 {
		f.Fatalf("Count = %d, want 5", n)
	}
	f.delete(f.key("3"), 0)
	if n := count(); n != 4 {
		f.Fatalf("Count after delete = %d, want 4", n)
	}
}

func testWatchFromZero(f *fixture) {
	before := f.create(f.key("before"), "old")
	f.update(f.key("before"), "old2", before)
	ch := f.watch(f.prefix, 0)
	rev := f.create(f.key("after"), "new")
	f.expectEvent(f.nextEvent(ch), wantEvent{typ: storage.EventPut, key: f.key("after"), value: "new", revision: rev, created: true})
	f.expectQuiet(ch)
}

func testWatchReplay(f *fixture) {
	a, b := f.key("a"), f.key("b")
	r1 := f.create(a, "a1")
	r2 := f.update(a, "a2", r1)
	r3 := f.create(b, "b1")
	_, r4 := f.delete(a, r2)
	r5 := f.create(a, "a3")
	want := []wantEvent{
		{typ: storage.EventPut, key: a, value: "a1", revision: r1, created: true},
		{typ: storage.EventPut, key: a, value: "a2", prevValue: "a1", revision: r2},
		{typ: storage.EventPut, key: b, value: "b1", revision: r3, created: true},
		{typ: storage.EventDelete, key: a, prevValue: "a2", revision: r4},
		{typ: storage.EventPut, key: a, value: "a3", revision: r5, created: true},
	}

	ch := f.watch(f.prefix, r1-1)
	var last int64
	for _, w := range want {
		ev := f.nextEvent(ch)
		if ev.Revision <= last {
			f.Fatalf("event revision %d after %d: not increasing", ev.Revision, last)
		}
		last = ev.Revision
		f.expectEvent(ev, w)
	}
	// The watch goes on with live changes.
	r6 := f.update(b, "b2", r3)
	f.expectEvent(f.nextEvent(ch), wantEvent{typ: storage.EventPut, key: b, value: "b2", prevValue: "b1", revision: r6})
	f.expectQuiet(ch)
}

func testWatchFromRevision(f *fixture) {
	a := f.key("a")
	r1 := f.create(a, "a1")
	r2 := f.update(a, "a2", r1)
	r3 := f.update(a, "a3", r2)
	ch := f.watch(f.prefix, r2)
	f.expectEvent(f.nextEvent(ch), wantEvent{typ: storage.EventPut, key: a, value: "a3", prevValue: "a2", revision: r3})
	f.expectQuiet(ch)
}

func testWatchCompactedRevision(f *fixture) {
	f.compactor()
	key := f.key("a")
	r1 := f.create(key, "v1")
	r2 := f.update(key, "v2", r1)
	f.compact(r2)

	ch := f.watch(f.prefix, r1-1)
	select {
	case r, ok := <-ch:
		if !ok {
			f.Fatal("watch closed without an error")
		}
		if !errors.Is(r.Err, storage.ErrCompacted) {
			f.Fatalf("first result %+v, want ErrCompacted", r)
		}
	case <-time.After(watchTimeout):
		f.Fatal("no result from a watch at a compacted revision")
	}
	select {
	case r, ok := <-ch:
		if ok {
			f.Fatalf("result %+v after ErrCompacted, want the channel closed", r)
		}
	case <-time.After(watchTimeout):
		f.Fatal("watch channel not closed after ErrCompacted")
	}

	// Starting right at the compaction revision still works. The previous
	// value of that first event may be compacted away, so it is not checked.
	ch = f.watch(f.prefix, r1)
	if ev := f.nextEvent(ch); ev.Type != storage.EventPut || ev.Key != key || string(ev.Value) != "v2" || ev.Revision != r2 || ev.Created {
		f.Fatalf("first event from the compaction revision = %+v, want the update of %q at %d", ev, key, r2)
	}
	r3 := f.update(key, "v3", r2)
	f.expectEvent(f.nextEvent(ch), wantEvent{typ: storage.EventPut, key: key, value: "v3", prevValue: "v2", revision: r3})
}

func testWatchEndsOnCancel(f *fixture) {
	ctx, cancel := context.WithCancel(f.ctx)
	ch, err := f.store.Watch(ctx, f.prefix, 0)
	if err != nil {
		f.Fatalf("Watch: %v", err)
	}
	rev := f.create(f.key("a"), "v")
	f.expectEvent(f.nextEvent(ch), wantEvent{typ: storage.EventPut, key: f.key("a"), value: "v", revision: rev, created: true})
	cancel()
	// Writes after the cancel must not keep the channel open or block the store.
	f.create(f.key("b"), "v")
	timeout := time.After(watchTimeout)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout:
			f.Fatal("watch channel not closed after its context was cancelled")
		}
	}
}

func testConcurrentCompareAndSwap(f *fixture) {
	const (
		workers    = 8
		increments = 15
	)
	key := f.key("counter")
	f.create(key, "0")
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		conflicts int
	)
	for range workers {
		wg.Go(func() {
			kv, err := f.store.Get(f.ctx, key)
			if err != nil {
				f.Errorf("Get: %v", err)
				return
			}
			for done := 0; done < increments; {
				n, err := strconv.Atoi(string(kv.Value))
				if err != nil {
					f.Errorf("counter value %q: %v", kv.Value, err)
					return
				}
				next := []byte(strconv.Itoa(n + 1))
				rev, err := f.store.Update(f.ctx, key, next, kv.ModRevision)
				var ce *storage.ConflictError
				switch {
				case err == nil:
					kv.Value, kv.ModRevision = next, rev
					done++
				case errors.As(err, &ce):
					mu.Lock()
					conflicts++
					mu.Unlock()
					kv = ce.Current
				default:
					f.Errorf("Update: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if f.Failed() {
		return
	}
	if got, want := string(f.get(key).Value), strconv.Itoa(workers*increments); got != want {
		f.Fatalf("counter = %s after %d increments (%d conflicts retried)", got, workers*increments, conflicts)
	}
	f.Logf("%d increments, %d conflicts retried", workers*increments, conflicts)
}

func testRevisionsIncrease(f *fixture) {
	last := f.currentRevision()
	next := func(what string, rev int64) {
		f.Helper()
		if rev <= last {
			f.Fatalf("%s returned revision %d, not above the previous %d", what, rev, last)
		}
		last = rev
	}
	a, b := f.key("a"), f.key("b")
	ra := f.create(a, "1")
	next("Create a", ra)
	next("Create b", f.create(b, "1"))
	ra = f.update(a, "2", ra)
	next("Update a", ra)
	_, rd := f.delete(b, 0)
	next("Delete b", rd)
	next("Create b again", f.create(b, "2"))
	_, rd = f.delete(a, ra)
	next("Delete a", rd)
	if cur := f.currentRevision(); cur < last {
		f.Fatalf("CurrentRevision %d is below the last write %d", cur, last)
	}
	if kv := f.get(b); kv.ModRevision >= last || kv.ModRevision <= ra {
		f.Fatalf("b's mod revision %d is not between %d and %d", kv.ModRevision, ra, last)
	}
}

// testTTLExpires writes keys with a short TTL, on create and on update, next to keys
// without one, and checks that the store deletes exactly the expiring ones by itself,
// which watchers see as deletions carrying the last value.
func testTTLExpires(f *fixture) {
	ttl := storage.WithTTL(shortTTL)
	keep, permanent, created, updated := f.key("keep"), f.key("permanent"), f.key("created"), f.key("updated")
	f.create(keep, "k")
	// Written with a TTL first, then updated without one: the update makes it permanent.
	rev, err := f.store.Create(f.ctx, permanent, []byte("p1"), ttl)
	if err != nil {
		f.Fatalf("Create(%q, WithTTL): %v", permanent, err)
	}
	f.update(permanent, "p2", rev)
	if _, err := f.store.Create(f.ctx, created, []byte("c"), ttl); err != nil {
		f.Fatalf("Create(%q, WithTTL): %v", created, err)
	}
	rev = f.create(updated, "u1")
	last, err := f.store.Update(f.ctx, updated, []byte("u2"), rev, ttl)
	if err != nil {
		f.Fatalf("Update(%q, WithTTL): %v", updated, err)
	}
	ch := f.watch(f.prefix, last)

	wantGone := map[string]string{created: "c", updated: "u2"}
	deadline := time.After(expiryTimeout)
	for len(wantGone) > 0 {
		select {
		case r, ok := <-ch:
			if !ok {
				f.Fatal("watch channel closed, want the expired keys' deletions")
			}
			if r.Err != nil {
				f.Fatalf("watch error %v, want the expired keys' deletions", r.Err)
			}
			if r.Event.Key == "" {
				continue // a progress notification
			}
			ev := r.Event
			want, ok := wantGone[ev.Key]
			if !ok || ev.Type != storage.EventDelete {
				f.Fatalf("watch event %v %q (value %q), want only the deletions of %v", ev.Type, ev.Key, ev.Value, wantGone)
			}
			if ev.Revision <= last || ev.Value != nil || string(ev.PrevValue) != want {
				f.Fatalf("deletion of %q: revision %d value %q prev %q, want revision > %d, no value, prev %q",
					ev.Key, ev.Revision, ev.Value, ev.PrevValue, last, want)
			}
			delete(wantGone, ev.Key)
		case <-deadline:
			f.Fatalf("keys written with a TTL of %v still not deleted after %v: %v", shortTTL, expiryTimeout, wantGone)
		}
	}
	f.expectNotFound(created)
	f.expectNotFound(updated)
	f.expectKV("Get(keep)", f.get(keep), keep, "k", 0, 0)
	f.expectKV("Get(permanent)", f.get(permanent), permanent, "p2", 0, 0)
	if res := f.list(f.prefix, storage.ListOptions{}); !slices.Equal(keysOf(res.Items), []string{keep, permanent}) {
		f.Fatalf("List after expiry = %q, want %q", keysOf(res.Items), []string{keep, permanent})
	}
}
