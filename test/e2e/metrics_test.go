package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/kubette/kubette/internal/testenv/testimage"
)

// TestResourceMetrics reads the kubelet's /metrics/resource and /stats/summary through the
// API server's nodes/proxy, as metrics-server and `kubectl get --raw` do: a container that
// burns CPU shows CPU time and a working set, and its pod is in the summary.
func TestResourceMetrics(t *testing.T) {
	nc := startNodeCluster(t)
	registry := testimage.Registry(t)
	busybox := registry + "/kubette/busybox:v1"
	testimage.Push(t, registry, "kubette/busybox:v1", testimage.Busybox(t))
	nc.must(t, "run", "burn", "--image="+busybox, "--", "sh", "-c", "while :; do :; done")
	nc.waitPod(t, "burn", "Running", 90*time.Second, running)
	node := strings.TrimPrefix(strings.TrimSpace(nc.must(t, "get", "nodes", "-o", "name")), "node/")

	var cpu, ws float64
	var text string
	if !poll(30*time.Second, func() bool {
		text = nc.must(t, "get", "--raw", "/api/v1/nodes/"+node+"/proxy/metrics/resource")
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(strings.NewReader(text))
		if err != nil {
			t.Fatalf("expfmt: %v\n%s", err, text)
		}
		for _, m := range families["container_cpu_usage_seconds_total"].GetMetric() {
			if label(m.GetLabel(), "container") == "burn" && label(m.GetLabel(), "pod") == "burn" && label(m.GetLabel(), "namespace") == "default" {
				cpu = m.GetCounter().GetValue()
			}
		}
		for _, m := range families["container_memory_working_set_bytes"].GetMetric() {
			if label(m.GetLabel(), "container") == "burn" {
				ws = m.GetGauge().GetValue()
			}
		}
		return cpu > 0 && ws > 0 && families["node_cpu_usage_seconds_total"].GetMetric()[0].GetCounter().GetValue() > 0
	}) {
		t.Fatalf("no CPU time or working set for the burning container (cpu %v, ws %v):\n%s", cpu, ws, text)
	}
	if !strings.Contains(text, "\nresource_scrape_error 0\n") {
		t.Errorf("scrape error:\n%s", text)
	}

	var sum statsapi.Summary
	var pod *statsapi.PodStats
	// usageNanoCores needs two samples: the second summary has it.
	if !poll(30*time.Second, func() bool {
		out := nc.must(t, "get", "--raw", "/api/v1/nodes/"+node+"/proxy/stats/summary")
		if err := json.Unmarshal([]byte(out), &sum); err != nil {
			t.Fatalf("summary: %v\n%s", err, out)
		}
		pod = nil
		for i := range sum.Pods {
			if sum.Pods[i].PodRef.Name == "burn" {
				pod = &sum.Pods[i]
			}
		}
		return pod != nil && pod.CPU != nil && pod.CPU.UsageNanoCores != nil && *pod.CPU.UsageNanoCores > 0
	}) {
		t.Fatalf("no CPU rate for pod burn: %+v", sum)
	}
	if sum.Node.NodeName != node || sum.Node.CPU == nil || sum.Node.Memory == nil || sum.Node.Memory.WorkingSetBytes == nil ||
		len(pod.Containers) != 1 || pod.Containers[0].Name != "burn" || pod.Containers[0].Rootfs == nil {
		t.Errorf("summary: %+v", sum)
	}
	t.Logf("burn: %v core-seconds, %d nanocores, working set %v bytes", cpu, *pod.CPU.UsageNanoCores, ws)
}

func label(pairs []*dto.LabelPair, name string) string {
	for _, p := range pairs {
		if p.GetName() == name {
			return p.GetValue()
		}
	}
	return ""
}
