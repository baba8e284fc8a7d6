package iptables

import (
	"cmp"
	"net/netip"
	"slices"
)

// MergePrefixes returns the fewest prefixes that cover exactly the addresses
// of ps, sorted by address: each prefix is masked, invalid ones are dropped,
// prefixes inside another are left out and two halves of one prefix become
// that prefix, again and again (256 consecutive /24s aligned on a /16 become
// the /16). ps is not modified.
func MergePrefixes(ps []netip.Prefix) []netip.Prefix {
	in := make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		if p.IsValid() {
			in = append(in, p.Masked())
		}
	}
	slices.SortFunc(in, comparePrefixes)
	// The kept prefixes are disjoint and sorted; one that a later prefix lies
	// in can only be the last kept one, and a merged pair can only pair
	// again with the one kept before it.
	var out []netip.Prefix
	for _, p := range in {
		if n := len(out); n > 0 && out[n-1].Bits() <= p.Bits() && out[n-1].Contains(p.Addr()) {
			continue
		}
		out = append(out, p)
		for n := len(out); n >= 2; n = len(out) {
			a, b := out[n-2], out[n-1]
			if a.Bits() != b.Bits() || a.Bits() == 0 || a.Addr().BitLen() != b.Addr().BitLen() {
				break
			}
			parent := netip.PrefixFrom(a.Addr(), a.Bits()-1).Masked()
			if parent.Addr() != a.Addr() || !parent.Contains(b.Addr()) {
				break
			}
			out = append(out[:n-2], parent)
		}
	}
	return out
}

func comparePrefixes(a, b netip.Prefix) int {
	return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
}

// within returns the part of p that lies in c: p itself when c holds it, c
// when p holds c, and false when they are disjoint (or of two families).
func within(p, c netip.Prefix) (netip.Prefix, bool) {
	switch {
	case p.Addr().BitLen() != c.Addr().BitLen():
		return netip.Prefix{}, false
	case p.Bits() >= c.Bits() && c.Contains(p.Addr()):
		return p, true
	case c.Bits() >= p.Bits() && p.Contains(c.Addr()):
		return c, true
	}
	return netip.Prefix{}, false
}

// GuardPrefixes returns what the pod part of the guard matches, both merged
// (MergePrefixes) and sorted: rejects are the parts of the Nodes' pod CIDRs
// (NodePodCIDRs) inside ClusterCIDR that no routed prefix (RoutedPodCIDRs)
// covers whole, returns the routed prefixes that lie inside one of them,
// which the guard lets through (RETURN) before it rejects. Addresses outside
// every Node's pod CIDR are never rejected, whatever ClusterCIDR spans (the
// host's own network or resolver may lie in it). Both are empty unless
// RejectUnroutedPodCIDR is set and ClusterCIDR valid; only IPv4 counts.
func GuardPrefixes(o Options) (returns, rejects []netip.Prefix) {
	if !o.RejectUnroutedPodCIDR || !o.ClusterCIDR.IsValid() || !o.ClusterCIDR.Addr().Is4() {
		return nil, nil
	}
	cluster := o.ClusterCIDR.Masked()
	clip := func(ps []netip.Prefix) []netip.Prefix {
		var out []netip.Prefix
		for _, p := range ps {
			if !p.IsValid() {
				continue
			}
			if q, ok := within(p.Masked(), cluster); ok {
				out = append(out, q)
			}
		}
		return MergePrefixes(out)
	}
	pods := clip(o.NodePodCIDRs)
	if len(pods) == 0 {
		return nil, nil
	}
	routed := clip(o.RoutedPodCIDRs)
	for _, p := range pods {
		if !slices.ContainsFunc(routed, func(r netip.Prefix) bool { return r.Bits() <= p.Bits() && r.Contains(p.Addr()) }) {
			rejects = append(rejects, p)
		}
	}
	for _, r := range routed {
		if slices.ContainsFunc(rejects, func(p netip.Prefix) bool { return p.Bits() < r.Bits() && p.Contains(r.Addr()) }) {
			returns = append(returns, r)
		}
	}
	return returns, rejects
}
