package proxy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubette/kubette/internal/proxy/iptables"
	"github.com/kubette/kubette/internal/testenv/needs"
)

// testNetns creates a fresh network namespace with only lo (up) that is
// deleted when the test ends, and returns a Runner that runs the tools in it.
func testNetns(t *testing.T) (string, ExecRunner) {
	t.Helper()
	needs.Root(t)
	needs.Binary(t, "ip", "iproute2")
	needs.Binary(t, "iptables-restore", "iptables")
	needs.Binary(t, "iptables-save", "iptables")
	name := fmt.Sprintf("kbt-proxy-%d-%d", os.Getpid(), rand.IntN(1<<30))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	inNetns(t, name, "ip", "link", "set", "lo", "up")
	return name, ExecRunner{Prefix: []string{"ip", "netns", "exec", name}}
}

func inNetns(t *testing.T, netns string, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", netns}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v: %s", args, err, out)
	}
	return string(out)
}

// TestRealIptablesInNetns runs the proxy against the real iptables tools in a
// network namespace of its own: the rules land, a change is applied as a
// partial restore, traffic to a ClusterIP reaches the endpoint, an unknown
// ClusterIP and a Service without endpoints are refused, and Cleanup leaves
// nothing behind.
func TestRealIptablesInNetns(t *testing.T) {
	netns, runner := testNetns(t)
	ctx := context.Background()
	// The endpoint is an address of the namespace's lo, served by busybox httpd;
	// the service CIDR is routed to lo so that packets reach the nat table.
	inNetns(t, netns, "ip", "addr", "add", "10.244.1.5/32", "dev", "lo")
	inNetns(t, netns, "ip", "route", "add", "10.96.0.0/12", "dev", "lo", "src", "10.244.1.5")
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "index.html"), []byte("hello from the endpoint\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	httpd := exec.Command("ip", "netns", "exec", netns, "/bin/busybox", "httpd", "-f", "-p", "10.244.1.5:8080", "-h", root)
	if err := httpd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = httpd.Process.Kill(); _ = httpd.Wait() })

	client := fake.NewClientset(service("web", "10.96.0.10", 80), endpointSlice("web", "web-1", 8080, true, "10.244.1.5"),
		service("empty", "10.96.0.20", 80))
	t.Cleanup(func() {
		if err := Cleanup(context.Background(), runner); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
	})
	p := startProxy(t, client, runner, 10*time.Millisecond)
	eventually(t, "the first sync", func() bool { return p.Stats().FullRestores == 1 })
	if s := p.Stats(); s.LastError != nil {
		t.Fatalf("sync: %v", s.LastError)
	}
	saved, err := runner.Save(ctx)
	if err != nil {
		t.Fatal(err)
	}
	svcChain := iptables.SVCChain("default/web:http", "TCP")
	sepChain := iptables.SEPChain("default/web:http", "TCP", "10.244.1.5:8080")
	for _, want := range []string{
		":" + svcChain + " - ", ":" + sepChain + " - ", ":KUBE-SERVICE-CIDR-GUARD - ",
		"-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment \"default/web:http cluster IP\" -m tcp --dport 80 -j " + svcChain,
		"--to-destination 10.244.1.5:8080",
		"-A KUBE-SERVICES -d 10.96.0.20/32 -p tcp -m comment --comment \"default/empty:http has no endpoints\" -m tcp --dport 80 -j REJECT",
		"-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES",
		"-A POSTROUTING -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING",
	} {
		if !strings.Contains(string(saved), want) {
			t.Errorf("iptables-save lacks %q:\n%s", want, saved)
		}
	}
	for _, chain := range []string{"OUTPUT", "FORWARD"} {
		first := inNetns(t, netns, "iptables", "-t", "filter", "-S", chain, "1")
		if !strings.Contains(first, "-j KUBE-SERVICE-CIDR-GUARD") {
			t.Errorf("filter %s starts with %q, want the guard", chain, first)
		}
	}

	// busybox wget crashes here; nc speaks the HTTP request itself.
	get := func(addr string) (string, error) {
		cmd := exec.Command("ip", "netns", "exec", netns, "/bin/busybox", "nc", "-w", "5", addr, "80")
		cmd.Stdin = strings.NewReader("GET / HTTP/1.0\r\n\r\n")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	eventually(t, "HTTP through the ClusterIP", func() bool {
		out, err := get("10.96.0.10")
		return err == nil && strings.HasSuffix(out, "\r\n\r\nhello from the endpoint\n")
	})
	for _, addr := range []string{"10.96.0.20", "10.96.0.99"} { // no endpoints; unknown ClusterIP
		out, err := get(addr)
		if err == nil || !strings.Contains(out, "refused") {
			t.Errorf("%s: %v %q, want connection refused", addr, err, out)
		}
	}

	// A change: the endpoint moves to another port. Applied as a partial
	// restore; the old SEP chain is deleted in the same restore.
	restores := p.Stats().Restores
	slice, err := client.DiscoveryV1().EndpointSlices("default").Get(ctx, "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	port := int32(8081)
	slice.Ports[0].Port = &port
	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the partial restore", func() bool { return p.Stats().Restores > restores })
	if s := p.Stats(); s.FullRestores != 1 || s.LastError != nil {
		t.Errorf("stats after the change: %+v", s)
	}
	saved, err = runner.Save(ctx)
	if err != nil {
		t.Fatal(err)
	}
	newSep := iptables.SEPChain("default/web:http", "TCP", "10.244.1.5:8081")
	if strings.Contains(string(saved), sepChain) || !strings.Contains(string(saved), "-A "+newSep+" ") ||
		!strings.Contains(string(saved), "--to-destination 10.244.1.5:8081") {
		t.Errorf("after the change:\n%s", saved)
	}
	if _, err := get("10.96.0.10"); err == nil {
		t.Error("HTTP still reaches port 8080 after the endpoint moved to 8081")
	}

	// Cleanup removes every chain and jump of the proxy.
	if err := Cleanup(ctx, runner); err != nil {
		t.Fatal(err)
	}
	saved, err = runner.Save(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(saved), "KUBE-") {
		t.Errorf("after Cleanup:\n%s", saved)
	}
}

// TestRealGuardRejectsUnroutedPodCIDR checks, in the kernel, that with
// RejectUnroutedPodCIDR a connect to an address of a Node's pod CIDR
// without a local route (a simulated node's pod) is refused at once while a
// routed pod answers, and so does an address of the cluster CIDR in no
// Node's pod CIDR (the host's own network may lie in the cluster CIDR).
func TestRealGuardRejectsUnroutedPodCIDR(t *testing.T) {
	netns, runner := testNetns(t)
	inNetns(t, netns, "ip", "addr", "add", "10.244.1.5/32", "dev", "lo")
	inNetns(t, netns, "ip", "addr", "add", "10.244.9.9/32", "dev", "lo")
	inNetns(t, netns, "ip", "route", "add", "10.244.0.0/16", "dev", "lo", "src", "10.244.1.5")
	for _, addr := range []string{"10.244.1.5:80", "10.244.9.9:80"} {
		httpd := exec.Command("ip", "netns", "exec", netns, "/bin/busybox", "httpd", "-f", "-p", addr, "-h", t.TempDir())
		if err := httpd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = httpd.Process.Kill(); _ = httpd.Wait() })
	}
	nodes := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "real"}, Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "sim-node-0"}, Spec: corev1.NodeSpec{PodCIDR: "10.244.7.0/24", PodCIDRs: []string{"10.244.7.0/24"}}},
	)
	t.Cleanup(func() {
		if err := Cleanup(context.Background(), runner); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
	})
	p, err := New(Options{
		Client: nodes, ServiceCIDR: "10.96.0.0/12", ClusterCIDR: "10.244.0.0/16",
		RejectUnroutedPodCIDR: true, Iptables: runner, Logger: quietLogger(),
		RoutedPodCIDRs: func(netip.Prefix) ([]netip.Prefix, error) {
			return []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer runProxy(t, p)()
	eventually(t, "the first sync", func() bool { return p.Stats().FullRestores == 1 })
	nc := func(addr string) (string, error) {
		cmd := exec.Command("ip", "netns", "exec", netns, "/bin/busybox", "nc", "-w", "5", addr, "80")
		cmd.Stdin = strings.NewReader("GET / HTTP/1.0\r\n\r\n")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := nc("10.244.1.5"); err != nil || !strings.HasPrefix(out, "HTTP/1.") {
		t.Errorf("routed pod: %v %q, want an HTTP answer", err, out)
	}
	if out, err := nc("10.244.9.9"); err != nil || !strings.HasPrefix(out, "HTTP/1.") {
		t.Errorf("cluster CIDR address of no node: %v %q, want an HTTP answer", err, out)
	}
	if out, err := nc("10.244.7.7"); err == nil || !strings.Contains(out, "refused") {
		t.Errorf("unrouted pod: %v %q, want connection refused", err, out)
	}
}
