package proxy

import (
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/kubette/kubette/internal/proxy/iptables"
)

// defaultAffinityTimeout is upstream's ClientIP affinity timeout (3 hours)
// when the Service does not set one.
const defaultAffinityTimeout = 10800

// buildModel turns Services and their EndpointSlices (labelled
// kubernetes.io/service-name) into the renderer's model. ExternalName
// Services and headless ones get no rules; only IPv4 addresses are used.
func buildModel(svcs []*corev1.Service, slices []*discoveryv1.EndpointSlice) iptables.Model {
	return (&modelCache{}).build(svcs, slices)
}

type serviceKey struct{ namespace, name string }

// modelCache keeps each Service's model with the informer objects it was
// built from: informers hand out a new object for every change, so the same
// pointers mean the same model and the Service is not built again.
type modelCache struct {
	entries map[serviceKey]modelEntry
}

type modelEntry struct {
	svc    *corev1.Service
	slices []*discoveryv1.EndpointSlice
	out    iptables.Service
	ok     bool // false: the Service gets no rules
}

// build returns the model of svcs and slices, reusing what did not change
// since the previous call.
func (c *modelCache) build(svcs []*corev1.Service, slices []*discoveryv1.EndpointSlice) iptables.Model {
	byService := make(map[serviceKey][]*discoveryv1.EndpointSlice, len(slices))
	for _, s := range slices {
		name := s.Labels[discoveryv1.LabelServiceName]
		if name == "" || s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		k := serviceKey{s.Namespace, name}
		byService[k] = append(byService[k], s)
	}
	next := make(map[serviceKey]modelEntry, len(svcs))
	m := iptables.Model{Services: make([]iptables.Service, 0, len(svcs))}
	for _, svc := range svcs {
		k := serviceKey{svc.Namespace, svc.Name}
		ss := byService[k]
		if len(ss) > 1 {
			sort.Slice(ss, func(i, j int) bool { return ss[i].Name < ss[j].Name })
		}
		e, ok := c.entries[k]
		if !ok || e.svc != svc || !sameSlices(e.slices, ss) {
			e = modelEntry{svc: svc, slices: ss}
			e.out, e.ok = serviceModel(svc, ss)
		}
		next[k] = e
		if e.ok {
			m.Services = append(m.Services, e.out)
		}
	}
	c.entries = next
	return m
}

func sameSlices(a, b []*discoveryv1.EndpointSlice) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// serviceModel is one Service's model; false when it gets no rules.
func serviceModel(svc *corev1.Service, slices []*discoveryv1.EndpointSlice) (iptables.Service, bool) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return iptables.Service{}, false
	}
	ms := iptables.Service{Namespace: svc.Namespace, Name: svc.Name}
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
			ms.ClusterIPs = append(ms.ClusterIPs, a)
		}
	}
	if len(ms.ClusterIPs) == 0 {
		return iptables.Service{}, false
	}
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		ms.AffinityTimeoutSeconds = defaultAffinityTimeout
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil && *c.ClientIP.TimeoutSeconds > 0 {
			ms.AffinityTimeoutSeconds = *c.ClientIP.TimeoutSeconds
		}
	}
	nodePorts := svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer
	// Traffic policies and load-balancer addresses as upstream's service
	// change tracker reads them: externalTrafficPolicy counts only for
	// externally accessible Services, the ingress IPs only for type
	// LoadBalancer and not with ipMode Proxy (the load balancer proxies).
	ms.InternalLocal = svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal
	ms.ExternalLocal = (nodePorts || len(svc.Spec.ExternalIPs) > 0) && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for _, in := range svc.Status.LoadBalancer.Ingress {
			a, err := netip.ParseAddr(in.IP)
			if err != nil || !a.Is4() || (in.IPMode != nil && *in.IPMode == corev1.LoadBalancerIPModeProxy) {
				continue
			}
			ms.LoadBalancerIPs = append(ms.LoadBalancerIPs, a)
		}
		// Source ranges as upstream reads them: the spec's IPv4 CIDRs,
		// surrounding spaces ignored, invalid ones left out.
		for _, r := range svc.Spec.LoadBalancerSourceRanges {
			p, err := netip.ParsePrefix(strings.TrimSpace(r))
			if err == nil && p.Addr().Is4() {
				ms.LoadBalancerSourceRanges = append(ms.LoadBalancerSourceRanges, p.Masked())
			}
		}
		if ms.ExternalLocal {
			ms.HealthCheckNodePort = svc.Spec.HealthCheckNodePort
		}
	}
	// spec.externalIPs, for any type (ExternalName aside): IPv4 ones only.
	for _, s := range svc.Spec.ExternalIPs {
		if a, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil && a.Is4() {
			ms.ExternalIPs = append(ms.ExternalIPs, a)
		}
	}
	for _, sp := range svc.Spec.Ports {
		proto := sp.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		p := iptables.Port{Name: sp.Name, Protocol: string(proto), Port: sp.Port}
		if nodePorts {
			p.NodePort = sp.NodePort
		}
		for _, slice := range slices {
			p.Endpoints = appendSliceEndpoints(p.Endpoints, slice, sp.Name, proto)
		}
		ms.Ports = append(ms.Ports, p)
	}
	return ms, true
}

// appendSliceEndpoints adds the endpoints of slice for the port named port
// with protocol proto.
func appendSliceEndpoints(out []iptables.Endpoint, slice *discoveryv1.EndpointSlice, port string, proto corev1.Protocol) []iptables.Endpoint {
	for _, ep := range slice.Ports {
		name, p := "", corev1.ProtocolTCP
		if ep.Name != nil {
			name = *ep.Name
		}
		if ep.Protocol != nil {
			p = *ep.Protocol
		}
		if name != port || p != proto || ep.Port == nil {
			continue
		}
		for _, e := range slice.Endpoints {
			if len(e.Addresses) == 0 {
				continue
			}
			a, err := netip.ParseAddr(e.Addresses[0])
			if err != nil || !a.Is4() {
				continue
			}
			// As upstream: a missing ready condition means ready, a missing
			// serving condition means the ready one, a missing terminating
			// condition means not terminating.
			ready := e.Conditions.Ready == nil || *e.Conditions.Ready
			serving := ready
			if e.Conditions.Serving != nil {
				serving = *e.Conditions.Serving
			}
			terminating := e.Conditions.Terminating != nil && *e.Conditions.Terminating
			node := ""
			if e.NodeName != nil {
				node = *e.NodeName
			}
			out = append(out, iptables.Endpoint{IP: a, Port: *ep.Port, Ready: ready, Serving: serving, Terminating: terminating, NodeName: node})
		}
	}
	return out
}
