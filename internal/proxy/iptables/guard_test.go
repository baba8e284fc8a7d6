package iptables

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ss))
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func prefixStrings(ps []netip.Prefix) string {
	ss := make([]string, len(ps))
	for i, p := range ps {
		ss[i] = p.String()
	}
	return strings.Join(ss, " ")
}

// simNodeCIDRs are the pod CIDRs kubette sim gives n nodes by default:
// consecutive /24s from 10.128.0.0.
func simNodeCIDRs(n int) []netip.Prefix {
	out := make([]netip.Prefix, n)
	for i := range n {
		out[i] = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(128 + i>>8), byte(i), 0}), 24)
	}
	return out
}

func TestMergePrefixes(t *testing.T) {
	for _, c := range []struct {
		name string
		in   []netip.Prefix
		want string
	}{
		{"empty", nil, ""},
		{"one", prefixes("10.1.2.0/24"), "10.1.2.0/24"},
		{"masked", []netip.Prefix{netip.PrefixFrom(ip("10.1.2.3"), 24)}, "10.1.2.0/24"},
		{"invalid dropped", []netip.Prefix{{}, netip.MustParsePrefix("10.1.2.0/24")}, "10.1.2.0/24"},
		{"duplicates", prefixes("10.1.2.0/24", "10.1.2.0/24"), "10.1.2.0/24"},
		{"contained", prefixes("10.1.2.0/24", "10.1.0.0/16", "10.1.9.128/25"), "10.1.0.0/16"},
		{"siblings", prefixes("10.1.3.0/24", "10.1.2.0/24"), "10.1.2.0/23"},
		{"adjacent but not siblings", prefixes("10.1.1.0/24", "10.1.2.0/24"), "10.1.1.0/24 10.1.2.0/24"},
		{"cascade", prefixes("10.0.3.0/24", "10.0.0.0/24", "10.0.2.0/24", "10.0.1.0/24"), "10.0.0.0/22"},
		{"cascade through a contained one", prefixes("10.0.0.0/23", "10.0.2.0/24", "10.0.3.0/25", "10.0.3.128/25", "10.0.2.7/32"), "10.0.0.0/22"},
		{"gap", prefixes("10.0.0.0/24", "10.0.1.0/24", "10.0.3.0/24"), "10.0.0.0/23 10.0.3.0/24"},
		{"whole space", prefixes("0.0.0.0/1", "128.0.0.0/1"), "0.0.0.0/0"},
		{"families kept apart", prefixes("10.0.0.0/24", "fd00::/64", "10.0.1.0/24", "fd00:0:0:1::/64"), "10.0.0.0/23 fd00::/63"},
		{"5000 simulated nodes", simNodeCIDRs(5000), "10.128.0.0/12 10.144.0.0/15 10.146.0.0/16 10.147.0.0/17 10.147.128.0/21"},
		{"16384 simulated nodes", simNodeCIDRs(16384), "10.128.0.0/10"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := slices.Clone(c.in)
			if got := prefixStrings(MergePrefixes(c.in)); got != c.want {
				t.Errorf("MergePrefixes = %s, want %s", got, c.want)
			}
			if !slices.Equal(in, c.in) {
				t.Errorf("MergePrefixes changed its input")
			}
		})
	}
}

// TestMergePrefixesCoversTheSameAddresses checks on random sets of small
// prefixes of 10.0.0.0/22 that the merge covers exactly the input's
// addresses, with disjoint, sorted prefixes no two of which could merge.
func TestMergePrefixesCoversTheSameAddresses(t *testing.T) {
	base := netip.MustParsePrefix("10.0.0.0/22")
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 11))
		var in []netip.Prefix
		for range r.IntN(40) {
			bits := 22 + r.IntN(11)
			a := base.Addr().As4()
			off := r.Uint32N(1 << 10)
			a[2] += byte(off >> 8)
			a[3] = byte(off)
			in = append(in, netip.PrefixFrom(netip.AddrFrom4(a), bits).Masked())
		}
		out := MergePrefixes(in)
		covered := func(ps []netip.Prefix, a netip.Addr) bool {
			return slices.ContainsFunc(ps, func(p netip.Prefix) bool { return p.Contains(a) })
		}
		for off := range 1 << 10 {
			a := base.Addr().As4()
			a[2] += byte(off >> 8)
			a[3] = byte(off)
			addr := netip.AddrFrom4(a)
			if covered(in, addr) != covered(out, addr) {
				t.Fatalf("seed %d: %s covered %v by %s, %v by its merge %s", seed, addr, covered(in, addr), prefixStrings(in), covered(out, addr), prefixStrings(out))
			}
		}
		for i := 1; i < len(out); i++ {
			prev, p := out[i-1], out[i]
			if prev.Addr().Compare(p.Addr()) >= 0 || prev.Overlaps(p) {
				t.Fatalf("seed %d: merge %s not sorted and disjoint", seed, prefixStrings(out))
			}
			if prev.Bits() == p.Bits() && netip.PrefixFrom(prev.Addr(), prev.Bits()-1).Masked() == netip.PrefixFrom(p.Addr(), p.Bits()-1).Masked() {
				t.Fatalf("seed %d: merge %s keeps the halves %s and %s apart", seed, prefixStrings(out), prev, p)
			}
		}
	}
}

func TestGuardPrefixes(t *testing.T) {
	cluster := netip.MustParsePrefix("10.128.0.0/9")
	for _, c := range []struct {
		name                string
		nodes, routed       []netip.Prefix
		noReject            bool
		wantReturn, wantRej string
	}{
		{name: "no nodes", routed: prefixes("10.244.0.0/24")},
		{name: "off", nodes: prefixes("10.130.0.0/24"), noReject: true},
		{name: "unrouted node", nodes: prefixes("10.130.0.0/24"), wantRej: "10.130.0.0/24"},
		{name: "routed node", nodes: prefixes("10.244.0.0/24"), routed: prefixes("10.244.0.0/24")},
		{name: "node inside a wider route", nodes: prefixes("10.244.3.0/24"), routed: prefixes("10.244.0.0/16")},
		{name: "routed part of a merged range", nodes: prefixes("10.244.0.0/24", "10.244.1.0/24"), routed: prefixes("10.244.0.0/24", "10.200.0.0/24"),
			wantReturn: "10.244.0.0/24", wantRej: "10.244.0.0/23"},
		{name: "outside the cluster CIDR", nodes: prefixes("192.168.7.0/24", "10.0.0.0/24"), routed: nil},
		{name: "wider than the cluster CIDR", nodes: prefixes("10.0.0.0/8"), wantRej: "10.128.0.0/9"},
		{name: "IPv6 ignored", nodes: prefixes("fd00::/64", "10.131.0.0/24"), wantRej: "10.131.0.0/24"},
		{name: "5000 simulated nodes and the real one", nodes: append(simNodeCIDRs(5000), prefixes("10.244.0.0/24")...), routed: prefixes("10.244.0.0/24"),
			wantRej: "10.128.0.0/12 10.144.0.0/15 10.146.0.0/16 10.147.0.0/17 10.147.128.0/21"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := Options{ClusterCIDR: cluster, RejectUnroutedPodCIDR: !c.noReject, NodePodCIDRs: c.nodes, RoutedPodCIDRs: c.routed}
			returns, rejects := GuardPrefixes(o)
			if got := prefixStrings(returns); got != c.wantReturn {
				t.Errorf("returns %s, want %s", got, c.wantReturn)
			}
			if got := prefixStrings(rejects); got != c.wantRej {
				t.Errorf("rejects %s, want %s", got, c.wantRej)
			}
		})
	}
}

func BenchmarkGuardPrefixes5000Nodes(b *testing.B) {
	o := Options{ClusterCIDR: netip.MustParsePrefix("10.128.0.0/9"), RejectUnroutedPodCIDR: true,
		NodePodCIDRs: simNodeCIDRs(5000), RoutedPodCIDRs: prefixes("10.244.0.0/24")}
	for b.Loop() {
		if _, rejects := GuardPrefixes(o); len(rejects) != 5 {
			b.Fatal(fmt.Sprint(rejects))
		}
	}
}
