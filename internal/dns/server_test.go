package dns

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestRunStopsRightAfterReady cancels the server as soon as it is ready,
// many times: Run must return (both listeners shut down) every time, and the
// first index must already hold the Services that existed before.
func TestRunStopsRightAfterReady(t *testing.T) {
	client := fake.NewClientset(clusterIPService("default", "web", []string{"10.96.0.10"}, port("http", corev1.ProtocolTCP, 80)))
	for i := range 20 {
		s, err := New(Options{Client: client, Addr: "127.0.0.1:0", Upstreams: []string{},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		select {
		case <-s.Ready():
		case err := <-done:
			cancel()
			t.Fatalf("run %d ended before ready: %v", i, err)
		}
		if i == 0 {
			checkAnswer(t, query(t, s, "udp", "web.default.svc.cluster.local.", dns.TypeA),
				want{answer: []string{"web.default.svc.cluster.local. 5 IN A 10.96.0.10"}})
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run %d: %v", i, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("run %d: Run did not return 30 s after its context ended", i)
		}
	}
}

func TestRunFailsOnBusyAddress(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	s, err := New(Options{Client: fake.NewClientset(), Addr: pc.LocalAddr().String(), Upstreams: []string{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "listen udp") {
		t.Fatalf("Run on a busy address: %v", err)
	}
}
