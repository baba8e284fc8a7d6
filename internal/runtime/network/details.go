package network

import (
	"encoding/json"
	"net/netip"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
)

// describe fills in what a sandbox's CNI ADD did (Result's Network, Plugins, Interface,
// Addrs and Gateways) from the network list it ran and the list's result. What it cannot
// read stays empty: the description is for people (the runtime's Events), not for the
// sandbox's set-up.
func describe(list *libcni.NetworkConfigList, res types.Result, out *Result) {
	out.Network = list.Name
	for _, p := range list.Plugins {
		out.Plugins = append(out.Plugins, p.Network.Type)
		var conf struct {
			IPAM struct {
				Type string `json:"type"`
			} `json:"ipam"`
		}
		if json.Unmarshal(p.Bytes, &conf) == nil && conf.IPAM.Type != "" {
			out.Plugins = append(out.Plugins, conf.IPAM.Type)
		}
	}
	r, err := types100.NewResultFromResult(res)
	if err != nil {
		return
	}
	for _, ipc := range r.IPs {
		a, ok := netip.AddrFromSlice(ipc.Address.IP)
		if !ok {
			continue
		}
		ones, _ := ipc.Address.Mask.Size()
		out.Addrs = append(out.Addrs, netip.PrefixFrom(a.Unmap(), ones))
		if gw, ok := netip.AddrFromSlice(ipc.Gateway); ok {
			out.Gateways = append(out.Gateways, gw.Unmap())
		}
		if ipc.Interface != nil && *ipc.Interface >= 0 && *ipc.Interface < len(r.Interfaces) && out.Interface == "" {
			out.Interface = r.Interfaces[*ipc.Interface].Name
		}
	}
	if out.Interface == "" {
		out.Interface = ifName
	}
}
