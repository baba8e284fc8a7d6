package dns

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/miekg/dns"
	"k8s.io/client-go/kubernetes/fake"
)

func TestResolvConfUpstreams(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	conf := `# a comment
search example.org
nameserver 127.0.0.1
nameserver 127.0.0.53
nameserver 192.0.2.53
nameserver fe80::1%eth0
nameserver 2001:db8::53
nameserver not-an-address
options ndots:2
`
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		listen string
		want   []string
	}{
		// On every address at port 53: every loopback nameserver is this server.
		{":53", []string{"192.0.2.53:53", "[fe80::1%eth0]:53", "[2001:db8::53]:53"}},
		{"0.0.0.0:53", []string{"192.0.2.53:53", "[fe80::1%eth0]:53", "[2001:db8::53]:53"}},
		{"127.0.0.1:53", []string{"127.0.0.53:53", "192.0.2.53:53", "[fe80::1%eth0]:53", "[2001:db8::53]:53"}},
		// Another port: no nameserver (always port 53) is this server.
		{"127.0.0.1:1053", []string{"127.0.0.1:53", "127.0.0.53:53", "192.0.2.53:53", "[fe80::1%eth0]:53", "[2001:db8::53]:53"}},
		{"10.96.0.10:53", []string{"127.0.0.1:53", "127.0.0.53:53", "192.0.2.53:53", "[fe80::1%eth0]:53", "[2001:db8::53]:53"}},
	} {
		got, err := resolvConfUpstreams(path, tt.listen)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("listening on %s: %v, want %v", tt.listen, got, tt.want)
		}
	}
	if _, err := resolvConfUpstreams(filepath.Join(t.TempDir(), "missing"), ":53"); err == nil {
		t.Error("a missing resolv.conf gave no error")
	}
}

func TestIsSelf(t *testing.T) {
	up := netip.MustParseAddrPort("[::1]:53")
	if !isSelf(up, "[::]:53") || !isSelf(up, "[::1]:53") || isSelf(up, "127.0.0.1:53") || isSelf(up, "[::1]:5353") {
		t.Error("isSelf wrong for ::1")
	}
}

func TestNewOptions(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("no Client accepted")
	}
	client := fake.NewClientset()
	for _, o := range []Options{{Client: client, Addr: "53"}, {Client: client, Zone: "bad..zone"}} {
		if _, err := New(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	s, err := New(Options{Client: client, Zone: "Example.Internal", Upstreams: []string{"192.0.2.1", "[2001:db8::1]:5353"}})
	if err != nil {
		t.Fatal(err)
	}
	if s.o.Addr != ":53" || s.res.zone != "example.internal." || s.o.TTL != 5 || s.o.ResolvConf != "/etc/resolv.conf" ||
		!slices.Equal(s.o.Upstreams, []string{"192.0.2.1:53", "[2001:db8::1]:5353"}) {
		t.Errorf("defaults: %+v, zone %q", s.o, s.res.zone)
	}
	if s.Addr() != nil {
		t.Error("Addr before Run")
	}
}

// TestForwardSkipsDeadUpstream: an upstream that refuses (nothing listens on
// its loopback port) is skipped for the next one.
func TestForwardSkipsDeadUpstream(t *testing.T) {
	up := startFakeUpstream(t)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := pc.LocalAddr().String()
	pc.Close()
	f := newForwarder([]string{dead, up.addr})
	req := new(dns.Msg)
	req.SetQuestion("example.org.", dns.TypeA)
	resp, err := f.forward(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	checkAnswer(t, resp, want{answer: []string{"example.org. 60 IN A 192.0.2.1"}})

	if _, err := newForwarder([]string{dead}).forward(context.Background(), req); err == nil {
		t.Error("a dead upstream gave no error")
	}
}
