package dns

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const testZone = "cluster.local."

func clusterIPService(ns, name string, ips []string, ports ...corev1.ServicePort) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{ClusterIPs: ips, Ports: ports}}
	if len(ips) > 0 {
		svc.Spec.ClusterIP = ips[0]
	}
	return svc
}

func headlessService(ns, name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, ClusterIPs: []string{corev1.ClusterIPNone}}}
}

func port(name string, proto corev1.Protocol, n int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: proto, Port: n}
}

type testEndpoint struct {
	addr     string
	hostname string
	ready    *bool
}

func endpointSlice(ns, svc, name string, family discoveryv1.AddressType, portName string, portNum int32, eps ...testEndpoint) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: family,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &portNum}},
	}
	for _, e := range eps {
		ep := discoveryv1.Endpoint{Addresses: []string{e.addr}, Conditions: discoveryv1.EndpointConditions{Ready: e.ready}}
		if e.hostname != "" {
			ep.Hostname = &e.hostname
		}
		es.Endpoints = append(es.Endpoints, ep)
	}
	return es
}

func ptr[T any](v T) *T { return &v }

// testResolver holds the Services every answer test shares.
func testResolver(t *testing.T) *resolver {
	t.Helper()
	ix := newIndex(testZone, 100)
	set := func(svc *corev1.Service, slices ...*discoveryv1.EndpointSlice) {
		ix.set(svc.Namespace+"/"+svc.Name, serviceRecords(testZone, 5, svc, slices))
	}
	set(clusterIPService("default", "kubernetes", []string{"10.96.0.1"}, port("https", corev1.ProtocolTCP, 443)))
	set(clusterIPService("default", "web", []string{"10.96.0.10", "fd00::10"},
		port("http", corev1.ProtocolTCP, 80), port("dns", corev1.ProtocolUDP, 53), port("", corev1.ProtocolTCP, 81)))
	set(headlessService("default", "db"),
		endpointSlice("default", "db", "db-b", discoveryv1.AddressTypeIPv4, "pg", 5432,
			testEndpoint{addr: "10.244.1.5", hostname: "db-0", ready: ptr(true)},
			testEndpoint{addr: "10.244.1.7", hostname: "db-2", ready: ptr(false)}),
		endpointSlice("default", "db", "db-a", discoveryv1.AddressTypeIPv4, "pg", 5432,
			testEndpoint{addr: "10.244.1.6"}, // ready unknown counts as ready
			testEndpoint{addr: "10.244.1.5", hostname: "db-0", ready: ptr(true)}))
	set(headlessService("default", "empty"))
	set(clusterIPService("default", "pending", nil))
	set(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "ext"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "Example.COM"}})
	return &resolver{zone: testZone, ttl: 5, ix: ix}
}

type want struct {
	rcode   int
	answer  []string
	extra   []string
	soa     bool // the SOA is in the authority section
	forward bool
}

func TestAnswer(t *testing.T) {
	r := testResolver(t)
	const soa = true
	tests := []struct {
		name  string
		qtype uint16
		want  want
	}{
		// ClusterIP Services.
		{"web.default.svc.cluster.local.", dns.TypeA, want{answer: []string{"web.default.svc.cluster.local. 5 IN A 10.96.0.10"}}},
		{"web.default.svc.cluster.local.", dns.TypeAAAA, want{answer: []string{"web.default.svc.cluster.local. 5 IN AAAA fd00::10"}}},
		{"web.default.svc.cluster.local", dns.TypeA, want{answer: []string{"web.default.svc.cluster.local. 5 IN A 10.96.0.10"}}},
		{"WEB.Default.Svc.CLUSTER.local.", dns.TypeA, want{answer: []string{"WEB.Default.Svc.CLUSTER.local. 5 IN A 10.96.0.10"}}},
		{"kubernetes.default.svc.cluster.local.", dns.TypeA, want{answer: []string{"kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1"}}},
		{"web.default.svc.cluster.local.", dns.TypeTXT, want{soa: soa}},
		{"web.default.svc.cluster.local.", dns.TypeANY, want{answer: []string{
			"web.default.svc.cluster.local. 5 IN A 10.96.0.10", "web.default.svc.cluster.local. 5 IN AAAA fd00::10"}}},
		{"pending.default.svc.cluster.local.", dns.TypeA, want{soa: soa}},
		// SRV of named ports only.
		{"_https._tcp.kubernetes.default.svc.cluster.local.", dns.TypeSRV, want{
			answer: []string{"_https._tcp.kubernetes.default.svc.cluster.local. 5 IN SRV 0 100 443 kubernetes.default.svc.cluster.local."},
			extra:  []string{"kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1"}}},
		{"_DNS._UDP.web.default.svc.cluster.local.", dns.TypeSRV, want{
			answer: []string{"_DNS._UDP.web.default.svc.cluster.local. 5 IN SRV 0 100 53 web.default.svc.cluster.local."},
			extra:  []string{"web.default.svc.cluster.local. 5 IN A 10.96.0.10", "web.default.svc.cluster.local. 5 IN AAAA fd00::10"}}},
		{"_http._udp.web.default.svc.cluster.local.", dns.TypeSRV, want{rcode: dns.RcodeNameError, soa: soa}},
		{"_tcp.web.default.svc.cluster.local.", dns.TypeSRV, want{soa: soa}},
		{"_https._tcp.kubernetes.default.svc.cluster.local.", dns.TypeA, want{soa: soa}},
		// Headless: ready endpoints only, each address once.
		{"db.default.svc.cluster.local.", dns.TypeA, want{answer: []string{
			"db.default.svc.cluster.local. 5 IN A 10.244.1.5", "db.default.svc.cluster.local. 5 IN A 10.244.1.6"}}},
		{"db.default.svc.cluster.local.", dns.TypeAAAA, want{soa: soa}},
		{"db-0.db.default.svc.cluster.local.", dns.TypeA, want{answer: []string{"db-0.db.default.svc.cluster.local. 5 IN A 10.244.1.5"}}},
		{"10-244-1-6.db.default.svc.cluster.local.", dns.TypeA, want{answer: []string{"10-244-1-6.db.default.svc.cluster.local. 5 IN A 10.244.1.6"}}},
		{"db-2.db.default.svc.cluster.local.", dns.TypeA, want{rcode: dns.RcodeNameError, soa: soa}},
		{"_pg._tcp.db.default.svc.cluster.local.", dns.TypeSRV, want{
			answer: []string{
				"_pg._tcp.db.default.svc.cluster.local. 5 IN SRV 0 50 5432 10-244-1-6.db.default.svc.cluster.local.",
				"_pg._tcp.db.default.svc.cluster.local. 5 IN SRV 0 50 5432 db-0.db.default.svc.cluster.local."},
			extra: []string{"10-244-1-6.db.default.svc.cluster.local. 5 IN A 10.244.1.6", "db-0.db.default.svc.cluster.local. 5 IN A 10.244.1.5"}}},
		{"empty.default.svc.cluster.local.", dns.TypeA, want{soa: soa}},
		// ExternalName.
		{"ext.prod.svc.cluster.local.", dns.TypeCNAME, want{answer: []string{"ext.prod.svc.cluster.local. 5 IN CNAME example.com."}}},
		{"ext.prod.svc.cluster.local.", dns.TypeA, want{answer: []string{"ext.prod.svc.cluster.local. 5 IN CNAME example.com."}}},
		// PTR.
		{"10.0.96.10.in-addr.arpa.", dns.TypePTR, want{answer: []string{"10.0.96.10.in-addr.arpa. 5 IN PTR web.default.svc.cluster.local."}}},
		{"1.0.96.10.IN-ADDR.ARPA", dns.TypePTR, want{answer: []string{"1.0.96.10.IN-ADDR.ARPA. 5 IN PTR kubernetes.default.svc.cluster.local."}}},
		{"5.1.244.10.in-addr.arpa.", dns.TypePTR, want{answer: []string{"5.1.244.10.in-addr.arpa. 5 IN PTR db-0.db.default.svc.cluster.local."}}},
		{"6.1.244.10.in-addr.arpa.", dns.TypePTR, want{answer: []string{"6.1.244.10.in-addr.arpa. 5 IN PTR 10-244-1-6.db.default.svc.cluster.local."}}},
		{"0.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", dns.TypePTR, want{answer: []string{
			"0.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa. 5 IN PTR web.default.svc.cluster.local."}}},
		{"7.1.244.10.in-addr.arpa.", dns.TypePTR, want{forward: true}},
		{"10.0.96.10.in-addr.arpa.", dns.TypeA, want{forward: true}},
		// Pods, insecure mode.
		{"10-244-1-9.anyns.pod.cluster.local.", dns.TypeA, want{answer: []string{"10-244-1-9.anyns.pod.cluster.local. 5 IN A 10.244.1.9"}}},
		{"10-244-1-9.anyns.pod.cluster.local.", dns.TypeAAAA, want{soa: soa}},
		{"fd00--1.anyns.pod.cluster.local.", dns.TypeAAAA, want{answer: []string{"fd00--1.anyns.pod.cluster.local. 5 IN AAAA fd00::1"}}},
		{"10-244-1-999.anyns.pod.cluster.local.", dns.TypeA, want{rcode: dns.RcodeNameError, soa: soa}},
		{"x.10-244-1-9.anyns.pod.cluster.local.", dns.TypeA, want{rcode: dns.RcodeNameError, soa: soa}},
		{"anyns.pod.cluster.local.", dns.TypeA, want{soa: soa}},
		// The rest of the zone.
		{"nope.default.svc.cluster.local.", dns.TypeA, want{rcode: dns.RcodeNameError, soa: soa}},
		{"web.default.svc.cluster.local.default.svc.cluster.local.", dns.TypeA, want{rcode: dns.RcodeNameError, soa: soa}},
		{"web.other.svc.cluster.local.", dns.TypeA, want{rcode: dns.RcodeNameError, soa: soa}},
		{"default.svc.cluster.local.", dns.TypeA, want{soa: soa}},
		{"other.svc.cluster.local.", dns.TypeA, want{rcode: dns.RcodeNameError, soa: soa}},
		{"svc.cluster.local.", dns.TypeA, want{soa: soa}},
		{"pod.cluster.local.", dns.TypeA, want{soa: soa}},
		{"cluster.local.", dns.TypeA, want{soa: soa}},
		{"cluster.local.", dns.TypeSOA, want{answer: []string{"cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 106 7200 1800 86400 5"}}},
		{"dns-version.cluster.local.", dns.TypeTXT, want{answer: []string{`dns-version.cluster.local. 5 IN TXT "1.1.0"`}}},
		{"foo.cluster.local.", dns.TypeA, want{rcode: dns.RcodeNameError, soa: soa}},
		// Outside the zone.
		{"example.org.", dns.TypeA, want{forward: true}},
		{"cluster.local.example.org.", dns.TypeA, want{forward: true}},
		{"local.", dns.TypeSOA, want{forward: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/"+dns.TypeToString[tt.qtype], func(t *testing.T) {
			req := new(dns.Msg)
			req.SetQuestion(tt.name, tt.qtype)
			resp, forward := r.answer(req)
			if forward != tt.want.forward {
				t.Fatalf("forward = %v, want %v", forward, tt.want.forward)
			}
			if forward {
				return
			}
			checkAnswer(t, resp, tt.want)
			if resp.Id != req.Id || !resp.Response || !resp.Authoritative {
				t.Errorf("header: id %d (want %d), qr %v, aa %v", resp.Id, req.Id, resp.Response, resp.Authoritative)
			}
		})
	}
}

func checkAnswer(t *testing.T, resp *dns.Msg, w want) {
	t.Helper()
	if resp.Rcode != w.rcode {
		t.Errorf("rcode %s, want %s", dns.RcodeToString[resp.Rcode], dns.RcodeToString[w.rcode])
	}
	if got := rrStrings(resp.Answer); !slices.Equal(got, sorted(w.answer)) {
		t.Errorf("answer:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(sorted(w.answer), "\n"))
	}
	if got := rrStrings(resp.Extra); !slices.Equal(got, sorted(w.extra)) {
		t.Errorf("extra:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(sorted(w.extra), "\n"))
	}
	hasSOA := len(resp.Ns) == 1 && resp.Ns[0].Header().Rrtype == dns.TypeSOA && resp.Ns[0].Header().Name == testZone
	if hasSOA != w.soa || (!w.soa && len(resp.Ns) > 0) {
		t.Errorf("authority %v, want the SOA: %v", resp.Ns, w.soa)
	}
}

func rrStrings(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		out = append(out, strings.Join(strings.Fields(rr.String()), " "))
	}
	slices.Sort(out)
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestAnswerRejectsOddMessages(t *testing.T) {
	r := testResolver(t)
	req := new(dns.Msg)
	req.SetQuestion("web.default.svc.cluster.local.", dns.TypeA)
	req.Question = append(req.Question, req.Question[0])
	if resp, fwd := r.answer(req); fwd || resp.Rcode != dns.RcodeFormatError {
		t.Errorf("two questions: forward %v, %v", fwd, resp)
	}
	req = new(dns.Msg)
	req.SetNotify("cluster.local.")
	if resp, fwd := r.answer(req); fwd || resp.Rcode != dns.RcodeNotImplemented {
		t.Errorf("NOTIFY: forward %v, %v", fwd, resp)
	}
}

// TestIndexReplaceAndRemove checks that replacing a Service's records drops
// the old ones and that removing it leaves no trace, empty non-terminals
// included.
func TestIndexReplaceAndRemove(t *testing.T) {
	r := testResolver(t)
	ask := func(name string, qtype uint16) *dns.Msg {
		req := new(dns.Msg)
		req.SetQuestion(name, qtype)
		resp, _ := r.answer(req)
		return resp
	}
	r.ix.set("default/web", serviceRecords(testZone, 5, clusterIPService("default", "web", []string{"10.96.0.20"}, port("http", corev1.ProtocolTCP, 8080)), nil))
	checkAnswer(t, ask("web.default.svc.cluster.local.", dns.TypeA), want{answer: []string{"web.default.svc.cluster.local. 5 IN A 10.96.0.20"}})
	checkAnswer(t, ask("_dns._udp.web.default.svc.cluster.local.", dns.TypeSRV), want{rcode: dns.RcodeNameError, soa: true})
	if _, fwd := r.answer(func() *dns.Msg { m := new(dns.Msg); return m.SetQuestion("10.0.96.10.in-addr.arpa.", dns.TypePTR) }()); !fwd {
		t.Error("the old ClusterIP's PTR is still answered")
	}

	for _, key := range []string{"default/web", "default/kubernetes", "default/db", "default/empty", "default/pending"} {
		r.ix.set(key, nil)
	}
	checkAnswer(t, ask("default.svc.cluster.local.", dns.TypeA), want{rcode: dns.RcodeNameError, soa: true})
	checkAnswer(t, ask("prod.svc.cluster.local.", dns.TypeA), want{soa: true})
	r.ix.set("prod/ext", nil)
	if len(r.ix.names) != 0 || len(r.ix.ents) != 0 || len(r.ix.services) != 0 {
		t.Errorf("index not empty: %v %v %v", r.ix.names, r.ix.ents, r.ix.services)
	}
}

// TestConcurrentAnswersAndUpdates runs answers while a Service's records are
// replaced (run with -race): every answer is one of the two versions.
func TestConcurrentAnswersAndUpdates(t *testing.T) {
	r := testResolver(t)
	versions := []recordSet{
		serviceRecords(testZone, 5, clusterIPService("default", "web", []string{"10.96.0.10"}), nil),
		serviceRecords(testZone, 5, clusterIPService("default", "web", []string{"10.96.0.20"}), nil),
	}
	ok := map[string]bool{
		"web.default.svc.cluster.local. 5 IN A 10.96.0.10": true,
		"web.default.svc.cluster.local. 5 IN A 10.96.0.20": true,
	}
	done := make(chan struct{})
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
				r.ix.set("default/web", versions[i%2])
			}
		}
	}()
	errs := make(chan string, 4)
	var readers sync.WaitGroup
	for range 4 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for range 2000 {
				req := new(dns.Msg)
				req.SetQuestion("web.default.svc.cluster.local.", dns.TypeA)
				resp, _ := r.answer(req)
				if got := rrStrings(resp.Answer); len(got) != 1 || !ok[got[0]] {
					errs <- strings.Join(got, "; ")
					return
				}
			}
		}()
	}
	readers.Wait()
	close(done)
	<-writerDone
	close(errs)
	for e := range errs {
		t.Errorf("torn answer: %s", e)
	}
}
