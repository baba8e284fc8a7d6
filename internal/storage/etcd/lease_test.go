package etcd

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kubette/kubette/internal/storage"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// fakeGrants records grant requests and answers with increasing lease IDs.
type fakeGrants struct {
	mu       sync.Mutex
	requests []int64
	// minTTL, when set, is the TTL granted to shorter requests (etcd's minimum lease TTL).
	minTTL int64
	err    error
}

func (g *fakeGrants) grant(_ context.Context, ttl int64) (clientv3.LeaseID, int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return clientv3.NoLease, 0, g.err
	}
	g.requests = append(g.requests, ttl)
	return clientv3.LeaseID(len(g.requests)), max(ttl, g.minTTL), nil
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newTestLeases() (*leaseManager, *fakeGrants, *fakeClock) {
	g := &fakeGrants{}
	c := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return newLeaseManager(g.grant, c.now), g, c
}

func mustLease(t *testing.T, l *leaseManager, ttl time.Duration) clientv3.LeaseID {
	t.Helper()
	id, err := l.lease(t.Context(), ttl)
	if err != nil {
		t.Fatalf("lease(%v): %v", ttl, err)
	}
	return id
}

func TestLeaseTimes(t *testing.T) {
	for _, tc := range []struct {
		ttl          time.Duration
		secs, window int64
	}{
		{time.Hour, 3600, 60},       // 5 % is 180 s: the 60 s cap
		{10 * time.Minute, 600, 30}, // 5 %
		{20 * time.Second, 20, 1},   // the first TTL with a window
		{19 * time.Second, 19, 0},   // 0.95 s rounds down to none
		{time.Second, 1, 0},
		{1500 * time.Millisecond, 2, 0}, // whole seconds, rounded up
		{time.Millisecond, 1, 0},
		{24 * time.Hour, 86400, 60},
		{1200*time.Second + 1, 1201, 60},
		{1199 * time.Second, 1199, 59},                 // 59.95 s rounds down
		{1000*time.Second - time.Nanosecond, 1000, 50}, // rounded up before the window
	} {
		secs, window := leaseTimes(tc.ttl)
		if secs != tc.secs || window != tc.window {
			t.Errorf("leaseTimes(%v) = %d s + %d s, want %d s + %d s", tc.ttl, secs, window, tc.secs, tc.window)
		}
	}
}

func TestLeaseReusedWithinWindow(t *testing.T) {
	l, g, c := newTestLeases()
	first := mustLease(t, l, time.Hour)
	if len(g.requests) != 1 || g.requests[0] != 3660 {
		t.Fatalf("grant requests %v, want one of 3660 s (1 h plus the 60 s window)", g.requests)
	}
	// Every write in the next 60 s shares the lease: it outlives each of them by 1 h
	// and at most 60 s more.
	for _, step := range []time.Duration{0, time.Second, 30 * time.Second, 28 * time.Second} {
		c.step(step)
		if id := mustLease(t, l, time.Hour); id != first {
			t.Fatalf("after %v more: lease %v, want the first one (%v) reused", step, id, first)
		}
	}
	if st := l.Stats(); st.Grants != 1 || st.Reuses != 4 {
		t.Fatalf("stats %+v, want 1 grant and 4 reuses", st)
	}
	// 60 s after the grant the lease would expire exactly 1 h from now: no longer enough.
	c.step(time.Second)
	second := mustLease(t, l, time.Hour)
	if second == first {
		t.Fatalf("60 s after the grant: the first lease reused, want a new one")
	}
	if id := mustLease(t, l, time.Hour); id != second {
		t.Fatalf("lease %v, want the second one (%v) reused", id, second)
	}
	if st := l.Stats(); st.Grants != 2 || st.Reuses != 5 {
		t.Fatalf("stats %+v, want 2 grants and 5 reuses", st)
	}
}

func TestLeaseNotReusedForOtherTTL(t *testing.T) {
	l, g, c := newTestLeases()
	hour := mustLease(t, l, time.Hour)
	// A longer TTL: the lease would expire too early.
	long := mustLease(t, l, 2*time.Hour)
	// A much shorter TTL: the only lease cached (2 h) would keep the key far too long.
	c.step(time.Second)
	short := mustLease(t, l, 10*time.Minute)
	if hour == long || long == short || hour == short {
		t.Fatalf("leases %v, %v, %v: want three different ones", hour, long, short)
	}
	if want := []int64{3660, 7260, 630}; !slices.Equal(g.requests, want) {
		t.Fatalf("grant requests %v, want %v", g.requests, want)
	}
}

func TestLeaseShortTTLNotShared(t *testing.T) {
	// Below 20 s there is no window: a lease is granted for exactly the TTL, and a later
	// write would outlive it.
	l, g, c := newTestLeases()
	a := mustLease(t, l, 2*time.Second)
	c.step(time.Millisecond)
	b := mustLease(t, l, 2*time.Second)
	if a == b || !slices.Equal(g.requests, []int64{2, 2}) {
		t.Fatalf("leases %v, %v from grants %v, want two of 2 s", a, b, g.requests)
	}
}

func TestLeaseRaisedByMinimumTTL(t *testing.T) {
	// etcd may grant more than asked (its minimum lease TTL): the manager counts with
	// what was granted, here 200 s for 100 s asked (5 s window).
	l, g, c := newTestLeases()
	g.minTTL = 200
	first := mustLease(t, l, 100*time.Second)
	c.step(time.Second)
	// The first lease would keep a key 99 s too long: a new one.
	second := mustLease(t, l, 100*time.Second)
	if second == first {
		t.Fatalf("lease %v reused 1 s after its grant, though it outlives the TTL by 99 s", first)
	}
	c.step(95 * time.Second)
	// The second lease expires 105 s from now: within 100 s plus the 5 s window.
	if id := mustLease(t, l, 100*time.Second); id != second {
		t.Fatalf("lease %v, want the second one (%v) reused", id, second)
	}
	if !slices.Equal(g.requests, []int64{105, 105}) {
		t.Fatalf("grant requests %v, want two of 105 s", g.requests)
	}
}

func TestLeaseMaxKeys(t *testing.T) {
	l, g, _ := newTestLeases()
	l.maxKeys = 3
	var ids []clientv3.LeaseID
	for range 7 {
		ids = append(ids, mustLease(t, l, time.Hour))
	}
	want := []clientv3.LeaseID{1, 1, 1, 2, 2, 2, 3}
	for i := range ids {
		if ids[i] != want[i] {
			t.Fatalf("leases %v, want %v (3 keys per lease)", ids, want)
		}
	}
	if len(g.requests) != 3 {
		t.Fatalf("grant requests %v, want 3", g.requests)
	}
}

func TestLeaseForget(t *testing.T) {
	l, _, _ := newTestLeases()
	a := mustLease(t, l, time.Hour)
	l.forget(a + 100) // another lease: no effect
	if b := mustLease(t, l, time.Hour); b != a {
		t.Fatalf("lease %v after forgetting another one, want %v", b, a)
	}
	l.forget(a)
	if b := mustLease(t, l, time.Hour); b == a {
		t.Fatalf("lease %v reused after it was forgotten", b)
	}
}

func TestLeaseGrantError(t *testing.T) {
	l, g, _ := newTestLeases()
	g.err = errors.New("etcd down")
	if _, err := l.lease(t.Context(), time.Hour); err == nil || !errors.Is(err, g.err) {
		t.Fatalf("lease: error %v, want one wrapping %v", err, g.err)
	}
	g.err = nil
	if id := mustLease(t, l, time.Hour); id != 1 {
		t.Fatalf("lease %v after a failed grant, want a new one", id)
	}
	if st := l.Stats(); st.Grants != 1 || st.Reuses != 0 {
		t.Fatalf("stats %+v, want 1 grant", st)
	}
}

func TestLeaseConcurrent(t *testing.T) {
	// Concurrent writes wait for one grant instead of each granting their own.
	l, g, _ := newTestLeases()
	var wg sync.WaitGroup
	ids := make([]clientv3.LeaseID, 50)
	for i := range ids {
		wg.Go(func() {
			id, err := l.lease(context.Background(), time.Hour)
			if err != nil {
				t.Errorf("lease: %v", err)
			}
			ids[i] = id
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != 1 {
			t.Fatalf("leases %v, want all the first one", ids)
		}
	}
	if st := l.Stats(); len(g.requests) != 1 || st.Grants != 1 || st.Reuses != 49 {
		t.Fatalf("grants %v, stats %+v: want 1 grant and 49 reuses", g.requests, st)
	}
}

// TestStoreTTLLeases writes through a real etcd: writes with a TTL share one lease,
// carry it, and a write after the lease was revoked gets a new one.
func TestStoreTTLLeases(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{})
	testStoreTTLLeases(t, embeddedStore(t, e))
}

// The in-process Store writes through the server's KV service, not the client:
// its lease errors must still send a write with a revoked lease to a new one.
func TestStoreTTLLeasesInProcess(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{})
	s := inProcessStore(t, e)
	if s.kv == nil {
		t.Fatal("the in-process Store does not call the server's KV service")
	}
	testStoreTTLLeases(t, s)
}

func testStoreTTLLeases(t *testing.T, s *Store) {
	ctx := t.Context()
	prefix := "/ttl-leases/"
	var revs []int64
	for i := range 5 {
		rev, err := s.Create(ctx, prefix+string(rune('a'+i)), []byte("v"), storage.WithTTL(time.Hour))
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		revs = append(revs, rev)
	}
	if _, err := s.Update(ctx, prefix+"a", []byte("w"), revs[0], storage.WithTTL(time.Hour)); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if _, err := s.Create(ctx, prefix+"plain", []byte("v")); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if st := s.LeaseStats(); st.Grants != 1 || st.Reuses != 5 {
		t.Fatalf("lease stats %+v, want 1 grant and 5 reuses", st)
	}
	resp, err := s.Client().Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	var lease clientv3.LeaseID
	for _, kv := range resp.Kvs {
		id := clientv3.LeaseID(kv.Lease)
		switch {
		case string(kv.Key) == prefix+"plain":
			if id != clientv3.NoLease {
				t.Fatalf("%s has lease %x, want none", kv.Key, id)
			}
		case id == clientv3.NoLease || (lease != clientv3.NoLease && id != lease):
			t.Fatalf("%s has lease %x, want the shared one (%x)", kv.Key, id, lease)
		default:
			lease = id
		}
	}
	ttl, err := s.Client().TimeToLive(ctx, lease)
	if err != nil {
		t.Fatalf("TimeToLive: %v", err)
	}
	if ttl.GrantedTTL != 3660 {
		t.Fatalf("granted TTL %d s, want 3660 (1 h plus the 60 s reuse window)", ttl.GrantedTTL)
	}
	// Revoking the lease deletes its keys in one revision: a watch gets them together,
	// each but the last marked More.
	ch, err := s.Watch(ctx, prefix, 0)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	if _, err := s.Client().Revoke(ctx, lease); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	var deletes []storage.Event
	for len(deletes) < 5 {
		select {
		case r := <-ch:
			if r.Err != nil {
				t.Fatalf("watch: %v", r.Err)
			}
			if r.Event.Key != "" {
				deletes = append(deletes, r.Event)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("watch: %d deletions after the revoke, want 5", len(deletes))
		}
	}
	for i, ev := range deletes {
		if ev.Type != storage.EventDelete || ev.Revision != deletes[0].Revision || ev.More != (i < 4) {
			t.Fatalf("deletion %d: %v %s revision %d More %v; want deletions at one revision, More on all but the last",
				i, ev.Type, ev.Key, ev.Revision, ev.More)
		}
	}
	// The next write finds the cached lease gone, and gets a new one instead of failing.
	if n, err := s.Count(ctx, prefix); err != nil || n != 1 {
		t.Fatalf("Count after revoke = %d, %v; want 1 (plain)", n, err)
	}
	if _, err := s.Create(ctx, prefix+"after", []byte("v"), storage.WithTTL(time.Hour)); err != nil {
		t.Fatalf("Create after the lease was revoked: %v", err)
	}
	if st := s.LeaseStats(); st.Grants != 2 {
		t.Fatalf("lease stats %+v, want a second grant", st)
	}
	// Without the retry the error would be etcd's.
	if _, err := s.Client().Put(ctx, prefix+"x", "v", clientv3.WithLease(lease)); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Fatalf("Put with the revoked lease: %v, want ErrLeaseNotFound", err)
	}
}

// BenchmarkCreateTTL measures parallel creates of distinct 1 KiB keys through an
// in-process store (fsync off) without and with a TTL, and what expiring them costs:
// the revocation of the leases, whose keys go in one transaction each. It reports the
// process's CPU time per create (cpu-µs/create), which etcd's server shares, and per
// key deleted by the revocations (cpu-µs/expired).
func BenchmarkCreateTTL(b *testing.B) {
	for _, bc := range []struct {
		name string
		ttl  time.Duration
	}{{"ttl=0", 0}, {"ttl=1h", time.Hour}} {
		b.Run(bc.name, func(b *testing.B) {
			e := startEmbedded(b, EmbeddedConfig{UnsafeNoFsync: true})
			s := inProcessStore(b, e)
			value := bytes.Repeat([]byte("x"), 1024)
			var opts []storage.WriteOption
			if bc.ttl > 0 {
				opts = []storage.WriteOption{storage.WithTTL(bc.ttl)}
			}
			var n atomic.Int64
			b.SetParallelism(4)
			b.ReportAllocs()
			cpu0 := processCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.Create(b.Context(), "/bench/"+strconv.FormatInt(n.Add(1), 10), value, opts...); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/1000/float64(b.N), "cpu-µs/create")
			if bc.ttl == 0 {
				return
			}
			b.ReportMetric(float64(s.LeaseStats().Grants), "grants")
			leases, err := s.Client().Leases(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			cpu0 = processCPU()
			for _, l := range leases.Leases {
				if _, err := s.Client().Revoke(b.Context(), l.ID); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/1000/float64(b.N), "cpu-µs/expired")
			if left, err := s.Count(b.Context(), "/bench/"); err != nil || left != 0 {
				b.Fatalf("%d keys left after revoking every lease (%v)", left, err)
			}
		})
	}
}

// processCPU is the user+system CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
