package proxy

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubette/kubette/internal/proxy/iptables"
)

func service(name, clusterIP string, port int32) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: port}},
		},
	}
}

func endpointSlice(svc, name string, port int32, ready bool, ips ...string) *discoveryv1.EndpointSlice {
	pn, proto := "http", corev1.ProtocolTCP
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &pn, Protocol: &proto, Port: &port}},
	}
	for _, ip := range ips {
		r := ready
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &r}})
	}
	return s
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startProxy runs a proxy over client and host until the test ends.
func startProxy(t *testing.T, client kubernetes.Interface, host Runner, minSync time.Duration) *Proxy {
	t.Helper()
	p, err := New(Options{
		Client: client, NodeName: "n1", ServiceCIDR: "10.96.0.0/12", ClusterCIDR: "10.244.0.0/16",
		MinSyncPeriod: minSync, Iptables: host, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	runProxy(t, p)
	return p
}

// runProxy runs p until stop is called or the test ends, whichever comes first; stop
// waits for Run to return and reports its error.
func runProxy(t *testing.T, p *Proxy) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// eventually polls cond for up to 30 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func hasRule(rules []string, parts ...string) bool {
	return slices.ContainsFunc(rules, func(r string) bool {
		for _, p := range parts {
			if !strings.Contains(r, p) {
				return false
			}
		}
		return true
	})
}

func TestGuardFirstHooksOnceAndStaleChainsRemoved(t *testing.T) {
	host := newFakeHost()
	// A previous run left a service chain behind, jumped to from KUBE-SERVICES.
	if err := host.Restore(context.Background(), []byte("*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-OLDOLDOLDOLDOLDO - [0:0]\n"+
		"-A KUBE-SERVICES -d 10.96.0.99 -j KUBE-SVC-OLDOLDOLDOLDOLDO\nCOMMIT\n")); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(service("web", "10.96.0.10", 80), endpointSlice("web", "web-1", 8080, true, "10.244.1.5"))
	for run := range 2 { // a restart must not duplicate anything
		p, err := New(Options{Client: client, ServiceCIDR: "10.96.0.0/12", ClusterCIDR: "10.244.0.0/16", Iptables: host, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		stop := runProxy(t, p)
		eventually(t, "the first sync", func() bool { return p.Stats().FullRestores == 1 })
		stop()
		if run == 0 {
			host.mu.Lock()
			first := host.restores[1]
			host.mu.Unlock()
			if first != string(iptables.GuardText(p.ipt)) {
				t.Errorf("first restore of the proxy is not the guard:\n%s", first)
			}
		}
		for _, chain := range []string{"OUTPUT", "FORWARD"} {
			rules := host.rules("filter", chain)
			if len(rules) == 0 || jumpTarget(rules[0]) != iptables.ChainGuard {
				t.Errorf("run %d: filter %s does not start with the guard: %v", run, chain, rules)
			}
		}
		for _, h := range append(iptables.Hooks(), iptables.GuardHooks()...) {
			n := 0
			for _, r := range host.rules(h.Table, h.Chain) {
				if r == quoteArgs(h.Args) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("run %d: hook %s %s %v present %d times", run, h.Table, h.Chain, h.Args, n)
			}
		}
		if got := host.chainNames("nat", "KUBE-SVC-"); len(got) != 1 || got[0] == "KUBE-SVC-OLDOLDOLDOLDOLDO" {
			t.Errorf("run %d: service chains %v", run, got)
		}
		if !hasRule(host.rules("nat", "KUBE-SERVICES"), "-d 10.96.0.10", "--dport 80") {
			t.Errorf("run %d: no rule for the ClusterIP: %v", run, host.rules("nat", "KUBE-SERVICES"))
		}
	}
	// Cleanup leaves nothing of the proxy.
	if err := Cleanup(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	saved, _ := host.Save(context.Background())
	if strings.Contains(string(saved), "KUBE-") {
		t.Errorf("after Cleanup:\n%s", saved)
	}
}

func TestFailedApplyIsRetriedAsFullSync(t *testing.T) {
	host := newFakeHost()
	client := fake.NewClientset()
	p := startProxy(t, client, host, 10*time.Millisecond)
	eventually(t, "the first sync", func() bool { return p.Stats().FullRestores == 1 })
	host.mu.Lock()
	host.failRestores = 2
	host.mu.Unlock()
	ctx := context.Background()
	if _, err := client.CoreV1().Services("default").Create(ctx, service("web", "10.96.0.10", 80), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, endpointSlice("web", "web-1", 8080, true, "10.244.1.5"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the rules after two failed applies", func() bool {
		return hasRule(host.rules("nat", "KUBE-SERVICES"), "-d 10.96.0.10")
	})
	eventually(t, "the stats", func() bool {
		s := p.Stats()
		return s.Failures == 2 && s.FullRestores == 2 && s.LastError == nil
	})
}

func TestModelFromAPIObjects(t *testing.T) {
	svc := service("web", "10.96.0.10", 80)
	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc.Spec.Ports[0].NodePort = 30080
	svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	headless := service("db", corev1.ClusterIPNone, 5432)
	external := service("ext", "", 80)
	external.Spec.Type = corev1.ServiceTypeExternalName
	f := false
	term := endpointSlice("web", "web-2", 8080, false, "10.244.1.6")
	term.Endpoints[0].Conditions.Serving = &[]bool{true}[0]
	term.Endpoints[0].Conditions.Terminating = &[]bool{true}[0]
	other := endpointSlice("web", "web-3", 9090, true, "10.244.1.7")
	other.Ports[0].Name = &[]string{"metrics"}[0]
	nilReady := endpointSlice("web", "web-4", 8080, true, "10.244.1.8")
	nilReady.Endpoints[0].Conditions.Ready = nil
	v6 := endpointSlice("web", "web-5", 8080, true, "fd00::1")
	v6.AddressType = discoveryv1.AddressTypeIPv6
	notReady := endpointSlice("web", "web-6", 8080, true, "10.244.1.9")
	notReady.Endpoints[0].Conditions.Ready = &f
	m := buildModel([]*corev1.Service{svc, headless, external},
		[]*discoveryv1.EndpointSlice{endpointSlice("web", "web-1", 8080, true, "10.244.1.5"), term, other, nilReady, v6, notReady})
	if len(m.Services) != 1 {
		t.Fatalf("services %+v, want only web", m.Services)
	}
	s := m.Services[0]
	if s.AffinityTimeoutSeconds != 10800 || len(s.Ports) != 1 || s.Ports[0].NodePort != 30080 {
		t.Errorf("service %+v", s)
	}
	var got []string
	for _, e := range s.Ports[0].Endpoints {
		got = append(got, e.IP.String()+":"+map[bool]string{true: "ready", false: "not"}[e.Ready]+":"+map[bool]string{true: "term", false: ""}[e.Terminating])
	}
	want := []string{"10.244.1.5:ready:", "10.244.1.6:not:term", "10.244.1.8:ready:", "10.244.1.9:not:"}
	if !slices.Equal(got, want) {
		t.Errorf("endpoints %v, want %v", got, want)
	}
}

func TestStaleUDPConntrack(t *testing.T) {
	host := newFakeHost()
	p, err := New(Options{Client: fake.NewClientset(), ServiceCIDR: "10.96.0.0/12", Iptables: host, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	dns := service("dns", "10.96.0.53", 53)
	dns.Spec.Ports[0].Protocol = corev1.ProtocolUDP
	slice := func(ips ...string) *discoveryv1.EndpointSlice {
		s := endpointSlice("dns", "dns-1", 53, true, ips...)
		udp := corev1.ProtocolUDP
		s.Ports[0].Protocol = &udp
		return s
	}
	ctx := context.Background()
	p.clearStaleUDP(ctx, buildModel([]*corev1.Service{dns}, nil))                                                             // first: no endpoints
	p.clearStaleUDP(ctx, buildModel([]*corev1.Service{dns}, []*discoveryv1.EndpointSlice{slice("10.244.1.2", "10.244.1.3")})) // gained
	p.clearStaleUDP(ctx, buildModel([]*corev1.Service{dns}, []*discoveryv1.EndpointSlice{slice("10.244.1.3")}))               // lost one
	want := [][]string{
		{"-D", "-p", "udp", "--orig-dst", "10.96.0.53", "--orig-port-dst", "53"},
		{"-D", "-p", "udp", "--orig-dst", "10.96.0.53", "--orig-port-dst", "53", "--dst-nat", "10.244.1.2"},
	}
	if len(host.conntrack) != len(want) {
		t.Fatalf("conntrack calls %v, want %v", host.conntrack, want)
	}
	for i := range want {
		if !slices.Equal(host.conntrack[i], want[i]) {
			t.Errorf("conntrack call %d: %v, want %v", i, host.conntrack[i], want[i])
		}
	}
}

func TestGuardInstallRetried(t *testing.T) {
	host := newFakeHost()
	host.mu.Lock()
	host.failRestores = 2 // the guard's restore fails twice, as when another writer races it
	host.mu.Unlock()
	client := fake.NewClientset(service("web", "10.96.0.10", 80), endpointSlice("web", "web-1", 8080, true, "10.244.1.5"))
	p := startProxy(t, client, host, 0)
	eventually(t, "the first sync after two failed guard installs", func() bool { return p.Stats().FullRestores == 1 })
	rules := host.rules("filter", "OUTPUT")
	if len(rules) == 0 || jumpTarget(rules[0]) != iptables.ChainGuard {
		t.Errorf("filter OUTPUT does not start with the guard: %v", rules)
	}
}

func TestGuardInstallGivesUp(t *testing.T) {
	host := newFakeHost()
	host.mu.Lock()
	host.failRestores = guardAttempts
	host.mu.Unlock()
	p, err := New(Options{Client: fake.NewClientset(), ServiceCIDR: "10.96.0.0/12", ClusterCIDR: "10.244.0.0/16", Iptables: host, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "install the service CIDR guard") {
		t.Errorf("Run = %v, want the guard's error after %d attempts", err, guardAttempts)
	}
}

// unparsableSave is a host whose iptables-save output the parser refuses.
type unparsableSave struct{ *fakeHost }

func (u unparsableSave) Save(ctx context.Context) ([]byte, error) {
	out, err := u.fakeHost.Save(ctx)
	return append(out, "something iptables-save never printed before\n"...), err
}

// TestFullSyncWithUnparsableSave: when the saved tables cannot be parsed,
// the full sync writes everything and deletes the stale chains, as before
// the comparison existed, instead of failing forever.
func TestFullSyncWithUnparsableSave(t *testing.T) {
	host := newFakeHost()
	if err := host.Restore(context.Background(), []byte("*nat\n:KUBE-SVC-OLDOLDOLDOLDOLDO - [0:0]\nCOMMIT\n")); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(service("web", "10.96.0.10", 80), endpointSlice("web", "web-1", 8080, true, "10.244.1.5"))
	p := startProxy(t, client, unparsableSave{host}, 10*time.Millisecond)
	eventually(t, "the first sync", func() bool { return p.Stats().FullRestores == 1 })
	if err := p.Stats().LastError; err != nil {
		t.Fatal(err)
	}
	if got := host.chainNames("nat", "KUBE-SVC-"); len(got) != 1 || got[0] == "KUBE-SVC-OLDOLDOLDOLDOLDO" {
		t.Errorf("service chains %v", got)
	}
}
