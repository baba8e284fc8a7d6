package proxy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubette/kubette/internal/proxy/iptables"
)

// TestExternalIPsAndSourceRanges runs the proxy in a node namespace with two
// client namespaces (A, B) and a pod namespace behind veth pairs; a
// LoadBalancer Service has a load-balancer IP and an external IP (both
// addresses of the node namespace's lo) and allows only client A's range.
// Client A reaches the load-balancer IP, client B's packets to it are
// dropped (KUBE-PROXY-FIREWALL counts them); both reach the external IP and
// the NodePort (not subject to source ranges), and so does the node itself,
// the load-balancer IP included (its range holds the node's address). Without
// source ranges client B gets through too.
func TestExternalIPsAndSourceRanges(t *testing.T) {
	node, runner := testNetns(t)
	clientA, _ := testNetns(t)
	clientB, _ := testNetns(t)
	pod, _ := testNetns(t)
	suffix := rand.IntN(1 << 20)
	link := func(peer, tag, nodeAddr, peerAddr string) {
		nodeSide, peerSide := fmt.Sprintf("kb%sn%x", tag, suffix), fmt.Sprintf("kb%sp%x", tag, suffix)
		inNetns(t, node, "ip", "link", "add", nodeSide, "type", "veth", "peer", "name", peerSide, "netns", peer)
		inNetns(t, node, "ip", "addr", "add", nodeAddr, "dev", nodeSide)
		inNetns(t, node, "ip", "link", "set", nodeSide, "up")
		inNetns(t, peer, "ip", "addr", "add", peerAddr, "dev", peerSide)
		inNetns(t, peer, "ip", "link", "set", peerSide, "up")
	}
	link(clientA, "a", "172.31.78.1/24", "172.31.78.2/24")
	link(clientB, "b", "172.31.79.1/24", "172.31.79.2/24")
	link(pod, "q", "10.244.1.1/24", "10.244.1.5/24")
	inNetns(t, pod, "ip", "route", "add", "default", "via", "10.244.1.1")
	inNetns(t, clientA, "ip", "route", "add", "172.31.90.0/24", "via", "172.31.78.1")
	inNetns(t, clientB, "ip", "route", "add", "172.31.90.0/24", "via", "172.31.79.1")
	const lbIP, extIP = "172.31.90.10", "172.31.90.20"
	inNetns(t, node, "ip", "addr", "add", lbIP+"/32", "dev", "lo")
	inNetns(t, node, "ip", "addr", "add", extIP+"/32", "dev", "lo")
	inNetns(t, node, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1") // this namespace's own setting

	servePodHTTP(t, pod, "10.244.1.5:8080", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "served")
	})
	t.Cleanup(func() {
		if err := Cleanup(context.Background(), runner); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
	})

	svc := service("web", "10.96.0.10", 80)
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	svc.Spec.Ports[0].NodePort = 30080
	svc.Spec.ExternalIPs = []string{extIP}
	svc.Spec.LoadBalancerSourceRanges = []string{"172.31.78.0/24"}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: lbIP}}
	cs := fake.NewClientset(svc, endpointSlice("web", "web-1", 8080, true, "10.244.1.5"))
	p, err := New(Options{Client: cs, NodeName: "n1", ServiceCIDR: "10.96.0.0/12", ClusterCIDR: "10.244.0.0/16",
		NodeIPs:       []netip.Addr{netip.MustParseAddr("172.31.78.1"), netip.MustParseAddr("172.31.79.1")},
		MinSyncPeriod: 10 * time.Millisecond, Iptables: runner, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	runProxy(t, p)
	ctx := context.Background()
	eventually(t, "the first sync", func() bool { return p.Stats().FullRestores == 1 })
	if err := p.Stats().LastError; err != nil {
		t.Fatal(err)
	}

	from := func(ns, addr string) (string, error) {
		var answer string
		err := inNetnsThread(ns, func() error {
			var err error
			answer, err = get(addr)
			return err
		})
		return answer, err
	}
	served := func(ns, addr string) {
		t.Helper()
		var answer string
		var err error
		eventually(t, fmt.Sprintf("an answer to %s from %s", addr, ns), func() bool {
			answer, err = from(ns, addr)
			return err == nil && answer == "served"
		})
	}
	dropped := func() int {
		t.Helper()
		out := inNetns(t, node, "iptables", "-t", "filter", "-L", iptables.ChainProxyFirewall, "-v", "-n", "-x")
		total := 0
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) > 2 && f[2] == "DROP" {
				n, _ := strconv.Atoi(f[0])
				total += n
			}
		}
		return total
	}
	lb, ext, nodePortB := lbIP+":80", extIP+":80", "172.31.79.1:30080"
	served(clientA, lb)
	served(clientA, ext)
	served(clientB, ext)
	served(clientB, nodePortB)
	served(node, ext)
	served(node, lb) // from the load-balancer IP itself, allowed as the node's range is
	before := dropped()
	if answer, err := from(clientB, lb); err == nil {
		t.Errorf("client B outside the source ranges reached the load-balancer IP: %q", answer)
	}
	if after := dropped(); after <= before {
		t.Errorf("KUBE-PROXY-FIREWALL dropped %d packets before client B's attempt, %d after: want more", before, after)
	}

	// Without source ranges the load-balancer IP serves everyone.
	svc.Spec.LoadBalancerSourceRanges = nil
	if _, err := cs.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	served(clientB, lb)
	saved, err := runner.Save(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(saved), iptables.PrefixFW) || strings.Contains(string(saved), "-A "+iptables.ChainProxyFirewall+" ") {
		t.Errorf("without source ranges the firewall rules stay:\n%s", saved)
	}
}
