package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/kubette/kubette/internal/testenv/testimage"
)

// topResolution is the scrape interval the kubectl top test asks for: short, so that
// the test is; usage needs two scrapes.
const topResolution = 5 * time.Second

// topRows runs kubectl top with args and returns its rows (without the header) split
// into columns; nil while kubectl fails (no metrics yet).
func topRows(t *testing.T, nc *nodeCluster, args ...string) [][]string {
	t.Helper()
	r := nc.kubectl(t, append([]string{"top"}, args...)...)
	if r.err != nil {
		return nil
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) < 2 {
		return nil
	}
	var rows [][]string
	for _, l := range lines[1:] {
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

// milli parses a kubectl top CPU figure ("123m").
func milli(t *testing.T, s string) int64 {
	t.Helper()
	q, err := resource.ParseQuantity(s)
	if err != nil {
		t.Fatalf("CPU %q: %v", s, err)
	}
	return q.MilliValue()
}

// TestKubectlTop: the real kubectl top reads kubette's metrics.k8s.io: the node and a
// CPU-burning container show non-zero CPU and memory within a few scrape intervals
// (usage needs two), with -A, -l, --containers and --sort-by.
func TestKubectlTop(t *testing.T) {
	nc := startNodeCluster(t, "--metric-resolution", topResolution.String())
	registry := testimage.Registry(t)
	busybox := registry + "/kubette/busybox:v1"
	testimage.Push(t, registry, "kubette/busybox:v1", testimage.Busybox(t))
	nc.must(t, "create", "namespace", "other")
	nc.must(t, "run", "burn", "--image="+busybox, "--labels=app=burn", "--", "sh", "-c", "while :; do :; done")
	nc.must(t, "run", "idle", "-n", "other", "--image="+busybox, "--labels=app=idle", "--", "sleep", "3600")
	nc.waitPod(t, "burn", "Running", 90*time.Second, running)
	running := time.Now()
	if !poll(90*time.Second, func() bool {
		return nc.kubectl(t, "get", "pod", "-n", "other", "idle", "-o", "jsonpath={.status.phase}").stdout == "Running"
	}) {
		t.Fatal("pod other/idle is not Running")
	}

	var nodes, pods [][]string
	if !poll(90*time.Second, func() bool {
		nodes = topRows(t, nc, "node")
		return len(nodes) == 1 && len(nodes[0]) == 5 && milli(t, nodes[0][1]) > 0
	}) {
		t.Fatalf("kubectl top node: %q\n%s", nodes, nc.kubectl(t, "top", "node"))
	}
	// NAME CPU(cores) CPU(%) MEMORY(bytes) MEMORY(%)
	if mem, err := resource.ParseQuantity(nodes[0][3]); err != nil || mem.Value() <= 0 || !strings.HasSuffix(nodes[0][2], "%") {
		t.Errorf("kubectl top node row %q", nodes[0])
	}
	if !poll(90*time.Second, func() bool {
		pods = topRows(t, nc, "pod")
		return len(pods) == 1 && pods[0][0] == "burn" && milli(t, pods[0][1]) > 0
	}) {
		t.Fatalf("kubectl top pod: %q\n%s", pods, nc.kubectl(t, "top", "pod"))
	}
	t.Logf("kubectl top pod showed burn at %s CPU %.1f scrape intervals after it ran", pods[0][1], float64(time.Since(running))/float64(topResolution))
	// A busy shell's working set is well under 1Mi, which kubectl prints as 0Mi: the API
	// has the bytes.
	if _, err := resource.ParseQuantity(pods[0][2]); err != nil {
		t.Errorf("burn's memory %q: %v", pods[0][2], err)
	}
	var pm metricsv1beta1.PodMetrics
	raw := nc.must(t, "get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/burn")
	if err := json.Unmarshal([]byte(raw), &pm); err != nil {
		t.Fatalf("PodMetrics burn: %v\n%s", err, raw)
	}
	if len(pm.Containers) != 1 || pm.Containers[0].Usage.Memory().Value() <= 0 || pm.Containers[0].Usage.Cpu().MilliValue() <= 0 {
		t.Errorf("PodMetrics burn:\n%s", raw)
	}

	var all [][]string
	if !poll(60*time.Second, func() bool {
		all = topRows(t, nc, "pod", "-A", "--sort-by=cpu")
		return len(all) == 2
	}) {
		t.Fatalf("kubectl top pod -A: %q", all)
	}
	// NAMESPACE NAME CPU(cores) MEMORY(bytes), the busiest first.
	if all[0][0] != "default" || all[0][1] != "burn" || all[1][0] != "other" || all[1][1] != "idle" ||
		milli(t, all[0][2]) < milli(t, all[1][2]) {
		t.Errorf("kubectl top pod -A --sort-by=cpu: %q", all)
	}
	byMem := topRows(t, nc, "pod", "-A", "--sort-by=memory")
	if len(byMem) != 2 {
		t.Fatalf("kubectl top pod -A --sort-by=memory: %q", byMem)
	}
	m0, err0 := resource.ParseQuantity(byMem[0][3])
	m1, err1 := resource.ParseQuantity(byMem[1][3])
	if err0 != nil || err1 != nil || m0.Cmp(m1) < 0 {
		t.Errorf("kubectl top pod -A --sort-by=memory not by memory: %q", byMem)
	}
	if l := topRows(t, nc, "pod", "-A", "-l", "app=idle"); len(l) != 1 || l[0][1] != "idle" {
		t.Errorf("kubectl top pod -A -l app=idle: %q", l)
	}
	// POD NAME CPU(cores) MEMORY(bytes)
	if c := topRows(t, nc, "pod", "burn", "--containers"); len(c) != 1 || c[0][0] != "burn" || c[0][1] != "burn" || milli(t, c[0][2]) <= 0 {
		t.Errorf("kubectl top pod burn --containers: %q", c)
	}
	// kubectl get of the metrics resources prints metrics-server's table.
	out := nc.must(t, "get", "podmetrics", "burn")
	if !strings.HasPrefix(strings.TrimSpace(out), "NAME") || !strings.Contains(out, "CPU") || !strings.Contains(out, "WINDOW") {
		t.Errorf("kubectl get podmetrics burn:\n%s", out)
	}
}
