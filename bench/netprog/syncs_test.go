package main

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubette/kubette/internal/proxy"
)

// memRunner is a proxy.Runner that accepts every restore and keeps nothing:
// enough for the proxy to sync and log. Save shows empty tables; iptables
// -C finds every hook (so none is inserted).
type memRunner struct {
	mu       sync.Mutex
	restores int
}

func (r *memRunner) Restore(context.Context, []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.restores++
	return nil
}

func (r *memRunner) Save(context.Context) ([]byte, error) {
	return []byte("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n" +
		"*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n"), nil
}

func (r *memRunner) Iptables(context.Context, ...string) ([]byte, error) { return nil, nil }

func (r *memRunner) Conntrack(context.Context, ...string) error { return proxy.ErrNoConntrack }

// TestSyncLogSeesTheProxysSyncs runs the real proxy (iptables mode, over a
// runner that keeps nothing) with the bench's handler: its first sync is
// recorded as full, a later endpoint change as a partial sync, each with its
// duration and bytes. The bench depends on the proxy's log lines for
// "sync done"; this test fails if they change.
func TestSyncLogSeesTheProxysSyncs(t *testing.T) {
	ready := true
	pn, port, proto := "http", int32(8080), corev1.ProtocolTCP
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &pn, Port: &port, Protocol: &proto}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.128.0.10"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}
	client := fake.NewClientset(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.160.0.10", ClusterIPs: []string{"10.160.0.10"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, slice)
	syncs := newTimeline[syncRecord]("proxy sync")
	p, err := proxy.New(proxy.Options{
		Client: client, ServiceCIDR: serviceCIDR.String(), ClusterCIDR: clusterCIDR.String(),
		MinSyncPeriod: time.Millisecond, Iptables: &memRunner{},
		Logger: slog.New(syncLog{rec: syncs, next: slog.NewTextHandler(io.Discard, nil)}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("proxy: %v", err)
		}
	})
	first, err := syncs.wait(ctx, time.Minute, func(s syncRecord) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if !first.full || first.took <= 0 || first.bytes <= 0 || first.end.IsZero() {
		t.Fatalf("first sync recorded as %+v, want full with a duration and bytes", first)
	}

	changed := time.Now()
	slice = slice.DeepCopy()
	slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.128.0.11"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	next, err := syncs.wait(ctx, time.Minute, func(s syncRecord) bool { return s.start().After(changed) })
	if err != nil {
		t.Fatal(err)
	}
	if next.full || next.took <= 0 || next.bytes <= 0 {
		t.Errorf("the change's sync recorded as %+v, want partial with a duration and bytes", next)
	}
}

// TestTimelineWait returns the first matching entry, also one added while
// waiting, and gives up after the timeout.
func TestTimelineWait(t *testing.T) {
	ctx := context.Background()
	tl := newTimeline[int]("number")
	tl.add(1)
	if got, err := tl.wait(ctx, time.Second, func(n int) bool { return n == 1 }); err != nil || got != 1 {
		t.Fatalf("wait for 1: %v, %v", got, err)
	}
	go func() {
		for i := 2; i <= 5; i++ {
			tl.add(i)
		}
	}()
	if got, err := tl.wait(ctx, time.Minute, func(n int) bool { return n > 3 }); err != nil || got != 4 {
		t.Fatalf("wait for > 3: %v, %v", got, err)
	}
	if _, err := tl.wait(ctx, 10*time.Millisecond, func(n int) bool { return n > 5 }); err == nil {
		t.Fatal("wait for > 5 succeeded")
	}
}

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("10000, 0,1000,1000")
	if err != nil || len(got) != 3 || got[0] != 0 || got[1] != 1000 || got[2] != 10000 {
		t.Fatalf("parseSizes: %v, %v", got, err)
	}
	for _, bad := range []string{"", "x", "-1", "60001"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) succeeded", bad)
		}
	}
}
