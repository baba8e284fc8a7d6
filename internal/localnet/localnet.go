// Package localnet tells whether this machine reaches an address without sending a packet
// out of it, and dials only such addresses. Reachable are this machine's own addresses and
// the subnets of loopback interfaces and of bridges whose every port is a virtual device
// (the CNI bridge of the node's pods, with one veth per pod). Anything else, a pod address
// of a simulated node (which exists nowhere) or another machine of the host's network,
// is refused before any packet leaves.
package localnet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
)

// Snapshot is what Reachable needs to know about this machine's network.
type Snapshot struct {
	// Addrs are the addresses of every interface.
	Addrs []netip.Addr
	// Subnets are the on-link subnets of the loopback interfaces and of the local bridges
	// (bridges whose every port is a virtual device).
	Subnets []netip.Prefix
}

// Reachable reports whether ip is one of the machine's addresses or lies in one of its
// local subnets.
func Reachable(ip netip.Addr, snap Snapshot) bool {
	ip = ip.Unmap()
	for _, a := range snap.Addrs {
		if a.Unmap() == ip {
			return true
		}
	}
	for _, p := range snap.Subnets {
		if p.Masked().Contains(ip) {
			return true
		}
	}
	return false
}

// Read takes a snapshot of this machine's network: every address (one dump of the
// kernel's address table), and the subnets of the loopback interfaces and local bridges
// (the many pod veths carry no address and are not looked at one by one).
func Read() (Snapshot, error) {
	var snap Snapshot
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return snap, fmt.Errorf("list interface addresses: %w", err)
	}
	for _, a := range addrs {
		if p, ok := prefixOf(a); ok {
			snap.Addrs = append(snap.Addrs, p.Addr())
		}
	}
	ifis, err := net.Interfaces()
	if err != nil {
		return snap, fmt.Errorf("list network interfaces: %w", err)
	}
	for _, ifi := range ifis {
		if ifi.Flags&net.FlagUp == 0 || (ifi.Flags&net.FlagLoopback == 0 && !isLocalBridge(ifi.Name)) {
			continue
		}
		addrs, err := ifi.Addrs()
		if err != nil {
			return snap, fmt.Errorf("addresses of %s: %w", ifi.Name, err)
		}
		for _, a := range addrs {
			if p, ok := prefixOf(a); ok {
				snap.Subnets = append(snap.Subnets, p)
			}
		}
	}
	return snap, nil
}

// prefixOf is an interface address as a prefix (the address and its on-link length).
func prefixOf(a net.Addr) (netip.Prefix, bool) {
	ipn, ok := a.(*net.IPNet)
	if !ok {
		return netip.Prefix{}, false
	}
	addr, ok := netip.AddrFromSlice(ipn.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := ipn.Mask.Size()
	addr = addr.Unmap()
	if addr.Is4() && ones > 32 {
		ones -= 96
	}
	return netip.PrefixFrom(addr, ones), true
}

// isLocalBridge reports whether name is a bridge none of whose ports is a physical device
// (a device with a /sys/class/net/PORT/device link is hardware: the bridge reaches the wire).
func isLocalBridge(name string) bool {
	dir := filepath.Join("/sys/class/net", name)
	if _, err := os.Stat(filepath.Join(dir, "bridge")); err != nil {
		return false
	}
	ports, err := os.ReadDir(filepath.Join(dir, "brif"))
	if err != nil {
		return false
	}
	for _, p := range ports {
		if _, err := os.Stat(filepath.Join("/sys/class/net", p.Name(), "device")); err == nil {
			return false
		}
	}
	return true
}

// Check returns nil when this machine reaches ip without sending a packet out, else an
// error that names the address.
func Check(ip netip.Addr) error {
	snap, err := Read()
	if err != nil {
		return err
	}
	if !Reachable(ip, snap) {
		return &NotLocalError{Addr: ip}
	}
	return nil
}

// NotLocalError is the refusal of an address that is not on this machine.
type NotLocalError struct{ Addr netip.Addr }

func (e *NotLocalError) Error() string {
	return fmt.Sprintf("address %s is on no network of this machine (not one of its addresses, nor on a local bridge): refused without dialling", e.Addr)
}

// Dialer dials only addresses that Check allows; a host that is not an IP literal is
// refused too (nothing is resolved).
type Dialer struct {
	// Dialer makes the connections that are allowed.
	Dialer net.Dialer
}

// DialContext checks addr's host and dials it.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return nil, fmt.Errorf("dial %s: the host is not an IP address, and names are not resolved here", addr)
	}
	if err := Check(ip); err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return d.Dialer.DialContext(ctx, network, addr)
}
