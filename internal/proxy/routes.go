package proxy

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// KernelRoutedPrefixes returns the destinations of this host's IPv4 routes
// that lie inside cluster (a pod bridge's subnet, routes to other real nodes'
// pod CIDRs). A route that covers more than cluster (the default route) does
// not count: it would send the packet out of the machine.
func KernelRoutedPrefixes(cluster netip.Prefix) ([]netip.Prefix, error) {
	routes, err := netlink.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("list routes: %w", err)
	}
	var out []netip.Prefix
	for _, r := range routes {
		if r.Dst == nil {
			continue
		}
		a, ok := netip.AddrFromSlice(r.Dst.IP.To4())
		if !ok {
			continue
		}
		ones, _ := r.Dst.Mask.Size()
		p := netip.PrefixFrom(a, ones).Masked()
		if p.Bits() >= cluster.Bits() && cluster.Contains(p.Addr()) {
			out = append(out, p)
		}
	}
	return out, nil
}
