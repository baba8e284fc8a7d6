package iptables

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	goldenfile "github.com/kubette/kubette/internal/testenv/golden"
)

var testOptions = Options{
	ServiceCIDR: netip.MustParsePrefix("10.96.0.0/12"),
	ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16"),
	NodeIPs:     []netip.Addr{netip.MustParseAddr("192.168.1.10")},
	NodeName:    "n1",
}

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

func ready(addr string, port int32) Endpoint {
	return Endpoint{IP: ip(addr), Port: port, Ready: true, Serving: true, NodeName: "n1"}
}

func TestChainNamesMatchUpstream(t *testing.T) {
	// Upstream's proxier tests name these chains for ns1/svc1:p80 and its
	// endpoint 10.180.0.1:80.
	if got := SVCChain("ns1/svc1:p80", "TCP"); got != "KUBE-SVC-XPGD46QRK7WJZT7O" {
		t.Errorf("SVCChain = %s", got)
	}
	if got := SEPChain("ns1/svc1:p80", "TCP", "10.180.0.1:80"); got != "KUBE-SEP-SXIVWICOYRO3J4NJ" {
		t.Errorf("SEPChain = %s", got)
	}
}

func goldenCases() map[string]Model {
	web := func(eps ...Endpoint) Service {
		return Service{Namespace: "default", Name: "web", ClusterIPs: []netip.Addr{ip("10.96.0.10")},
			Ports: []Port{{Name: "http", Protocol: "TCP", Port: 80, Endpoints: eps}}}
	}
	nodePort := web(ready("10.244.1.5", 8080))
	nodePort.Ports[0].NodePort = 30080
	affinity := web(ready("10.244.1.5", 8080), ready("10.244.2.7", 8080))
	affinity.AffinityTimeoutSeconds = 10800
	noEndpoints := web(Endpoint{IP: ip("10.244.1.5"), Port: 8080, Serving: false, NodeName: "n1"})
	noEndpoints.Ports[0].NodePort = 30081
	remote := func(addr string) Endpoint { e := ready(addr, 8080); e.NodeName = "n2"; return e }
	internalLocal := web(ready("10.244.1.5", 8080), remote("10.244.2.7"))
	internalLocal.InternalLocal = true
	internalLocalNone := web(remote("10.244.2.7"))
	internalLocalNone.InternalLocal = true
	// 192.0.2.0/24 (TEST-NET-1): rendered only, never sent to.
	externalLocal := web(ready("10.244.1.5", 8080), remote("10.244.2.7"))
	externalLocal.Ports[0].NodePort = 30080
	externalLocal.ExternalLocal = true
	externalLocal.LoadBalancerIPs = []netip.Addr{ip("192.0.2.10")}
	externalLocal.HealthCheckNodePort = 32000
	externalLocalNone := web(remote("10.244.2.7"))
	externalLocalNone.Ports[0].NodePort = 30080
	externalLocalNone.ExternalLocal = true
	externalLocalNone.LoadBalancerIPs = []netip.Addr{ip("192.0.2.10")}
	externalLocalNone.HealthCheckNodePort = 32000
	lb := web(ready("10.244.1.5", 8080), remote("10.244.2.7"))
	lb.Ports[0].NodePort = 30080
	lb.LoadBalancerIPs = []netip.Addr{ip("192.0.2.10")}
	lbNone := web()
	lbNone.Ports[0].NodePort = 30080
	lbNone.LoadBalancerIPs = []netip.Addr{ip("192.0.2.10")}
	// 192.0.2.0/24 and 203.0.113.0/24 (TEST-NET-1, -3): rendered only.
	extIPs := web(ready("10.244.1.5", 8080))
	extIPs.ExternalIPs = []netip.Addr{ip("192.0.2.20"), ip("192.0.2.21")}
	extIPsNone := web()
	extIPsNone.ExternalIPs = []netip.Addr{ip("192.0.2.20")}
	extIPsLocal := web(remote("10.244.2.7"))
	extIPsLocal.ExternalIPs = []netip.Addr{ip("192.0.2.20")}
	extIPsLocal.ExternalLocal = true
	ranges := web(ready("10.244.1.5", 8080))
	ranges.Ports[0].NodePort = 30080
	ranges.LoadBalancerIPs = []netip.Addr{ip("192.0.2.10")}
	ranges.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("192.168.1.0/24")}
	rangesNone := web()
	rangesNone.LoadBalancerIPs = []netip.Addr{ip("192.0.2.10")}
	rangesNone.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}
	return map[string]Model{
		"external-ips":               {Services: []Service{extIPs}},
		"external-ips-no-endpoints":  {Services: []Service{extIPsNone}},
		"external-ips-local-none":    {Services: []Service{extIPsLocal}},
		"source-ranges":              {Services: []Service{ranges}},
		"source-ranges-no-endpoints": {Services: []Service{rangesNone}},
		"internal-local":             {Services: []Service{internalLocal}},
		"internal-local-none":        {Services: []Service{internalLocalNone}},
		"external-local":             {Services: []Service{externalLocal}},
		"external-local-none":        {Services: []Service{externalLocalNone}},
		"loadbalancer":               {Services: []Service{lb}},
		"loadbalancer-no-endpoints":  {Services: []Service{lbNone}},
		"clusterip-1":                {Services: []Service{web(ready("10.244.1.5", 8080))}},
		"clusterip-3": {Services: []Service{web(ready("10.244.3.1", 8080), ready("10.244.1.5", 8080), ready("10.244.2.7", 8080),
			Endpoint{IP: ip("10.244.2.8"), Port: 8080, Serving: true, NodeName: "n2"})}}, // not ready, not terminating: unused
		"nodeport":     {Services: []Service{nodePort}},
		"affinity":     {Services: []Service{affinity}},
		"no-endpoints": {Services: []Service{noEndpoints}},
		"headless": {Services: []Service{{Namespace: "default", Name: "db", ClusterIPs: nil,
			Ports: []Port{{Name: "pg", Protocol: "TCP", Port: 5432, Endpoints: []Endpoint{ready("10.244.1.9", 5432)}}}}}},
		"terminating-only": {Services: []Service{web(
			Endpoint{IP: ip("10.244.1.5"), Port: 8080, Serving: true, Terminating: true},
			Endpoint{IP: ip("10.244.1.6"), Port: 8080, Serving: false, Terminating: true})}},
		"multi-port": {Services: []Service{{Namespace: "kube-system", Name: "dns", ClusterIPs: []netip.Addr{ip("10.96.0.53")},
			Ports: []Port{
				{Name: "dns", Protocol: "UDP", Port: 53, Endpoints: []Endpoint{ready("10.244.1.2", 53), ready("10.244.1.3", 53)}},
				{Name: "dns-tcp", Protocol: "TCP", Port: 53, Endpoints: []Endpoint{ready("10.244.1.2", 53), ready("10.244.1.3", 53)}},
				{Name: "metrics", Protocol: "TCP", Port: 9153},
			}}}},
	}
}

func TestRenderGolden(t *testing.T) {
	for name, m := range goldenCases() {
		t.Run(name, func(t *testing.T) {
			got := Render(m, testOptions).Text(nil)
			goldenfile.Check(t, filepath.Join("testdata", name+".golden"), got)
			// Deterministic: the same model in another order renders the same.
			rev := Model{}
			for i := len(m.Services) - 1; i >= 0; i-- {
				s := m.Services[i]
				s.Ports = append([]Port(nil), s.Ports...)
				for j := range s.Ports {
					eps := append([]Endpoint(nil), s.Ports[j].Endpoints...)
					for a, b := 0, len(eps)-1; a < b; a, b = a+1, b-1 {
						eps[a], eps[b] = eps[b], eps[a]
					}
					s.Ports[j].Endpoints = eps
				}
				rev.Services = append(rev.Services, s)
			}
			if again := Render(rev, testOptions).Text(nil); !bytes.Equal(again, got) {
				t.Errorf("rendering depends on input order:\n%s", goldenfile.LineDiff(string(got), string(again)))
			}
		})
	}
}

func newTracer(t *testing.T, text []byte, o Options) *tracer {
	t.Helper()
	tables, err := parseRestore(text)
	if err != nil {
		t.Fatalf("parse rendered rules: %v", err)
	}
	tr := &tracer{tables: tables, local: map[netip.Addr]bool{}}
	for _, a := range o.NodeIPs {
		tr.local[a] = true
	}
	if err := tr.checkJumps(); err != nil {
		t.Fatal(err)
	}
	return tr
}

// toService traces p as the host's OUTPUT path or a pod's FORWARD path does.
func toService(tr *tracer, p packet) ([]outcome, error) {
	return tr.trace(p, ChainServices, ChainGuard, ChainServices)
}

// toNode traces p arriving at the node for itself (NodePorts: INPUT path).
func toNode(tr *tracer, p packet) ([]outcome, error) {
	return tr.trace(p, ChainServices, ChainExternalServices)
}

func randomModel(r *rand.Rand) Model {
	var m Model
	n := 1 + r.IntN(12)
	nodePort := int32(30000)
	for i := range n {
		s := Service{Namespace: fmt.Sprintf("ns%d", r.IntN(3)), Name: fmt.Sprintf("svc%d", i)}
		if r.IntN(8) != 0 {
			s.ClusterIPs = []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(i / 200), byte(1 + i%200)})}
		}
		if r.IntN(3) == 0 {
			s.AffinityTimeoutSeconds = int32(1 + r.IntN(10800))
		}
		s.InternalLocal = r.IntN(3) == 0
		s.ExternalLocal = r.IntN(2) == 0
		if r.IntN(3) == 0 {
			s.LoadBalancerIPs = []netip.Addr{netip.AddrFrom4([4]byte{192, 0, 2, byte(1 + i)})}
		}
		if r.IntN(3) == 0 {
			s.ExternalIPs = []netip.Addr{netip.AddrFrom4([4]byte{192, 0, 2, byte(100 + i)})}
		}
		if len(s.LoadBalancerIPs) > 0 && r.IntN(2) == 0 {
			// The outside client and the node; nothing here; the pods; the
			// outside client only.
			choices := []string{"192.168.1.0/24", "203.0.113.0/24", "10.244.0.0/16", "192.168.1.77/32"}
			for range 1 + r.IntN(2) {
				s.LoadBalancerSourceRanges = append(s.LoadBalancerSourceRanges, netip.MustParsePrefix(choices[r.IntN(len(choices))]))
			}
		}
		np := 1 + r.IntN(3)
		for j := range np {
			p := Port{Protocol: []string{"TCP", "UDP", "SCTP"}[r.IntN(3)], Port: int32(80 + j)}
			if np > 1 {
				p.Name = fmt.Sprintf("p%d", j)
			}
			if r.IntN(3) == 0 && len(s.ClusterIPs) > 0 {
				nodePort++
				p.NodePort = nodePort
			}
			for range r.IntN(6) {
				e := Endpoint{IP: netip.AddrFrom4([4]byte{10, 244, byte(r.IntN(4)), byte(1 + r.IntN(20))}), Port: int32(8000 + r.IntN(3)),
					NodeName: []string{"n1", "n2"}[r.IntN(2)]}
				switch r.IntN(4) {
				case 0, 1:
					e.Ready, e.Serving = true, true
				case 2:
					e.Serving, e.Terminating = r.IntN(2) == 0, true
				}
				p.Endpoints = append(p.Endpoints, e)
			}
			s.Ports = append(s.Ports, p)
		}
		m.Services = append(m.Services, s)
	}
	return m
}

// wantLocal is the Local-policy endpoint rule written independently of
// LocalEndpoints: the usable-endpoint rule over the endpoints on node.
func wantLocal(eps []Endpoint, node string) map[netip.AddrPort]bool {
	var local []Endpoint
	for _, e := range eps {
		if e.NodeName == node {
			local = append(local, e)
		}
	}
	return wantEndpoints(local)
}

// policyOutcomes checks a packet under a traffic policy: local is whether the
// policy is Local. With no endpoint for the policy the packet is rejected
// when the service has none anywhere, dropped when it has some elsewhere.
func policyOutcomes(t *testing.T, fail func(string, ...any), outs []outcome, eps []Endpoint, local, masq bool, mark uint32) {
	t.Helper()
	want := wantEndpoints(eps)
	if local {
		want = wantLocal(eps, testOptions.NodeName)
		if len(want) == 0 && len(wantEndpoints(eps)) > 0 {
			if len(outs) != 1 || outs[0].verdict != "DROP" {
				fail("no local endpoints: outcomes %+v, want one DROP", outs)
			}
			return
		}
	}
	checkOutcomes(t, fail, outs, want, masq, mark)
	if local && !masq {
		for _, o := range outs {
			if o.mark&mark != 0 {
				fail("Local policy traffic from outside masqueraded (source address lost): %+v", o)
			}
		}
	}
}

// wantEndpoints is the usable-endpoint rule written independently of
// UsableEndpoints: ready ones, else serving+terminating ones; deduplicated.
func wantEndpoints(eps []Endpoint) map[netip.AddrPort]bool {
	out := map[netip.AddrPort]bool{}
	for _, e := range eps {
		if e.Ready {
			out[netip.AddrPortFrom(e.IP, uint16(e.Port))] = true
		}
	}
	if len(out) == 0 {
		for _, e := range eps {
			if e.Serving && e.Terminating {
				out[netip.AddrPortFrom(e.IP, uint16(e.Port))] = true
			}
		}
	}
	return out
}

func TestTraceRandomModels(t *testing.T) {
	const mark = 0x4000
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 42))
		m := randomModel(r)
		text := Render(m, testOptions).Text(nil)
		tr := newTracer(t, text, testOptions)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d: "+format+"\nrules:\n%s", append([]any{seed}, append(args, text)...)...)
		}
		for _, s := range m.Services {
			for _, p := range s.Ports {
				want := wantEndpoints(p.Endpoints)
				if s.InternalLocal {
					want = wantLocal(p.Endpoints, testOptions.NodeName)
				}
				proto := strings.ToLower(p.Protocol)
				for _, cip := range s.ClusterIPs {
					for _, src := range []netip.Addr{ip("10.244.0.99"), ip("192.168.1.10")} {
						outs, err := toService(tr, packet{src: src, dst: cip, proto: proto, dport: int(p.Port)})
						if err != nil {
							fail("%s/%s:%d from %s: %v", s.Namespace, s.Name, p.Port, src, err)
						}
						policyOutcomes(t, fail, outs, p.Endpoints, s.InternalLocal, !testOptions.ClusterCIDR.Contains(src), mark)
					}
					// Hairpin: an endpoint reaching its own service is masqueraded
					// when it lands on itself.
					for ep := range want {
						outs, err := toService(tr, packet{src: ep.Addr(), dst: cip, proto: proto, dport: int(p.Port)})
						if err != nil {
							fail("hairpin: %v", err)
						}
						for _, o := range outs {
							if o.to.Addr() == ep.Addr() && o.mark&mark == 0 {
								fail("hairpin to %s not masqueraded: %+v", ep, o)
							}
						}
					}
				}
				if len(s.ClusterIPs) == 0 {
					continue
				}
				// External traffic: a NodePort on the node's address (INPUT) and a
				// load-balancer IP (FORWARD), from outside (the policy decides),
				// from a pod and from the node (short-circuited to Cluster).
				type dest struct {
					dst     netip.Addr
					port    int
					filters []string
					ranges  []netip.Prefix
				}
				var dests []dest
				if p.NodePort > 0 {
					dests = append(dests, dest{ip("192.168.1.10"), int(p.NodePort), []string{ChainExternalServices, ChainProxyFirewall}, nil})
				}
				forward := []string{ChainGuard, ChainServices, ChainExternalServices, ChainProxyFirewall}
				for _, lb := range s.LoadBalancerIPs {
					dests = append(dests, dest{lb, int(p.Port), forward, s.LoadBalancerSourceRanges})
				}
				for _, ext := range s.ExternalIPs { // from anywhere, whatever the source ranges
					dests = append(dests, dest{ext, int(p.Port), forward, nil})
				}
				for _, d := range dests {
					from := func(src netip.Addr) []outcome {
						outs, err := tr.trace(packet{src: src, dst: d.dst, proto: proto, dport: d.port}, ChainServices, d.filters...)
						if err != nil {
							fail("%s:%d from %s: %v", d.dst, d.port, src, err)
						}
						return outs
					}
					// loadBalancerSourceRanges: a source no range allows is
					// dropped (when the Service has endpoints at all; else
					// rejected as always).
					allowed := func(src netip.Addr) bool {
						if len(d.ranges) == 0 || len(wantEndpoints(p.Endpoints)) == 0 {
							return true
						}
						fromNode := false
						for _, r := range d.ranges {
							if r.Contains(src) {
								return true
							}
							fromNode = fromNode || r.Contains(ip("192.168.1.10"))
						}
						return fromNode && src == d.dst
					}
					for _, c := range []struct {
						src         netip.Addr
						local, masq bool
					}{
						{ip("192.168.1.77"), s.ExternalLocal, !s.ExternalLocal},
						{ip("10.244.0.99"), false, !s.ExternalLocal},
						{ip("192.168.1.10"), false, true},
					} {
						outs := from(c.src)
						if !allowed(c.src) {
							for _, o := range outs {
								if o.verdict != "DROP" {
									fail("%s:%d from %s (source ranges %v): %+v, want DROP", d.dst, d.port, c.src, d.ranges, o)
								}
							}
							continue
						}
						policyOutcomes(t, fail, outs, p.Endpoints, c.local, c.masq, mark)
					}
				}
			}
		}
		// An address of the service CIDR that no Service has is rejected
		// locally, never routed out.
		for _, proto := range []string{"tcp", "udp"} {
			outs, err := toService(tr, packet{src: ip("192.168.1.10"), dst: ip("10.111.222.33"), proto: proto, dport: 80})
			if err != nil {
				fail("unknown clusterIP: %v", err)
			}
			for _, o := range outs {
				if o.verdict != "REJECT" {
					fail("unknown ClusterIP %s: %+v, want REJECT", proto, o)
				}
				if proto == "tcp" && o.reject != "tcp-reset" {
					fail("unknown ClusterIP tcp rejected with %s", o.reject)
				}
			}
		}
	}
}

// checkOutcomes asserts that the outcomes of a packet to a service port are
// exactly its usable endpoints, each with its fair share, masqueraded as
// wanted — or one REJECT when it has none.
func checkOutcomes(t *testing.T, fail func(string, ...any), outs []outcome, want map[netip.AddrPort]bool, masq bool, mark uint32) {
	t.Helper()
	if len(want) == 0 {
		if len(outs) != 1 || outs[0].verdict != "REJECT" {
			fail("no endpoints: outcomes %+v, want one REJECT", outs)
		}
		return
	}
	share := map[netip.AddrPort]float64{}
	for _, o := range outs {
		if o.weight == 0 {
			// The affinity path (-m recent --rcheck hit) must still land on a
			// usable endpoint.
			if o.verdict != "DNAT" || !want[o.to] {
				fail("affinity path ends in %+v", o)
			}
			continue
		}
		if o.verdict != "DNAT" || !want[o.to] {
			fail("outcome %+v (path %v) is not one of the endpoints %v", o, o.path, want)
		}
		if masq && o.mark&mark == 0 {
			fail("traffic from outside the pod CIDR not marked for masquerade: %+v", o)
		}
		share[o.to] += o.weight
	}
	for ep := range want {
		if math.Abs(share[ep]-1/float64(len(want))) > 1e-6 {
			fail("endpoint %s gets %.6f of the traffic, want 1/%d (all: %v)", ep, share[ep], len(want), share)
		}
	}
}

func TestGuardRejectsUnroutedPodCIDR(t *testing.T) {
	o := testOptions
	o.RejectUnroutedPodCIDR = true
	o.NodePodCIDRs = prefixes("10.244.1.0/24", "10.244.7.0/24", "10.244.9.0/24")
	o.RoutedPodCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}
	m := Model{Services: []Service{{Namespace: "default", Name: "web", ClusterIPs: []netip.Addr{ip("10.96.0.10")},
		Ports: []Port{{Protocol: "TCP", Port: 80, Endpoints: []Endpoint{ready("10.244.1.5", 8080), ready("10.244.7.5", 8080)}}}}}}
	tr := newTracer(t, Render(m, o).Text(nil), o)
	outs, err := toService(tr, packet{src: ip("10.244.1.3"), dst: ip("10.96.0.10"), proto: "tcp", dport: 80})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, out := range outs {
		got[fmt.Sprintf("%s %s", out.verdict, out.to)] = true
	}
	// The endpoint on the routed /24 is reached; the one on an unrouted
	// (simulated) node is rejected locally after the DNAT.
	if !got["DNAT 10.244.1.5:8080"] || !got["REJECT 10.244.7.5:8080"] || len(got) != 2 {
		t.Errorf("outcomes %v", got)
	}
	for _, dst := range []string{"10.244.9.9", "10.244.7.5"} {
		outs, err := toService(tr, packet{src: ip("10.244.1.3"), dst: ip(dst), proto: "udp", dport: 53})
		if err != nil {
			t.Fatal(err)
		}
		if len(outs) != 1 || outs[0].verdict != "REJECT" {
			t.Errorf("to unrouted pod %s: %+v, want REJECT", dst, outs)
		}
	}
	outs, err = toService(tr, packet{src: ip("10.244.1.3"), dst: ip("10.244.1.9"), proto: "udp", dport: 53})
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 1 || outs[0].verdict != "" {
		t.Errorf("to routed pod: %+v, want untouched", outs)
	}
	// An address of the cluster CIDR in no Node's pod CIDR is not a pod.
	outs, err = toService(tr, packet{src: ip("10.244.1.3"), dst: ip("10.244.200.1"), proto: "udp", dport: 53})
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 1 || outs[0].verdict != "" {
		t.Errorf("to 10.244.200.1 (no node's): %+v, want untouched", outs)
	}
}

// TestGuardLeavesTheHostNetworkAlone: with kubette up's cluster CIDR
// 10.128.0.0/9, the host's resolver at 10.255.255.53 (in it, but in no
// Node's pod CIDR) is not rejected, the /24s of 5000 simulated nodes are in
// five pairs of REJECTs, and the real node's routed /24 returns inside the
// /23 it merges into with its unrouted neighbour.
func TestGuardLeavesTheHostNetworkAlone(t *testing.T) {
	o := testOptions
	o.ClusterCIDR = netip.MustParsePrefix("10.128.0.0/9")
	o.RejectUnroutedPodCIDR = true
	o.NodePodCIDRs = append(simNodeCIDRs(5000), prefixes("10.244.0.0/24", "10.244.1.0/24")...)
	o.RoutedPodCIDRs = prefixes("10.244.0.0/24")
	var got []string
	for _, r := range Guard(o).Rules {
		if !strings.Contains(r, "service CIDR") {
			got = append(got, r)
		}
	}
	var want []string
	want = append(want, comment("kubette: routed pod CIDR")+" -d 10.244.0.0/24 -j RETURN")
	for _, p := range []string{"10.128.0.0/12", "10.144.0.0/15", "10.146.0.0/16", "10.147.0.0/17", "10.147.128.0/21", "10.244.0.0/23"} {
		want = append(want,
			comment("kubette: node pod CIDR without a local route")+" -d "+p+" -p tcp -j REJECT --reject-with tcp-reset",
			comment("kubette: node pod CIDR without a local route")+" -d "+p+" -j REJECT --reject-with icmp-port-unreachable")
	}
	if !slices.Equal(got, want) {
		t.Errorf("pod guard rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	tr := newTracer(t, Render(Model{}, o).Text(nil), o)
	for dst, verdict := range map[string]string{
		"10.255.255.53": "",       // the host's resolver
		"10.200.0.1":    "",       // cluster CIDR, no node's
		"10.147.136.1":  "",       // just past the last simulated node's /24
		"10.244.0.9":    "",       // the real node's routed pods
		"10.128.0.5":    "REJECT", // the first simulated node's pods
		"10.147.135.9":  "REJECT", // the last one's
		"10.244.1.9":    "REJECT", // a node whose pod CIDR has no route
	} {
		for _, proto := range []string{"udp", "tcp"} {
			outs, err := toService(tr, packet{src: ip("192.168.1.10"), dst: ip(dst), proto: proto, dport: 53})
			if err != nil {
				t.Fatal(err)
			}
			if len(outs) != 1 || outs[0].verdict != verdict {
				t.Errorf("%s to %s: %+v, want verdict %q", proto, dst, outs, verdict)
			}
		}
	}
}

func TestUpdateEqualsFullText(t *testing.T) {
	for seed := range uint64(100) {
		r := rand.New(rand.NewPCG(seed, 7))
		a, b := randomModel(r), randomModel(r)
		prev, next := Render(a, testOptions), Render(b, testOptions)
		// Apply prev's full text, then the partial update, to a simulated host.
		host, err := parseRestore(prev.Text(nil))
		if err != nil {
			t.Fatal(err)
		}
		upd := Update(prev, next)
		if upd == nil {
			if !bytes.Equal(prev.Text(nil), next.Text(nil)) {
				t.Fatalf("seed %d: Update says unchanged but texts differ", seed)
			}
			continue
		}
		if err := applyNoflush(host, upd); err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, upd)
		}
		want, err := parseRestore(next.Text(nil))
		if err != nil {
			t.Fatal(err)
		}
		if d := diffTables(host, want); d != "" {
			t.Fatalf("seed %d: after the partial update the host differs from the full text: %s", seed, d)
		}
	}
	if Update(Render(goldenCases()["nodeport"], testOptions), Render(goldenCases()["nodeport"], testOptions)) != nil {
		t.Error("Update of equal rulesets is not nil")
	}
}

// applyNoflush applies restore text with --noflush semantics to host.
func applyNoflush(host map[string]map[string][][]string, text []byte) error {
	upd, err := parseRestoreOps(text)
	if err != nil {
		return err
	}
	for _, op := range upd {
		chains := host[op.table]
		if chains == nil {
			chains = map[string][][]string{}
			host[op.table] = chains
		}
		switch op.kind {
		case ':':
			chains[op.chain] = nil
		case 'A':
			chains[op.chain] = append(chains[op.chain], op.rule)
		case 'D': // the first equal rule goes; none fails the restore
			rules, ok := chains[op.chain]
			i := slices.IndexFunc(rules, func(r []string) bool { return slices.Equal(r, op.rule) })
			if !ok || i < 0 {
				return fmt.Errorf("-D %s %s: no such rule", op.chain, strings.Join(op.rule, " "))
			}
			chains[op.chain] = slices.Delete(rules, i, i+1)
		case 'I': // at a 1-based position at most one past the end
			rules, ok := chains[op.chain]
			if !ok || op.pos < 1 || op.pos > len(rules)+1 {
				return fmt.Errorf("-I %s %d: chain of %d rules (declared: %v)", op.chain, op.pos, len(rules), ok)
			}
			chains[op.chain] = slices.Insert(rules, op.pos-1, op.rule)
		case 'X':
			for cn, rules := range chains {
				for _, r := range rules {
					for i := range r {
						if r[i] == "-j" && i+1 < len(r) && r[i+1] == op.chain {
							return fmt.Errorf("-X %s while %s still jumps to it", op.chain, cn)
						}
					}
				}
			}
			delete(chains, op.chain)
		}
	}
	return nil
}

type restoreOp struct {
	table, chain string
	kind         byte
	rule         []string
	pos          int // of an insert
}

func parseRestoreOps(text []byte) ([]restoreOp, error) {
	var ops []restoreOp
	table := ""
	for _, line := range strings.Split(string(text), "\n") {
		switch {
		case line == "" || line == "COMMIT":
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, ":"):
			name, _, _ := strings.Cut(line[1:], " ")
			ops = append(ops, restoreOp{table: table, chain: name, kind: ':'})
		case strings.HasPrefix(line, "-X "):
			ops = append(ops, restoreOp{table: table, chain: line[3:], kind: 'X'})
		case strings.HasPrefix(line, "-A "):
			toks, err := tokenize(line)
			if err != nil {
				return nil, err
			}
			ops = append(ops, restoreOp{table: table, chain: toks[1], kind: 'A', rule: toks[2:]})
		case strings.HasPrefix(line, "-D "):
			toks, err := tokenize(line)
			if err != nil {
				return nil, err
			}
			ops = append(ops, restoreOp{table: table, chain: toks[1], kind: 'D', rule: toks[2:]})
		case strings.HasPrefix(line, "-I "):
			toks, err := tokenize(line)
			if err != nil {
				return nil, err
			}
			if len(toks) < 3 {
				return nil, fmt.Errorf("short insert %q", line)
			}
			pos, err := strconv.Atoi(toks[2])
			if err != nil {
				return nil, fmt.Errorf("insert %q: %w", line, err)
			}
			ops = append(ops, restoreOp{table: table, chain: toks[1], kind: 'I', rule: toks[3:], pos: pos})
		default:
			return nil, fmt.Errorf("unexpected line %q", line)
		}
	}
	// iptables-restore applies a table's -X after its rules: order is as written.
	return ops, nil
}

func diffTables(got, want map[string]map[string][][]string) string {
	for tn, chains := range want {
		for cn, rules := range chains {
			g, ok := got[tn][cn]
			if !ok {
				return fmt.Sprintf("%s %s missing", tn, cn)
			}
			if fmt.Sprint(g) != fmt.Sprint(rules) {
				return fmt.Sprintf("%s %s: got %v, want %v", tn, cn, g, rules)
			}
		}
	}
	for tn, chains := range got {
		for cn := range chains {
			if _, ok := want[tn][cn]; !ok {
				return fmt.Sprintf("%s %s left over", tn, cn)
			}
		}
	}
	return ""
}

func TestStaleAndCleanup(t *testing.T) {
	saved := []byte(`# Generated by iptables-save
*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-AAAAAAAAAAAAAAAA - [0:0]
:KUBE-SEP-BBBBBBBBBBBBBBBB - [0:0]
:CNI-1234 - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -s 10.88.0.0/16 -j CNI-1234
-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -j KUBE-SVC-AAAAAAAAAAAAAAAA
-A KUBE-SVC-AAAAAAAAAAAAAAAA -j KUBE-SEP-BBBBBBBBBBBBBBBB
COMMIT
*filter
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-SERVICE-CIDR-GUARD - [0:0]
-A OUTPUT -m comment --comment "kubette service CIDR guard" -j KUBE-SERVICE-CIDR-GUARD
COMMIT
`)
	stale := StaleChains(saved, Render(Model{}, testOptions))
	if fmt.Sprint(stale) != "map[nat:[KUBE-SVC-AAAAAAAAAAAAAAAA KUBE-SEP-BBBBBBBBBBBBBBBB]]" {
		t.Errorf("StaleChains = %v", stale)
	}
	want := `*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-AAAAAAAAAAAAAAAA - [0:0]
:KUBE-SEP-BBBBBBBBBBBBBBBB - [0:0]
-D PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-X KUBE-SERVICES
-X KUBE-SVC-AAAAAAAAAAAAAAAA
-X KUBE-SEP-BBBBBBBBBBBBBBBB
COMMIT
*filter
:KUBE-SERVICE-CIDR-GUARD - [0:0]
-D OUTPUT -m comment --comment "kubette service CIDR guard" -j KUBE-SERVICE-CIDR-GUARD
-X KUBE-SERVICE-CIDR-GUARD
COMMIT
`
	if got := string(CleanupText(saved)); got != want {
		t.Errorf("CleanupText:\n%s\nwant:\n%s", got, want)
	}
	if CleanupText([]byte("*nat\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n")) != nil {
		t.Error("CleanupText of a clean host is not nil")
	}
}

// applyBatches applies each restore batch to host as iptables-restore --noflush would,
// checking after each that every jump has its target.
func applyBatches(t *testing.T, seed uint64, host map[string]map[string][][]string, batches [][]byte) {
	t.Helper()
	for i, bt := range batches {
		if err := applyNoflush(host, bt); err != nil {
			t.Fatalf("seed %d: batch %d: %v\n%s", seed, i, err, bt)
		}
		if err := checkHostJumps(host); err != nil {
			t.Fatalf("seed %d: after batch %d of %d: %v", seed, i, len(batches), err)
		}
	}
}

// checkHostJumps reports a jump to a chain the simulated host does not have.
func checkHostJumps(host map[string]map[string][][]string) error {
	return (&tracer{tables: host}).checkJumps()
}

func TestBatchesKeepEveryJumpValid(t *testing.T) {
	for seed := range uint64(100) {
		r := rand.New(rand.NewPCG(seed, 11))
		a, b := randomModel(r), randomModel(r)
		prev, next := Render(a, testOptions), Render(b, testOptions)
		maxChains := 1 + r.IntN(6)
		// A full sync in batches over a host that holds prev: prev's chains that
		// next lacks are stale.
		host, err := parseRestore(prev.Text(nil))
		if err != nil {
			t.Fatal(err)
		}
		var saved bytes.Buffer
		for _, tn := range []string{TableFilter, TableNAT} {
			fmt.Fprintf(&saved, "*%s\n", tn)
			for _, c := range prev.Table(tn) {
				fmt.Fprintf(&saved, ":%s - [0:0]\n", c.Name)
			}
			saved.WriteString("COMMIT\n")
		}
		stale := StaleChains(saved.Bytes(), next)
		if seed%2 == 0 { // a fresh host
			host, stale = map[string]map[string][][]string{}, nil
		}
		batches := next.TextBatches(stale, maxChains)
		if !bytes.Equal(bytes.Join(next.TextBatches(stale, 0), nil), next.Text(stale)) {
			t.Fatalf("seed %d: one batch is not Text", seed)
		}
		applyBatches(t, seed, host, batches)
		want, _ := parseRestore(next.Text(nil))
		if d := diffTables(host, want); d != "" {
			t.Fatalf("seed %d: after the batched full sync: %s", seed, d)
		}
		// The partial update in batches, from prev.
		host, _ = parseRestore(prev.Text(nil))
		for i, bt := range UpdateBatches(prev, next, maxChains) {
			if err := applyNoflush(host, bt); err != nil {
				t.Fatalf("seed %d: update batch %d: %v\n%s", seed, i, err, bt)
			}
			if err := checkHostJumps(host); err != nil {
				t.Fatalf("seed %d: after update batch %d: %v", seed, i, err)
			}
		}
		if d := diffTables(host, want); d != "" {
			t.Fatalf("seed %d: after the batched update: %s", seed, d)
		}
	}
}

// TestRendererReusesUnchangedServices checks a Renderer's cached output and
// its fast diff against fresh renders, while the caller changes its model in
// place between calls.
func TestRendererReusesUnchangedServices(t *testing.T) {
	for seed := range uint64(100) {
		r := rand.New(rand.NewPCG(seed, 13))
		m := randomModel(r)
		rr := NewRenderer()
		prev := rr.Render(m, testOptions)
		for step := range 5 {
			// Change a few things in place.
			for range 1 + r.IntN(3) {
				s := &m.Services[r.IntN(len(m.Services))]
				p := &s.Ports[r.IntN(len(s.Ports))]
				switch r.IntN(4) {
				case 0:
					if len(p.Endpoints) > 0 {
						p.Endpoints[0].IP = netip.AddrFrom4([4]byte{10, 244, 9, byte(r.IntN(250))})
						p.Endpoints[0].Ready = true
					}
				case 1:
					p.Endpoints = append(p.Endpoints, ready("10.244.8."+fmt.Sprint(r.IntN(250)), 8080))
				case 2:
					s.AffinityTimeoutSeconds = int32(r.IntN(2) * 100)
				case 3:
					if len(m.Services) > 1 {
						m.Services = append(m.Services[:0:0], m.Services[1:]...)
					}
				}
			}
			next := rr.Render(m, testOptions)
			if !bytes.Equal(next.Text(nil), Render(m, testOptions).Text(nil)) {
				t.Fatalf("seed %d step %d: cached render differs from a fresh one", seed, step)
			}
			host, err := parseRestore(prev.Text(nil))
			if err != nil {
				t.Fatal(err)
			}
			for i, bt := range UpdateBatches(prev, next, 1+r.IntN(4)) {
				if err := applyNoflush(host, bt); err != nil {
					t.Fatalf("seed %d step %d: batch %d: %v", seed, step, i, err)
				}
				if err := checkHostJumps(host); err != nil {
					t.Fatalf("seed %d step %d: after batch %d: %v", seed, step, i, err)
				}
			}
			want, _ := parseRestore(next.Text(nil))
			if d := diffTables(host, want); d != "" {
				t.Fatalf("seed %d step %d: %s", seed, step, d)
			}
			prev = next
		}
	}
}
