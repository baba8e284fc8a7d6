// Package nftables renders kubette's Service rules for the proxy's nftables
// mode (upstream kube-proxy's nftables mode, KEP-3866, in its own shape) and
// applies them: one table, ip kube-proxy, whose verdict maps send a packet
// to the chain that DNATs it in one lookup, and whose endpoint maps pick the
// endpoint in another, so that an ordinary Service is map elements only.
//
// The renderer is a pure function of the same model internal/proxy/iptables
// renders (iptables.Model and iptables.Options) to a Ruleset: named chains
// with their rules and named sets and maps with their elements, printed as
// nft input (FullText for a whole table, UpdateText for the difference
// between two Rulesets).
//
// What is rendered:
//   - Base chains nat-prerouting and nat-output (dstnat, -100) jump to
//     services; nat-postrouting (srcnat, 100) to masquerading;
//     filter-input, filter-forward and filter-output (filter, -90: after
//     DNAT, so a packet that was translated no longer has its Service's
//     address) jump to endpoints-check and, forward and output, to
//     service-cidr-guard.
//   - services: traffic to the service CIDR from outside the cluster CIDR is
//     marked for masquerading (one rule for every ClusterIP: upstream puts
//     it in each service chain); then the verdict map service-ips (ClusterIP,
//     external IP and load-balancer IP . protocol . port) and, for
//     node-local destinations, service-nodeports (protocol . port) goto the
//     chain that picks the endpoint.
//   - Ordinary service ports (Cluster traffic policies, no session
//     affinity, no load-balancer source ranges) have no chain of their own:
//     their keys goto endpoints-N (ClusterIPs), external-endpoints-N
//     (external and load-balancer IPs: masqueraded) or nodeport-endpoints-N
//     (NodePorts: masqueraded), one chain per endpoint count N in use, whose
//     one rule DNATs through the map of the same name, keyed by the packet's
//     key and `numgen random mod N` (endpoint i of the port is element
//     key . i). An endpoint change is then element deletes and adds in one
//     transaction; a count change moves the port's keys from one map to the
//     other and its verdict to the other chain in that same transaction, so
//     a packet never looks up an index the map lacks. Upstream has a chain
//     per endpoint and a `numgen … vmap` per Service; the spike that chose
//     this shape is in bench/proxy/README.md.
//   - service-<hash>-<ns>/<name>/<proto>/<port> (Cluster policy) and
//     local-<hash>-… (Local policy) for the other ports: rule i of n
//     `numgen random mod (n-i) 0 … dnat to ip:port`, the last one
//     unconditional — the same distribution as the iptables mode's
//     probabilities.
//   - The hairpin check (an endpoint reaching itself through its Service)
//     is one set of endpoint . endpoint pairs in masquerading.
//   - sessionAffinity ClientIP: one set per endpoint with the Service's
//     timeout (as upstream), checked before the random choice and refreshed
//     by every connection that DNATs to that endpoint.
//   - external-<hash>-…: NodePort, external IP and load-balancer traffic of
//     the other ports: masquerade and go to the service chain (Cluster
//     policy); Local policy keeps the client's address and goes to local-…,
//     except traffic from pods and from the node itself, which goes to
//     service-… (masqueraded when from the node), as upstream.
//   - firewall-<hash>-…: load-balancer traffic of a Service with
//     loadBalancerSourceRanges: the allowed sources goto external-…, the rest
//     falls through undisturbed and endpoints-check drops it (the set
//     firewall-ips: it was not DNATed).
//   - endpoints-check: the verdict maps no-endpoint-services and
//     no-endpoint-nodeports reject (goto reject-chain) traffic to a Service
//     port without endpoints and drop it where a Local policy has none on
//     this node.
//   - service-cidr-guard (kubette's own): rejects packets to the service
//     CIDR that were not DNATed and, with RejectUnroutedPodCIDR, packets to
//     the Nodes' unrouted pod CIDRs (iptables.GuardPrefixes).
//
// How it is written (Applier): a partial sync is one `nft -f` transaction
// of what differs. A full sync writes the shared sets (the fixed sets and
// the endpoint maps, nearly every element) through netlink as a new
// generation of themselves (names suffixed __a or __b) that the rules are
// switched to in one small nft transaction (Applier.fullSync); a Runner
// netlink cannot follow into its namespace gets FullText, one transaction
// that replaces the table.
//
// Not rendered: the iptables mode's KUBE-FORWARD accepts and the accept of
// health check node ports (an nftables accept does not override another
// table's drop), IPv6, topology-aware routing.
package nftables

import (
	"cmp"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/kubette/kubette/internal/proxy/iptables"
)

// Table is the nftables table the proxy owns (family ip).
const Table = "kube-proxy"

// Names of the fixed chains, sets and maps.
const (
	ChainServices      = "services"
	ChainMasquerading  = "masquerading"
	ChainMarkMasq      = "mark-for-masquerade"
	ChainReject        = "reject-chain"
	ChainEndpointCheck = "endpoints-check"
	ChainGuard         = "service-cidr-guard"

	MapServiceIPs          = "service-ips"
	MapServiceNodePorts    = "service-nodeports"
	MapNoEndpointServices  = "no-endpoint-services"
	MapNoEndpointNodePorts = "no-endpoint-nodeports"
	SetFirewallIPs         = "firewall-ips"
	SetNodePortIPs         = "nodeport-ips"
	SetHairpin             = "hairpin"
)

// Chain is one chain: Hook is its base-chain declaration ("" for a regular
// chain), Rules its rules as nft prints them after "add rule ip kube-proxy
// NAME ".
type Chain struct {
	Name  string
	Hook  string
	Rules []string
}

// Element is one set or map element: Key, and Value for a map ("" in a set).
type Element struct {
	Key, Value string
	// holders are the Services that put this key in a fixed set or map,
	// with their values, ordered by Service (the first one's value wins).
	holders []holder
}

// Set is one named set or map: Kind is "set" or "map", Spec its
// declaration's body (type, flags, timeout), Elements sorted by key.
type Set struct {
	Name, Kind, Spec string
	Elements         []Element
}

// Ruleset is the whole table: chains and sets in a fixed order (the fixed
// ones first).
type Ruleset struct {
	Chains []Chain
	Sets   []Set
	// prev is the Renderer's previous Ruleset when this one was derived
	// from it: changes are the Services whose output differs, delta the
	// fixed sets' elements that differ (fixed.go).
	prev    *Ruleset
	changes []svcChange
	delta   map[string]elementDelta
	// suffix is the generation suffix of the shared sets' names in the
	// kernel ("" when written by FullText; see Applier).
	suffix string
	// shared is the number of shared sets at the start of Sets: the fixed
	// ones, then the endpoint maps in use (whose chains follow the fixed
	// chains in Chains, in the same order).
	shared int
}

func hash8(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base32.StdEncoding.EncodeToString(sum[:])[:8]
}

// portID is upstream's "<ns>/<name>/<proto>/<port name>" of a service port.
func portID(ns, name, proto, port string) string {
	return ns + "/" + name + "/" + proto + "/" + port
}

// portChain names a chain of a service port: its kind, a short hash of
// upstream's port ID, and the ID itself.
func portChain(kind, ns, name, proto, port string) string {
	id := portID(ns, name, proto, port)
	return kind + "-" + hash8(id) + "-" + id
}

// ServiceChain, LocalChain, ExternalChain and FirewallChain name the chains
// of a service port (ns, name, lower-case protocol, port name).
func ServiceChain(ns, name, proto, port string) string {
	return portChain("service", ns, name, proto, port)
}

// LocalChain is the Local-policy chain of a service port.
func LocalChain(ns, name, proto, port string) string {
	return portChain("local", ns, name, proto, port)
}

// ExternalChain is the chain of a service port's external traffic.
func ExternalChain(ns, name, proto, port string) string {
	return portChain("external", ns, name, proto, port)
}

// FirewallChain is the loadBalancerSourceRanges chain of a service port.
func FirewallChain(ns, name, proto, port string) string {
	return portChain("firewall", ns, name, proto, port)
}

// AffinitySet is the ClientIP affinity set of one endpoint of a service port.
func AffinitySet(ns, name, proto, port string, ep netip.AddrPort) string {
	id := portID(ns, name, proto, port) + "__" + ep.Addr().String() + "/" + strconv.Itoa(int(ep.Port()))
	return "affinity-" + hash8(id) + "-" + id
}

// Renderer renders like Render, and keeps each Service's output to reuse it
// when the same Service comes again unchanged under the same options; the
// fixed maps and sets of a Ruleset are those of the previous one with only
// the changed Services' elements taken out and put in, and UpdateText
// between two consecutive Rulesets of a Renderer looks only at those
// Services (fixed.go). It is not safe for concurrent use.
type Renderer struct {
	opts  iptables.Options
	cache map[svcKey]*svcOut
	last  *Ruleset
}

type svcKey struct{ namespace, name string }

func (k svcKey) compare(o svcKey) int {
	return cmp.Or(cmp.Compare(k.namespace, o.namespace), cmp.Compare(k.name, o.name))
}

// svcOut is one Service's share of the ruleset.
type svcOut struct {
	key    svcKey
	in     iptables.Service
	chains []Chain
	sets   []Set
	// elems are this Service's elements of the fixed sets and maps, by
	// name (the hairpin pairs of its endpoints included, deduplicated).
	elems map[string][]Element
}

// NewRenderer returns a Renderer with an empty cache.
func NewRenderer() *Renderer { return &Renderer{cache: map[svcKey]*svcOut{}} }

// Render returns the ruleset of m under o. It is pure and deterministic.
func Render(m iptables.Model, o iptables.Options) *Ruleset {
	return NewRenderer().Render(m, o)
}

func mark(o iptables.Options) string {
	if o.MasqueradeMark == 0 {
		return "0x4000"
	}
	return "0x" + strconv.FormatUint(uint64(o.MasqueradeMark), 16)
}

// Render returns the ruleset of m under o, reusing the output of Services
// that did not change since the previous call.
func (r *Renderer) Render(m iptables.Model, o iptables.Options) *Ruleset {
	if !r.opts.SameServiceRendering(o) {
		clear(r.cache)
		r.last = nil
	}
	r.opts = o
	order := make([]int, len(m.Services))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		x, y := &m.Services[a], &m.Services[b]
		return cmp.Or(cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
	})
	next := make(map[svcKey]*svcOut, len(order))
	outs := make([]*svcOut, 0, len(order))
	var changes []svcChange
	for _, i := range order {
		s := &m.Services[i]
		k := svcKey{s.Namespace, s.Name}
		if _, dup := next[k]; dup {
			continue // one Service per name: the first
		}
		out, ok := r.cache[k]
		if !ok || !out.in.Equal(s) {
			n := renderService(s, o)
			changes = append(changes, svcChange{old: out, new: n})
			out = n
		}
		next[k] = out
		outs = append(outs, out)
	}
	for k, out := range r.cache {
		if _, ok := next[k]; !ok {
			changes = append(changes, svcChange{old: out})
		}
	}
	slices.SortFunc(changes, func(a, b svcChange) int { return a.key().compare(b.key()) })
	r.cache = next
	var shared []Set
	rs := &Ruleset{}
	if r.last != nil {
		shared, rs.delta = updateSharedSets(r.last.Sets[:r.last.shared], changes)
		rs.prev, rs.changes = r.last, changes
	} else {
		shared = buildSharedSets(outs)
	}
	rs.shared = len(shared)
	rs.Chains = fixedChains(o)
	nChains, nSets := len(rs.Chains)+len(shared)-len(fixedSetNames), 0
	for _, out := range outs {
		nChains += len(out.chains)
		nSets += len(out.sets)
	}
	rs.Chains = slices.Grow(rs.Chains, nChains-len(rs.Chains))
	for _, s := range shared[len(fixedSetNames):] {
		rs.Chains = append(rs.Chains, endpointMapChain(s.Name))
	}
	svcSets := make([]Set, 0, nSets)
	for _, out := range outs {
		rs.Chains = append(rs.Chains, out.chains...)
		svcSets = append(svcSets, out.sets...)
	}
	nodeIPs := &shared[slices.Index(fixedSetNames, SetNodePortIPs)]
	nodeIPs.Elements = nil
	for _, ip := range o.NodeIPs {
		if ip.Is4() {
			nodeIPs.Elements = append(nodeIPs.Elements, Element{Key: ip.String()})
		}
	}
	slices.SortFunc(nodeIPs.Elements, func(a, b Element) int { return cmp.Compare(a.Key, b.Key) })
	nodeIPs.Elements = slices.CompactFunc(nodeIPs.Elements, func(a, b Element) bool { return a.Key == b.Key })
	rs.Sets = append(shared, svcSets...)
	r.last = rs
	return rs
}

// nodeDst is the match of node-local destinations (NodePorts).
func nodeDst(o iptables.Options) string {
	if len(o.NodeIPs) == 0 {
		return "fib daddr type local ip daddr != 127.0.0.0/8"
	}
	return "ip daddr @" + SetNodePortIPs
}

// fixedChains are the chains every ruleset has, in order.
func fixedChains(o iptables.Options) []Chain {
	mk := mark(o)
	masqRule := "ip daddr " + o.ServiceCIDR.Masked().String()
	if o.ClusterCIDR.IsValid() {
		masqRule += " ip saddr != " + o.ClusterCIDR.Masked().String()
	}
	return []Chain{
		{Name: "nat-prerouting", Hook: "type nat hook prerouting priority -100", Rules: []string{"jump " + ChainServices}},
		{Name: "nat-output", Hook: "type nat hook output priority -100", Rules: []string{"jump " + ChainServices}},
		{Name: "nat-postrouting", Hook: "type nat hook postrouting priority 100", Rules: []string{"jump " + ChainMasquerading}},
		{Name: "filter-input", Hook: "type filter hook input priority -90", Rules: []string{"jump " + ChainEndpointCheck}},
		{Name: "filter-forward", Hook: "type filter hook forward priority -90", Rules: []string{"jump " + ChainEndpointCheck, "jump " + ChainGuard}},
		{Name: "filter-output", Hook: "type filter hook output priority -90", Rules: []string{"jump " + ChainEndpointCheck, "jump " + ChainGuard}},
		{Name: ChainServices, Rules: []string{
			masqRule + " jump " + ChainMarkMasq,
			"ip daddr . meta l4proto . th dport vmap @" + MapServiceIPs,
			nodeDst(o) + " meta l4proto . th dport vmap @" + MapServiceNodePorts,
		}},
		{Name: ChainMasquerading, Rules: []string{
			"ct status dnat ip saddr . ip daddr @" + SetHairpin + " masquerade fully-random",
			"meta mark & " + mk + " == 0 return",
			"meta mark set meta mark ^ " + mk,
			"masquerade fully-random",
		}},
		{Name: ChainMarkMasq, Rules: []string{"meta mark set meta mark | " + mk}},
		{Name: ChainReject, Rules: []string{"meta l4proto tcp reject with tcp reset", "reject"}},
		{Name: ChainEndpointCheck, Rules: []string{
			"ip daddr . meta l4proto . th dport vmap @" + MapNoEndpointServices,
			nodeDst(o) + " meta l4proto . th dport vmap @" + MapNoEndpointNodePorts,
			"ip daddr . meta l4proto . th dport @" + SetFirewallIPs + " drop",
		}},
		GuardChain(o),
	}
}

// GuardChain is kubette's guard: packets to the service CIDR that were not
// DNATed (and, with RejectUnroutedPodCIDR, to the Nodes' pod CIDRs that no
// local route serves, after a return per routed prefix inside them:
// iptables.GuardPrefixes) are rejected here, TCP with a reset. Addresses
// outside every Node's pod CIDR pass.
func GuardChain(o iptables.Options) Chain {
	c := Chain{Name: ChainGuard}
	if o.ServiceCIDR.IsValid() {
		cidr := o.ServiceCIDR.Masked().String()
		c.Rules = append(c.Rules,
			"ip daddr "+cidr+" ct status & dnat == 0 meta l4proto tcp reject with tcp reset",
			"ip daddr "+cidr+" ct status & dnat == 0 reject")
	}
	returns, rejects := iptables.GuardPrefixes(o)
	for _, p := range returns {
		c.Rules = append(c.Rules, "ip daddr "+p.String()+" return")
	}
	for _, p := range rejects {
		c.Rules = append(c.Rules,
			"ip daddr "+p.String()+" meta l4proto tcp reject with tcp reset",
			"ip daddr "+p.String()+" reject")
	}
	return c
}

// renderService renders one Service; its input is copied into the result.
func renderService(in *iptables.Service, o iptables.Options) *svcOut {
	out := &svcOut{key: svcKey{in.Namespace, in.Name}, in: *in, elems: map[string][]Element{}}
	out.in.ClusterIPs = slices.Clone(in.ClusterIPs)
	out.in.LoadBalancerIPs = slices.Clone(in.LoadBalancerIPs)
	out.in.ExternalIPs = slices.Clone(in.ExternalIPs)
	out.in.LoadBalancerSourceRanges = slices.Clone(in.LoadBalancerSourceRanges)
	out.in.Ports = slices.Clone(in.Ports)
	for i := range out.in.Ports {
		out.in.Ports[i].Endpoints = slices.Clone(in.Ports[i].Endpoints)
	}
	s := &out.in
	cips := iptables.IPv4(s.ClusterIPs)
	if len(cips) == 0 {
		return out
	}
	ports := slices.Clone(s.Ports)
	slices.SortStableFunc(ports, func(a, b iptables.Port) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Port, b.Port), cmp.Compare(a.Protocol, b.Protocol))
	})
	var ranges []netip.Prefix
	for _, r := range s.LoadBalancerSourceRanges {
		if r.IsValid() && r.Addr().Is4() {
			ranges = append(ranges, r.Masked())
		}
	}
	for _, p := range ports {
		renderPort(out, s, p, cips, iptables.IPv4(s.LoadBalancerIPs), iptables.IPv4(s.ExternalIPs), ranges, o)
	}
	return out
}

// renderPort renders one service port with the iptables mode's traffic
// policy logic (iptables.UsableEndpoints, iptables.LocalEndpoints).
func renderPort(out *svcOut, s *iptables.Service, p iptables.Port, cips, lbIPs, extIPs []netip.Addr, ranges []netip.Prefix, o iptables.Options) {
	proto := strings.ToLower(p.Protocol)
	if proto == "" {
		proto = "tcp"
	}
	portName := p.Name
	if portName == "" {
		portName = "p" + strconv.Itoa(int(p.Port))
	}
	external := p.NodePort > 0 || len(lbIPs) > 0 || len(extIPs) > 0
	externalLocal := s.ExternalLocal && external
	usesCluster := !s.InternalLocal || external
	usesLocal := s.InternalLocal || externalLocal
	var clusterEps, localEps []iptables.Endpoint
	if usesCluster {
		clusterEps = iptables.UsableEndpoints(p.Endpoints)
	}
	if usesLocal {
		localEps = iptables.LocalEndpoints(p.Endpoints, o.NodeName)
	}
	hasEndpoints := len(clusterEps) > 0
	if usesLocal && !hasEndpoints {
		hasEndpoints = len(iptables.UsableEndpoints(p.Endpoints)) > 0
	}
	svcChain := ServiceChain(s.Namespace, s.Name, proto, portName)
	localChain := LocalChain(s.Namespace, s.Name, proto, portName)
	extChain := ExternalChain(s.Namespace, s.Name, proto, portName)
	fwChain := FirewallChain(s.Namespace, s.Name, proto, portName)
	internalChain, hasInternal := svcChain, hasEndpoints
	if s.InternalLocal {
		internalChain, hasInternal = localChain, len(localEps) > 0
	}
	externalPolicyChain, hasExternal := svcChain, hasEndpoints
	if externalLocal {
		externalPolicyChain, hasExternal = localChain, len(localEps) > 0
	}
	usesExt := hasEndpoints && external
	usesFW := hasEndpoints && len(lbIPs) > 0 && len(ranges) > 0
	lbChain, npChain := extChain, extChain
	if usesFW {
		lbChain = fwChain
	}
	// An ordinary port (Cluster policies, no affinity, no source ranges)
	// has no chain of its own: its keys goto the shared chain of its
	// endpoint count, whose map picks the endpoint.
	mapPath := hasEndpoints && !s.InternalLocal && !externalLocal && s.AffinityTimeoutSeconds == 0 && !usesFW
	if mapPath {
		n := len(clusterEps)
		internalChain = EndpointMap(FamilyEndpoints, n)
		extChain, lbChain = EndpointMap(FamilyExternalEndpoints, n), EndpointMap(FamilyExternalEndpoints, n)
		npChain = EndpointMap(FamilyNodePortEndpoints, n)
	}
	// What endpoints-check does with traffic no endpoint takes.
	verdict := "goto " + ChainReject
	if hasEndpoints {
		verdict = "drop"
	}
	key := func(ip netip.Addr, port int32) string {
		return ip.String() + " . " + proto + " . " + strconv.Itoa(int(port))
	}
	add := func(m, k, v string) { out.elems[m] = append(out.elems[m], Element{Key: k, Value: v}) }

	for _, ip := range cips {
		if hasInternal {
			add(MapServiceIPs, key(ip, p.Port), "goto "+internalChain)
		} else {
			add(MapNoEndpointServices, key(ip, p.Port), verdict)
		}
	}
	for _, ip := range extIPs {
		if hasEndpoints {
			add(MapServiceIPs, key(ip, p.Port), "goto "+extChain)
		}
		if !hasExternal {
			add(MapNoEndpointServices, key(ip, p.Port), verdict)
		}
	}
	for _, ip := range lbIPs {
		if hasEndpoints {
			add(MapServiceIPs, key(ip, p.Port), "goto "+lbChain)
		}
		if usesFW {
			add(SetFirewallIPs, key(ip, p.Port), "")
		}
		if !hasExternal {
			add(MapNoEndpointServices, key(ip, p.Port), verdict)
		}
	}
	if p.NodePort > 0 {
		k := proto + " . " + strconv.Itoa(int(p.NodePort))
		if hasEndpoints {
			add(MapServiceNodePorts, k, "goto "+npChain)
		}
		if !hasExternal {
			add(MapNoEndpointNodePorts, k, verdict)
		}
	}
	if !hasEndpoints {
		return
	}
	if mapPath {
		for i, e := range clusterEps {
			idx := " . " + strconv.Itoa(i)
			v := e.IP.String() + " . " + strconv.Itoa(int(e.Port))
			for _, ip := range cips {
				add(internalChain, key(ip, p.Port)+idx, v)
			}
			for _, ip := range append(slices.Clone(extIPs), lbIPs...) {
				add(extChain, key(ip, p.Port)+idx, v)
			}
			if p.NodePort > 0 {
				add(npChain, proto+" . "+strconv.Itoa(int(p.NodePort))+idx, v)
			}
		}
	} else {
		if len(clusterEps) > 0 {
			out.chains = append(out.chains, endpointChain(out, svcChain, s, proto, portName, clusterEps))
		}
		if len(localEps) > 0 {
			out.chains = append(out.chains, endpointChain(out, localChain, s, proto, portName, localEps))
		}
		if usesExt {
			c := Chain{Name: extChain}
			if !externalLocal {
				c.Rules = append(c.Rules, "jump "+ChainMarkMasq)
			} else {
				if o.ClusterCIDR.IsValid() {
					c.Rules = append(c.Rules, "ip saddr "+o.ClusterCIDR.Masked().String()+" goto "+svcChain)
				}
				c.Rules = append(c.Rules, "fib saddr type local jump "+ChainMarkMasq, "fib saddr type local goto "+svcChain)
			}
			if hasExternal {
				c.Rules = append(c.Rules, "goto "+externalPolicyChain)
			}
			out.chains = append(out.chains, c)
		}
		if usesFW {
			c := Chain{Name: fwChain}
			fromNode := false
			for _, r := range ranges {
				c.Rules = append(c.Rules, "ip saddr "+r.String()+" goto "+extChain)
				for _, ip := range o.NodeIPs {
					fromNode = fromNode || r.Contains(ip)
				}
			}
			if fromNode {
				for _, ip := range lbIPs {
					c.Rules = append(c.Rules, "ip saddr "+ip.String()+" goto "+extChain)
				}
			}
			out.chains = append(out.chains, c)
		}
	}
	for _, e := range append(slices.Clone(clusterEps), localEps...) {
		k := e.IP.String() + " . " + e.IP.String()
		if !slices.ContainsFunc(out.elems[SetHairpin], func(x Element) bool { return x.Key == k }) {
			add(SetHairpin, k, "")
		}
	}
}

// endpointChain is a policy chain: with ClientIP affinity, each endpoint's
// set is checked first; then endpoint i of n is taken with probability
// 1/(n-i), the last one always.
func endpointChain(out *svcOut, name string, s *iptables.Service, proto, portName string, eps []iptables.Endpoint) Chain {
	c := Chain{Name: name}
	dnat := func(e iptables.Endpoint) string {
		return "meta l4proto " + proto + " dnat to " + netip.AddrPortFrom(e.IP, uint16(e.Port)).String()
	}
	affinity := func(e iptables.Endpoint) string {
		return AffinitySet(s.Namespace, s.Name, proto, portName, netip.AddrPortFrom(e.IP, uint16(e.Port)))
	}
	if s.AffinityTimeoutSeconds > 0 {
		for _, e := range eps {
			set := affinity(e)
			if !slices.ContainsFunc(out.sets, func(x Set) bool { return x.Name == set }) {
				out.sets = append(out.sets, Set{Name: set, Kind: "set",
					Spec: fmt.Sprintf("type ipv4_addr ; flags dynamic,timeout ; timeout %ds", s.AffinityTimeoutSeconds)})
			}
			c.Rules = append(c.Rules, "ip saddr @"+set+" update @"+set+" { ip saddr } "+dnat(e))
		}
	}
	n := len(eps)
	for i, e := range eps {
		r := ""
		if i < n-1 {
			r = "numgen random mod " + strconv.Itoa(n-i) + " 0 "
		}
		if s.AffinityTimeoutSeconds > 0 {
			r += "update @" + affinity(e) + " { ip saddr } "
		}
		c.Rules = append(c.Rules, r+dnat(e))
	}
	return c
}
