package e2e

import (
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubette/kubette/internal/testenv/testimage"
)

// TestExternalIPAndSourceRanges runs a node and serves a Deployment through spec.externalIPs
// and through a load-balancer IP with loadBalancerSourceRanges, both the node's own address
// (so that nothing can leave the machine): the external IP answers on the service port from
// the host; the load-balancer IP does not while the only allowed range is a documentation
// range without the node's address (the host's own requests are dropped by
// KUBE-PROXY-FIREWALL), and does once the range is the node's address.
func TestExternalIPAndSourceRanges(t *testing.T) {
	nc := startNodeCluster(t, "--dns-port", strconv.Itoa(freePort(t)))
	registry := testimage.Registry(t)
	testimage.Push(t, registry, "kubette/server:v1", testimage.HTTPServer(t))
	image := registry + "/kubette/server:v1"
	hostIP := nc.must(t, "get", "nodes", "-o", "jsonpath={.items[0].status.addresses[?(@.type==\"InternalIP\")].address}")
	if hostIP == "" {
		t.Fatal("the node has no InternalIP")
	}

	nc.must(t, "create", "deployment", "web", "--image="+image, "--replicas=2")
	nc.must(t, "rollout", "status", "deployment/web", "--timeout=90s")
	nc.must(t, "expose", "deployment", "web", "--name=web-ext", "--port=18091", "--target-port=8080", "--external-ip="+hostIP)
	if got := nc.must(t, "get", "service", "web-ext", "-o", "jsonpath={.spec.externalIPs[0]}"); got != hostIP {
		t.Fatalf("web-ext externalIPs[0] = %q, want %s", got, hostIP)
	}
	if got := podsReached(t, "http://"+hostIP+":18091/", 2); len(got) < 2 {
		t.Errorf("the external IP reached %d pods: %v", len(got), got)
	}

	nc.must(t, "expose", "deployment", "web", "--name=web-lb", "--type=LoadBalancer", "--port=18092", "--target-port=8080")
	// A documentation range (RFC 5737) that does not hold the node's address.
	other := "203.0.113.0/24"
	if netip.MustParsePrefix(other).Contains(netip.MustParseAddr(hostIP)) {
		other = "198.51.100.0/24"
	}
	nc.must(t, "patch", "service", "web-lb", "--type=merge", "-p", `{"spec":{"loadBalancerSourceRanges":["`+other+`"]}}`)
	nc.must(t, "patch", "service", "web-lb", "--subresource=status", "--type=merge",
		"-p", `{"status":{"loadBalancer":{"ingress":[{"ip":"`+hostIP+`"}]}}}`)
	lbURL := "http://" + hostIP + ":18092/"
	// The rules are in place once the Service's NodePort serves (same sync); then the
	// load-balancer IP must not answer the host, which no range allows.
	nodePort := nc.must(t, "get", "service", "web-lb", "-o", "jsonpath={.spec.ports[0].nodePort}")
	if body := httpGet(t, "http://"+hostIP+":"+nodePort+"/"); !strings.Contains(body, "hostname=web-") {
		t.Fatalf("the NodePort answered %q", body)
	}
	if !poll(30*time.Second, func() bool {
		out, _ := exec.Command("iptables", "-w", "5", "-t", "filter", "-S", "KUBE-PROXY-FIREWALL").CombinedOutput()
		return strings.Contains(string(out), "default/web-lb traffic not accepted by KUBE-FW-")
	}) {
		t.Fatalf("no KUBE-PROXY-FIREWALL rule for web-lb")
	}
	if body, err := tryGet(lbURL); err == nil {
		t.Errorf("%s answered the host %q although loadBalancerSourceRanges allows only %s", lbURL, body, other)
	}

	nc.must(t, "patch", "service", "web-lb", "--type=merge", "-p", `{"spec":{"loadBalancerSourceRanges":["`+hostIP+`/32"]}}`)
	if got := podsReached(t, lbURL, 2); len(got) < 2 {
		t.Errorf("with the node's address allowed, the load-balancer IP reached %d pods: %v", len(got), got)
	}
}
