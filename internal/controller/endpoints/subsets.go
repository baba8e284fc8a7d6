package endpoints

import (
	"fmt"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubette/kubette/internal/controller/endpointslice/podendpoint"
)

// maxCapacity is the most addresses an Endpoints object lists.
const maxCapacity = 1000

// truncated is the value of the over-capacity annotation.
const truncated = "truncated"

// serviceFamily is the IP family of the addresses a Service's Endpoints list,
// as upstream: its first IP family, else that of its cluster IP, else (a
// legacy headless Service) that of the pod's IP.
func serviceFamily(svc *corev1.Service, pod *corev1.Pod) corev1.IPFamily {
	if len(svc.Spec.IPFamilies) > 0 {
		return svc.Spec.IPFamilies[0]
	}
	ip := pod.Status.PodIP
	if svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		ip = svc.Spec.ClusterIP
	}
	if podendpoint.FamilyOf(ip) == corev1.IPv6Protocol {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

// podAddress is the pod's address in the Service's Endpoints, or false when
// the pod has no IP of the Service's family.
func podAddress(svc *corev1.Service, pod *corev1.Pod) (corev1.EndpointAddress, bool) {
	ip := podendpoint.IPOfFamily(pod, serviceFamily(svc, pod))
	if ip == "" {
		return corev1.EndpointAddress{}, false
	}
	a := corev1.EndpointAddress{
		IP:        ip,
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
	}
	if pod.Spec.NodeName != "" {
		node := pod.Spec.NodeName
		a.NodeName = &node
	}
	if podendpoint.ShouldSetHostname(pod, svc) {
		a.Hostname = pod.Spec.Hostname
	}
	return a, true
}

// addrKey identifies an address: its IP and the pod it belongs to.
type addrKey struct {
	ip  string
	uid types.UID
}

// portEntry is one port and the addresses offering it, with their readiness.
type portEntry struct {
	port  *corev1.EndpointPort // nil for a headless Service without ports
	addrs map[addrKey]bool
}

// subsetBuilder collects (address, port, ready) triples and packs them into
// the canonical subsets: one subset per set of addresses, listing every
// port those addresses offer, as upstream's RepackSubsets.
type subsetBuilder struct {
	addrs map[addrKey]corev1.EndpointAddress
	ports map[string]*portEntry
}

func newSubsetBuilder() *subsetBuilder {
	return &subsetBuilder{addrs: make(map[addrKey]corev1.EndpointAddress), ports: make(map[string]*portEntry)}
}

func portID(p *corev1.EndpointPort) string {
	if p == nil {
		return ""
	}
	app := ""
	if p.AppProtocol != nil {
		app = *p.AppProtocol
	}
	return fmt.Sprintf("%s/%d/%s/%s", p.Name, p.Port, p.Protocol, app)
}

// add records that a offers port (nil: no port), ready or not. An address
// ready for a port stays ready for it.
func (b *subsetBuilder) add(a corev1.EndpointAddress, port *corev1.EndpointPort, ready bool) {
	k := addrKey{ip: a.IP}
	if a.TargetRef != nil {
		k.uid = a.TargetRef.UID
	}
	if _, ok := b.addrs[k]; !ok {
		b.addrs[k] = a
	}
	id := portID(port)
	e, ok := b.ports[id]
	if !ok {
		e = &portEntry{port: port, addrs: make(map[addrKey]bool)}
		b.ports[id] = e
	}
	e.addrs[k] = e.addrs[k] || ready
}

// subsets returns the packed subsets, sorted: addresses by IP then pod UID,
// ports by name, port and protocol, subsets by their addresses.
func (b *subsetBuilder) subsets() []corev1.EndpointSubset {
	type group struct {
		addrs map[addrKey]bool
		ports []corev1.EndpointPort
	}
	groups := make(map[string]*group)
	for _, e := range b.ports {
		sig := signature(e.addrs)
		g, ok := groups[sig]
		if !ok {
			g = &group{addrs: e.addrs}
			groups[sig] = g
		}
		if e.port != nil {
			g.ports = append(g.ports, *e.port)
		}
	}
	sigs := make([]string, 0, len(groups))
	for s := range groups {
		sigs = append(sigs, s)
	}
	sort.Strings(sigs)
	out := []corev1.EndpointSubset{}
	for _, s := range sigs {
		g := groups[s]
		keys := make([]addrKey, 0, len(g.addrs))
		for k := range g.addrs {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			if keys[i].ip != keys[j].ip {
				return keys[i].ip < keys[j].ip
			}
			return keys[i].uid < keys[j].uid
		})
		var ss corev1.EndpointSubset
		for _, k := range keys {
			if g.addrs[k] {
				ss.Addresses = append(ss.Addresses, b.addrs[k])
			} else {
				ss.NotReadyAddresses = append(ss.NotReadyAddresses, b.addrs[k])
			}
		}
		sort.Slice(g.ports, func(i, j int) bool {
			a, c := g.ports[i], g.ports[j]
			if a.Name != c.Name {
				return a.Name < c.Name
			}
			if a.Port != c.Port {
				return a.Port < c.Port
			}
			return a.Protocol < c.Protocol
		})
		ss.Ports = g.ports
		out = append(out, ss)
	}
	return out
}

// signature identifies a set of addresses with their readiness.
func signature(addrs map[addrKey]bool) string {
	parts := make([]string, 0, len(addrs))
	for k, ready := range addrs {
		parts = append(parts, fmt.Sprintf("%s|%s|%t", k.ip, k.uid, ready))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// truncate keeps at most maxCapacity addresses, ready ones first, spread over
// the subsets in proportion to their sizes, as upstream; it reports whether
// anything was cut. Subsets left without addresses are dropped (the API
// rejects them).
func truncate(subsets []corev1.EndpointSubset) ([]corev1.EndpointSubset, bool) {
	ready, notReady := 0, 0
	for _, s := range subsets {
		ready += len(s.Addresses)
		notReady += len(s.NotReadyAddresses)
	}
	if ready+notReady <= maxCapacity {
		return subsets, false
	}
	// Either ready addresses alone exceed the capacity (cut them, drop every
	// not-ready one), or all ready ones fit and not-ready ones share the rest.
	cutReady := ready > maxCapacity
	budget, total := maxCapacity-ready, notReady
	if cutReady {
		budget, total = maxCapacity, ready
	}
	left := budget
	for i := range subsets {
		s := &subsets[i]
		n := len(s.NotReadyAddresses)
		if cutReady {
			n = len(s.Addresses)
		}
		share := min(int(math.Ceil(float64(n)/float64(total)*float64(budget))), left)
		if cutReady {
			s.Addresses = s.Addresses[:min(share, len(s.Addresses))]
			s.NotReadyAddresses = nil
			left -= len(s.Addresses)
		} else {
			s.NotReadyAddresses = s.NotReadyAddresses[:min(share, len(s.NotReadyAddresses))]
			left -= len(s.NotReadyAddresses)
		}
	}
	kept := subsets[:0]
	for _, s := range subsets {
		if len(s.Addresses)+len(s.NotReadyAddresses) > 0 {
			kept = append(kept, s)
		}
	}
	return kept, true
}
