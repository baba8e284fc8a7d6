package dns

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// startServer runs a Server on a free loopback port until the test ends.
func startServer(t *testing.T, client kubernetes.Interface, upstreams []string) *Server {
	t.Helper()
	s, err := New(Options{Client: client, Addr: "127.0.0.1:0", Upstreams: upstreams,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-s.Ready():
	case err := <-done:
		done <- err
		t.Fatalf("Run ended before ready: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("server not ready after 60 s")
	}
	return s
}

// query asks the server over network ("udp" or "tcp").
func query(t *testing.T, s *Server, network, name string, qtype uint16) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 5 * time.Second}
	req := new(dns.Msg)
	req.SetQuestion(name, qtype)
	resp, _, err := c.Exchange(req, s.Addr().String())
	if err != nil {
		t.Fatalf("%s %s over %s: %v", name, dns.TypeToString[qtype], network, err)
	}
	return resp
}

// eventually polls until the answer to the question, over UDP, has w's rcode and
// records, then checks the rest of it (additional and authority sections).
func eventually(t *testing.T, s *Server, name string, qtype uint16, w want) {
	t.Helper()
	var resp *dns.Msg
	poll.Until(t, "the answer to "+name+" "+dns.TypeToString[qtype], func() error {
		resp = query(t, s, "udp", name, qtype)
		if resp.Rcode == w.rcode && slices.Equal(rrStrings(resp.Answer), sorted(w.answer)) {
			return nil
		}
		return fmt.Errorf("still %s %v, want %s %v", dns.RcodeToString[resp.Rcode], rrStrings(resp.Answer),
			dns.RcodeToString[w.rcode], w.answer)
	})
	checkAnswer(t, resp, w)
}

// fakeUpstream is a resolver on loopback that answers example.org and
// big.example.org (truncated over UDP, whole over TCP), and records the
// transports it was asked over.
type fakeUpstream struct {
	addr string
	mu   sync.Mutex
	seen []string // "udp big.example.org."
}

func startFakeUpstream(t *testing.T) *fakeUpstream {
	t.Helper()
	f := &fakeUpstream{}
	pc, ln, err := listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = pc.LocalAddr().String()
	h := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		network := "tcp"
		if _, ok := w.RemoteAddr().(*net.UDPAddr); ok {
			network = "udp"
		}
		name := strings.ToLower(req.Question[0].Name)
		f.mu.Lock()
		f.seen = append(f.seen, network+" "+name)
		f.mu.Unlock()
		resp := new(dns.Msg)
		resp.SetReply(req)
		switch {
		case name == "example.org." && req.Question[0].Qtype == dns.TypeA:
			resp.Answer = append(resp.Answer, &dns.A{Hdr: hdr(req.Question[0].Name, dns.TypeA, 60), A: net.IPv4(192, 0, 2, 1)})
		case name == "big.example.org." && network == "udp":
			resp.Truncated = true
		case name == "big.example.org.":
			for i := range 20 {
				resp.Answer = append(resp.Answer, &dns.A{Hdr: hdr(req.Question[0].Name, dns.TypeA, 60), A: net.IPv4(192, 0, 2, byte(10+i))})
			}
		default:
			resp.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(resp)
	})
	udp := &dns.Server{PacketConn: pc, Handler: h}
	tcp := &dns.Server{Listener: ln, Handler: h}
	var wg sync.WaitGroup
	for _, srv := range []*dns.Server{udp, tcp} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = srv.ActivateAndServe()
		}()
	}
	t.Cleanup(func() {
		_ = udp.Shutdown()
		_ = tcp.Shutdown()
		wg.Wait()
	})
	return f
}

func (f *fakeUpstream) asked(q string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.seen, q)
}

// TestServerAgainstAPIServer creates Services and EndpointSlices through a
// real API server and queries the DNS server over UDP and TCP on loopback.
func TestServerAgainstAPIServer(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	up := startFakeUpstream(t)

	// kubernetes.default is a normal Service. The API server creates it;
	// the test creates it when the API server does not (yet).
	svcs := env.Client.CoreV1().Services("default")
	kube := clusterIPService("default", "kubernetes", []string{"10.96.0.1"}, port("https", corev1.ProtocolTCP, 443))
	var kubeSvc *corev1.Service
	poll.Until(t, "the kubernetes Service", func() (err error) {
		if kubeSvc, err = svcs.Get(ctx, "kubernetes", metav1.GetOptions{}); err == nil {
			return nil
		}
		if _, err := svcs.Create(ctx, kube, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Logf("create the kubernetes Service: %v", err) // e.g. its IP taken by the API server's own
		}
		return err
	})
	s := startServer(t, env.Client, []string{up.addr})
	eventually(t, s, "kubernetes.default.svc.cluster.local.", dns.TypeA,
		want{answer: []string{"kubernetes.default.svc.cluster.local. 5 IN A " + kubeSvc.Spec.ClusterIP}})

	// A ClusterIP Service: A, SRV (with the A in the additional section), PTR.
	if _, err := svcs.Create(ctx, clusterIPService("default", "web", []string{"10.96.0.10"}, port("http", corev1.ProtocolTCP, 80)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, "web.default.svc.cluster.local.", dns.TypeA, want{answer: []string{"web.default.svc.cluster.local. 5 IN A 10.96.0.10"}})
	checkAnswer(t, query(t, s, "tcp", "_http._tcp.web.default.svc.cluster.local.", dns.TypeSRV), want{
		answer: []string{"_http._tcp.web.default.svc.cluster.local. 5 IN SRV 0 100 80 web.default.svc.cluster.local."},
		extra:  []string{"web.default.svc.cluster.local. 5 IN A 10.96.0.10"}})
	checkAnswer(t, query(t, s, "udp", "10.0.96.10.in-addr.arpa.", dns.TypePTR),
		want{answer: []string{"10.0.96.10.in-addr.arpa. 5 IN PTR web.default.svc.cluster.local."}})
	checkAnswer(t, query(t, s, "udp", "web.default.svc.cluster.local.", dns.TypeAAAA), want{soa: true})
	checkAnswer(t, query(t, s, "udp", "nope.default.svc.cluster.local.", dns.TypeA), want{rcode: dns.RcodeNameError, soa: true})

	// A headless Service: no endpoints yet is NODATA; then its slice's ready
	// endpoints, by Service name, hostname and SRV.
	if _, err := svcs.Create(ctx, headlessService("default", "db"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, "db.default.svc.cluster.local.", dns.TypeA, want{soa: true})
	epSlices := env.Client.DiscoveryV1().EndpointSlices("default")
	es, err := epSlices.Create(ctx, endpointSlice("default", "db", "db-1", discoveryv1.AddressTypeIPv4, "pg", 5432,
		testEndpoint{addr: "10.244.1.5", hostname: "db-0", ready: ptr(true)},
		testEndpoint{addr: "10.244.1.6", ready: ptr(false)}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, s, "db.default.svc.cluster.local.", dns.TypeA, want{answer: []string{"db.default.svc.cluster.local. 5 IN A 10.244.1.5"}})
	checkAnswer(t, query(t, s, "udp", "db-0.db.default.svc.cluster.local.", dns.TypeA),
		want{answer: []string{"db-0.db.default.svc.cluster.local. 5 IN A 10.244.1.5"}})
	checkAnswer(t, query(t, s, "udp", "_pg._tcp.db.default.svc.cluster.local.", dns.TypeSRV), want{
		answer: []string{"_pg._tcp.db.default.svc.cluster.local. 5 IN SRV 0 100 5432 db-0.db.default.svc.cluster.local."},
		extra:  []string{"db-0.db.default.svc.cluster.local. 5 IN A 10.244.1.5"}})
	checkAnswer(t, query(t, s, "udp", "5.1.244.10.in-addr.arpa.", dns.TypePTR),
		want{answer: []string{"5.1.244.10.in-addr.arpa. 5 IN PTR db-0.db.default.svc.cluster.local."}})

	// The second endpoint becomes ready.
	es.Endpoints[1].Conditions.Ready = ptr(true)
	if _, err := epSlices.Update(ctx, es, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, "db.default.svc.cluster.local.", dns.TypeA, want{answer: []string{
		"db.default.svc.cluster.local. 5 IN A 10.244.1.5", "db.default.svc.cluster.local. 5 IN A 10.244.1.6"}})
	checkAnswer(t, query(t, s, "udp", "10-244-1-6.db.default.svc.cluster.local.", dns.TypeA),
		want{answer: []string{"10-244-1-6.db.default.svc.cluster.local. 5 IN A 10.244.1.6"}})

	// ExternalName.
	ext := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ext"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.org"}}
	if _, err := svcs.Create(ctx, ext, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, "ext.default.svc.cluster.local.", dns.TypeCNAME, want{answer: []string{"ext.default.svc.cluster.local. 5 IN CNAME example.org."}})

	// Deleting the slice, then the Service.
	if err := epSlices.Delete(ctx, "db-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, "db.default.svc.cluster.local.", dns.TypeA, want{soa: true})
	if err := svcs.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, "web.default.svc.cluster.local.", dns.TypeA, want{rcode: dns.RcodeNameError, soa: true})
	if up.asked("udp 10.0.96.10.in-addr.arpa.") {
		t.Error("the PTR of a known ClusterIP went upstream")
	}

	// Outside the zone: forwarded, over UDP, and over TCP after a truncated
	// UDP answer; the client's transport does not matter.
	for _, network := range []string{"udp", "tcp"} {
		checkAnswer(t, query(t, s, network, "example.org.", dns.TypeA), want{answer: []string{"example.org. 60 IN A 192.0.2.1"}})
	}
	big := query(t, s, "udp", "big.example.org.", dns.TypeA)
	if big.Rcode != dns.RcodeSuccess || len(big.Answer) != 20 || big.Truncated {
		t.Errorf("big.example.org: %v", big)
	}
	if !up.asked("udp big.example.org.") || !up.asked("tcp big.example.org.") {
		t.Error("upstream was not asked for big.example.org over UDP, then TCP")
	}
	checkAnswer(t, query(t, s, "udp", "nothing.example.org.", dns.TypeA), want{rcode: dns.RcodeNameError})

	// No upstreams: SERVFAIL outside the zone, the zone still answered.
	s2 := startServer(t, env.Client, []string{})
	if resp := query(t, s2, "udp", "example.org.", dns.TypeA); resp.Rcode != dns.RcodeServerFailure {
		t.Errorf("no upstreams: %s, want SERVFAIL", dns.RcodeToString[resp.Rcode])
	}
	checkAnswer(t, query(t, s2, "tcp", "kubernetes.default.svc.cluster.local.", dns.TypeA),
		want{answer: []string{"kubernetes.default.svc.cluster.local. 5 IN A " + kubeSvc.Spec.ClusterIP}})
}
