package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubette/kubette/internal/proxy/iptables"
)

// localLB is a LoadBalancer Service with externalTrafficPolicy Local, the
// health check port hc and the given load-balancer ingress.
func localLB(name, clusterIP string, hc int32, ingress ...corev1.LoadBalancerIngress) *corev1.Service {
	s := service(name, clusterIP, 80)
	s.Spec.Type = corev1.ServiceTypeLoadBalancer
	s.Spec.Ports[0].NodePort = 30080
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	s.Spec.HealthCheckNodePort = hc
	s.Status.LoadBalancer.Ingress = ingress
	return s
}

func TestModelTrafficPoliciesAndLoadBalancer(t *testing.T) {
	proxyMode := corev1.LoadBalancerIPModeProxy
	lb := localLB("lb", "10.96.0.30", 31999,
		corev1.LoadBalancerIngress{IP: "192.0.2.10"},
		corev1.LoadBalancerIngress{IP: "192.0.2.11", IPMode: &proxyMode}, // the load balancer proxies: no rules
		corev1.LoadBalancerIngress{Hostname: "lb.example"})
	local := corev1.ServiceInternalTrafficPolicyLocal
	internal := service("internal", "10.96.0.31", 80)
	internal.Spec.InternalTrafficPolicy = &local
	internal.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal // not externally accessible: ignored
	cluster := localLB("cluster", "10.96.0.32", 0)
	cluster.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	m := buildModel([]*corev1.Service{lb, internal, cluster}, nil)
	got := map[string]iptables.Service{}
	for _, s := range m.Services {
		got[s.Name] = s
	}
	if s := got["lb"]; !s.ExternalLocal || s.InternalLocal || s.HealthCheckNodePort != 31999 ||
		!slices.Equal(s.LoadBalancerIPs, []netip.Addr{netip.MustParseAddr("192.0.2.10")}) {
		t.Errorf("lb model = %+v", s)
	}
	if s := got["internal"]; !s.InternalLocal || s.ExternalLocal || s.HealthCheckNodePort != 0 || s.LoadBalancerIPs != nil {
		t.Errorf("internal model = %+v", s)
	}
	if s := got["cluster"]; s.ExternalLocal || s.HealthCheckNodePort != 0 {
		t.Errorf("cluster model = %+v", s)
	}
}

func TestModelExternalIPsAndSourceRanges(t *testing.T) {
	lb := localLB("lb", "10.96.0.30", 31999, corev1.LoadBalancerIngress{IP: "192.0.2.10"})
	lb.Spec.LoadBalancerSourceRanges = []string{" 203.0.113.7/24", "2001:db8::/32", "bogus", "192.168.1.0/24"}
	lb.Spec.ExternalIPs = []string{"192.0.2.20", "2001:db8::1", "nope"}
	clusterIP := service("ext", "10.96.0.31", 80)
	clusterIP.Spec.ExternalIPs = []string{"192.0.2.21"}
	clusterIP.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"} // not a load balancer: no ranges
	clusterIP.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	m := buildModel([]*corev1.Service{lb, clusterIP}, nil)
	got := map[string]iptables.Service{}
	for _, s := range m.Services {
		got[s.Name] = s
	}
	if s := got["lb"]; !slices.Equal(s.LoadBalancerSourceRanges, []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("192.168.1.0/24")}) ||
		!slices.Equal(s.ExternalIPs, []netip.Addr{netip.MustParseAddr("192.0.2.20")}) {
		t.Errorf("lb model = %+v", s)
	}
	// externalIPs make a ClusterIP Service externally accessible: its
	// externalTrafficPolicy counts.
	if s := got["ext"]; s.LoadBalancerSourceRanges != nil || !s.ExternalLocal ||
		!slices.Equal(s.ExternalIPs, []netip.Addr{netip.MustParseAddr("192.0.2.21")}) {
		t.Errorf("ext model = %+v", s)
	}
}

func freeTCPPort(t *testing.T) int32 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return int32(ln.Addr().(*net.TCPAddr).Port)
}

type healthReply struct {
	code int
	body healthBody
	err  error
}

func getHealth(port int32) healthReply {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
	if err != nil {
		return healthReply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return healthReply{err: err}
	}
	var r healthReply
	r.code = resp.StatusCode
	if err := json.Unmarshal(b, &r.body); err != nil {
		r.err = fmt.Errorf("body %q: %w", b, err)
	}
	return r
}

// TestHealthCheckNodePort drives upstream's service health check: 200 with the
// local endpoint count while this node (n1) has ready endpoints, 503 when only
// other nodes have some, closed when the Service goes; the filter table
// accepts the port and the Service's rules keep traffic local.
func TestHealthCheckNodePort(t *testing.T) {
	ctx := context.Background()
	hc := freeTCPPort(t)
	slice := endpointSlice("lb", "lb-1", 8080, true, "10.244.1.5", "10.244.1.6", "10.244.2.7")
	n1, n2 := "n1", "n2"
	slice.Endpoints[0].NodeName, slice.Endpoints[1].NodeName, slice.Endpoints[2].NodeName = &n1, &n1, &n2
	client := fake.NewClientset(localLB("lb", "10.96.0.30", hc, corev1.LoadBalancerIngress{IP: "192.0.2.10"}), slice)
	host := newFakeHost()
	startProxy(t, client, host, 0)

	var r healthReply
	eventually(t, "a healthy answer with 2 local endpoints", func() bool {
		r = getHealth(hc)
		return r.err == nil && r.code == http.StatusOK && r.body.LocalEndpoints == 2
	})
	if r.body.Service.Namespace != "default" || r.body.Service.Name != "lb" || !r.body.ServiceProxyHealthy {
		t.Errorf("health body = %+v", r.body)
	}
	svl := iptables.SVLChain("default/lb:http", "TCP")
	eventually(t, "the local-policy rules", func() bool {
		return len(host.rules("nat", svl)) == 2 && slices.ContainsFunc(host.rules("filter", "KUBE-NODEPORTS"), func(rule string) bool {
			return strings.Contains(rule, fmt.Sprintf("--dport %d -j ACCEPT", hc))
		})
	})

	// Only n2 keeps an endpoint: 503, and external traffic is dropped here.
	slice.Endpoints = slice.Endpoints[2:]
	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "an unhealthy answer", func() bool {
		r = getHealth(hc)
		return r.err == nil && r.code == http.StatusServiceUnavailable && r.body.LocalEndpoints == 0
	})
	if !slices.ContainsFunc(host.rules("filter", "KUBE-EXTERNAL-SERVICES"), func(rule string) bool {
		return strings.Contains(rule, "has no local endpoints") && strings.HasSuffix(rule, "-j DROP")
	}) {
		t.Errorf("no DROP for external traffic without local endpoints: %q", host.rules("filter", "KUBE-EXTERNAL-SERVICES"))
	}

	// The Service goes: so does its health check server.
	if err := client.CoreV1().Services("default").Delete(ctx, "lb", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the health check port closed", func() bool { return getHealth(hc).err != nil })
}
