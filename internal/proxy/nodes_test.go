package proxy

import (
	"context"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubette/kubette/internal/proxy/iptables"
)

func podCIDRNode(name string, cidrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDRs: cidrs}}
	if len(cidrs) > 0 {
		n.Spec.PodCIDR = cidrs[0]
	}
	return n
}

// podGuard returns the destinations the guard chain returns for and those
// it rejects (the service CIDR's rules aside), in order.
func podGuard(h *fakeHost) (returns, rejects []string) {
	for _, r := range h.rules("filter", iptables.ChainGuard) {
		f := strings.Fields(r)
		dst := ""
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "-d" {
				dst = f[i+1]
			}
		}
		switch {
		case dst == "10.96.0.0/12":
		case strings.HasSuffix(r, "-j RETURN"):
			returns = append(returns, dst)
		case strings.Contains(r, "-p tcp -j REJECT"):
			rejects = append(rejects, dst)
		}
	}
	return returns, rejects
}

// TestGuardFollowsNodePodCIDRs: with kubette up's cluster CIDR the guard
// rejects the Nodes' unrouted pod CIDRs, merged, from its first install on
// (Run lists the Nodes first), never the rest of the cluster CIDR, and
// follows Nodes that come and go, pod CIDRs set later and routes that
// appear.
func TestGuardFollowsNodePodCIDRs(t *testing.T) {
	host := newFakeHost()
	legacy := podCIDRNode("sim-node-1")
	legacy.Spec.PodCIDR = "10.130.1.0/24" // only the singular field
	client := fake.NewClientset(
		podCIDRNode("real", "10.244.0.0/24"),
		podCIDRNode("sim-node-0", "10.130.0.0/24", "fd00:1::/64"),
		legacy,
		podCIDRNode("sim-node-3"), // no pod CIDR yet
	)
	var routed atomic.Pointer[[]netip.Prefix]
	setRoutes := func(ss ...string) {
		ps := []netip.Prefix{}
		for _, s := range ss {
			ps = append(ps, netip.MustParsePrefix(s))
		}
		routed.Store(&ps)
	}
	setRoutes("10.244.0.0/24")
	p, err := New(Options{
		Client: client, NodeName: "real", ServiceCIDR: "10.96.0.0/12", ClusterCIDR: "10.128.0.0/9",
		RejectUnroutedPodCIDR: true, Iptables: host, Logger: quietLogger(),
		MinSyncPeriod: time.Millisecond, RoutePollPeriod: 5 * time.Millisecond,
		RoutedPodCIDRs: func(netip.Prefix) ([]netip.Prefix, error) { return *routed.Load(), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	runProxy(t, p)
	eventually(t, "the first sync", func() bool { return p.Stats().FullRestores == 1 })
	host.mu.Lock()
	first := host.restores[0]
	host.mu.Unlock()
	if !strings.Contains(first, "-d 10.130.0.0/23 -p tcp -j REJECT") || strings.Contains(first, "10.128.0.0/9") || strings.Contains(first, "10.244.0.0/24") {
		t.Errorf("the first guard install does not reject exactly the simulated nodes' /23:\n%s", first)
	}
	wantGuard := func(what string, returns, rejects string) {
		t.Helper()
		eventually(t, what, func() bool {
			r, j := podGuard(host)
			return strings.Join(r, " ") == returns && strings.Join(j, " ") == rejects
		})
	}
	wantGuard("the guard of the first nodes", "", "10.130.0.0/23")

	ctx := context.Background()
	if _, err := client.CoreV1().Nodes().Create(ctx, podCIDRNode("sim-node-2", "10.130.2.0/24"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantGuard("a new node's pod CIDR", "", "10.130.0.0/23 10.130.2.0/24")

	n3 := podCIDRNode("sim-node-3", "10.130.3.0/24")
	if _, err := client.CoreV1().Nodes().Update(ctx, n3, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantGuard("a pod CIDR set later", "", "10.130.0.0/22")

	if err := client.CoreV1().Nodes().Delete(ctx, "sim-node-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wantGuard("a deleted node", "", "10.130.0.0/24 10.130.2.0/23")

	// The real node's neighbour /24 without a route: the two merge, the
	// routed one returns first.
	if _, err := client.CoreV1().Nodes().Create(ctx, podCIDRNode("real-2", "10.244.1.0/24"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantGuard("an unrouted real node", "10.244.0.0/24", "10.130.0.0/24 10.130.2.0/23 10.244.0.0/23")
	setRoutes("10.244.0.0/24", "10.244.1.0/24")
	wantGuard("a route that appeared", "", "10.130.0.0/24 10.130.2.0/23")
	if err := p.Stats().LastError; err != nil {
		t.Fatal(err)
	}
}

func TestStripNodeKeepsOnlyPodCIDRs(t *testing.T) {
	n := podCIDRNode("a", "10.130.0.0/24")
	n.UID, n.ResourceVersion, n.Labels = "u1", "7", map[string]string{"x": "y"}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
	out, err := stripNode(n)
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*corev1.Node)
	if s.Name != "a" || s.UID != "u1" || s.ResourceVersion != "7" || len(s.Labels) != 0 || len(s.Status.Addresses) != 0 ||
		len(s.Spec.Taints) != 0 || s.Spec.PodCIDR != "10.130.0.0/24" || len(s.Spec.PodCIDRs) != 1 {
		t.Errorf("stripped node %+v", s)
	}
	if got, _ := stripNode("tombstone"); got != "tombstone" {
		t.Errorf("stripNode of a non-Node = %v", got)
	}
}
