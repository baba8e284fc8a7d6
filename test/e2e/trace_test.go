package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubette/kubette/internal/testenv/needs"
	"github.com/kubette/kubette/internal/testenv/testimage"
	"github.com/kubette/kubette/internal/trace"
)

// TestTraceOnARealNode traces flows on a cluster whose node is this machine: a 3-replica
// Deployment applied with kubectl (the create, its etcd write, the delivery to the
// deployment controller, the ReplicaSet, the pods, the bindings, the kubelet's container
// starts and status updates, in this order; each pod's runtime steps — CNI ADD with its IP,
// runc create, runc start — as the kubelet's calls to runtime/<node> before its status
// write), then a Service of it (the EndpointSlice
// controller's slice and the proxy's rule sync) and an Ingress to that Service (the
// ingress controller's Sync and RELOAD). Each diagram is checked by Mermaid's own parser
// when node and npm can provide it, and by trace.CheckMermaid always.
//
// KUBETTE_TRACE_FIXTURES=DIR writes the three flows (trace.Input, as `kubette trace`
// collects them) to DIR/node-{deployment,service,ingress}.json: the golden tests'
// fixtures in internal/trace/testdata.
func TestTraceOnARealNode(t *testing.T) {
	needs.Binary(t, "nginx", "nginx")
	nc := startNodeCluster(t, "--dns-port", strconv.Itoa(freePort(t)), "--ingress=true",
		"--ingress-http-port", strconv.Itoa(freePort(t)), "--ingress-https-port", strconv.Itoa(freePort(t)))
	registry := testimage.Registry(t)
	testimage.Push(t, registry, "kubette/server:v1", testimage.HTTPServer(t))
	image := registry + "/kubette/server:v1"
	node := nc.must(t, "get", "nodes", "-o", "jsonpath={.items[0].metadata.name}")
	kubelet := "kubelet/" + node

	manifest := writeFile(t, "web.yaml", `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: server
        image: `+image+`
        ports:
        - containerPort: 8080
`)
	nc.must(t, "apply", "-f", manifest)
	nc.must(t, "rollout", "status", "deployment/web", "--timeout=120s")

	// The whole timeline (--all: nothing folded) holds every step in order; Events and the
	// last status writes may trail the rollout, so poll.
	var text, missing string
	if !poll(90*time.Second, func() bool {
		text = nc.trace(t, "deployment/web", "--format", "text", "--all")
		missing = inOrder(text, []step{
			{what: "kubectl's create", re: `^kubectl → API server: POST /apis/apps/v1/namespaces/default/deployments → 201$`},
			{what: "its etcd write", re: `^API server → etcd: create /registry/deployments/default/web \(rev \d+\)$`},
			{what: "the delivery to the deployment controller", re: `^API server -\) deployment-controller: watch ADDED deployment default/web `},
			{what: "the ReplicaSet create", re: `^deployment-controller → API server: POST /apis/apps/v1/namespaces/default/replicasets → 201$`},
			{what: "three pod creates", re: `^replicaset-controller → API server: POST /api/v1/namespaces/default/pods → 201$`, count: 3},
			{what: "three bindings", re: `^scheduler → API server: POST /api/v1/namespaces/default/pods/web-[a-z0-9-]+/binding → 201$`, count: 3},
			{what: "three container starts", re: `^\[` + regexp.QuoteMeta(kubelet) + `\] Started: Started container server$`, count: 3},
			{what: "the status updates to Running", re: `^` + regexp.QuoteMeta(kubelet) + ` → API server: PUT /api/v1/namespaces/default/pods/web-[a-z0-9-]+/status → 200$`},
		})
		return missing == ""
	}) {
		t.Fatalf("trace deployment/web --format text --all lacks %s:\n%s", missing, text)
	}
	// Each pod's IP shows where the kubelet's status write set it (its sandbox and network).
	if missing := inOrder(text, []step{
		{what: "three bindings", re: `^scheduler → API server: POST /api/v1/namespaces/default/pods/web-[a-z0-9-]+/binding → 201$`, count: 3},
		{what: "three pod IPs", re: `^\[` + regexp.QuoteMeta(kubelet) + `\] podIP 10\.244\.[0-9.]+ set: sandbox and network ready$`, count: 3},
	}); missing != "" {
		t.Errorf("trace deployment/web --format text --all lacks %s:\n%s", missing, text)
	}
	// Each pod's runtime steps are the kubelet's calls to the runtime, at the steps' own
	// times: the sandbox's CNI ADD with the pod's IP, runc create, runc start (both
	// StartContainer's: CreateContainer only prepares the bundle, as containerd's), then the
	// kubelet's status write of the running pod. The kubelet's Started Event, sent in the
	// background, follows the runc start it reports.
	runtime := "runtime/" + node
	call := func(method, podRe, rest string) string {
		return `^` + regexp.QuoteMeta(kubelet+" → "+runtime+": "+method+" ") + podRe + ": " + rest + `$`
	}
	for _, pod := range strings.Fields(nc.must(t, "get", "pods", "-l", "app=web", "-o", "jsonpath={.items[*].metadata.name}")) {
		network := regexp.MustCompile(call("RunPodSandbox", pod, `CNI kubette: bridge\+host-local → eth0 (10\.244\.[0-9.]+)/24 gw 10\.244\.[0-9.]+ in [0-9.]+[µm]?s`))
		create := step{what: pod + "'s runc create", re: call("StartContainer", pod, `runc create server in [0-9.]+[µm]?s`)}
		start := step{what: pod + "'s runc start", re: call("StartContainer", pod, `runc start server: pid [1-9][0-9]* in [0-9.]+[µm]?s`)}
		for _, steps := range [][]step{
			{{what: pod + "'s CNI ADD", re: network.String()}, create, start,
				{what: pod + "'s status write after them", re: `^` + regexp.QuoteMeta(kubelet) + ` → API server: PUT /api/v1/namespaces/default/pods/` + pod + `/status → 200$`}},
			{start, {what: "the kubelet's Started after it", re: `^\[` + regexp.QuoteMeta(kubelet) + `\] Started: Started container server$`}},
		} {
			if missing := inOrder(text, steps); missing != "" {
				t.Errorf("trace deployment/web --format text --all lacks %s:\n%s", missing, text)
			}
		}
		// The CNI step's address is the one the kubelet's status write set.
		ip := "(none)"
		for _, l := range strings.Split(text, "\n") {
			if m := timelineLine.FindStringSubmatch(l); m != nil {
				if mm := network.FindStringSubmatch(m[1]); mm != nil {
					ip = mm[1]
				}
			}
		}
		if !strings.Contains(text, "] podIP "+ip+" set: sandbox and network ready") {
			t.Errorf("%s: the CNI step's address %s is no pod IP the kubelet set:\n%s", pod, ip, text)
		}
	}
	// The folded timeline says the same, repeated steps folded (×2 pods).
	text = nc.trace(t, "deployment/web", "--format", "text")
	if missing := inOrder(text, []step{
		{what: "kubectl's create", re: `^kubectl → API server: POST /apis/apps/v1/namespaces/default/deployments → 201$`},
		{what: "the pod creates", re: `^replicaset-controller → API server: POST /api/v1/namespaces/default/pods → 201$`, count: 3},
		{what: "the bindings", re: `^scheduler → API server: POST /api/v1/namespaces/default/pods/web-[a-z0-9-]+/binding → 201$`, count: 3},
		{what: "the container starts", re: `^\[` + regexp.QuoteMeta(kubelet) + `\] Started: Started container server$`, count: 3},
	}); missing != "" {
		t.Errorf("trace deployment/web --format text lacks %s:\n%s", missing, text)
	}
	if missing := inOrder(text, []step{
		{what: "the CNI ADDs", re: call("RunPodSandbox", `web-[a-z0-9-…]+`, `CNI kubette: bridge\+host-local → eth0 10\.244\.[0-9.…]+/24 gw 10\.244\.[0-9.]+ in [0-9.µms–]+`), count: 3},
		{what: "the runc starts", re: call("StartContainer", `web-[a-z0-9-…]+`, `runc start server: pid [0-9…]+ in [0-9.µms–]+`), count: 3},
	}); missing != "" {
		t.Errorf("trace deployment/web --format text lacks %s:\n%s", missing, text)
	}
	parse := mermaidParser(t)
	for _, args := range [][]string{{}, {"--all"}} {
		m := nc.trace(t, append([]string{"deployment/web"}, args...)...)
		if err := parse(m); err != nil {
			t.Errorf("trace deployment/web %v: %v\n%s", args, err, m)
		}
	}

	// The Service flow: the EndpointSlice controller's slice, then the proxy's rules.
	nc.must(t, "expose", "deployment", "web", "--port=80", "--target-port=8080")
	if !poll(90*time.Second, func() bool {
		text = nc.trace(t, "service/web", "--format", "text")
		missing = inOrder(text, []step{
			{what: "kubectl's create", re: `^kubectl → API server: POST /api/v1/namespaces/default/services → 201$`},
			{what: "the delivery to the EndpointSlice controller", re: `^API server -\) endpointslice-controller: watch ADDED service default/web `},
			{what: "the EndpointSlice create", re: `^endpointslice-controller → API server: POST /apis/discovery.k8s.io/v1/namespaces/default/endpointslices → 201$`},
			{what: "the delivery of the slice to the proxy", re: `^API server -\) kube-proxy: watch (ADDED|MODIFIED) endpointslice default/web-`},
			{what: "the proxy's rule sync with the three pods", re: `^\[kube-proxy\] RulesSynced: Synced iptables rules on node ` + regexp.QuoteMeta(node) + `: [0-9.]+:80/TCP → 3 ready endpoints$`},
		})
		return missing == ""
	}) {
		t.Fatalf("trace service/web --format text lacks %s:\n%s", missing, text)
	}
	if m := nc.trace(t, "service/web"); parse(m) != nil {
		t.Errorf("trace service/web: %v\n%s", parse(m), m)
	}

	// The Ingress flow: the ingress controller takes the Ingress and reloads nginx.
	applyJSON(t, nc.cluster, `{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"web"},"spec":{
	  "rules":[{"host":"web.example","http":{"paths":[{"path":"/","pathType":"Prefix","backend":{"service":{"name":"web","port":{"number":80}}}}]}}]}}`)
	if !poll(90*time.Second, func() bool {
		text = nc.trace(t, "ingress/web", "--format", "text")
		missing = inOrder(text, []step{
			{what: "the Ingress create", re: `^kubectl → API server: POST /apis/networking.k8s.io/v1/namespaces/default/ingresses → 201$`},
			{what: "the delivery to the ingress controller", re: `^API server -\) ingress-controller: watch ADDED ingress default/web `},
			{what: "the ingress controller's Sync", re: `^\[ingress-controller\] Sync: Scheduled for sync$`},
			{what: "the nginx reload", re: `^\[ingress-controller\] RELOAD: NGINX reload triggered due to a change in configuration$`},
		})
		if missing == "" {
			// The status write is not ordered with the Sync and RELOAD Events: Events are
			// posted apart by the controller's event broadcaster, and a trace times them by
			// their create request, which on a loaded machine may come after the status write.
			missing = inOrder(text, []step{
				{what: "the delivery to the ingress controller", re: `^API server -\) ingress-controller: watch ADDED ingress default/web `},
				{what: "the status update", re: `^ingress-controller → API server: PUT /apis/networking.k8s.io/v1/namespaces/default/ingresses/web/status → 200$`},
			})
		}
		return missing == ""
	}) {
		t.Fatalf("trace ingress/web --format text lacks %s:\n%s", missing, text)
	}
	if m := nc.trace(t, "ingress/web"); parse(m) != nil {
		t.Errorf("trace ingress/web: %v\n%s", parse(m), m)
	}

	if dir := os.Getenv("KUBETTE_TRACE_FIXTURES"); dir != "" {
		recordFixtures(t, nc.cluster, dir)
	}
}

// trace runs `kubette trace args...` against the cluster and returns its output.
func (c *cluster) trace(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, tools.kubette, append([]string{"trace", "--kubeconfig", c.kubeconfig}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubette trace %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

// step is one line a timeline must have: count of them (default 1), after the steps
// before it.
type step struct {
	what, re string
	count    int
}

// timelineLine strips the number and time off a line of `kubette trace --format text`.
var timelineLine = regexp.MustCompile(`^\s*(?:\d+\s+)?\+[0-9.]+s\s+(.*)$`)

// inOrder returns the first of steps the timeline lacks or has out of order ("" when it
// has them all): each step's first line comes after the previous step's first line, and
// a step with a count has that many lines (×N counts N).
func inOrder(text string, steps []step) string {
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if m := timelineLine.FindStringSubmatch(l); m != nil {
			lines = append(lines, m[1])
		}
	}
	folded := regexp.MustCompile(` ×(\d+)(?: [a-z]+)?$`)
	after := -1
	for _, s := range steps {
		re := regexp.MustCompile(s.re)
		first, n := -1, 0
		for i, l := range lines {
			k := 1
			if !re.MatchString(l) {
				m := folded.FindStringSubmatchIndex(l)
				if m == nil || !re.MatchString(l[:m[0]]) {
					continue
				}
				k, _ = strconv.Atoi(l[m[2]:m[3]])
			}
			if i > after && first < 0 {
				first = i
			}
			n += k
		}
		want := max(s.count, 1)
		switch {
		case first < 0:
			return s.what + " (after the previous step)"
		case n < want:
			return fmt.Sprintf("%s (%d of %d)", s.what, n, want)
		}
		after = first
	}
	return ""
}

// mermaidParser returns Mermaid's own parser when node can run it (installed with npm
// once per machine), else trace.CheckMermaid; both check with CheckMermaid first.
func mermaidParser(t *testing.T) func(string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	real, err := trace.MermaidParser(ctx, filepath.Join(os.TempDir(), "kubette-test-mermaid11"))
	if err != nil {
		t.Logf("Mermaid's parser is not available (%v): the grammar check alone", err)
	}
	return func(src string) error {
		if err := trace.CheckMermaid(src); err != nil || real == nil {
			return err
		}
		return real(src)
	}
}

// recordFixtures writes the flows of deployment/web, service/web and ingress/web as
// trace.Input JSON to dir/node-*.json.
func recordFixtures(t *testing.T, c *cluster, dir string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"Deployment", "Service", "Ingress"} {
		in, err := trace.Collect(context.Background(), client, kind, "default", "web")
		if err != nil {
			t.Fatalf("collect %s/web: %v", kind, err)
		}
		data, err := json.MarshalIndent(in, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "node-"+strings.ToLower(kind)+".json")
		if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
	}
}
