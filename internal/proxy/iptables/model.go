// Package iptables renders kubette's Service rules as iptables-restore text,
// in the shape of upstream kube-proxy's iptables mode: a pure function from a
// model of Services and their endpoints to the filter and nat tables. Nothing
// here runs a command or reads the host; internal/proxy applies the text.
//
// What is rendered (names as upstream):
//   - nat KUBE-SERVICES: one rule per ClusterIP:port with endpoints, jumping to
//     KUBE-SVC-<hash>; the last rule sends node-local destinations to
//     KUBE-NODEPORTS.
//   - nat KUBE-SVC-<hash>: masquerade for traffic to the ClusterIP that does not
//     come from the cluster (pod) CIDR, ClientIP affinity via -m recent, then
//     one rule per endpoint with -m statistic --mode random --probability 1/(n-i).
//   - nat KUBE-SEP-<hash>: hairpin masquerade (endpoint → itself) and the DNAT.
//   - nat KUBE-SVL-<hash>: like KUBE-SVC but only this node's endpoints, for
//     internalTrafficPolicy Local (ClusterIP traffic) and externalTrafficPolicy
//     Local (NodePort and load-balancer traffic).
//   - nat KUBE-NODEPORTS / KUBE-EXT-<hash>: NodePorts, external IPs
//     (spec.externalIPs) and load-balancer ingress IPs. externalTrafficPolicy
//     Cluster masquerades and goes to KUBE-SVC; Local keeps the client's
//     source address and goes to KUBE-SVL, except for traffic from pods and
//     from the node itself, which is short-circuited to KUBE-SVC (masqueraded
//     when from the node) as upstream.
//   - nat KUBE-FW-<hash>: load-balancer IP traffic of a Service with
//     loadBalancerSourceRanges: the allowed sources go on to KUBE-EXT (and,
//     when a range holds a node address, the load-balancer IPs themselves as
//     sources, for VIPs that are local addresses), the rest falls through
//     undisturbed and filter KUBE-PROXY-FIREWALL drops it (it was not
//     DNATed, so it still has the load-balancer IP as destination).
//   - nat KUBE-MARK-MASQ / KUBE-POSTROUTING: mark, then MASQUERADE marked packets.
//   - filter KUBE-SERVICES / KUBE-EXTERNAL-SERVICES: a REJECT per ClusterIP:port,
//     NodePort and load-balancer IP:port without usable endpoints, so clients
//     get "connection refused"; a DROP ("has no local endpoints") where a Local
//     policy finds no endpoint on this node but others exist.
//   - filter KUBE-NODEPORTS: ACCEPT for each healthCheckNodePort.
//   - filter KUBE-PROXY-FIREWALL (hooked from INPUT, OUTPUT and FORWARD for
//     new connections): a DROP per load-balancer IP:port with source ranges.
//   - filter KUBE-FORWARD: accept masquerade-marked and established forwarded
//     traffic, after the guard.
//   - filter KUBE-SERVICE-CIDR-GUARD (kubette's own, first in OUTPUT and
//     FORWARD): drops ClusterIP traffic a Local policy has no endpoint for (a
//     copy of the KUBE-SERVICES DROP, which the guard would otherwise
//     preempt), rejects packets to the service CIDR that were not DNATed and,
//     with RejectUnroutedPodCIDR, packets to the Nodes' pod CIDRs (merged,
//     inside the cluster CIDR) that no local route serves, after a RETURN
//     per routed pod CIDR inside them: such packets (to simulated pods) must
//     never leave the machine. Other cluster-CIDR addresses pass.
//
// Only IPv4 is rendered; topology-aware routing is not rendered.
package iptables

import (
	"fmt"
	"net/netip"
	"slices"
)

// Model is everything the rules are rendered from.
type Model struct {
	// Services in any order; Render sorts.
	Services []Service
}

// Service is one Service's part of the model.
type Service struct {
	Namespace, Name string
	// ClusterIPs are the Service's IPv4 cluster IPs; empty (headless, or
	// "None") means no rules at all.
	ClusterIPs []netip.Addr
	// Ports are the Service's ports, each with its endpoints.
	Ports []Port
	// AffinityTimeoutSeconds > 0 means sessionAffinity ClientIP with that
	// timeout; 0 means no affinity.
	AffinityTimeoutSeconds int32
	// InternalLocal is internalTrafficPolicy Local: ClusterIP traffic goes
	// only to endpoints on this node (Options.NodeName).
	InternalLocal bool
	// ExternalLocal is externalTrafficPolicy Local: NodePort and
	// load-balancer traffic from outside goes only to endpoints on this node,
	// with the client's source address kept.
	ExternalLocal bool
	// LoadBalancerIPs are the IPv4 addresses of status.loadBalancer.ingress
	// (not those of ipMode Proxy); traffic to them on a service port is
	// served like NodePort traffic.
	LoadBalancerIPs []netip.Addr
	// LoadBalancerSourceRanges are the IPv4 source ranges allowed to reach
	// the load-balancer IPs (spec.loadBalancerSourceRanges): with any, traffic
	// to a load-balancer IP goes through a KUBE-FW chain that passes these
	// sources on and leaves the rest to KUBE-PROXY-FIREWALL, which drops it.
	// NodePorts and external IPs are not subject to them (as upstream).
	LoadBalancerSourceRanges []netip.Prefix
	// ExternalIPs are the IPv4 addresses of spec.externalIPs: traffic to
	// them on a service port, from anywhere (the node itself included), is
	// served like NodePort traffic.
	ExternalIPs []netip.Addr
	// HealthCheckNodePort is spec.healthCheckNodePort (0: none): the filter
	// table accepts TCP to it, where the proxy's health check server answers.
	HealthCheckNodePort int32
}

// Port is one port of a Service and the endpoints that serve it.
type Port struct {
	// Name is the ServicePort's name ("" for an unnamed single port).
	Name string
	// Protocol is TCP, UDP or SCTP.
	Protocol string
	// Port is the ClusterIP port; NodePort is 0 unless the Service has one.
	Port, NodePort int32
	// Endpoints in any order; Render picks the usable ones and sorts them.
	Endpoints []Endpoint
}

// Endpoint is one address:port of an EndpointSlice, with its conditions.
type Endpoint struct {
	IP                          netip.Addr
	Port                        int32
	Ready, Serving, Terminating bool
	NodeName                    string
}

// Options are the node's and cluster's settings the rules depend on.
type Options struct {
	// ServiceCIDR is the range ClusterIPs come from; the guard rejects what
	// was not DNATed in it. Required.
	ServiceCIDR netip.Prefix
	// ClusterCIDR is the pod range: traffic to a ClusterIP from outside it is
	// masqueraded. The zero prefix masquerades all ClusterIP traffic.
	ClusterCIDR netip.Prefix
	// NodeIPs are the addresses NodePorts answer on; empty means every local
	// address except 127.0.0.0/8 (-m addrtype --dst-type LOCAL).
	NodeIPs []netip.Addr
	// NodeName is this node's name: endpoints whose nodeName it is are the
	// local ones of the Local traffic policies.
	NodeName string
	// MasqueradeMark is the fwmark bit of KUBE-MARK-MASQ; 0 means 0x4000.
	MasqueradeMark uint32
	// RejectUnroutedPodCIDR makes the guard reject packets to the addresses
	// of NodePodCIDRs (inside ClusterCIDR) outside RoutedPodCIDRs: pods of
	// simulated nodes, say, which exist nowhere. The rest of ClusterCIDR is
	// never rejected (GuardPrefixes).
	RejectUnroutedPodCIDR bool
	// NodePodCIDRs are the pod CIDRs of the cluster's Nodes (spec.podCIDRs),
	// in any order; the guard merges them into the fewest covering prefixes.
	NodePodCIDRs []netip.Prefix
	// RoutedPodCIDRs are the parts of ClusterCIDR this machine has a route to.
	RoutedPodCIDRs []netip.Prefix
}

func (o Options) mark() uint32 {
	if o.MasqueradeMark == 0 {
		return 0x4000
	}
	return o.MasqueradeMark
}

// SameServiceRendering reports whether o and b render Services the same (the
// routed pod CIDRs only shape the guard), so a renderer may keep what it
// rendered under o.
func (o Options) SameServiceRendering(b Options) bool {
	return o.ServiceCIDR == b.ServiceCIDR && o.ClusterCIDR == b.ClusterCIDR && o.mark() == b.mark() &&
		o.NodeName == b.NodeName && slices.Equal(o.NodeIPs, b.NodeIPs)
}

// Equal reports whether s and b hold the same Service model: a renderer
// renders them the same.
func (s *Service) Equal(b *Service) bool {
	if s.Namespace != b.Namespace || s.Name != b.Name || s.AffinityTimeoutSeconds != b.AffinityTimeoutSeconds ||
		s.InternalLocal != b.InternalLocal || s.ExternalLocal != b.ExternalLocal || s.HealthCheckNodePort != b.HealthCheckNodePort ||
		!slices.Equal(s.LoadBalancerIPs, b.LoadBalancerIPs) || !slices.Equal(s.ExternalIPs, b.ExternalIPs) ||
		!slices.Equal(s.LoadBalancerSourceRanges, b.LoadBalancerSourceRanges) ||
		!slices.Equal(s.ClusterIPs, b.ClusterIPs) || len(s.Ports) != len(b.Ports) {
		return false
	}
	for i := range s.Ports {
		x, y := &s.Ports[i], &b.Ports[i]
		if x.Name != y.Name || x.Protocol != y.Protocol || x.Port != y.Port || x.NodePort != y.NodePort || !slices.Equal(x.Endpoints, y.Endpoints) {
			return false
		}
	}
	return true
}

// SyntheticModel returns n Services of one TCP port 80 each, with ClusterIPs
// counted up from 10.96.0.0 and e ready endpoints each on port 8080 counted up
// from 10.244.0.0: the model bench/proxy and the renderers' benchmarks sync.
func SyntheticModel(n, e int) Model {
	m := Model{Services: make([]Service, n)}
	for i := range n {
		s := Service{Namespace: "bench", Name: fmt.Sprintf("svc-%05d", i),
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})}}
		p := Port{Name: "http", Protocol: "TCP", Port: 80}
		for j := range e {
			k := i*e + j
			p.Endpoints = append(p.Endpoints, Endpoint{IP: netip.AddrFrom4([4]byte{10, 244, byte(k >> 8), byte(k)}), Port: 8080, Ready: true, Serving: true})
		}
		s.Ports = []Port{p}
		m.Services[i] = s
	}
	return m
}

// IPv4 returns the IPv4 addresses of ips, in order: the addresses both
// renderers write (IPv6 is not rendered yet).
func IPv4(ips []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, ip := range ips {
		if ip.Is4() {
			out = append(out, ip)
		}
	}
	return out
}
