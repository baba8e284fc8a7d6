package servicealloc

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"

	"github.com/kubette/kubette/internal/storage"
	"github.com/kubette/kubette/internal/storage/etcd"
)

func newStore(t *testing.T) storage.Store {
	t.Helper()
	e, err := etcd.StartEmbedded(context.Background(), etcd.EmbeddedConfig{DataDir: t.TempDir(), UnsafeNoFsync: true})
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(e.Close)
	st, err := e.Store()
	if err != nil {
		t.Fatalf("store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func TestParse(t *testing.T) {
	p, err := ParseCIDR("10.96.0.0/12")
	if err != nil || p.String() != "10.96.0.0/12" {
		t.Fatalf("ParseCIDR = %v, %v", p, err)
	}
	for _, bad := range []string{"fd00::/108", "10.0.0.0/31", "nonsense"} {
		if _, err := ParseCIDR(bad); err == nil {
			t.Errorf("ParseCIDR(%q) accepted", bad)
		}
	}
	r, err := ParsePortRange("30000-32767")
	if err != nil || r.Base != 30000 || r.Size != 2768 || r.String() != "30000-32767" {
		t.Fatalf("ParsePortRange = %+v, %v", r, err)
	}
	for _, bad := range []string{"32767-30000", "0-10", "1-70000", "a-b"} {
		if _, err := ParsePortRange(bad); err == nil {
			t.Errorf("ParsePortRange(%q) accepted", bad)
		}
	}
}

func TestIPRangeMath(t *testing.T) {
	a := NewIPs(nil, netip.MustParsePrefix("10.96.0.0/12"))
	if a.bits.Size() != 1<<20-2 {
		t.Fatalf("size = %d", a.bits.Size())
	}
	if got := a.First().String(); got != "10.96.0.1" {
		t.Fatalf("First = %s", got)
	}
	if a.bits.static != 256 {
		t.Fatalf("static band = %d, want 256", a.bits.static)
	}
	for ip, want := range map[string]int{"10.96.0.1": 0, "10.96.0.10": 9, "10.111.255.254": 1<<20 - 3} {
		if off, err := a.Offset(netip.MustParseAddr(ip)); err != nil || off != want {
			t.Errorf("Offset(%s) = %d, %v; want %d", ip, off, err, want)
		}
	}
	for _, ip := range []string{"10.96.0.0", "10.111.255.255", "10.112.0.1", "192.168.0.1"} {
		_, err := a.Offset(netip.MustParseAddr(ip))
		var nir *NotInRangeError
		if !errors.As(err, &nir) || err.Error() != "provided IP is not in the valid range. The range of valid IPs is 10.96.0.0/12" {
			t.Errorf("Offset(%s) error = %v", ip, err)
		}
	}
}

func TestIPAllocateReleaseExhaust(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	a := NewIPs(st, netip.MustParsePrefix("10.0.0.0/27")) // 30 addresses, static band 16
	if err := a.Allocate(ctx, netip.MustParseAddr("10.0.0.5")); err != nil {
		t.Fatal(err)
	}
	if err := a.Allocate(ctx, netip.MustParseAddr("10.0.0.5")); !errors.Is(err, ErrAllocated) || err.Error() != "provided IP is already allocated" {
		t.Fatalf("second Allocate = %v", err)
	}
	// Dynamic allocation starts above the static band, then falls back into it.
	first, err := a.AllocateNext(ctx)
	if err != nil || first.String() != "10.0.0.17" {
		t.Fatalf("AllocateNext = %v, %v; want 10.0.0.17", first, err)
	}
	seen := map[netip.Addr]bool{first: true, netip.MustParseAddr("10.0.0.5"): true}
	for i := 0; i < 28; i++ {
		ip, err := a.AllocateNext(ctx)
		if err != nil {
			t.Fatalf("AllocateNext %d: %v", i, err)
		}
		if seen[ip] {
			t.Fatalf("%s handed out twice", ip)
		}
		seen[ip] = true
	}
	if _, err := a.AllocateNext(ctx); !errors.Is(err, ErrFull) {
		t.Fatalf("AllocateNext on a full range = %v, want ErrFull", err)
	}
	if _, err := a.PeekNext(ctx); !errors.Is(err, ErrFull) {
		t.Fatalf("PeekNext on a full range = %v", err)
	}
	if err := a.Release(ctx, netip.MustParseAddr("10.0.0.9")); err != nil {
		t.Fatal(err)
	}
	if err := a.Check(ctx, netip.MustParseAddr("10.0.0.9")); err != nil {
		t.Fatalf("Check of a released address = %v", err)
	}
	if ip, err := a.AllocateNext(ctx); err != nil || ip.String() != "10.0.0.9" {
		t.Fatalf("AllocateNext after release = %v, %v", ip, err)
	}
	// A second allocator on the same store (another API server) sees the same state.
	b := NewIPs(st, netip.MustParsePrefix("10.0.0.0/27"))
	if err := b.Allocate(ctx, netip.MustParseAddr("10.0.0.9")); !errors.Is(err, ErrAllocated) {
		t.Fatalf("other allocator Allocate = %v", err)
	}
	if n, err := b.bits.Free(ctx); err != nil || n != 0 {
		t.Fatalf("Free = %d, %v", n, err)
	}
}

func TestPortsAllocate(t *testing.T) {
	ctx := context.Background()
	a := NewPorts(newStore(t), PortRange{Base: 30000, Size: 2768})
	if err := a.Allocate(ctx, 30080); err != nil {
		t.Fatal(err)
	}
	if err := a.Allocate(ctx, 30080); !errors.Is(err, ErrPortAllocated) || err.Error() != "provided port is already allocated" {
		t.Fatalf("second Allocate = %v", err)
	}
	if err := a.Allocate(ctx, 80); err == nil || err.Error() != "provided port is not in the valid range. The range of valid ports is 30000-32767" {
		t.Fatalf("Allocate(80) = %v", err)
	}
	p, err := a.AllocateNext(ctx)
	if err != nil || p != 30000+86 {
		t.Fatalf("AllocateNext = %d, %v (static band 86)", p, err)
	}
	if err := a.Release(ctx, p, 30080); err != nil {
		t.Fatal(err)
	}
	if err := a.Check(ctx, 30080); err != nil {
		t.Fatalf("Check after release = %v", err)
	}
}

// Two allocators on one store (as two API servers) never hand out one value twice.
func TestConcurrentAllocatorsDistinct(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	allocs := []*IPs{NewIPs(st, netip.MustParsePrefix("10.96.0.0/12")), NewIPs(st, netip.MustParsePrefix("10.96.0.0/12"))}
	var mu sync.Mutex
	got := map[netip.Addr]int{}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(a *IPs) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				ip, err := a.AllocateNext(ctx)
				if err != nil {
					t.Errorf("AllocateNext: %v", err)
					return
				}
				mu.Lock()
				got[ip]++
				mu.Unlock()
			}
		}(allocs[w%2])
	}
	wg.Wait()
	if len(got) != 200 {
		t.Fatalf("%d distinct addresses for 200 allocations", len(got))
	}
}

func TestRebuildLeaks(t *testing.T) {
	ctx := context.Background()
	a := NewPorts(newStore(t), PortRange{Base: 30000, Size: 100})
	for _, p := range []int{30001, 30002} {
		if err := a.Allocate(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	// 30001 is held by a Service, 30002 by none (a leak); 30003 is held but unmarked.
	used := func(context.Context) (map[int]bool, error) { return map[int]bool{1: true, 3: true}, nil }
	leaks := map[int]int{}
	for run := 1; run <= 3; run++ {
		if err := a.bits.Rebuild(ctx, used, leaks, 3); err != nil {
			t.Fatal(err)
		}
		if err := a.Check(ctx, 30003); !errors.Is(err, ErrPortAllocated) {
			t.Fatalf("run %d: a port in use was not marked: %v", run, err)
		}
		err := a.Check(ctx, 30002)
		if run < 3 && !errors.Is(err, ErrPortAllocated) {
			t.Fatalf("run %d: a leak was freed too early", run)
		}
		if run == 3 && err != nil {
			t.Fatalf("run 3: the leak is still taken: %v", err)
		}
	}
	if len(leaks) != 0 {
		t.Fatalf("leaks left: %v", leaks)
	}
}
