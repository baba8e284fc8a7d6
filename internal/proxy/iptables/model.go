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
//   - nat KUBE-NODEPORTS / KUBE-EXT-<hash>: NodePorts, always masqueraded
//     (externalTrafficPolicy Cluster).
//   - nat KUBE-MARK-MASQ / KUBE-POSTROUTING: mark, then MASQUERADE marked packets.
//   - filter KUBE-SERVICES / KUBE-EXTERNAL-SERVICES: a REJECT per ClusterIP:port
//     and NodePort without usable endpoints, so clients get "connection refused".
//   - filter KUBE-FORWARD: accept masquerade-marked and established forwarded
//     traffic, after the guard.
//   - filter KUBE-SERVICE-CIDR-GUARD (kubette's own): rejects packets to the
//     service CIDR that were not DNATed and, with RejectUnroutedPodCIDR, packets
//     to cluster-CIDR addresses outside the locally routed pod CIDRs: on this
//     network such packets must never leave the machine.
//
// Only IPv4 is rendered; Services with ExternalTrafficPolicy or
// InternalTrafficPolicy Local are rendered as Cluster (not supported yet).
package iptables

import (
	"net/netip"
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
	// MasqueradeMark is the fwmark bit of KUBE-MARK-MASQ; 0 means 0x4000.
	MasqueradeMark uint32
	// RejectUnroutedPodCIDR makes the guard reject packets to ClusterCIDR
	// addresses outside RoutedPodCIDRs (pods of simulated nodes, say).
	RejectUnroutedPodCIDR bool
	// RoutedPodCIDRs are the parts of ClusterCIDR this machine has a route to.
	RoutedPodCIDRs []netip.Prefix
}

func (o Options) mark() uint32 {
	if o.MasqueradeMark == 0 {
		return 0x4000
	}
	return o.MasqueradeMark
}
