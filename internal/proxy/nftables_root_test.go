package proxy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubette/kubette/internal/proxy/nftables"
	"github.com/kubette/kubette/internal/testenv/needs"
)

// nftTopology is a node namespace (the "host", 172.31.77.1 towards an
// outside client namespace at 172.31.77.2) with two pod namespaces behind
// veth pairs: pod A serves HTTP on 10.244.1.5:8080 ("a") and
// 10.244.1.6:8080 ("b"), each answering with its name and the client
// address it sees; pod B (10.244.2.5) is a client.
type nftTopology struct {
	node, podA, podB, client string
	runner                   ExecRunner
}

func newNftTopology(t *testing.T) nftTopology {
	t.Helper()
	needs.Binary(t, "nft", "nftables")
	var tp nftTopology
	tp.node, tp.runner = testNetns(t)
	tp.podA, _ = testNetns(t)
	tp.podB, _ = testNetns(t)
	tp.client, _ = testNetns(t)
	suffix := rand.IntN(1 << 20)
	link := func(pod, nodeSide, podSide, nodeAddr, podAddr, gw string) {
		inNetns(t, tp.node, "ip", "link", "add", nodeSide, "type", "veth", "peer", "name", podSide, "netns", pod)
		inNetns(t, tp.node, "ip", "addr", "add", nodeAddr, "dev", nodeSide)
		inNetns(t, tp.node, "ip", "link", "set", nodeSide, "up")
		inNetns(t, pod, "ip", "addr", "add", podAddr, "dev", podSide)
		inNetns(t, pod, "ip", "link", "set", podSide, "up")
		inNetns(t, pod, "ip", "route", "add", "default", "via", gw)
	}
	link(tp.podA, fmt.Sprintf("kna%x", suffix), fmt.Sprintf("kpa%x", suffix), "10.244.1.1/24", "10.244.1.5/24", "10.244.1.1")
	link(tp.podB, fmt.Sprintf("knb%x", suffix), fmt.Sprintf("kpb%x", suffix), "10.244.2.1/24", "10.244.2.5/24", "10.244.2.1")
	link(tp.client, fmt.Sprintf("knc%x", suffix), fmt.Sprintf("kpc%x", suffix), "172.31.77.1/24", "172.31.77.2/24", "172.31.77.1")
	inNetns(t, tp.podA, "ip", "addr", "add", "10.244.1.6/24", "dev", fmt.Sprintf("kpa%x", suffix))
	// The node routes the service CIDR somewhere, so that its own packets
	// to a ClusterIP reach the nat and filter hooks (as a default route does
	// on a real host).
	inNetns(t, tp.node, "ip", "route", "add", "10.96.0.0/12", "dev", fmt.Sprintf("kna%x", suffix))
	inNetns(t, tp.node, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
	servePodHTTP(t, tp.podA, "10.244.1.5:8080", func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		fmt.Fprintln(w, "a from "+host)
	})
	servePodHTTP(t, tp.podA, "10.244.1.6:8080", func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		fmt.Fprintln(w, "b from "+host)
	})
	t.Cleanup(func() {
		if err := nftables.Cleanup(context.Background(), nftables.ExecRunner{Prefix: tp.runner.Prefix}); err != nil {
			t.Errorf("nftables.Cleanup: %v", err)
		}
	})
	return tp
}

// from sends GET to addr from inside netns.
func (tp nftTopology) from(netns, addr string) (string, error) {
	var answer string
	err := inNetnsThread(netns, func() (err error) { answer, err = get(addr); return err })
	return answer, err
}

// refused reports whether a connection to addr from netns is refused.
func (tp nftTopology) refused(netns, addr string) bool {
	_, err := tp.from(netns, addr)
	return errors.Is(err, syscall.ECONNREFUSED)
}

func (tp nftTopology) table(t *testing.T) string {
	t.Helper()
	out, err := nftables.ExecRunner{Prefix: tp.runner.Prefix}.Nft(context.Background(), nil, "list", "tables")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "table ip "+nftables.Table) {
		return ""
	}
	return inNetns(t, tp.node, "nft", "list", "table", "ip", nftables.Table)
}

func startNftProxy(t *testing.T, cs kubernetes.Interface, tp nftTopology) (*Proxy, func()) {
	t.Helper()
	p, err := New(Options{Client: cs, NodeName: "n1", ServiceCIDR: "10.96.0.0/12", ClusterCIDR: "10.244.0.0/16",
		MinSyncPeriod: 10 * time.Millisecond, Iptables: tp.runner, Mode: ModeNFTables, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return p, runProxy(t, p)
}

// TestNftablesModeServesClusterIPAndNodePort runs the proxy in nftables mode
// with the real nft and kernel: a ClusterIP and a NodePort answer from the
// node itself, from another pod and (hairpin) from the endpoint's own pod; a
// Service without endpoints and an unknown ClusterIP are refused; a removed
// Service's rules go; Cleanup removes the table.
func TestNftablesModeServesClusterIPAndNodePort(t *testing.T) {
	tp := newNftTopology(t)
	ctx := context.Background()
	web := service("web", "10.96.0.10", 80)
	web.Spec.Type = corev1.ServiceTypeNodePort
	web.Spec.Ports[0].NodePort = 30080
	cs := fake.NewClientset(web, endpointSlice("web", "web-1", 8080, true, "10.244.1.5"), service("empty", "10.96.0.20", 80))
	p, _ := startNftProxy(t, cs, tp)
	eventually(t, "the first sync", func() bool { return p.Stats().FullRestores == 1 })
	if err := p.Stats().LastError; err != nil {
		t.Fatalf("sync: %v", err)
	}

	for _, c := range []struct{ what, netns, addr, want string }{
		{"ClusterIP from the node", tp.node, "10.96.0.10:80", "a from 10.244.1.1"}, // masqueraded: off-cluster source
		{"NodePort from the node", tp.node, "10.244.2.1:30080", "a from 10.244.1.1"},
		{"ClusterIP from pod B", tp.podB, "10.96.0.10:80", "a from 10.244.2.5"}, // pod source kept
		{"NodePort from pod B", tp.podB, "10.244.2.1:30080", "a from 10.244.1.1"},
		{"ClusterIP from the endpoint itself (hairpin)", tp.podA, "10.96.0.10:80", "a from 10.244.1.1"},
	} {
		var got string
		var err error
		for range 5 { // several requests: every one must reach the endpoint
			if got, err = tp.from(c.netns, c.addr); err != nil || got != c.want {
				t.Errorf("%s: %q, %v; want %q", c.what, got, err, c.want)
				break
			}
		}
	}
	for _, c := range []struct{ what, netns, addr string }{
		{"a Service without endpoints from the node", tp.node, "10.96.0.20:80"},
		{"a Service without endpoints from pod B", tp.podB, "10.96.0.20:80"},
		{"an unknown ClusterIP from the node", tp.node, "10.96.0.99:80"},
		{"an unknown ClusterIP from pod B", tp.podB, "10.96.0.99:80"},
		{"a known ClusterIP's other port", tp.node, "10.96.0.10:81"},
	} {
		if !tp.refused(c.netns, c.addr) {
			_, err := tp.from(c.netns, c.addr)
			t.Errorf("%s: %v, want connection refused", c.what, err)
		}
	}

	// Removal removes: the Service's map elements go (and the endpoint map
	// and chain of its endpoint count, which no other Service uses), its
	// ClusterIP is refused.
	svcChain := nftables.EndpointMap(nftables.FamilyEndpoints, 1)
	if tbl := tp.table(t); !strings.Contains(tbl, svcChain) || !strings.Contains(tbl, "10.96.0.10 . tcp . 80 . 0 : 10.244.1.5 . 8080") {
		t.Fatalf("the table lacks %s or the Service's endpoint:\n%s", svcChain, tbl)
	}
	if err := cs.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the removed Service's ClusterIP refused", func() bool { return tp.refused(tp.node, "10.96.0.10:80") })
	if tbl := tp.table(t); strings.Contains(tbl, svcChain) || strings.Contains(tbl, "10.96.0.10") {
		t.Errorf("after the removal the table still holds the Service:\n%s", tbl)
	}
	if s := p.Stats(); s.Restores < 2 || s.FullRestores != 1 {
		t.Errorf("stats %+v: want the removal written as a partial sync", s)
	}

	if err := nftables.Cleanup(ctx, nftables.ExecRunner{Prefix: tp.runner.Prefix}); err != nil {
		t.Fatal(err)
	}
	if tbl := tp.table(t); tbl != "" {
		t.Errorf("after Cleanup the table is still there:\n%s", tbl)
	}
}

// TestNftablesModeRestartKeepsServing stops the proxy while a pod keeps
// sending requests to a ClusterIP: the table stays and serves; a new proxy
// installs its guard and replaces the table in one transaction without a
// request refused or lost.
func TestNftablesModeRestartKeepsServing(t *testing.T) {
	tp := newNftTopology(t)
	ctx := context.Background()
	cs := fake.NewClientset(service("web", "10.96.0.10", 80), endpointSlice("web", "web-1", 8080, true, "10.244.1.5"))
	first, stopFirst := startNftProxy(t, cs, tp)
	eventually(t, "the first proxy's first sync", func() bool { return first.Stats().FullRestores == 1 })

	pr := &prober{answers: map[string]int{}}
	pctx, stopProbe := context.WithCancel(ctx)
	probeDone := make(chan error, 1)
	go pr.probe(pctx, tp.podB, "10.96.0.10:80", probeDone)
	t.Cleanup(func() { stopProbe(); <-probeDone })
	want := "a from 10.244.2.5"
	pr.waitAnswers(t, "answers before the restart", want, 20)
	stopFirst()
	pr.reset()
	pr.waitAnswers(t, "answers while no proxy runs", want, 20)
	for range 3 {
		second, stopSecond := startNftProxy(t, cs, tp)
		eventually(t, "the new proxy's first sync", func() bool { return second.Stats().FullRestores == 1 })
		pr.reset()
		pr.waitAnswers(t, "answers after the restart", want, 20)
		stopSecond()
	}
	stopProbe()
	if err := <-probeDone; err != nil {
		t.Fatal(err)
	}
	probeDone <- nil // for the clean-up's receive
	if _, failures := pr.snapshot(); len(failures) > 0 {
		t.Errorf("%d requests failed across the restarts, first: %v", len(failures), failures[:min(5, len(failures))])
	}
}

// TestModeSwitchRemovesTheOtherMode runs the iptables mode, then the
// nftables mode, then the iptables mode again in one namespace: each start
// removes the other mode's rules, so both are never active at once.
func TestModeSwitchRemovesTheOtherMode(t *testing.T) {
	tp := newNftTopology(t)
	t.Cleanup(func() {
		if err := Cleanup(context.Background(), tp.runner); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
	})
	cs := fake.NewClientset(service("web", "10.96.0.10", 80), endpointSlice("web", "web-1", 8080, true, "10.244.1.5"))
	ipt := func() {
		p, err := New(Options{Client: cs, NodeName: "n1", ServiceCIDR: "10.96.0.0/12", ClusterCIDR: "10.244.0.0/16",
			MinSyncPeriod: 10 * time.Millisecond, Iptables: tp.runner, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		stop := runProxy(t, p)
		eventually(t, "the iptables mode's first sync", func() bool { return p.Stats().FullRestores == 1 })
		stop()
	}
	ipt()
	nft, stop := startNftProxy(t, cs, tp)
	eventually(t, "the nftables mode's first sync", func() bool { return nft.Stats().FullRestores == 1 })
	stop()
	if saved := inNetns(t, tp.node, "iptables-save"); strings.Contains(saved, "KUBE-") {
		t.Errorf("the nftables mode left the iptables mode's rules:\n%s", saved)
	}
	if got, err := tp.from(tp.podB, "10.96.0.10:80"); err != nil || got != "a from 10.244.2.5" {
		t.Errorf("through the nftables mode: %q, %v", got, err)
	}
	ipt()
	if tbl := tp.table(t); tbl != "" {
		t.Errorf("the iptables mode left the nftables table:\n%s", tbl)
	}
	if got, err := tp.from(tp.podB, "10.96.0.10:80"); err != nil || got != "a from 10.244.2.5" {
		t.Errorf("through the iptables mode: %q, %v", got, err)
	}
}

// TestNftablesModeTrafficPolicyAndAffinity checks externalTrafficPolicy
// Local (an outside client's address reaches the endpoint; with Cluster it
// is masqueraded) and sessionAffinity ClientIP (every request of one client
// goes to one endpoint, while without affinity both endpoints answer).
func TestNftablesModeTrafficPolicyAndAffinity(t *testing.T) {
	tp := newNftTopology(t)
	ctx := context.Background()
	web := service("web", "10.96.0.10", 80)
	web.Spec.Type = corev1.ServiceTypeNodePort
	web.Spec.Ports[0].NodePort = 30080
	web.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	webSlice := endpointSlice("web", "web-1", 8080, true, "10.244.1.5")
	n1 := "n1"
	webSlice.Endpoints[0].NodeName = &n1
	sticky := service("sticky", "10.96.0.30", 80)
	sticky.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	cs := fake.NewClientset(web, webSlice, sticky, endpointSlice("sticky", "sticky-1", 8080, true, "10.244.1.5", "10.244.1.6"),
		service("spread", "10.96.0.31", 80), endpointSlice("spread", "spread-1", 8080, true, "10.244.1.5", "10.244.1.6"))
	p, _ := startNftProxy(t, cs, tp)
	eventually(t, "the first sync", func() bool { return p.Stats().FullRestores == 1 })

	if got, err := tp.from(tp.client, "172.31.77.1:30080"); err != nil || got != "a from 172.31.77.2" {
		t.Errorf("NodePort with externalTrafficPolicy Local from outside: %q, %v; want the client's own address", got, err)
	}
	web.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	if _, err := cs.CoreV1().Services("default").Update(ctx, web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a masqueraded source with externalTrafficPolicy Cluster", func() bool {
		got, err := tp.from(tp.client, "172.31.77.1:30080")
		return err == nil && got == "a from 10.244.1.1"
	})

	seen := map[string]int{}
	for range 20 {
		got, err := tp.from(tp.podB, "10.96.0.30:80")
		if err != nil {
			t.Fatalf("sticky: %v", err)
		}
		seen[got]++
	}
	if len(seen) != 1 {
		t.Errorf("with ClientIP affinity one client reached %v, want one endpoint", seen)
	}
	seen = map[string]int{}
	for range 60 {
		got, err := tp.from(tp.podB, "10.96.0.31:80")
		if err != nil {
			t.Fatalf("spread: %v", err)
		}
		seen[got]++
	}
	if seen["a from 10.244.2.5"] == 0 || seen["b from 10.244.2.5"] == 0 {
		t.Errorf("without affinity 60 requests reached %v, want both endpoints", seen)
	}
}

// TestNftablesModeEndpointCountChangesLoseNoRequest changes a Service's
// endpoints between one and two (and from one endpoint to the other) while a
// pod keeps sending requests to its ClusterIP: each change moves the
// Service's keys from one endpoint map to another (or changes an element)
// in one partial sync, and no request is refused or lost meanwhile.
func TestNftablesModeEndpointCountChangesLoseNoRequest(t *testing.T) {
	tp := newNftTopology(t)
	ctx := context.Background()
	cs := fake.NewClientset(service("web", "10.96.0.10", 80), endpointSlice("web", "web-1", 8080, true, "10.244.1.5"))
	p, _ := startNftProxy(t, cs, tp)
	eventually(t, "the first sync", func() bool { return p.Stats().FullRestores == 1 })

	pr := &prober{answers: map[string]int{}}
	pctx, stopProbe := context.WithCancel(ctx)
	probeDone := make(chan error, 1)
	go pr.probe(pctx, tp.podB, "10.96.0.10:80", probeDone)
	t.Cleanup(func() { stopProbe(); <-probeDone })
	a, b := "a from 10.244.2.5", "b from 10.244.2.5"
	pr.waitAnswers(t, "answers from the one endpoint", a, 10)
	for _, step := range []struct {
		ips  []string
		want []string
	}{
		{[]string{"10.244.1.5", "10.244.1.6"}, []string{a, b}},
		{[]string{"10.244.1.6"}, []string{b}},
		{[]string{"10.244.1.6", "10.244.1.5"}, []string{a, b}},
		{[]string{"10.244.1.5"}, []string{a}},
	} {
		if _, err := cs.DiscoveryV1().EndpointSlices("default").Update(ctx, endpointSlice("web", "web-1", 8080, true, step.ips...), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Once only the new endpoints answer (the old set may answer
		// until the sync), each of them answers 10 times.
		eventually(t, fmt.Sprintf("only %v answering", step.ips), func() bool {
			pr.reset()
			time.Sleep(200 * time.Millisecond)
			got, _ := pr.snapshot()
			for who := range got {
				if !slices.Contains(step.want, who) {
					return false
				}
			}
			return len(got) > 0
		})
		pr.reset()
		for _, who := range step.want {
			pr.waitAnswers(t, "answers from "+who, who, 10)
		}
	}
	stopProbe()
	if err := <-probeDone; err != nil {
		t.Fatal(err)
	}
	probeDone <- nil // for the clean-up's receive
	if _, failures := pr.snapshot(); len(failures) > 0 {
		t.Errorf("%d requests failed across the endpoint changes, first: %v", len(failures), failures[:min(5, len(failures))])
	}
	if s := p.Stats(); s.FullRestores != 1 || s.LastError != nil {
		t.Errorf("stats %+v: want every change written as a partial sync", s)
	}
}
