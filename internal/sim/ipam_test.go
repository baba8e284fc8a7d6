package sim

import (
	"net/netip"
	"testing"
)

func TestSubnet(t *testing.T) {
	base := netip.MustParsePrefix("10.128.0.0/9")
	for _, tc := range []struct {
		i    int
		want string
	}{{0, "10.128.0.0/24"}, {1, "10.128.1.0/24"}, {256, "10.129.0.0/24"}, {32767, "10.255.255.0/24"}} {
		got, err := subnet(base, 24, tc.i)
		if err != nil || got.String() != tc.want {
			t.Errorf("subnet(%s, 24, %d) = %v, %v; want %s", base, tc.i, got, err, tc.want)
		}
	}
	if _, err := subnet(base, 24, 32768); err == nil {
		t.Error("subnet 32768 of a /9 in /24s: want an error")
	}
	if _, err := subnet(base, 8, 0); err == nil {
		t.Error("a /8 inside a /9: want an error")
	}
	if _, err := subnet(netip.MustParsePrefix("fd00::/64"), 80, 0); err == nil {
		t.Error("IPv6: want an error")
	}
}

func TestIPPoolLowestFreeFirstAndReuse(t *testing.T) {
	p, err := newIPPool(netip.MustParsePrefix("10.128.3.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	if p.capacity() != 253 {
		t.Fatalf("capacity %d, want 253 (.2 to .254)", p.capacity())
	}
	seen := map[netip.Addr]bool{}
	var all []netip.Addr
	for i := 0; i < 253; i++ {
		ip, ok := p.allocate()
		if !ok {
			t.Fatalf("allocation %d failed", i)
		}
		if seen[ip] {
			t.Fatalf("%s handed out twice", ip)
		}
		seen[ip] = true
		all = append(all, ip)
	}
	if all[0].String() != "10.128.3.2" || all[252].String() != "10.128.3.254" {
		t.Fatalf("first %s last %s, want 10.128.3.2 and 10.128.3.254", all[0], all[252])
	}
	if ip, ok := p.allocate(); ok {
		t.Fatalf("exhausted pool handed out %s", ip)
	}
	p.release(all[100])
	p.release(all[7])
	p.release(all[7]) // twice: no effect
	p.release(netip.MustParseAddr("10.1.1.1"))
	if p.inUse != 251 {
		t.Fatalf("inUse %d after two releases, want 251", p.inUse)
	}
	if ip, _ := p.allocate(); ip != all[7] {
		t.Fatalf("got %s, want the lowest released %s", ip, all[7])
	}
	if ip, _ := p.allocate(); ip != all[100] {
		t.Fatalf("got %s, want %s", ip, all[100])
	}
}

func TestIPPoolReserve(t *testing.T) {
	p, _ := newIPPool(netip.MustParsePrefix("10.128.0.0/24"))
	for _, tc := range []struct {
		ip   string
		want bool
	}{
		{"10.128.0.5", true}, {"10.128.0.5", false}, // already in use
		{"10.128.0.0", false}, {"10.128.0.1", false}, {"10.128.0.255", false}, // network, gateway, broadcast
		{"10.128.1.5", false}, // outside
	} {
		if got := p.reserve(netip.MustParseAddr(tc.ip)); got != tc.want {
			t.Errorf("reserve(%s) = %v, want %v", tc.ip, got, tc.want)
		}
	}
	for i := 0; i < 3; i++ {
		ip, _ := p.allocate()
		if ip.String() == "10.128.0.5" {
			t.Fatal("reserved address handed out")
		}
	}
}

func TestIPPoolSizes(t *testing.T) {
	for _, tc := range []struct {
		cidr string
		cap  int
	}{{"10.0.0.0/29", 5}, {"10.0.0.0/26", 61}, {"10.0.0.0/16", 65533}, {"10.0.0.0/12", 65533}} {
		p, err := newIPPool(netip.MustParsePrefix(tc.cidr))
		if err != nil {
			t.Fatalf("%s: %v", tc.cidr, err)
		}
		if p.capacity() != tc.cap {
			t.Errorf("%s: capacity %d, want %d", tc.cidr, p.capacity(), tc.cap)
		}
		n := 0
		for {
			if _, ok := p.allocate(); !ok {
				break
			}
			n++
		}
		if n != tc.cap {
			t.Errorf("%s: handed out %d, want %d", tc.cidr, n, tc.cap)
		}
	}
	if _, err := newIPPool(netip.MustParsePrefix("10.0.0.0/30")); err == nil {
		t.Error("a /30: want an error")
	}
}
