package nftables

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/kubette/kubette/internal/proxy/iptables"
	goldenfile "github.com/kubette/kubette/internal/testenv/golden"
)

var testOptions = iptables.Options{
	ServiceCIDR: netip.MustParsePrefix("10.96.0.0/12"),
	ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16"),
	NodeIPs:     []netip.Addr{netip.MustParseAddr("192.168.1.10")},
	NodeName:    "n1",
}

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

func ready(addr string, port int32) iptables.Endpoint {
	return iptables.Endpoint{IP: ip(addr), Port: port, Ready: true, Serving: true, NodeName: "n1"}
}

func remote(addr string) iptables.Endpoint { e := ready(addr, 8080); e.NodeName = "n2"; return e }

func web(eps ...iptables.Endpoint) iptables.Service {
	return iptables.Service{Namespace: "default", Name: "web", ClusterIPs: []netip.Addr{ip("10.96.0.10")},
		Ports: []iptables.Port{{Name: "http", Protocol: "TCP", Port: 80, Endpoints: eps}}}
}

// goldenCases are the iptables renderer's golden cases, rendered for
// nftables. 192.0.2.0/24 and 203.0.113.0/24 (TEST-NET-1, -3) are rendered
// only, never sent to.
func goldenCases() map[string]iptables.Model {
	nodePort := web(ready("10.244.1.5", 8080))
	nodePort.Ports[0].NodePort = 30080
	affinity := web(ready("10.244.1.5", 8080), ready("10.244.2.7", 8080))
	affinity.AffinityTimeoutSeconds = 10800
	noEndpoints := web(iptables.Endpoint{IP: ip("10.244.1.5"), Port: 8080, NodeName: "n1"})
	noEndpoints.Ports[0].NodePort = 30081
	internalLocal := web(ready("10.244.1.5", 8080), remote("10.244.2.7"))
	internalLocal.InternalLocal = true
	internalLocalNone := web(remote("10.244.2.7"))
	internalLocalNone.InternalLocal = true
	externalLocal := web(ready("10.244.1.5", 8080), remote("10.244.2.7"))
	externalLocal.Ports[0].NodePort = 30080
	externalLocal.ExternalLocal = true
	externalLocal.LoadBalancerIPs = []netip.Addr{ip("192.0.2.10")}
	externalLocalNone := web(remote("10.244.2.7"))
	externalLocalNone.Ports[0].NodePort = 30080
	externalLocalNone.ExternalLocal = true
	externalLocalNone.LoadBalancerIPs = []netip.Addr{ip("192.0.2.10")}
	lb := web(ready("10.244.1.5", 8080), remote("10.244.2.7"))
	lb.Ports[0].NodePort = 30080
	lb.LoadBalancerIPs = []netip.Addr{ip("192.0.2.10")}
	extIPs := web(ready("10.244.1.5", 8080))
	extIPs.ExternalIPs = []netip.Addr{ip("192.0.2.20"), ip("192.0.2.21")}
	extIPsNone := web()
	extIPsNone.ExternalIPs = []netip.Addr{ip("192.0.2.20")}
	ranges := web(ready("10.244.1.5", 8080))
	ranges.Ports[0].NodePort = 30080
	ranges.LoadBalancerIPs = []netip.Addr{ip("192.0.2.10")}
	ranges.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("192.168.1.0/24")}
	return map[string]iptables.Model{
		"empty":                     {},
		"clusterip-1":               {Services: []iptables.Service{web(ready("10.244.1.5", 8080))}},
		"clusterip-3":               {Services: []iptables.Service{web(ready("10.244.3.1", 8080), ready("10.244.1.5", 8080), ready("10.244.2.7", 8080), iptables.Endpoint{IP: ip("10.244.2.8"), Port: 8080, Serving: true, NodeName: "n2"})}},
		"nodeport":                  {Services: []iptables.Service{nodePort}},
		"affinity":                  {Services: []iptables.Service{affinity}},
		"no-endpoints":              {Services: []iptables.Service{noEndpoints}},
		"internal-local":            {Services: []iptables.Service{internalLocal}},
		"internal-local-none":       {Services: []iptables.Service{internalLocalNone}},
		"external-local":            {Services: []iptables.Service{externalLocal}},
		"external-local-none":       {Services: []iptables.Service{externalLocalNone}},
		"loadbalancer":              {Services: []iptables.Service{lb}},
		"external-ips":              {Services: []iptables.Service{extIPs}},
		"external-ips-no-endpoints": {Services: []iptables.Service{extIPsNone}},
		"source-ranges":             {Services: []iptables.Service{ranges}},
		"headless": {Services: []iptables.Service{{Namespace: "default", Name: "db",
			Ports: []iptables.Port{{Name: "pg", Protocol: "TCP", Port: 5432, Endpoints: []iptables.Endpoint{ready("10.244.1.9", 5432)}}}}}},
		"multi-port": {Services: []iptables.Service{{Namespace: "kube-system", Name: "dns", ClusterIPs: []netip.Addr{ip("10.96.0.53")},
			Ports: []iptables.Port{
				{Name: "dns", Protocol: "UDP", Port: 53, Endpoints: []iptables.Endpoint{ready("10.244.1.2", 53), ready("10.244.1.3", 53)}},
				{Name: "dns-tcp", Protocol: "TCP", Port: 53, Endpoints: []iptables.Endpoint{ready("10.244.1.2", 53), ready("10.244.1.3", 53)}},
				{Name: "metrics", Protocol: "TCP", Port: 9153},
			}}}},
	}
}

func TestRenderGolden(t *testing.T) {
	for name, m := range goldenCases() {
		t.Run(name, func(t *testing.T) {
			got := FullText(Render(m, testOptions))
			goldenfile.Check(t, filepath.Join("testdata", name+".golden"), got)
		})
	}
}

func TestGuardWithUnroutedPodCIDR(t *testing.T) {
	o := testOptions
	o.RejectUnroutedPodCIDR = true
	o.NodePodCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24"), netip.MustParsePrefix("10.244.3.0/24"),
		netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("10.244.0.0/24"), netip.MustParsePrefix("10.244.9.0/24")}
	o.RoutedPodCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("10.244.0.0/24"), netip.MustParsePrefix("10.244.200.0/24")}
	got := GuardChain(o).Rules
	want := []string{
		"ip daddr 10.96.0.0/12 ct status & dnat == 0 meta l4proto tcp reject with tcp reset",
		"ip daddr 10.96.0.0/12 ct status & dnat == 0 reject",
		"ip daddr 10.244.0.0/23 return", // the two routed /24s, merged
		"ip daddr 10.244.0.0/22 meta l4proto tcp reject with tcp reset",
		"ip daddr 10.244.0.0/22 reject",
		"ip daddr 10.244.9.0/24 meta l4proto tcp reject with tcp reset",
		"ip daddr 10.244.9.0/24 reject",
	}
	if !slices.Equal(got, want) {
		t.Errorf("guard rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestGuardLeavesTheHostNetworkAlone: with kubette up's cluster CIDR
// 10.128.0.0/9 the guard rejects the merged /24s of 5000 simulated nodes and
// a real node's unrouted /24, returns for the routed one and matches nothing
// else: not the host's resolver at 10.255.255.53, which lies in the cluster
// CIDR.
func TestGuardLeavesTheHostNetworkAlone(t *testing.T) {
	o := testOptions
	o.ClusterCIDR = netip.MustParsePrefix("10.128.0.0/9")
	o.RejectUnroutedPodCIDR = true
	for i := range 5000 {
		o.NodePodCIDRs = append(o.NodePodCIDRs, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(128 + i>>8), byte(i), 0}), 24))
	}
	o.NodePodCIDRs = append(o.NodePodCIDRs, netip.MustParsePrefix("10.244.0.0/24"), netip.MustParsePrefix("10.244.1.0/24"))
	o.RoutedPodCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/24")}
	got := GuardChain(o).Rules[2:]
	want := []string{"ip daddr 10.244.0.0/24 return"}
	for _, p := range []string{"10.128.0.0/12", "10.144.0.0/15", "10.146.0.0/16", "10.147.0.0/17", "10.147.128.0/21", "10.244.0.0/23"} {
		want = append(want, "ip daddr "+p+" meta l4proto tcp reject with tcp reset", "ip daddr "+p+" reject")
	}
	if !slices.Equal(got, want) {
		t.Errorf("pod guard rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Which rule a packet to each address meets first: the first rule whose
	// prefix holds it, or none.
	verdict := func(a netip.Addr) string {
		for _, r := range got {
			f := strings.Fields(r)
			if netip.MustParsePrefix(f[2]).Contains(a) {
				return f[len(f)-1]
			}
		}
		return ""
	}
	for dst, want := range map[string]string{
		"10.255.255.53": "", "10.200.0.1": "", "10.147.136.1": "",
		"10.244.0.9":   "return",
		"10.128.0.5":   "reset", // the tcp rule comes first; the next one rejects the rest
		"10.147.135.9": "reset",
		"10.244.1.9":   "reset",
	} {
		if got := verdict(netip.MustParseAddr(dst)); got != want {
			t.Errorf("to %s: %q, want %q", dst, got, want)
		}
	}
}

// table is a simulated kube-proxy table: what nft would hold after the
// commands FullText and UpdateText write.
type table struct {
	chains map[string][]string
	hooks  map[string]string
	sets   map[string]map[string]string
	specs  map[string]string
}

func (tb *table) apply(t *testing.T, text []byte) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(string(text)), "\n") {
		if line == "" {
			continue
		}
		verb, rest, _ := strings.Cut(line, " ")
		kind, rest, _ := strings.Cut(rest, " ")
		rest = strings.TrimPrefix(rest, prefix)
		name, arg, _ := strings.Cut(rest, " ")
		switch verb + " " + kind {
		case "add table":
		case "delete table":
			*tb = table{}
			fallthrough
		case "init table":
			tb.chains, tb.hooks = map[string][]string{}, map[string]string{}
			tb.sets, tb.specs = map[string]map[string]string{}, map[string]string{}
		case "add chain":
			if _, ok := tb.chains[name]; !ok {
				tb.chains[name] = []string{}
				tb.hooks[name] = arg
			}
		case "flush chain":
			mustHave(t, tb.chains, name, line)
			tb.chains[name] = []string{}
		case "delete chain":
			mustHave(t, tb.chains, name, line)
			if len(tb.chains[name]) > 0 {
				t.Fatalf("%s: chain not empty", line)
			}
			for set, els := range tb.sets {
				for k, v := range els {
					if v == "goto "+name || v == "jump "+name {
						t.Fatalf("%s: element %s of %s still refers to it", line, k, set)
					}
				}
			}
			delete(tb.chains, name)
		case "add rule":
			mustHave(t, tb.chains, name, line)
			tb.chains[name] = append(tb.chains[name], arg)
		case "add set", "add map":
			if _, ok := tb.sets[name]; !ok {
				tb.sets[name] = map[string]string{}
				tb.specs[name] = kind + " " + arg
			}
		case "delete set", "delete map":
			mustHave(t, tb.sets, name, line)
			for c, rules := range tb.chains {
				for _, r := range rules {
					if strings.Contains(r+" ", "@"+name+" ") {
						t.Fatalf("%s: rule %q of %s still refers to it", line, r, c)
					}
				}
			}
			delete(tb.sets, name)
			delete(tb.specs, name)
		case "add element", "delete element":
			mustHave(t, tb.sets, name, line)
			for _, e := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(arg, "{ "), " }"), ", ") {
				k, v, _ := strings.Cut(e, " : ")
				if _, ok := tb.sets[name][k]; ok == (verb == "add") {
					t.Fatalf("%s: element %q present=%v", line, k, ok)
				}
				if verb == "add" {
					tb.sets[name][k] = v
				} else {
					delete(tb.sets[name], k)
				}
			}
		default:
			t.Fatalf("unknown command %q", line)
		}
	}
}

func mustHave[V any](t *testing.T, m map[string]V, name, line string) {
	t.Helper()
	if _, ok := m[name]; !ok {
		t.Fatalf("%s: %s does not exist", line, name)
	}
}

func (tb *table) String() string {
	var lines []string
	for n, rules := range tb.chains {
		lines = append(lines, fmt.Sprintf("chain %s %s: %s", n, tb.hooks[n], strings.Join(rules, " | ")))
	}
	for n, els := range tb.sets {
		var es []string
		for k, v := range els {
			es = append(es, k+":"+v)
		}
		sort.Strings(es)
		lines = append(lines, fmt.Sprintf("%s %s: %s", tb.specs[n], n, strings.Join(es, ", ")))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// randomModel is a model of up to 8 Services with random endpoints, ports,
// policies and affinity.
func randomModel(r *rand.Rand) iptables.Model {
	var m iptables.Model
	for i := range r.IntN(8) {
		s := iptables.Service{Namespace: "ns", Name: fmt.Sprintf("s%d", r.IntN(10)+i*10),
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, 0, byte(i + 1)})}}
		if r.IntN(4) == 0 {
			s.AffinityTimeoutSeconds = int32(60 * (1 + r.IntN(2)))
		}
		s.InternalLocal = r.IntN(5) == 0
		s.ExternalLocal = r.IntN(4) == 0
		if r.IntN(3) == 0 {
			s.LoadBalancerIPs = []netip.Addr{netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)})}
			if r.IntN(2) == 0 {
				s.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}
			}
		}
		for p := range 1 + r.IntN(2) {
			port := iptables.Port{Name: fmt.Sprintf("p%d", p), Protocol: []string{"TCP", "UDP"}[r.IntN(2)], Port: int32(80 + p)}
			if r.IntN(2) == 0 {
				port.NodePort = int32(30000 + i*10 + p)
			}
			for range r.IntN(4) {
				e := iptables.Endpoint{IP: netip.AddrFrom4([4]byte{10, 244, byte(r.IntN(2)), byte(1 + r.IntN(6))}), Port: 8080,
					Ready: r.IntN(4) != 0, Serving: true, NodeName: []string{"n1", "n2"}[r.IntN(2)]}
				port.Endpoints = append(port.Endpoints, e)
			}
			s.Ports = append(s.Ports, port)
		}
		m.Services = append(m.Services, s)
	}
	return m
}

// TestUpdateTextReachesFullText applies random sequences of models: after
// the full text of the first and the update texts of the next ones (derived
// from the previous Ruleset, or between whole Rulesets), the simulated table
// holds exactly what the last model's full text builds.
func TestUpdateTextReachesFullText(t *testing.T) {
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 7))
		rd := NewRenderer()
		prevModel := randomModel(r)
		prev := rd.Render(prevModel, testOptions)
		var host table
		host.apply(t, FullText(prev))
		for step := range 6 {
			nextModel := randomModel(r)
			next := rd.Render(nextModel, testOptions)
			from := prev
			if step%2 == 1 {
				// A Ruleset of another Renderer: the diff of whole rulesets
				// (the others derive next from prev).
				from = Render(prevModel, testOptions)
			}
			prevModel = nextModel
			text, ok := UpdateText(from, next)
			if !ok {
				text = FullText(next)
			}
			host.apply(t, text)
			var want table
			want.apply(t, FullText(next))
			if host.String() != want.String() {
				t.Fatalf("seed %d step %d: after the update the table differs:\n%s\nwant:\n%s\nupdate:\n%s", seed, step, host.String(), want.String(), text)
			}
			prev = next
		}
	}
}

func TestUpdateTextNothingChanged(t *testing.T) {
	m := goldenCases()["affinity"]
	rd := NewRenderer()
	a := rd.Render(m, testOptions)
	b := rd.Render(m, testOptions)
	if text, ok := UpdateText(a, b); !ok || len(text) != 0 {
		t.Fatalf("UpdateText of an unchanged model = %q, %v", text, ok)
	}
}

func TestOneEndpointChangeWritesOnlyThatService(t *testing.T) {
	m := iptables.Model{}
	for i := range 50 {
		s := web(ready(fmt.Sprintf("10.244.1.%d", i+1), 8080), ready(fmt.Sprintf("10.244.2.%d", i+1), 8080))
		s.Name = fmt.Sprintf("web%02d", i)
		s.ClusterIPs = []netip.Addr{netip.AddrFrom4([4]byte{10, 96, 0, byte(i + 1)})}
		m.Services = append(m.Services, s)
	}
	rd := NewRenderer()
	a := rd.Render(m, testOptions)
	m.Services[7].Ports[0].Endpoints[1] = ready("10.244.3.99", 8080)
	b := rd.Render(m, testOptions)
	text, ok := UpdateText(a, b)
	if !ok {
		t.Fatal("UpdateText refused")
	}
	// Two endpoints before and after: the element of index 1 changes its
	// value in endpoints-2, no rule is written.
	want := "delete element ip kube-proxy hairpin { 10.244.2.8 . 10.244.2.8 }\n" +
		"delete element ip kube-proxy endpoints-2 { 10.96.0.8 . tcp . 80 . 1 }\n" +
		"add element ip kube-proxy hairpin { 10.244.3.99 . 10.244.3.99 }\n" +
		"add element ip kube-proxy endpoints-2 { 10.96.0.8 . tcp . 80 . 1 : 10.244.3.99 . 8080 }\n"
	if string(text) != want {
		t.Errorf("update:\n%s\nwant:\n%s", text, want)
	}
}

func TestNumFixedChains(t *testing.T) {
	if n := len(fixedChains(testOptions)); n != numFixedChains {
		t.Fatalf("fixedChains has %d chains, numFixedChains says %d", n, numFixedChains)
	}
}

// TestIncrementalFixedSetsMatchFreshRender renders random model sequences
// with one Renderer and checks each Ruleset against a fresh Renderer's:
// the fixed sets derived from the previous Ruleset are the ones built from
// scratch (shared hairpin pairs and keys claimed by two Services included).
func TestIncrementalFixedSetsMatchFreshRender(t *testing.T) {
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 11))
		rd := NewRenderer()
		for step := range 5 {
			m := randomModel(r)
			if r.IntN(3) == 0 && len(m.Services) > 1 { // two Services claim one external IP and port
				m.Services[1].ExternalIPs = []netip.Addr{ip("192.0.2.99")}
				m.Services[0].ExternalIPs = []netip.Addr{ip("192.0.2.99")}
			}
			got, want := FullText(rd.Render(m, testOptions)), FullText(Render(m, testOptions))
			if string(got) != string(want) {
				t.Fatalf("seed %d step %d: the incremental ruleset differs from a fresh render:\n%s\nwant:\n%s", seed, step, got, want)
			}
		}
	}
}
