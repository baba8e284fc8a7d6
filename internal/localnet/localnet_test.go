package localnet

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
)

func TestReachable(t *testing.T) {
	snap := Snapshot{
		Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1"), netip.MustParseAddr("192.168.5.10"),
			netip.MustParseAddr("10.244.0.1"), netip.MustParseAddr("172.20.0.1")},
		// lo and cni0 (the pods' bridge); eth0's 192.168.5.0/24 and br-lan's 172.20.0.0/16 (a
		// bridge with a NIC in it) reach other machines and are not local subnets.
		Subnets: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("10.244.0.1/24")},
	}
	for addr, want := range map[string]bool{
		"127.0.0.1":         true,
		"127.3.4.5":         true, // loopback's whole subnet
		"::1":               true,
		"192.168.5.10":      true,  // this machine's own address
		"192.168.5.11":      false, // another machine on the host's network
		"10.244.0.7":        true,  // a pod on the node's bridge
		"10.244.1.7":        false, // a pod of another (simulated) node
		"10.128.0.5":        false,
		"172.20.0.1":        true,
		"172.20.0.9":        false,
		"8.8.8.8":           false,
		"::ffff:10.244.0.7": true,
	} {
		if got := Reachable(netip.MustParseAddr(addr), snap); got != want {
			t.Errorf("Reachable(%s) = %v, want %v", addr, got, want)
		}
	}
}

func TestDialerRefusesWithoutDialling(t *testing.T) {
	d := &Dialer{}
	for _, addr := range []string{"10.250.3.4:80", "example.com:80", "nonsense"} {
		c, err := d.DialContext(context.Background(), "tcp", addr)
		if err == nil {
			c.Close()
			t.Errorf("dial %s: no error", addr)
		}
	}
	_, err := d.DialContext(context.Background(), "tcp", "10.250.3.4:80")
	var nl *NotLocalError
	if !errors.As(err, &nl) || nl.Addr != netip.MustParseAddr("10.250.3.4") || !strings.Contains(err.Error(), "refused without dialling") {
		t.Errorf("dial of an address elsewhere: %v", err)
	}

	// Loopback is on this machine.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := d.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial loopback: %v", err)
	}
	c.Close()
}

func TestReadThisMachine(t *testing.T) {
	snap, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	if !Reachable(netip.MustParseAddr("127.0.0.1"), snap) {
		t.Errorf("loopback is not reachable in %+v", snap)
	}
	if len(snap.Addrs) == 0 {
		t.Errorf("no addresses in %+v", snap)
	}
}
