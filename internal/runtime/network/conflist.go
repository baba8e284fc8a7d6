package network

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// networkName is the CNI network name of every conflist this package writes.
const networkName = "kubette"

// cniVersion is the CNI spec version of the generated conflist.
const cniVersion = "1.0.0"

// conflist is the network configuration list kubette hands to libcni: a bridge with host-local
// IPAM over the pod CIDR(s), then portmap for hostPorts. The bridge plugin does not masquerade
// (ipMasq): the manager's one chain for the pod CIDR does; conflists of earlier versions, kept in
// sandbox records for their DEL, may still ask for it. It exists so that generating the file and
// reading the pod CIDRs back after a restart use one shape.
type conflist struct {
	CNIVersion string   `json:"cniVersion"`
	Name       string   `json:"name"`
	Plugins    []plugin `json:"plugins"`
}

// plugin holds the fields of both plugins in the list; omitempty keeps each one's JSON to its own keys.
type plugin struct {
	Type         string          `json:"type"`
	Bridge       string          `json:"bridge,omitempty"`
	IsGateway    bool            `json:"isGateway,omitempty"`
	HairpinMode  bool            `json:"hairpinMode,omitempty"`
	IPMasq       bool            `json:"ipMasq,omitempty"`
	IPAM         *ipam           `json:"ipam,omitempty"`
	Capabilities map[string]bool `json:"capabilities,omitempty"`
	SNAT         *bool           `json:"snat,omitempty"`
}

// ipam is host-local's configuration.
type ipam struct {
	Type    string        `json:"type"`
	Ranges  [][]ipamRange `json:"ranges"`
	Routes  []route       `json:"routes"`
	DataDir string        `json:"dataDir"`
}

type ipamRange struct {
	Subnet string `json:"subnet"`
}

type route struct {
	Dst string `json:"dst"`
}

// parseCIDRs parses a pod CIDR as CRI's UpdateRuntimeConfig carries it: one prefix, or an IPv4 and
// an IPv6 prefix separated by a comma (dual stack). Prefixes are returned masked.
func parseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("parse pod CIDR %q: %w", s, err)
		}
		for _, q := range out {
			if q.Addr().Is4() == p.Addr().Is4() {
				return nil, fmt.Errorf("parse pod CIDR %q: more than one prefix per IP family", s)
			}
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// formatCIDRs is the inverse of parseCIDRs.
func formatCIDRs(cidrs []netip.Prefix) string {
	parts := make([]string, len(cidrs))
	for i, p := range cidrs {
		parts[i] = p.String()
	}
	return strings.Join(parts, ",")
}

// buildConflist renders the conflist for a bridge, the pod CIDRs (one host-local range set each,
// with a default route per family) and host-local's state directory. It is a pure function.
func buildConflist(bridge string, cidrs []netip.Prefix, ipamDir string) ([]byte, error) {
	in := ipam{Type: "host-local", DataDir: ipamDir}
	for _, p := range cidrs {
		in.Ranges = append(in.Ranges, []ipamRange{{Subnet: p.String()}})
		dst := "0.0.0.0/0"
		if p.Addr().Is6() {
			dst = "::/0"
		}
		in.Routes = append(in.Routes, route{Dst: dst})
	}
	snat := true
	c := conflist{
		CNIVersion: cniVersion,
		Name:       networkName,
		Plugins: []plugin{
			{Type: "bridge", Bridge: bridge, IsGateway: true, HairpinMode: true, IPAM: &in},
			{Type: "portmap", Capabilities: map[string]bool{"portMappings": true}, SNAT: &snat},
		},
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("render conflist: %w", err)
	}
	return append(b, '\n'), nil
}

// withoutPortmap returns a conflist written by buildConflist without its portmap plugin: the
// conflist of a sandbox that publishes no hostPort. It is a pure function.
func withoutPortmap(b []byte) ([]byte, error) {
	var c conflist
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("parse conflist: %w", err)
	}
	c.Plugins = slices.DeleteFunc(c.Plugins, func(p plugin) bool { return p.Type == "portmap" })
	out, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("render conflist: %w", err)
	}
	return append(out, '\n'), nil
}

// conflistCIDRs reads the pod CIDRs back from a conflist written by buildConflist.
func conflistCIDRs(b []byte) ([]netip.Prefix, error) {
	var c conflist
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("parse conflist: %w", err)
	}
	var out []netip.Prefix
	for _, p := range c.Plugins {
		if p.IPAM == nil {
			continue
		}
		for _, set := range p.IPAM.Ranges {
			for _, r := range set {
				pfx, err := netip.ParsePrefix(r.Subnet)
				if err != nil {
					return nil, fmt.Errorf("parse conflist subnet %q: %w", r.Subnet, err)
				}
				out = append(out, pfx.Masked())
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("parse conflist: no IPAM subnet")
	}
	return out, nil
}

// conflistBridge reads the bridge name back from a conflist written by buildConflist.
func conflistBridge(b []byte) (string, error) {
	var c conflist
	if err := json.Unmarshal(b, &c); err != nil {
		return "", fmt.Errorf("parse conflist: %w", err)
	}
	for _, p := range c.Plugins {
		if p.Type == "bridge" && p.Bridge != "" {
			return p.Bridge, nil
		}
	}
	return "", errors.New("parse conflist: no bridge plugin with a bridge name")
}
