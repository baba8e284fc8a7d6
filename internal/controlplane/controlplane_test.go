package controlplane_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubette/kubette/internal/apiserver/servicealloc"
	"github.com/kubette/kubette/internal/controlplane"
	"github.com/kubette/kubette/internal/storage/etcd"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// loopbackListener listens on a free loopback port, held until the API server serves on it.
func loopbackListener(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// startServer starts an API server with cfg on a free loopback port and a fresh data
// directory; it stops when the test ends.
func startServer(t *testing.T, cfg controlplane.Config) kubernetes.Interface {
	t.Helper()
	return kubernetes.NewForConfigOrDie(startServerConfig(t, cfg))
}

// startServerConfig is startServer returning the admin's client configuration.
func startServerConfig(t *testing.T, cfg controlplane.Config) *rest.Config {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg.DataDir, cfg.Listener = t.TempDir(), loopbackListener(t)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatalf("start API server: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := cp.Wait(); err != nil {
			t.Errorf("API server stopped with: %v", err)
		}
	})
	rc, err := clientcmd.BuildConfigFromFlags("", cp.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 1000, 2000
	return rc
}

// TestTwoAPIServersAllocateDistinct creates 200 NodePort Services through two API servers
// sharing one etcd at the same time: every cluster IP and node port is distinct. A third
// API server started after the allocation state was lost rebuilds it from the Services.
func TestTwoAPIServersAllocateDistinct(t *testing.T) {
	e, err := etcd.StartEmbedded(context.Background(), etcd.EmbeddedConfig{DataDir: t.TempDir(), UnsafeNoFsync: true})
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(e.Close)
	clients := []kubernetes.Interface{startServer(t, controlplane.Config{EtcdServers: e.Endpoints}), startServer(t, controlplane.Config{EtcdServers: e.Endpoints})}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const n, workers = 200, 10
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c := clients[w%2]
			for i := w; i < n; i += workers {
				svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%03d", i)}, Spec: corev1.ServiceSpec{
					Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "x"}, Ports: []corev1.ServicePort{{Port: 80}}}}
				if _, err := c.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
					t.Errorf("create %s: %v", svc.Name, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	list, err := clients[0].CoreV1().Services("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ips, ports := map[string]string{}, map[int32]string{}
	for _, s := range list.Items {
		if prev, ok := ips[s.Spec.ClusterIP]; ok || s.Spec.ClusterIP == "" {
			t.Errorf("%s and %s share cluster IP %q", prev, s.Name, s.Spec.ClusterIP)
		}
		ips[s.Spec.ClusterIP] = s.Name
		if s.Name == "kubernetes" {
			if s.Spec.ClusterIP != "10.96.0.1" {
				t.Errorf("kubernetes Service has %s", s.Spec.ClusterIP)
			}
			continue
		}
		p := s.Spec.Ports[0].NodePort
		if prev, ok := ports[p]; ok || p == 0 {
			t.Errorf("%s and %s share node port %d", prev, s.Name, p)
		}
		ports[p] = s.Name
	}
	if len(ips) != n+1 || len(ports) != n {
		t.Fatalf("%d cluster IPs and %d node ports for %d Services", len(ips), len(ports), n)
	}

	// Lose the allocation state; a new API server's repair restores it from the Services.
	st, err := e.Store()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, key := range []string{"/registry/ranges/serviceips", "/registry/ranges/servicenodeports"} {
		if _, _, err := st.Delete(ctx, key, 0); err != nil {
			t.Fatalf("delete %s: %v", key, err)
		}
	}
	third := startServer(t, controlplane.Config{EtcdServers: e.Endpoints})
	byName := map[string]corev1.Service{}
	for _, s := range list.Items {
		byName[s.Name] = s
	}
	taken, other := byName["s000"], byName["s001"]
	dup := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "dup"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeNodePort, ClusterIP: taken.Spec.ClusterIP, Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := third.CoreV1().Services("default").Create(ctx, dup, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("create with the IP of %s after repair: %v, want 422", taken.Name, err)
	}
	dup.Spec.ClusterIP = ""
	dup.Spec.Ports[0].NodePort = other.Spec.Ports[0].NodePort
	if _, err := third.CoreV1().Services("default").Create(ctx, dup, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("create with the node port of %s after repair: %v, want 422", other.Name, err)
	}
}

// TestSmallServiceRanges checks that the range flags reach the allocators: the kubernetes
// Service gets the first address of --service-cluster-ip-range, and an exhausted range
// answers 500 as upstream, until a delete frees a value.
func TestSmallServiceRanges(t *testing.T) {
	svcs := startServer(t, controlplane.Config{
		UnsafeNoFsync: true, ServiceClusterIPRange: "10.0.0.0/29", ServiceNodePortRange: "30000-30002",
	}).CoreV1().Services("default")
	tctx, tcancel := context.WithTimeout(context.Background(), time.Minute)
	defer tcancel()
	k, err := svcs.Get(tctx, "kubernetes", metav1.GetOptions{})
	if err != nil || k.Spec.ClusterIP != "10.0.0.1" {
		t.Fatalf("kubernetes Service: %v, %v", k, err)
	}
	svc := func(name string, typ corev1.ServiceType) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{Type: typ, Ports: []corev1.ServicePort{{Port: 80}}}}
	}
	// 6 usable addresses, one is the kubernetes Service's.
	for i := 0; i < 5; i++ {
		if _, err := svcs.Create(tctx, svc(fmt.Sprintf("c%d", i), ""), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create c%d: %v", i, err)
		}
	}
	_, err = svcs.Create(tctx, svc("full", ""), metav1.CreateOptions{})
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "failed to allocate a serviceIP: range is full") {
		t.Fatalf("create on a full IP range: %v, want 500 range is full", err)
	}
	if err := svcs.Delete(tctx, "c0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// 3 node ports; the failed create above took none.
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("n%d", i)
		if i > 0 {
			if err := svcs.Delete(tctx, fmt.Sprintf("c%d", i), metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := svcs.Create(tctx, svc(name, corev1.ServiceTypeNodePort), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	if err := svcs.Delete(tctx, "c3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = svcs.Create(tctx, svc("noport", corev1.ServiceTypeNodePort), metav1.CreateOptions{})
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "failed to allocate a nodePort: range is full") {
		t.Fatalf("create on a full port range: %v, want 500 range is full", err)
	}
	// The IP that failed create took was released: one address is free.
	if _, err := svcs.Create(tctx, svc("last", ""), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create after the failed NodePort create: %v", err)
	}
}

// TestRepairHealsLeaks marks an address and a node port taken that no Service holds (as a
// crash between allocation and write would) and drops the bit of an address a Service
// holds; the periodic repair marks the held one again and frees the leaks after three runs.
func TestRepairHealsLeaks(t *testing.T) {
	e, err := etcd.StartEmbedded(context.Background(), etcd.EmbeddedConfig{DataDir: t.TempDir(), UnsafeNoFsync: true})
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(e.Close)
	st, err := e.Store()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	cp, err := controlplane.Start(ctx, controlplane.Config{
		DataDir: t.TempDir(), Listener: loopbackListener(t), EtcdServers: e.Endpoints,
		ServiceRepairInterval: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		cancel()
		t.Fatalf("start API server: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := cp.Wait(); err != nil {
			t.Errorf("API server stopped with: %v", err)
		}
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", cp.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	svcs := kubernetes.NewForConfigOrDie(cfg).CoreV1().Services("default")
	tctx, tcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer tcancel()
	held := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "held"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.20", Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := svcs.Create(tctx, held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ips := servicealloc.NewIPs(st, netip.MustParsePrefix("10.96.0.0/12"))
	ports := servicealloc.NewPorts(st, servicealloc.PortRange{Base: 30000, Size: 2768})
	if err := ips.Allocate(tctx, netip.MustParseAddr("10.96.0.30")); err != nil {
		t.Fatal(err)
	}
	if err := ports.Allocate(tctx, 30123); err != nil {
		t.Fatal(err)
	}
	if err := ips.Release(tctx, netip.MustParseAddr("10.96.0.20")); err != nil {
		t.Fatal(err)
	}
	poll.UntilWithin(t, 90*time.Second, "the repair", func() error {
		heldBack := ips.Check(tctx, netip.MustParseAddr("10.96.0.20")) != nil
		ipFreed := ips.Check(tctx, netip.MustParseAddr("10.96.0.30")) == nil
		portFreed := ports.Check(tctx, 30123) == nil
		if heldBack && ipFreed && portFreed {
			return nil
		}
		return fmt.Errorf("held address marked %v, leaked address freed %v, leaked port freed %v", heldBack, ipFreed, portFreed)
	})
	leaked := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "leaked"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
		ClusterIP: "10.96.0.30", Ports: []corev1.ServicePort{{Port: 80, NodePort: 30123}}}}
	if _, err := svcs.Create(tctx, leaked, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create with the healed leaks: %v", err)
	}
}
