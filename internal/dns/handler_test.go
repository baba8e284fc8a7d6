package dns

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/miekg/dns"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// recorder is a dns.ResponseWriter that keeps what is written.
type recorder struct {
	remote net.Addr
	msg    *dns.Msg
}

func (r *recorder) LocalAddr() net.Addr       { return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53} }
func (r *recorder) RemoteAddr() net.Addr      { return r.remote }
func (r *recorder) WriteMsg(m *dns.Msg) error { r.msg = m; return nil }
func (r *recorder) Write([]byte) (int, error) { return 0, fmt.Errorf("not supported") }
func (r *recorder) Close() error              { return nil }
func (r *recorder) TsigStatus() error         { return nil }
func (r *recorder) TsigTimersOnly(bool)       {}
func (r *recorder) Hijack()                   {}

var _ dns.ResponseWriter = (*recorder)(nil)

// TestHandlerTruncatesUDP checks that an answer too big for the client's UDP
// buffer is truncated with TC set, and whole over TCP.
func TestHandlerTruncatesUDP(t *testing.T) {
	r := testResolver(t)
	var eps []testEndpoint
	for i := range 100 {
		eps = append(eps, testEndpoint{addr: fmt.Sprintf("10.244.2.%d", i+1)})
	}
	r.ix.set("default/big", serviceRecords(testZone, 5, headlessService("default", "big"),
		[]*discoveryv1.EndpointSlice{endpointSlice("default", "big", "big-1", discoveryv1.AddressTypeIPv4, "http", 80, eps...)}))
	h := &handler{res: r, fwd: newForwarder(nil), ctx: context.Background(), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	udp := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	tcp := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}

	for _, tt := range []struct {
		name    string
		remote  net.Addr
		edns    uint16
		limit   int
		answers int // -1: fewer than 100
	}{
		{"udp", udp, 0, dns.MinMsgSize, -1},
		{"udp with EDNS 4096", udp, 4096, 4096, 100},
		{"tcp", tcp, 0, dns.MaxMsgSize, 100},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := new(dns.Msg)
			req.SetQuestion("big.default.svc.cluster.local.", dns.TypeA)
			if tt.edns > 0 {
				req.SetEdns0(tt.edns, false)
			}
			w := &recorder{remote: tt.remote}
			h.ServeDNS(w, req)
			packed, err := w.msg.Pack()
			if err != nil {
				t.Fatal(err)
			}
			if len(packed) > tt.limit {
				t.Errorf("%d bytes, limit %d", len(packed), tt.limit)
			}
			if tt.answers < 0 {
				if !w.msg.Truncated || len(w.msg.Answer) >= 100 {
					t.Errorf("truncated %v with %d answers", w.msg.Truncated, len(w.msg.Answer))
				}
				return
			}
			if w.msg.Truncated || len(w.msg.Answer) != tt.answers {
				t.Errorf("truncated %v with %d answers, want %d", w.msg.Truncated, len(w.msg.Answer), tt.answers)
			}
			if tt.edns > 0 && (w.msg.IsEdns0() == nil || w.msg.IsEdns0().UDPSize() != ednsSize) {
				t.Errorf("EDNS of the answer: %v", w.msg.IsEdns0())
			}
		})
	}

	// Outside the zone with no upstream: SERVFAIL with the query's ID.
	req := new(dns.Msg)
	req.SetQuestion("example.org.", dns.TypeA)
	w := &recorder{remote: udp}
	h.ServeDNS(w, req)
	if w.msg.Rcode != dns.RcodeServerFailure || w.msg.Id != req.Id {
		t.Errorf("no upstream: %v", w.msg)
	}
}
