package network

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
)

func TestDescribe(t *testing.T) {
	list, err := libcni.NetworkConfFromBytes([]byte(`{"cniVersion":"1.0.0","name":"kubette","plugins":[
	  {"type":"bridge","bridge":"kubette0","ipam":{"type":"host-local","ranges":[[{"subnet":"10.244.0.0/24"}]]}},
	  {"type":"portmap","capabilities":{"portMappings":true}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	idx := 1
	res := &types100.Result{CNIVersion: "1.0.0",
		Interfaces: []*types100.Interface{{Name: "kubette0"}, {Name: "eth0", Sandbox: "/run/netns/x"}},
		IPs: []*types100.IPConfig{{Interface: &idx, Address: net.IPNet{IP: net.IPv4(10, 244, 0, 7), Mask: net.CIDRMask(24, 32)},
			Gateway: net.IPv4(10, 244, 0, 1)}}}
	var got Result
	describe(list, res, &got)
	if got.Network != "kubette" || !slices.Equal(got.Plugins, []string{"bridge", "host-local", "portmap"}) || got.Interface != "eth0" ||
		!slices.Equal(got.Addrs, []netip.Prefix{netip.MustParsePrefix("10.244.0.7/24")}) ||
		!slices.Equal(got.Gateways, []netip.Addr{netip.MustParseAddr("10.244.0.1")}) {
		t.Errorf("describe = %+v", got)
	}
}
