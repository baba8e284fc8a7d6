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
	// ChainProxyFirewall drops load-balancer traffic that a KUBE-FW chain
	// did not let through (filter table).
	ChainProxyFirewall = "KUBE-PROXY-FIREWALL"
	// ChainGuard is kubette's safety chain: it rejects what must not leave.
	ChainGuard = "KUBE-SERVICE-CIDR-GUARD"
)

// Prefixes of the per-service-port and per-endpoint chains.
const (
	PrefixSVC = "KUBE-SVC-"
	PrefixSVL = "KUBE-SVL-"
	PrefixSEP = "KUBE-SEP-"
	PrefixEXT = "KUBE-EXT-"
	PrefixFW  = "KUBE-FW-"
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
	// services are the per-Service outputs NAT's service chains come from,
	// in order (set by a Renderer; UpdateBatches diffs through them).
	services []*svcOut
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

// SVLChain is the KUBE-SVL chain name (Local traffic policy) of a service
// port.
func SVLChain(spn, protocol string) string {
	return PrefixSVL + portProtoHash(spn+strings.ToLower(protocol))
}

// EXTChain is the KUBE-EXT chain name of a service port.
func EXTChain(spn, protocol string) string {
	return PrefixEXT + portProtoHash(spn+strings.ToLower(protocol))
}

// FWChain is the KUBE-FW chain name (loadBalancerSourceRanges) of a service
// port.
func FWChain(spn, protocol string) string {
	return PrefixFW + portProtoHash(spn+strings.ToLower(protocol))
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
		if !usable(e) {
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
	return sortEndpoints(out)
}

// LocalEndpoints returns the endpoints a Local-policy service port sends
// traffic to on node: its ready endpoints there, or, when none is ready, its
// serving ones that are terminating there (as upstream); sorted, without
// duplicates.
func LocalEndpoints(eps []Endpoint, node string) []Endpoint {
	var local []Endpoint
	for _, e := range eps {
		if e.NodeName == node && node != "" {
			local = append(local, e)
		}
	}
	return UsableEndpoints(local)
}

// hasAnyEndpoints reports whether some endpoint anywhere is ready, or serving
// and terminating.
func hasAnyEndpoints(eps []Endpoint) bool {
	for _, e := range eps {
		if usable(e) && (e.Ready || (e.Serving && e.Terminating)) {
			return true
		}
	}
	return false
}

func usable(e Endpoint) bool { return e.IP.Is4() && e.Port > 0 }

func sortEndpoints(out []Endpoint) []Endpoint {
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
	return NewRenderer().Render(m, o)
}

// Renderer renders like Render, and keeps each Service's output to reuse it
// when the same Service comes again unchanged under the same options: a sync
// where one endpoint changed renders one Service, not all of them. Rulesets
// of one Renderer also diff fast (UpdateBatches compares only the Services
// whose output is not the very same). A Renderer is not safe for concurrent
// use.
type Renderer struct {
	opts  Options
	cache map[svcKey]*svcOut
}

type svcKey struct{ namespace, name string }

// NewRenderer returns a Renderer with an empty cache.
func NewRenderer() *Renderer { return &Renderer{cache: map[svcKey]*svcOut{}} }

// svcOut is one Service's share of the rules.
type svcOut struct {
	in                              Service
	natServices, natNodePorts       []string
	filterServices, filterExternals []string
	filterNodePorts, guardDrops     []string
	filterFirewall                  []string
	chains                          []Chain
	// forms and unpredicted are the chains' rules in SaveForm and the count
	// of rules without one, per chain; computed by the first full sync that
	// needs them (saved.go).
	forms       [][]string
	unpredicted []int
}

// Render returns the rules of m under o, reusing the output of Services that
// did not change since the previous call.
func (r *Renderer) Render(m Model, o Options) *Ruleset {
	if !r.opts.SameServiceRendering(o) {
		clear(r.cache)
	}
	r.opts = o
	mark := "0x" + strconv.FormatUint(uint64(o.mark()), 16)
	order := make([]int, len(m.Services))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		x, y := &m.Services[a], &m.Services[b]
		return cmp.Or(cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
	})
	nodeDst := nodePortDestinations(o)
	outs := make([]*svcOut, 0, len(order))
	next := make(map[svcKey]*svcOut, len(order))
	nChains, nServices := 0, 0
	for _, i := range order {
		s := &m.Services[i]
		key := svcKey{s.Namespace, s.Name}
		out, ok := r.cache[key]
		if !ok || !out.in.Equal(s) {
			out = renderService(s, o, nodeDst)
		}
		next[key] = out
		outs = append(outs, out)
		nChains += len(out.chains)
		nServices += len(out.natServices)
	}
	r.cache = next

	natServices := make([]string, 0, nServices+len(nodeDst))
	var natNodePorts, filterServices, filterExternals, filterNodePorts, guardDrops, filterFirewall []string
	for _, out := range outs {
		filterFirewall = append(filterFirewall, out.filterFirewall...)
		guardDrops = append(guardDrops, out.guardDrops...)
		natServices = append(natServices, out.natServices...)
		natNodePorts = append(natNodePorts, out.natNodePorts...)
		filterServices = append(filterServices, out.filterServices...)
		filterExternals = append(filterExternals, out.filterExternals...)
		filterNodePorts = append(filterNodePorts, out.filterNodePorts...)
	}
	for _, d := range nodeDst {
		natServices = append(natServices, comment("kubernetes service nodeports; NOTE: this must be the last rule in this chain")+" "+d+" -j "+ChainNodePorts)
	}
	nat := make([]Chain, 0, nChains+4)
	nat = append(nat,
		Chain{Name: ChainServices, Rules: natServices},
		Chain{Name: ChainNodePorts, Rules: natNodePorts},
		Chain{Name: ChainPostrouting, Rules: []string{
			"-m mark ! --mark " + mark + "/" + mark + " -j RETURN",
			"-j MARK --xor-mark " + mark,
			comment("kubernetes service traffic requiring SNAT") + " -j MASQUERADE --random-fully",
		}},
		Chain{Name: ChainMarkMasq, Rules: []string{"-j MARK --or-mark " + mark}},
	)
	for _, out := range outs {
		nat = append(nat, out.chains...)
	}
	// The guard comes first in filter OUTPUT and FORWARD: the DROP of
	// ClusterIP traffic that a Local policy has no endpoint for goes in it
	// too, before its REJECTs, so that such traffic is dropped as upstream.
	guard := Guard(o)
	if len(guardDrops) > 0 {
		guard.Rules = append(guardDrops, guard.Rules...)
	}
	return &Ruleset{
		Filter: []Chain{
			{Name: ChainNodePorts, Rules: filterNodePorts},
			{Name: ChainServices, Rules: filterServices},
			{Name: ChainExternalServices, Rules: filterExternals},
			{Name: ChainProxyFirewall, Rules: filterFirewall},
			{Name: ChainForward, Rules: []string{
				comment("kubette: never forward what the guard rejects") + " -j " + ChainGuard,
				"-m conntrack --ctstate INVALID -j DROP",
				comment("kubernetes forwarding rules") + " -m mark --mark " + mark + "/" + mark + " -j ACCEPT",
				comment("kubernetes forwarding conntrack rule") + " -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
			}},
			guard,
		},
		NAT:      nat,
		services: outs,
	}
}

// renderService renders one Service. Its input is copied into the result, so
// that the caller may change the model afterwards.
func renderService(in *Service, o Options, nodeDst []string) *svcOut {
	out := &svcOut{in: *in}
	out.in.ClusterIPs = slices.Clone(in.ClusterIPs)
	out.in.LoadBalancerIPs = slices.Clone(in.LoadBalancerIPs)
	out.in.ExternalIPs = slices.Clone(in.ExternalIPs)
	out.in.LoadBalancerSourceRanges = slices.Clone(in.LoadBalancerSourceRanges)
	out.in.Ports = slices.Clone(in.Ports)
	for i := range out.in.Ports {
		out.in.Ports[i].Endpoints = slices.Clone(in.Ports[i].Endpoints)
	}
	s := &out.in
	var cips []netip.Addr
	for _, ip := range s.ClusterIPs {
		if ip.Is4() {
			cips = append(cips, ip)
		}
	}
	if len(cips) == 0 {
		return out // headless or IPv6-only: no rules
	}
	ports := slices.Clone(s.Ports)
	slices.SortStableFunc(ports, func(a, b Port) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Port, b.Port), cmp.Compare(a.Protocol, b.Protocol))
	})
	ext := externals{lbIPs: IPv4(s.LoadBalancerIPs), extIPs: IPv4(s.ExternalIPs)}
	for _, r := range s.LoadBalancerSourceRanges {
		if r.IsValid() && r.Addr().Is4() {
			ext.ranges = append(ext.ranges, r.Masked())
		}
	}
	for _, p := range ports {
		renderPort(out, s, p, cips, ext, o, nodeDst)
	}
	return out
}

// externals are a Service's external destinations besides NodePorts.
type externals struct {
	lbIPs, extIPs []netip.Addr
	ranges        []netip.Prefix // loadBalancerSourceRanges
}

// renderPort renders one service port into out, with upstream's traffic
// policy logic: which endpoints Cluster and Local policy use, which chains
// exist, and what happens to traffic no endpoint can take.
func renderPort(out *svcOut, s *Service, p Port, cips []netip.Addr, ext externals, o Options, nodeDst []string) {
	lbIPs := ext.lbIPs
	proto := strings.ToLower(p.Protocol)
	if proto == "" {
		proto = "tcp"
	}
	spn := ServicePortName(s.Namespace, s.Name, p.Name)
	pm := protoMatch(proto)
	dport := strconv.Itoa(int(p.Port))
	nodePort := strconv.Itoa(int(p.NodePort))

	external := p.NodePort > 0 || len(lbIPs) > 0 || len(ext.extIPs) > 0
	externalLocal := s.ExternalLocal && external
	usesCluster := !s.InternalLocal || external
	usesLocal := s.InternalLocal || externalLocal
	var clusterEps, localEps []Endpoint
	if usesCluster {
		clusterEps = UsableEndpoints(p.Endpoints)
	}
	if usesLocal {
		localEps = LocalEndpoints(p.Endpoints, o.NodeName)
	}
	hasEndpoints := len(clusterEps) > 0 || (usesLocal && hasAnyEndpoints(p.Endpoints))

	svcChain, svlChain, extChain, fwChain := SVCChain(spn, proto), SVLChain(spn, proto), EXTChain(spn, proto), FWChain(spn, proto)
	internalChain, hasInternal := svcChain, hasEndpoints
	if s.InternalLocal {
		internalChain, hasInternal = svlChain, len(localEps) > 0
	}
	externalPolicyChain, hasExternal := svcChain, hasEndpoints
	if externalLocal {
		externalPolicyChain, hasExternal = svlChain, len(localEps) > 0
	}
	usesExt := hasEndpoints && external
	// Load-balancer traffic goes through a KUBE-FW chain when the Service
	// has source ranges.
	usesFW := hasEndpoints && len(lbIPs) > 0 && len(ext.ranges) > 0
	lbChain := extChain
	if usesFW {
		lbChain = fwChain
	}

	// What the filter table does with traffic no endpoint takes: REJECT when
	// there is none at all, DROP when a Local policy finds none on this node.
	verdict := func(match string) string {
		if !hasEndpoints {
			return comment(spn+" has no endpoints") + " " + match + " -j REJECT"
		}
		return comment(spn+" has no local endpoints") + " " + match + " -j DROP"
	}

	// Entry rules: ClusterIPs, load-balancer IPs, NodePorts.
	for _, ip := range cips {
		match := pm + " -d " + ip.String() + " --dport " + dport
		switch {
		case hasInternal:
			out.natServices = append(out.natServices, comment(spn+" cluster IP")+" "+match+" -j "+internalChain)
		case hasEndpoints:
			out.filterServices = append(out.filterServices, verdict(match))
			out.guardDrops = append(out.guardDrops, verdict(match))
		default:
			out.filterServices = append(out.filterServices, verdict(match))
		}
	}
	for _, ip := range ext.extIPs {
		match := pm + " -d " + ip.String() + " --dport " + dport
		if hasEndpoints {
			out.natServices = append(out.natServices, comment(spn+" external IP")+" "+match+" -j "+extChain)
		}
		if !hasExternal {
			out.filterExternals = append(out.filterExternals, verdict(match))
		}
	}
	for _, ip := range lbIPs {
		match := pm + " -d " + ip.String() + " --dport " + dport
		if hasEndpoints {
			out.natServices = append(out.natServices, comment(spn+" loadbalancer IP")+" "+match+" -j "+lbChain)
		}
		if usesFW {
			out.filterFirewall = append(out.filterFirewall, comment(spn+" traffic not accepted by "+fwChain)+" "+match+" -j DROP")
		}
	}
	if !hasExternal {
		for _, ip := range lbIPs {
			out.filterExternals = append(out.filterExternals, verdict(pm+" -d "+ip.String()+" --dport "+dport))
		}
	}
	if p.NodePort > 0 {
		if hasEndpoints {
			out.natNodePorts = append(out.natNodePorts, comment(spn)+" "+pm+" --dport "+nodePort+" -j "+extChain)
		}
		if !hasExternal {
			for _, d := range nodeDst {
				out.filterExternals = append(out.filterExternals, verdict(d+" "+pm+" --dport "+nodePort))
			}
		}
	}
	if s.HealthCheckNodePort > 0 {
		out.filterNodePorts = append(out.filterNodePorts, comment(spn+" health check node port")+" -m tcp -p tcp --dport "+
			strconv.Itoa(int(s.HealthCheckNodePort))+" -j ACCEPT")
	}
	if !hasEndpoints {
		return
	}

	// Masquerade for ClusterIP traffic from outside the pod network, in the
	// chain ClusterIP traffic goes to.
	var internalMasq []string
	if hasInternal {
		for _, ip := range cips {
			r := comment(spn+" cluster IP") + " " + pm + " -d " + ip.String() + " --dport " + dport
			if o.ClusterCIDR.IsValid() {
				r += " ! -s " + o.ClusterCIDR.String()
			}
			internalMasq = append(internalMasq, r+" -j "+ChainMarkMasq)
		}
	}
	if len(clusterEps) > 0 {
		c := Chain{Name: svcChain}
		if internalChain == svcChain {
			c.Rules = append(c.Rules, internalMasq...)
		}
		c.Rules = endpointRules(c.Rules, spn, proto, s.AffinityTimeoutSeconds, clusterEps)
		out.chains = append(out.chains, c)
	}
	if len(localEps) > 0 {
		c := Chain{Name: svlChain}
		if internalChain == svlChain {
			c.Rules = append(c.Rules, internalMasq...)
		}
		c.Rules = endpointRules(c.Rules, spn, proto, s.AffinityTimeoutSeconds, localEps)
		out.chains = append(out.chains, c)
	}
	if usesExt {
		extC := Chain{Name: extChain}
		if !externalLocal {
			extC.Rules = append(extC.Rules, comment("masquerade traffic for "+spn+" external destinations")+" -j "+ChainMarkMasq)
		} else {
			if o.ClusterCIDR.IsValid() {
				extC.Rules = append(extC.Rules, comment("pod traffic for "+spn+" external destinations")+" -s "+o.ClusterCIDR.String()+" -j "+svcChain)
			}
			extC.Rules = append(extC.Rules,
				comment("masquerade LOCAL traffic for "+spn+" external destinations")+" -m addrtype --src-type LOCAL -j "+ChainMarkMasq,
				comment("route LOCAL traffic for "+spn+" external destinations")+" -m addrtype --src-type LOCAL -j "+svcChain)
		}
		if hasExternal {
			extC.Rules = append(extC.Rules, "-j "+externalPolicyChain)
		}
		out.chains = append(out.chains, extC)
	}
	if usesFW {
		out.chains = append(out.chains, firewallChain(spn, fwChain, extChain, ext, o))
	}
	// One KUBE-SEP chain per endpoint either policy can reach.
	for _, e := range sortEndpoints(slices.Concat(clusterEps, localEps)) {
		ep := netip.AddrPortFrom(e.IP, uint16(e.Port)).String()
		name := SEPChain(spn, proto, ep)
		dnat := comment(spn)
		if s.AffinityTimeoutSeconds > 0 {
			dnat += " -m recent --name " + name + " --set"
		}
		out.chains = append(out.chains, Chain{Name: name, Rules: []string{
			comment(spn) + " -s " + e.IP.String() + " -j " + ChainMarkMasq,
			dnat + " " + pm + " -j DNAT --to-destination " + ep,
		}})
	}
}

// firewallChain is the KUBE-FW chain of a service port with
// loadBalancerSourceRanges: each allowed range goes on to KUBE-EXT; when a
// range holds one of the node's addresses, so do the load-balancer IPs as
// sources (a VIP that is a local address is the source of the node's own
// requests to it); the last rule, which matches anything and does nothing,
// says where the rest goes: on through KUBE-SERVICES undisturbed, to be
// dropped by filter KUBE-PROXY-FIREWALL.
func firewallChain(spn, fwChain, extChain string, ext externals, o Options) Chain {
	c := Chain{Name: fwChain}
	head := comment(spn + " loadbalancer IP")
	allowFromNode := false
	for _, r := range ext.ranges {
		c.Rules = append(c.Rules, head+" -s "+r.String()+" -j "+extChain)
		for _, ip := range o.NodeIPs {
			if r.Contains(ip) {
				allowFromNode = true
			}
		}
	}
	if allowFromNode {
		for _, ip := range ext.lbIPs {
			c.Rules = append(c.Rules, head+" -s "+ip.String()+" -j "+extChain)
		}
	}
	c.Rules = append(c.Rules, comment("other traffic to "+spn+" will be dropped by "+ChainProxyFirewall))
	return c
}

// endpointRules appends to rules a policy chain's jumps to its endpoints:
// the ClientIP affinity checks, then the random choice.
func endpointRules(rules []string, spn, proto string, affinity int32, eps []Endpoint) []string {
	if affinity > 0 {
		secs := strconv.Itoa(int(affinity))
		for _, e := range eps {
			ep := netip.AddrPortFrom(e.IP, uint16(e.Port)).String()
			sep := SEPChain(spn, proto, ep)
			rules = append(rules, comment(spn+" -> "+ep)+" -m recent --name "+sep+" --rcheck --seconds "+secs+" --reap -j "+sep)
		}
	}
	n := len(eps)
	for i, e := range eps {
		ep := netip.AddrPortFrom(e.IP, uint16(e.Port)).String()
		r := comment(spn + " -> " + ep)
		if i < n-1 {
			r += fmt.Sprintf(" -m statistic --mode random --probability %0.10f", 1.0/float64(n-i))
		}
		rules = append(rules, r+" -j "+SEPChain(spn, proto, ep))
	}
	return rules
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
// (not DNATed) and, with RejectUnroutedPodCIDR, to the Nodes' pod CIDRs that
// no local route serves (GuardPrefixes: a RETURN per routed prefix inside
// them first) on this machine: TCP gets a reset, everything else ICMP port
// unreachable. Addresses outside every Node's pod CIDR pass.
func Guard(o Options) Chain {
	c := Chain{Name: ChainGuard}
	if o.ServiceCIDR.IsValid() {
		cidr := o.ServiceCIDR.Masked().String()
		c.Rules = append(c.Rules,
			comment("kubette: service CIDR traffic that was not DNATed")+" -d "+cidr+" -m conntrack ! --ctstate DNAT -p tcp -j REJECT --reject-with tcp-reset",
			comment("kubette: service CIDR traffic that was not DNATed")+" -d "+cidr+" -m conntrack ! --ctstate DNAT -j REJECT --reject-with icmp-port-unreachable",
		)
	}
	returns, rejects := GuardPrefixes(o)
	for _, p := range returns {
		c.Rules = append(c.Rules, comment("kubette: routed pod CIDR")+" -d "+p.String()+" -j RETURN")
	}
	for _, p := range rejects {
		c.Rules = append(c.Rules,
			comment("kubette: node pod CIDR without a local route")+" -d "+p.String()+" -p tcp -j REJECT --reject-with tcp-reset",
			comment("kubette: node pod CIDR without a local route")+" -d "+p.String()+" -j REJECT --reject-with icmp-port-unreachable",
		)
	}
	return c
}
