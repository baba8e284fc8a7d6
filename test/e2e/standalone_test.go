package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/testenv/needs"
	"github.com/kubette/kubette/internal/testenv/testimage"
)

// TestStandaloneNode runs the node as the separate processes the architecture diagram draws:
// a control plane without a node (`kubette up --node=false`), then `kubette runtime` and
// `kubette kubelet` as processes of their own, the kubelet reaching the runtime over its CRI
// socket. The kubelet registers its Node, which becomes Ready; a pod scheduled to it pulls its
// image, runs, and kubectl's logs and exec reach it through the API server and the kubelet's
// HTTPS port (its certificate issued by the cluster's CA in the data dir).
//
// `up --node=false` writes no node credentials, so the kubelet uses the admin kubeconfig.
func TestStandaloneNode(t *testing.T) {
	requireTools(t)
	needs.Root(t)
	needs.Binary(t, "runc", "runc")
	needs.CNIPlugins(t)
	registry := testimage.Registry(t)
	testimage.Push(t, registry, "kubette/busybox:v1", testimage.Busybox(t))
	image := registry + "/kubette/busybox:v1"

	bridge := fmt.Sprintf("kbs%d", os.Getpid()%100000)
	rtDir := t.TempDir()
	// Registered first, so it runs last: after both processes stopped.
	t.Cleanup(func() {
		if out, err := exec.Command(tools.kubette, "down", "--data-dir", rtDir, "--bridge", bridge).CombinedOutput(); err != nil {
			t.Errorf("kubette down: %v\n%s", err, out)
		}
	})
	c := startCluster(t)

	rt := startProc(t, "kubette runtime", true, tools.kubette, "runtime", "--data-dir", rtDir, "--bridge", bridge)
	rt.waitForLine(t, regexp.MustCompile(`CRI runtime serving`), startTimeout)

	const node = "standalone-node"
	kubelet := startProc(t, "kubette kubelet", true, tools.kubette, "kubelet", "--kubeconfig", c.kubeconfig,
		"--data-dir", c.dataDir, "--node-name", node, "--pod-cidr", "10.89.91.0/24",
		"--container-runtime-endpoint", "unix://"+rtDir+"/cri.sock", "--port", strconv.Itoa(freePort(t)))
	if !poll(60*time.Second, func() bool {
		r := c.kubectl(t, "get", "node", node, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return r.err == nil && r.stdout == "True"
	}) {
		t.Fatalf("node %s did not become Ready:\n%s\nkubelet:\n%s", node, c.kubectl(t, "get", "nodes", "-o", "yaml"), kubelet.out.String())
	}

	c.must(t, "run", "hello", "--image="+image, "--restart=Never", "--", "sh", "-c", "echo hello-from-standalone; exec sleep 3600")
	if !poll(2*time.Minute, func() bool {
		return c.jsonpath(t, "{.status.phase}", "pod", "hello") == string(v1.PodRunning)
	}) {
		t.Fatalf("pod not Running:\n%s", c.kubectl(t, "describe", "pod", "hello"))
	}
	if got := c.jsonpath(t, "{.spec.nodeName}", "pod", "hello"); got != node {
		t.Errorf("pod on node %q, want %q", got, node)
	}
	if ip := c.jsonpath(t, "{.status.podIP}", "pod", "hello"); !strings.HasPrefix(ip, "10.89.91.") {
		t.Errorf("pod IP %q, want one of the node's pod CIDR 10.89.91.0/24", ip)
	}
	if !poll(30*time.Second, func() bool {
		r := c.kubectl(t, "logs", "hello")
		return r.err == nil && strings.Contains(r.stdout, "hello-from-standalone")
	}) {
		t.Errorf("kubectl logs: %s", c.kubectl(t, "logs", "hello"))
	}
	if out := strings.TrimSpace(c.must(t, "exec", "hello", "--", "cat", "/etc/hostname")); out != "hello" {
		t.Errorf("kubectl exec cat /etc/hostname = %q, want the pod's name", out)
	}
	c.must(t, "delete", "pod", "hello", "--wait=true")
	kubelet.stop(t, true)
	rt.stop(t, true)
}
