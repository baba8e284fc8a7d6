// Package endpointsubsets packs the addresses and ports of an Endpoints object into
// its canonical subsets, as upstream's RepackSubsets (pkg/api/v1/endpoints): one
// subset per set of addresses (with their readiness), listing every port those
// addresses offer. The endpoints controller builds its subsets with it; the
// EndpointSlice mirroring controller repacks what users wrote.
package endpointsubsets

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Repack returns subsets in canonical form: an address listed in several subsets is
// merged, and the addresses offering the same ports share one subset. A subset
// without ports contributes its addresses without a port.
func Repack(subsets []corev1.EndpointSubset) []corev1.EndpointSubset {
	b := NewBuilder()
	for i := range subsets {
		s := &subsets[i]
		add := func(port *corev1.EndpointPort) {
			for _, a := range s.Addresses {
				b.Add(a, port, true)
			}
			for _, a := range s.NotReadyAddresses {
				b.Add(a, port, false)
			}
		}
		if len(s.Ports) == 0 {
			add(nil)
			continue
		}
		for j := range s.Ports {
			add(&s.Ports[j])
		}
	}
	return b.Subsets()
}

type addrKey struct {
	ip  string
	uid types.UID
}

// portEntry is one port and the addresses offering it, with their readiness.
type portEntry struct {
	port  *corev1.EndpointPort // nil for a headless Service without ports
	addrs map[addrKey]bool
}

// Builder collects (address, port, ready) triples and packs them into the
// canonical subsets: one subset per set of addresses, listing every port those
// addresses offer, as upstream's RepackSubsets.
type Builder struct {
	addrs map[addrKey]corev1.EndpointAddress
	ports map[string]*portEntry
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder {
	return &Builder{addrs: make(map[addrKey]corev1.EndpointAddress), ports: make(map[string]*portEntry)}
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

// Add records that a offers port (nil: no port), ready or not. An address
// seen not ready for a port stays not ready for it, as upstream. Addresses are
// the same when their IP and target UID are; the first one seen is kept.
func (b *Builder) Add(a corev1.EndpointAddress, port *corev1.EndpointPort, ready bool) {
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
	if wasReady, seen := e.addrs[k]; !seen || wasReady {
		e.addrs[k] = ready
	}
}

// Subsets returns the packed subsets, sorted: addresses by IP then pod UID,
// ports by name, port and protocol, subsets by their addresses.
func (b *Builder) Subsets() []corev1.EndpointSubset {
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
