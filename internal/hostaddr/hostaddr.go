// Package hostaddr finds this machine's own address: the first IPv4 address of
// the interface that holds the default route. The API server advertises it for
// the kubernetes Service, the kubelet reports it as the node's InternalIP and the
// ingress controller publishes it in Ingress status.
package hostaddr

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// DefaultRouteIPv4 returns the first IPv4 address of the interface of the IPv4
// default route with the lowest metric, read from /proc/net/route.
func DefaultRouteIPv4() (netip.Addr, error) {
	data, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return netip.Addr{}, fmt.Errorf("read /proc/net/route: %w", err)
	}
	iface, err := defaultRouteInterface(data)
	if err != nil {
		return netip.Addr{}, err
	}
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("interface %s: %w", iface, err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("addresses of %s: %w", iface, err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			addr, _ := netip.AddrFromSlice(ipn.IP.To4())
			return addr, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("interface %s has no IPv4 address", iface)
}

// defaultRouteInterface finds the interface of the default route (destination
// and mask 0) with the lowest metric in the text of /proc/net/route.
func defaultRouteInterface(data []byte) (string, error) {
	best, bestMetric := "", uint64(0)
	for i, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 8 || f[1] != "00000000" || f[7] != "00000000" {
			continue
		}
		metric, err := strconv.ParseUint(f[6], 10, 64)
		if err != nil {
			continue
		}
		if best == "" || metric < bestMetric {
			best, bestMetric = f[0], metric
		}
	}
	if best == "" {
		return "", errors.New("no IPv4 default route")
	}
	return best, nil
}
