package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/testenv/needs"
	"github.com/kubette/kubette/internal/testenv/testimage"
)

// TestServicesRouteToReadyPods drives the Service flow on a real node, once per proxy mode
// (iptables, the default, and nftables): ClusterIP and NodePort traffic from the host and from
// a pod (by IP and by DNS name) reaches every ready pod, scaling and readiness change who gets
// traffic, and deleting the Service removes its rules.
func TestServicesRouteToReadyPods(t *testing.T) {
	for _, mode := range []string{"iptables", "nftables"} {
		t.Run(mode, func(t *testing.T) { testServicesRouteToReadyPods(t, mode) })
	}
}

func testServicesRouteToReadyPods(t *testing.T, mode string) {
	if mode == "nftables" {
		needs.Binary(t, "nft", "nftables")
	}
	nc := startNodeCluster(t, "--dns-port", strconv.Itoa(freePort(t)), "--proxy-mode", mode)
	registry := testimage.Registry(t)
	testimage.Push(t, registry, "kubette/server:v1", testimage.HTTPServer(t))
	image := registry + "/kubette/server:v1"

	nc.must(t, "create", "deployment", "web", "--image="+image, "--replicas=3")
	nc.must(t, "rollout", "status", "deployment/web", "--timeout=90s")
	nc.must(t, "expose", "deployment", "web", "--port=80", "--target-port=8080", "--type=NodePort")
	clusterIP := nc.must(t, "get", "service", "web", "-o", "jsonpath={.spec.clusterIP}")
	nodePort := nc.must(t, "get", "service", "web", "-o", "jsonpath={.spec.ports[0].nodePort}")
	if !strings.HasPrefix(clusterIP, "10.") || nodePort == "" {
		t.Fatalf("service web got clusterIP %q nodePort %q", clusterIP, nodePort)
	}

	// From the host, repeated requests to the ClusterIP reach all three pods.
	if got := podsReached(t, "http://"+clusterIP+":80/", 3); len(got) < 3 {
		t.Errorf("the ClusterIP reached %d pods: %v", len(got), got)
	}
	// The NodePort answers on the host's address.
	hostIP := nc.must(t, "get", "nodes", "-o", "jsonpath={.items[0].status.addresses[?(@.type==\"InternalIP\")].address}")
	if body := httpGet(t, "http://"+hostIP+":"+nodePort+"/"); !strings.Contains(body, "hostname=web-") {
		t.Errorf("the NodePort answered %q", body)
	}
	// An unknown ClusterIP is refused here, never sent out.
	if body, err := tryGet("http://10.96.255.254:80/"); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("an unknown ClusterIP answered %q (%v), want connection refused", body, err)
	}

	// From a pod: by ClusterIP, and by DNS names (full and short, through the pod's search path).
	nc.must(t, "run", "client", "--image="+image, "--restart=Never", "--command", "--",
		"/server", "get", "http://web.default.svc.cluster.local/", "6")
	nc.waitPod(t, "client", "completion", 90*time.Second, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed })
	if out := nc.must(t, "logs", "client"); !strings.Contains(out, "hostname=web-") {
		t.Errorf("a pod did not reach web.default.svc.cluster.local:\n%s", out)
	}
	nc.must(t, "run", "short", "--image="+image, "--restart=Never", "--command", "--", "/server", "get", "http://web/", "3")
	nc.waitPod(t, "short", "completion", 90*time.Second, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed })
	if out := nc.must(t, "logs", "short"); !strings.Contains(out, "hostname=web-") {
		t.Errorf("a pod did not reach the short name web:\n%s", out)
	}

	// Scale to 5: the new pods get traffic.
	nc.must(t, "scale", "deployment", "web", "--replicas=5")
	nc.must(t, "rollout", "status", "deployment/web", "--timeout=90s")
	if got := podsReached(t, "http://"+clusterIP+":80/", 5); len(got) < 5 {
		t.Errorf("after scaling to 5 the ClusterIP reached %d pods: %v", len(got), got)
	}

	// A pod that fails its readiness probe stops getting traffic.
	applyJSON(t, nc.cluster, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"notready","labels":{"app":"web"}},"spec":{"containers":[{"name":"server","image":"`+image+`",
	  "readinessProbe":{"httpGet":{"path":"/healthz","port":9999},"periodSeconds":1}}]}}`)
	nc.waitPod(t, "notready", "Running", 60*time.Second, running)
	time.Sleep(3 * time.Second) // several probe periods: the probe has failed by now
	if p := nc.pod(t, "notready"); ready(p) {
		t.Fatalf("a pod whose readiness probe targets a closed port is Ready")
	}
	for i := 0; i < 30; i++ {
		if body, err := tryGet("http://" + clusterIP + ":80/"); err == nil && strings.Contains(body, "hostname=notready") {
			t.Fatalf("a pod failing its readiness probe got traffic")
		}
	}

	// Deleting the Service removes its rules: the ClusterIP is refused again.
	nc.must(t, "delete", "service", "web")
	if !poll(30*time.Second, func() bool {
		_, err := tryGet("http://" + clusterIP + ":80/")
		return err != nil && strings.Contains(err.Error(), "refused")
	}) {
		t.Errorf("the ClusterIP of a deleted Service still answers")
	}
}

// podsReached requests url until `want` different pods answered or 60 s passed, and
// returns the hostnames seen.
func podsReached(t *testing.T, url string, want int) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	poll(60*time.Second, func() bool {
		if body, err := tryGet(url); err == nil {
			if i := strings.Index(body, "hostname="); i >= 0 {
				seen[strings.Fields(body[i:])[0]] = true
			}
		}
		return len(seen) >= want
	})
	return seen
}

// tryGet fetches url once.
func tryGet(url string) (string, error) {
	client := httpClient()
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b := make([]byte, 4096)
	n, _ := resp.Body.Read(b)
	if resp.StatusCode != 200 {
		return string(b[:n]), fmt.Errorf("status %d", resp.StatusCode)
	}
	return string(b[:n]), nil
}

// TestLoadBalancerLocalPolicyAndServiceRange runs a node whose service range is not the
// default one: the cluster DNS Service takes its 10th address and pods resolve through it.
// A LoadBalancer Service with externalTrafficPolicy Local shows <pending> until a status
// names an ingress IP (here the node's own address, so that nothing can leave the machine);
// then the proxy serves that IP on the service port. Its healthCheckNodePort answers 200
// with the node's local endpoint count.
func TestLoadBalancerLocalPolicyAndServiceRange(t *testing.T) {
	nc := startNodeCluster(t, "--dns-port", strconv.Itoa(freePort(t)), "--service-cluster-ip-range", "10.150.0.0/16")
	registry := testimage.Registry(t)
	testimage.Push(t, registry, "kubette/server:v1", testimage.HTTPServer(t))
	image := registry + "/kubette/server:v1"

	if !poll(60*time.Second, func() bool {
		r := nc.kubectl(t, "get", "service", "kube-dns", "-n", "kube-system", "-o", "jsonpath={.spec.clusterIP}")
		return r.err == nil && r.stdout == "10.150.0.10"
	}) {
		t.Fatalf("kube-dns did not get 10.150.0.10: %s", nc.kubectl(t, "get", "service", "-A"))
	}

	nc.must(t, "create", "deployment", "web", "--image="+image, "--replicas=2")
	nc.must(t, "rollout", "status", "deployment/web", "--timeout=90s")
	nc.must(t, "expose", "deployment", "web", "--type=LoadBalancer", "--port=18080", "--target-port=8080")
	nc.must(t, "patch", "service", "web", "--type=merge", "-p", `{"spec":{"externalTrafficPolicy":"Local"}}`)
	clusterIP := nc.must(t, "get", "service", "web", "-o", "jsonpath={.spec.clusterIP}")
	if !strings.HasPrefix(clusterIP, "10.150.") {
		t.Errorf("clusterIP %q is not from 10.150.0.0/16", clusterIP)
	}
	hc := nc.must(t, "get", "service", "web", "-o", "jsonpath={.spec.healthCheckNodePort}")
	nodePort := nc.must(t, "get", "service", "web", "-o", "jsonpath={.spec.ports[0].nodePort}")
	if hc == "" || hc == "0" || nodePort == "" {
		t.Fatalf("service web: healthCheckNodePort %q nodePort %q", hc, nodePort)
	}
	rows := tableRows(nc.must(t, "get", "service", "web"))
	if len(rows) != 2 || rows[1][3] != "<pending>" {
		t.Errorf("kubectl get service web, want EXTERNAL-IP <pending>:\n%v", rows)
	}

	// ClusterIP and NodePort serve (from the host: short-circuited to every endpoint).
	if got := podsReached(t, "http://"+clusterIP+":18080/", 2); len(got) < 2 {
		t.Errorf("the ClusterIP reached %d pods: %v", len(got), got)
	}
	hostIP := nc.must(t, "get", "nodes", "-o", "jsonpath={.items[0].status.addresses[?(@.type==\"InternalIP\")].address}")
	if body := httpGet(t, "http://"+hostIP+":"+nodePort+"/"); !strings.Contains(body, "hostname=web-") {
		t.Errorf("the NodePort answered %q", body)
	}
	// The health check port: both endpoints are on this node.
	var health string
	if !poll(30*time.Second, func() bool {
		var err error
		health, err = tryGet("http://" + hostIP + ":" + hc + "/healthz")
		return err == nil && strings.Contains(health, `"localEndpoints": 2`)
	}) {
		t.Errorf("health check port %s answered %q, want 200 with 2 local endpoints", hc, health)
	}

	// Nothing serves the node's address on the service port until the status names it.
	lbURL := "http://" + hostIP + ":18080/"
	if body, err := tryGet(lbURL); err == nil {
		t.Fatalf("%s answered %q before any load-balancer status", lbURL, body)
	}
	nc.must(t, "patch", "service", "web", "--subresource=status", "--type=merge",
		"-p", `{"status":{"loadBalancer":{"ingress":[{"ip":"`+hostIP+`"}]}}}`)
	rows = tableRows(nc.must(t, "get", "service", "web"))
	if len(rows) != 2 || rows[1][3] != hostIP {
		t.Errorf("kubectl get service web, want EXTERNAL-IP %s:\n%v", hostIP, rows)
	}
	if got := podsReached(t, lbURL, 2); len(got) < 2 {
		t.Errorf("the load-balancer IP reached %d pods: %v", len(got), got)
	}

	// A pod resolves the Service through the cluster DNS at 10.150.0.10.
	nc.must(t, "run", "client", "--image="+image, "--restart=Never", "--command", "--",
		"/server", "get", "http://web.default.svc.cluster.local:18080/", "3")
	nc.waitPod(t, "client", "completion", 90*time.Second, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed })
	if out := nc.must(t, "logs", "client"); !strings.Contains(out, "hostname=web-") {
		t.Errorf("a pod did not reach web.default.svc.cluster.local through 10.150.0.10:\n%s", out)
	}
}
