package dns

import (
	"strings"

	"github.com/miekg/dns"
)

// schemaVersion is the version of the Kubernetes DNS schema served at
// dns-version.<zone> TXT.
const schemaVersion = "1.1.0"

// resolver answers questions about the cluster zone from an index.
type resolver struct {
	zone string // fully qualified, lower-case
	ttl  uint32
	ix   *index
}

// answer builds the reply to req for names the cluster answers: the zone and
// the reverse names of known addresses. forward is true when req is to be
// forwarded upstream instead (resp is then nil).
func (r *resolver) answer(req *dns.Msg) (resp *dns.Msg, forward bool) {
	resp = new(dns.Msg)
	resp.SetReply(req)
	resp.RecursionAvailable = true
	if req.Opcode != dns.OpcodeQuery {
		resp.Rcode = dns.RcodeNotImplemented
		return resp, false
	}
	if len(req.Question) != 1 {
		resp.Rcode = dns.RcodeFormatError
		return resp, false
	}
	q := req.Question[0]
	name := strings.ToLower(dns.Fqdn(q.Name))
	if isReverse(name) {
		if q.Qtype != dns.TypePTR {
			return nil, true
		}
		rrs, _ := r.ix.lookup(name)
		rrs = ofType(rrs, dns.TypePTR)
		if len(rrs) == 0 {
			return nil, true
		}
		resp.Authoritative = true
		resp.Answer = withOwner(rrs, q.Name)
		return resp, false
	}
	if !dns.IsSubDomain(r.zone, name) {
		return nil, true
	}
	resp.Authoritative = true
	if q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY {
		resp.Rcode = dns.RcodeRefused
		return resp, false
	}
	rrs, exists := r.zoneRecords(name)
	if !exists {
		resp.Rcode = dns.RcodeNameError
		resp.Ns = []dns.RR{r.soa()}
		return resp, false
	}
	if cname := ofType(rrs, dns.TypeCNAME); len(cname) > 0 && q.Qtype != dns.TypeCNAME {
		rrs = cname
	} else if q.Qtype != dns.TypeANY {
		rrs = ofType(rrs, q.Qtype)
	}
	if len(rrs) == 0 {
		resp.Ns = []dns.RR{r.soa()}
		return resp, false
	}
	resp.Answer = withOwner(rrs, q.Name)
	for _, rr := range rrs {
		if s, ok := rr.(*dns.SRV); ok {
			targets, _ := r.ix.lookup(s.Target)
			resp.Extra = append(resp.Extra, ofType(targets, dns.TypeA, dns.TypeAAAA)...)
		}
	}
	return resp, false
}

// zoneRecords returns the records at name, a name inside the zone, and
// whether the name exists.
func (r *resolver) zoneRecords(name string) ([]dns.RR, bool) {
	switch name {
	case r.zone:
		return []dns.RR{r.soa()}, true
	case "dns-version." + r.zone:
		return []dns.RR{&dns.TXT{Hdr: hdr(name, dns.TypeTXT, r.ttl), Txt: []string{schemaVersion}}}, true
	case "svc." + r.zone, "pod." + r.zone:
		return nil, true
	}
	if rrs, ok := r.ix.lookup(name); ok {
		return rrs, true
	}
	// Pods, "insecure" mode: <a-b-c-d>.<ns>.pod.<zone> is <a.b.c.d>, whatever
	// the namespace.
	if !strings.HasSuffix(name, ".pod."+r.zone) {
		return nil, false
	}
	labels := dns.SplitDomainName(strings.TrimSuffix(name, "pod."+r.zone))
	switch len(labels) {
	case 1:
		return nil, true
	case 2:
		ip, ok := undashed(labels[0])
		if !ok {
			return nil, false
		}
		return []dns.RR{addressRR(name, r.ttl, ip)}, true
	}
	return nil, false
}

// soa is the zone's SOA record, sent in the authority section of negative
// answers; its minimum (the negative-caching TTL) is the records' TTL.
func (r *resolver) soa() dns.RR {
	return &dns.SOA{
		Hdr: hdr(r.zone, dns.TypeSOA, r.ttl), Ns: "ns.dns." + r.zone, Mbox: "hostmaster." + r.zone,
		Serial: r.ix.soaSerial(), Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: r.ttl,
	}
}

func isReverse(name string) bool {
	return dns.IsSubDomain("in-addr.arpa.", name) || dns.IsSubDomain("ip6.arpa.", name)
}

func ofType(rrs []dns.RR, types ...uint16) []dns.RR {
	var out []dns.RR
	for _, rr := range rrs {
		for _, t := range types {
			if rr.Header().Rrtype == t {
				out = append(out, rr)
				break
			}
		}
	}
	return out
}

// withOwner copies rrs with their owner name spelled as the question spelled
// it (the index stores names in lower case).
func withOwner(rrs []dns.RR, owner string) []dns.RR {
	out := make([]dns.RR, len(rrs))
	for i, rr := range rrs {
		out[i] = dns.Copy(rr)
		out[i].Header().Name = dns.Fqdn(owner)
	}
	return out
}
