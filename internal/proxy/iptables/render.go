package iptables

import (
	"cmp"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Chain names kubette owns besides the per-service ones.
const (
	ChainServices         = "KUBE-SERVICES"
	ChainExternalServices = "KUBE-EXTERNAL-SERVICES"
	ChainNodePorts        = "KUBE-NODEPORTS"
	ChainPostrouting      = "KUBE-POSTROUTING"
	ChainMarkMasq         = "KUBE-MARK-MASQ"
	ChainForward          = "KUBE-FORWARD"
	// ChainGuard is kubette's safety chain: it rejects what must not leave.
	ChainGuard = "KUBE-SERVICE-CIDR-GUARD"
)

// Prefixes of the per-service-port and per-endpoint chains.
const (
	PrefixSVC = "KUBE-SVC-"
	PrefixSEP = "KUBE-SEP-"
	PrefixEXT = "KUBE-EXT-"
)

// Table names as iptables-restore spells them.
const (
	TableFilter = "filter"
	TableNAT    = "nat"
)

// Chain is one user-defined chain and its rules, each rule the text after
// "-A NAME ".
type Chain struct {
	Name  string
	Rules []string
}

// Ruleset is the rendered filter and nat tables, chains in a fixed order.
type Ruleset struct {
	Filter, NAT []Chain
}

// Table returns the chains of the named table.
func (r *Ruleset) Table(name string) []Chain {
	if name == TableNAT {
		return r.NAT
	}
	return r.Filter
}

// portProtoHash is upstream's chain-name hash: base32 of sha256 over the
// service port name, the lower-case protocol and (for endpoint chains) the
// endpoint, first 16 characters.
func portProtoHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base32.StdEncoding.EncodeToString(sum[:])[:16]
}

// ServicePortName is upstream's "namespace/name:port" ("namespace/name" for an
// unnamed port).
func ServicePortName(namespace, name, port string) string {
	if port == "" {
		return namespace + "/" + name
	}
	return namespace + "/" + name + ":" + port
}

// SVCChain is the KUBE-SVC chain name of a service port.
func SVCChain(spn, protocol string) string {
	return PrefixSVC + portProtoHash(spn+strings.ToLower(protocol))
}

// EXTChain is the KUBE-EXT chain name of a service port.
func EXTChain(spn, protocol string) string {
	return PrefixEXT + portProtoHash(spn+strings.ToLower(protocol))
}

// SEPChain is the KUBE-SEP chain name of one endpoint ("ip:port") of a
// service port.
func SEPChain(spn, protocol, endpoint string) string {
	return PrefixSEP + portProtoHash(spn+strings.ToLower(protocol)+endpoint)
}

// UsableEndpoints returns the endpoints a Cluster-policy service port sends
// traffic to, sorted by address and port, without duplicates: the ready ones,
// or, when none is ready, the serving ones that are terminating (as upstream).
func UsableEndpoints(eps []Endpoint) []Endpoint {
	var ready, terminating []Endpoint
	for _, e := range eps {
		if !e.IP.Is4() || e.Port <= 0 {
			continue
		}
		switch {
		case e.Ready:
			ready = append(ready, e)
		case e.Serving && e.Terminating:
			terminating = append(terminating, e)
		}
	}
	out := ready
	if len(out) == 0 {
		out = terminating
	}
	slices.SortFunc(out, func(a, b Endpoint) int {
		if c := a.IP.Compare(b.IP); c != 0 {
			return c
		}
		return cmp.Compare(a.Port, b.Port)
	})
	return slices.CompactFunc(out, func(a, b Endpoint) bool { return a.IP == b.IP && a.Port == b.Port })
}

// comment renders -m comment the way iptables-save prints it.
func comment(s string) string {
	if strings.ContainsAny(s, " \t\"'") {
		return `-m comment --comment "` + s + `"`
	}
	return "-m comment --comment " + s
}

func protoMatch(protocol string) string {
	p := strings.ToLower(protocol)
	return "-m " + p + " -p " + p
}

// Render returns the rules of m under o. It is pure and deterministic.
func Render(m Model, o Options) *Ruleset {
	mark := "0x" + strconv.FormatUint(uint64(o.mark()), 16)
	svcs := slices.Clone(m.Services)
	slices.SortFunc(svcs, func(a, b Service) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})

	var (
		natServices, natNodePorts       []string
		filterServices, filterExternals []string
		svcChains                       []Chain
	)
	nodeDst := nodePortDestinations(o)
	for _, s := range svcs {
		var cips []netip.Addr
		for _, ip := range s.ClusterIPs {
			if ip.Is4() {
				cips = append(cips, ip)
			}
		}
		if len(cips) == 0 {
			continue // headless or IPv6-only
		}
		ports := slices.Clone(s.Ports)
		slices.SortStableFunc(ports, func(a, b Port) int {
			return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Port, b.Port), cmp.Compare(a.Protocol, b.Protocol))
		})
		for _, p := range ports {
			proto := strings.ToLower(p.Protocol)
			if proto == "" {
				proto = "tcp"
			}
			spn := ServicePortName(s.Namespace, s.Name, p.Name)
			eps := UsableEndpoints(p.Endpoints)
			pm := protoMatch(proto)
			dport := strconv.Itoa(int(p.Port))
			if len(eps) == 0 {
				for _, ip := range cips {
					filterServices = append(filterServices, comment(spn+" has no endpoints")+" "+pm+" -d "+ip.String()+" --dport "+dport+" -j REJECT")
				}
				if p.NodePort > 0 {
					for _, d := range nodeDst {
						filterExternals = append(filterExternals, comment(spn+" has no endpoints")+" "+d+" "+pm+" --dport "+strconv.Itoa(int(p.NodePort))+" -j REJECT")
					}
				}
				continue
			}
			svcChain := SVCChain(spn, proto)
			for _, ip := range cips {
				natServices = append(natServices, comment(spn+" cluster IP")+" "+pm+" -d "+ip.String()+" --dport "+dport+" -j "+svcChain)
			}
			svc := Chain{Name: svcChain}
			for _, ip := range cips {
				r := comment(spn+" cluster IP") + " " + pm + " -d " + ip.String() + " --dport " + dport
				if o.ClusterCIDR.IsValid() {
					r += " ! -s " + o.ClusterCIDR.String()
				}
				svc.Rules = append(svc.Rules, r+" -j "+ChainMarkMasq)
			}
			seps := make([]Chain, 0, len(eps))
			for _, e := range eps {
				ep := netip.AddrPortFrom(e.IP, uint16(e.Port)).String()
				seps = append(seps, Chain{Name: SEPChain(spn, proto, ep), Rules: []string{
					comment(spn) + " -s " + e.IP.String() + " -j " + ChainMarkMasq,
					"", // DNAT, below
				}})
				last := &seps[len(seps)-1]
				dnat := comment(spn)
				if s.AffinityTimeoutSeconds > 0 {
					dnat += " -m recent --name " + last.Name + " --set"
				}
				last.Rules[1] = dnat + " " + pm + " -j DNAT --to-destination " + ep
			}
			if s.AffinityTimeoutSeconds > 0 {
				secs := strconv.Itoa(int(s.AffinityTimeoutSeconds))
				for i, e := range eps {
					ep := netip.AddrPortFrom(e.IP, uint16(e.Port)).String()
					svc.Rules = append(svc.Rules, comment(spn+" -> "+ep)+" -m recent --name "+seps[i].Name+" --rcheck --seconds "+secs+" --reap -j "+seps[i].Name)
				}
			}
			n := len(eps)
			for i, e := range eps {
				ep := netip.AddrPortFrom(e.IP, uint16(e.Port)).String()
				r := comment(spn + " -> " + ep)
				if i < n-1 {
					r += fmt.Sprintf(" -m statistic --mode random --probability %0.10f", 1.0/float64(n-i))
				}
				svc.Rules = append(svc.Rules, r+" -j "+seps[i].Name)
			}
			svcChains = append(svcChains, svc)
			if p.NodePort > 0 {
				ext := Chain{Name: EXTChain(spn, proto), Rules: []string{
					comment("masquerade traffic for "+spn+" external destinations") + " -j " + ChainMarkMasq,
					"-j " + svcChain,
				}}
				natNodePorts = append(natNodePorts, comment(spn)+" "+pm+" --dport "+strconv.Itoa(int(p.NodePort))+" -j "+ext.Name)
				svcChains = append(svcChains, ext)
			}
			svcChains = append(svcChains, seps...)
		}
	}
	for _, d := range nodeDst {
		natServices = append(natServices, comment("kubernetes service nodeports; NOTE: this must be the last rule in this chain")+" "+d+" -j "+ChainNodePorts)
	}

	return &Ruleset{
		Filter: []Chain{
			{Name: ChainNodePorts},
			{Name: ChainServices, Rules: filterServices},
			{Name: ChainExternalServices, Rules: filterExternals},
			{Name: ChainForward, Rules: []string{
				comment("kubette: never forward what the guard rejects") + " -j " + ChainGuard,
				"-m conntrack --ctstate INVALID -j DROP",
				comment("kubernetes forwarding rules") + " -m mark --mark " + mark + "/" + mark + " -j ACCEPT",
				comment("kubernetes forwarding conntrack rule") + " -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
			}},
			Guard(o),
		},
		NAT: append([]Chain{
			{Name: ChainServices, Rules: natServices},
			{Name: ChainNodePorts, Rules: natNodePorts},
			{Name: ChainPostrouting, Rules: []string{
				"-m mark ! --mark " + mark + "/" + mark + " -j RETURN",
				"-j MARK --xor-mark " + mark,
				comment("kubernetes service traffic requiring SNAT") + " -j MASQUERADE --random-fully",
			}},
			{Name: ChainMarkMasq, Rules: []string{"-j MARK --or-mark " + mark}},
		}, svcChains...),
	}
}

// nodePortDestinations are the destination matches of NodePort rules.
func nodePortDestinations(o Options) []string {
	if len(o.NodeIPs) == 0 {
		return []string{"-m addrtype --dst-type LOCAL ! -d 127.0.0.0/8"}
	}
	ips := slices.Clone(o.NodeIPs)
	slices.SortFunc(ips, netip.Addr.Compare)
	var out []string
	for _, ip := range slices.Compact(ips) {
		if ip.Is4() {
			out = append(out, "-d "+ip.String())
		}
	}
	return out
}

// Guard returns the filter chain that keeps traffic to the service CIDR
// (not DNATed) and, with RejectUnroutedPodCIDR, to unrouted pod addresses on
// this machine: TCP gets a reset, everything else ICMP port unreachable.
func Guard(o Options) Chain {
	c := Chain{Name: ChainGuard}
	if o.ServiceCIDR.IsValid() {
		cidr := o.ServiceCIDR.Masked().String()
		c.Rules = append(c.Rules,
			comment("kubette: service CIDR traffic that was not DNATed")+" -d "+cidr+" -m conntrack ! --ctstate DNAT -p tcp -j REJECT --reject-with tcp-reset",
			comment("kubette: service CIDR traffic that was not DNATed")+" -d "+cidr+" -m conntrack ! --ctstate DNAT -j REJECT --reject-with icmp-port-unreachable",
		)
	}
	if o.RejectUnroutedPodCIDR && o.ClusterCIDR.IsValid() {
		routed := slices.Clone(o.RoutedPodCIDRs)
		slices.SortFunc(routed, func(a, b netip.Prefix) int {
			return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
		})
		for _, p := range slices.Compact(routed) {
			c.Rules = append(c.Rules, comment("kubette: routed pod CIDR")+" -d "+p.Masked().String()+" -j RETURN")
		}
		cidr := o.ClusterCIDR.Masked().String()
		c.Rules = append(c.Rules,
			comment("kubette: pod CIDR without a local route")+" -d "+cidr+" -p tcp -j REJECT --reject-with tcp-reset",
			comment("kubette: pod CIDR without a local route")+" -d "+cidr+" -j REJECT --reject-with icmp-port-unreachable",
		)
	}
	return c
}
