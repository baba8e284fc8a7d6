package proxy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"golang.org/x/sys/unix"
)

// servePodHTTP serves h on addr inside the network namespace netns until the test ends.
func servePodHTTP(t *testing.T, netns, addr string, h http.HandlerFunc) {
	t.Helper()
	var ln net.Listener
	if err := inNetnsThread(netns, func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: h}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); wg.Wait() })
}

// inNetnsThread runs f on a thread of its own that has entered netns (the
// thread is discarded afterwards), so that the sockets f creates are the
// namespace's.
func inNetnsThread(netns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		fd, err := unix.Open(filepath.Join("/var/run/netns", netns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("open netns %s: %w", netns, err)
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("enter netns %s: %w", netns, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// TestExternalTrafficPolicyKeepsSourceIP sends NodePort traffic from a client
// namespace over a veth pair to a node namespace whose proxy serves a
// Service with one endpoint on this node, a pod namespace behind another veth
// pair: with externalTrafficPolicy Local the endpoint sees the client's
// address, with Cluster the node's (masqueraded).
func TestExternalTrafficPolicyKeepsSourceIP(t *testing.T) {
	node, runner := testNetns(t)
	client, _ := testNetns(t)
	pod, _ := testNetns(t)
	suffix := rand.IntN(1 << 20)
	link := func(peer, nodeSide, peerSide, nodeAddr, peerAddr string) {
		inNetns(t, node, "ip", "link", "add", nodeSide, "type", "veth", "peer", "name", peerSide, "netns", peer)
		inNetns(t, node, "ip", "addr", "add", nodeAddr, "dev", nodeSide)
		inNetns(t, node, "ip", "link", "set", nodeSide, "up")
		inNetns(t, peer, "ip", "addr", "add", peerAddr, "dev", peerSide)
		inNetns(t, peer, "ip", "link", "set", peerSide, "up")
	}
	link(client, fmt.Sprintf("kbn%x", suffix), fmt.Sprintf("kbc%x", suffix), "172.31.77.1/24", "172.31.77.2/24")
	link(pod, fmt.Sprintf("kbp%x", suffix), fmt.Sprintf("kbq%x", suffix), "10.244.1.1/24", "10.244.1.5/24")
	inNetns(t, pod, "ip", "route", "add", "default", "via", "10.244.1.1")
	inNetns(t, node, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1") // this namespace's own setting

	// The endpoint: an HTTP server in the pod namespace that answers with
	// the client address it sees.
	servePodHTTP(t, pod, "10.244.1.5:8080", func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		fmt.Fprintln(w, host)
	})
	t.Cleanup(func() {
		if err := Cleanup(context.Background(), runner); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
	})

	svc := service("web", "10.96.0.10", 80)
	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc.Spec.Ports[0].NodePort = 30080
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	slice := endpointSlice("web", "web-1", 8080, true, "10.244.1.5")
	nodeName := "n1"
	slice.Endpoints[0].NodeName = &nodeName
	cs := fake.NewClientset(svc, slice)
	p, err := New(Options{Client: cs, NodeName: "n1", ServiceCIDR: "10.96.0.0/12", ClusterCIDR: "10.244.0.0/16",
		NodeIPs: []netip.Addr{netip.MustParseAddr("172.31.77.1")}, MinSyncPeriod: 10 * time.Millisecond, Iptables: runner, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	runProxy(t, p)
	ctx := context.Background()
	eventually(t, "the first sync", func() bool { return p.Stats().FullRestores == 1 })

	seenFrom := func() (string, error) {
		var answer string
		err := inNetnsThread(client, func() error {
			var err error
			answer, err = get("172.31.77.1:30080")
			return err
		})
		return answer, err
	}
	var last string
	var lastErr error
	eventually(t, "the client's own address at the endpoint (Local)", func() bool {
		last, lastErr = seenFrom()
		return lastErr == nil && last == "172.31.77.2"
	})

	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	if _, err := cs.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		last, lastErr = seenFrom()
		if lastErr == nil && last != "172.31.77.2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with externalTrafficPolicy Cluster the endpoint still sees %q (%v), want a masqueraded source", last, lastErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if last != "10.244.1.1" {
		t.Errorf("with externalTrafficPolicy Cluster the endpoint sees %s, want the node's address toward it, 10.244.1.1", last)
	}
}
