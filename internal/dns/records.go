package dns

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// recordSet is what one Service contributes to the index: owner name
// (lower-case, fully qualified) → records. An owner with no records still
// exists (a headless Service without ready endpoints answers NODATA, not
// NXDOMAIN).
type recordSet map[string][]dns.RR

// serviceRecords computes the records of svc and its EndpointSlices as the
// Kubernetes DNS specification (schema 1.1.0) lays them out. zone is fully
// qualified and lower-case. It is a pure function of its inputs.
func serviceRecords(zone string, ttl uint32, svc *corev1.Service, endpointSlices []*discoveryv1.EndpointSlice) recordSet {
	rs := recordSet{}
	base := strings.ToLower(svc.Name + "." + svc.Namespace + ".svc." + zone)
	rs[base] = nil
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		if svc.Spec.ExternalName != "" {
			rs.add(&dns.CNAME{Hdr: hdr(base, dns.TypeCNAME, ttl), Target: dns.Fqdn(strings.ToLower(svc.Spec.ExternalName))})
		}
	case svc.Spec.ClusterIP == corev1.ClusterIPNone:
		headlessRecords(rs, base, ttl, svc, endpointSlices)
	default:
		clusterIPRecords(rs, base, ttl, svc)
	}
	weighSRV(rs)
	return rs
}

func clusterIPRecords(rs recordSet, base string, ttl uint32, svc *corev1.Service) {
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	for _, s := range ips {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		rs.add(addressRR(base, ttl, ip))
		rs.addPTR(ip, base, ttl)
	}
	for _, p := range svc.Spec.Ports {
		if p.Name == "" {
			continue
		}
		rs.add(srv(srvName(p.Name, p.Protocol, base), ttl, uint16(p.Port), base))
	}
}

func headlessRecords(rs recordSet, base string, ttl uint32, svc *corev1.Service, endpointSlices []*discoveryv1.EndpointSlice) {
	// Sorted by name so that the records do not depend on the lister's order.
	endpointSlices = slices.Clone(endpointSlices)
	slices.SortFunc(endpointSlices, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	for _, es := range endpointSlices {
		if es.AddressType != discoveryv1.AddressTypeIPv4 && es.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		for _, ep := range es.Endpoints {
			if !svc.Spec.PublishNotReadyAddresses && ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, s := range ep.Addresses {
				ip, err := netip.ParseAddr(s)
				if err != nil {
					continue
				}
				host := dashed(ip)
				if ep.Hostname != nil && *ep.Hostname != "" {
					host = strings.ToLower(*ep.Hostname)
				}
				hostName := host + "." + base
				rs.add(addressRR(base, ttl, ip))
				rs.add(addressRR(hostName, ttl, ip))
				rs.addPTR(ip, hostName, ttl)
				for _, p := range es.Ports {
					if p.Name == nil || *p.Name == "" || p.Port == nil {
						continue
					}
					proto := corev1.ProtocolTCP
					if p.Protocol != nil {
						proto = *p.Protocol
					}
					rs.add(srv(srvName(*p.Name, proto, base), ttl, uint16(*p.Port), hostName))
				}
			}
		}
	}
}

// add appends rr at its owner unless an equal record is there already (the
// same address may appear in several EndpointSlices).
func (rs recordSet) add(rr dns.RR) {
	name := rr.Header().Name
	for _, have := range rs[name] {
		if dns.IsDuplicate(have, rr) {
			return
		}
	}
	rs[name] = append(rs[name], rr)
}

func (rs recordSet) addPTR(ip netip.Addr, target string, ttl uint32) {
	rev, err := dns.ReverseAddr(ip.String())
	if err != nil {
		return
	}
	rs.add(&dns.PTR{Hdr: hdr(rev, dns.TypePTR, ttl), Ptr: target})
}

// weighSRV spreads the weight of each SRV RRset evenly (100 in all), as
// CoreDNS does; the priority is 0 for every record.
func weighSRV(rs recordSet) {
	for _, rrs := range rs {
		n := 0
		for _, rr := range rrs {
			if _, ok := rr.(*dns.SRV); ok {
				n++
			}
		}
		if n == 0 {
			continue
		}
		w := uint16(max(1, 100/n))
		for _, rr := range rrs {
			if s, ok := rr.(*dns.SRV); ok {
				s.Weight = w
			}
		}
	}
}

func hdr(name string, rrtype uint16, ttl uint32) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: rrtype, Class: dns.ClassINET, Ttl: ttl}
}

// addressRR is an A record for an IPv4 address, an AAAA record otherwise.
func addressRR(name string, ttl uint32, ip netip.Addr) dns.RR {
	if ip.Is4() || ip.Is4In6() {
		return &dns.A{Hdr: hdr(name, dns.TypeA, ttl), A: ip.Unmap().AsSlice()}
	}
	return &dns.AAAA{Hdr: hdr(name, dns.TypeAAAA, ttl), AAAA: ip.AsSlice()}
}

func srv(name string, ttl uint32, port uint16, target string) *dns.SRV {
	return &dns.SRV{Hdr: hdr(name, dns.TypeSRV, ttl), Priority: 0, Weight: 100, Port: port, Target: target}
}

func srvName(port string, proto corev1.Protocol, base string) string {
	if proto == "" {
		proto = corev1.ProtocolTCP // the API's default
	}
	return "_" + strings.ToLower(port) + "._" + strings.ToLower(string(proto)) + "." + base
}

// dashed is the label an address is known by when it has no name: its text
// with '.' or ':' replaced by '-' (10-244-1-5, 2001-db8--1), as CoreDNS names
// endpoints without a hostname and pods.
func dashed(ip netip.Addr) string {
	s := ip.Unmap().String()
	return strings.NewReplacer(".", "-", ":", "-").Replace(s)
}

// undashed parses a dashed address label; ok is false when label is not one.
func undashed(label string) (netip.Addr, bool) {
	if ip, err := netip.ParseAddr(strings.ReplaceAll(label, "-", ".")); err == nil && ip.Is4() {
		return ip, true
	}
	ip, err := netip.ParseAddr(strings.ReplaceAll(label, "-", ":"))
	if err != nil || ip.Zone() != "" || !ip.Is6() {
		return netip.Addr{}, false
	}
	return ip, true
}
