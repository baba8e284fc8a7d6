package stats

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// fakeRuntime answers from fixed lists; cpu is each container's cumulative CPU, changed by tests.
type fakeRuntime struct {
	sandboxes  []*runtimeapi.PodSandbox
	containers []*runtimeapi.Container
	at         int64
	cpu        map[string]uint64
	mem        map[string]uint64
	err        error
}

func (f *fakeRuntime) ListPodSandbox(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	return f.sandboxes, f.err
}

func (f *fakeRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return f.containers, f.err
}

func (f *fakeRuntime) ListContainerStats(context.Context, *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	var out []*runtimeapi.ContainerStats
	for _, c := range f.containers {
		out = append(out, &runtimeapi.ContainerStats{
			Attributes: &runtimeapi.ContainerAttributes{Id: c.Id, Metadata: c.Metadata},
			Cpu:        &runtimeapi.CpuUsage{Timestamp: f.at, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: f.cpu[c.Id]}},
			Memory: &runtimeapi.MemoryUsage{Timestamp: f.at, WorkingSetBytes: &runtimeapi.UInt64Value{Value: f.mem[c.Id]},
				UsageBytes: &runtimeapi.UInt64Value{Value: f.mem[c.Id] + 100}},
			WritableLayer: &runtimeapi.FilesystemUsage{Timestamp: f.at, UsedBytes: &runtimeapi.UInt64Value{Value: 4096},
				InodesUsed: &runtimeapi.UInt64Value{Value: 3}},
		})
	}
	return out, f.err
}

func (f *fakeRuntime) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
		Timestamp: f.at, UsedBytes: &runtimeapi.UInt64Value{Value: 1 << 20}, InodesUsed: &runtimeapi.UInt64Value{Value: 7}}}}, nil
}

var t0 = time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC)

func newFake() *fakeRuntime {
	return &fakeRuntime{
		sandboxes: []*runtimeapi.PodSandbox{{Id: "sb1", CreatedAt: t0.Add(-time.Minute).UnixNano(),
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1"}}},
		containers: []*runtimeapi.Container{
			{Id: "c1", PodSandboxId: "sb1", CreatedAt: t0.Add(-30 * time.Second).UnixNano(), Metadata: &runtimeapi.ContainerMetadata{Name: "app"}},
			{Id: "c2", PodSandboxId: "sb1", CreatedAt: t0.Add(-20 * time.Second).UnixNano(), Metadata: &runtimeapi.ContainerMetadata{Name: "side"}},
		},
		at:  t0.UnixNano(),
		cpu: map[string]uint64{"c1": 2_500_000_000, "c2": 500_000_000},
		mem: map[string]uint64{"c1": 1000, "c2": 24},
	}
}

func fixedNode(cpu *uint64, at *time.Time) NodeReader {
	return func() (NodeSample, error) {
		ws := uint64(5 << 20)
		return NodeSample{Time: *at, CPUUsageCoreNanoSeconds: cpu, WorkingSetBytes: &ws, UsageBytes: uintPtr(6 << 20), AvailableBytes: uintPtr(10 << 20)}, nil
	}
}

func TestSummaryAndRates(t *testing.T) {
	rt := newFake()
	nodeCPU, nodeAt := uint64(100_000_000_000), t0
	p, err := New(Config{NodeName: "n1", Runtime: rt, Node: fixedNode(&nodeCPU, &nodeAt)})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := p.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Node.CPU.UsageNanoCores != nil || sum.Pods[0].CPU.UsageNanoCores != nil || sum.Pods[0].Containers[0].CPU.UsageNanoCores != nil {
		t.Fatalf("first sample has a rate: %+v", sum)
	}
	if got := *sum.Pods[0].CPU.UsageCoreNanoSeconds; got != 3_000_000_000 {
		t.Errorf("pod cpu = %d, want the sum 3e9", got)
	}
	if got := *sum.Pods[0].Memory.WorkingSetBytes; got != 1024 {
		t.Errorf("pod working set = %d, want 1024", got)
	}
	// Two seconds later c1 used one more CPU-second (0.5 cores), c2 none, the node four (2 cores).
	rt.at = t0.Add(2 * time.Second).UnixNano()
	rt.cpu["c1"] += 1_000_000_000
	nodeAt, nodeCPU = t0.Add(2*time.Second), nodeCPU+4_000_000_000
	sum, err = p.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, got *uint64, want uint64) {
		t.Helper()
		if got == nil || *got != want {
			t.Errorf("%s usageNanoCores = %v, want %d", what, got, want)
		}
	}
	check("node", sum.Node.CPU.UsageNanoCores, 2_000_000_000)
	check("pod", sum.Pods[0].CPU.UsageNanoCores, 500_000_000)
	check("app", sum.Pods[0].Containers[0].CPU.UsageNanoCores, 500_000_000)
	check("side", sum.Pods[0].Containers[1].CPU.UsageNanoCores, 0)
	// The same timestamp again gives no rate rather than a division by zero.
	sum, _ = p.Summary(context.Background())
	if sum.Pods[0].Containers[0].CPU.UsageNanoCores != nil {
		t.Errorf("a repeated sample has a rate")
	}
	// A container whose counter went back (restarted) starts over.
	rt.at += int64(time.Second)
	rt.cpu["c1"] = 10
	sum, _ = p.Summary(context.Background())
	if sum.Pods[0].Containers[0].CPU.UsageNanoCores != nil {
		t.Errorf("a counter that went back has a rate")
	}
}

func TestSummaryJSON(t *testing.T) {
	rt := newFake()
	cpu, at := uint64(7), t0
	p, _ := New(Config{NodeName: "n1", Runtime: rt, Node: fixedNode(&cpu, &at)})
	rec := httptest.NewRecorder()
	p.SummaryHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/stats/summary", nil))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("answer %d %q: %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	var raw map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	node := raw["node"].(map[string]any)
	if node["nodeName"] != "n1" || node["memory"].(map[string]any)["workingSetBytes"] != float64(5<<20) ||
		node["runtime"].(map[string]any)["imageFs"].(map[string]any)["usedBytes"] != float64(1<<20) {
		t.Errorf("node = %v", node)
	}
	pod := raw["pods"].([]any)[0].(map[string]any)
	ref := pod["podRef"].(map[string]any)
	if ref["name"] != "web" || ref["namespace"] != "default" || ref["uid"] != "uid-1" {
		t.Errorf("podRef = %v", ref)
	}
	ctr := pod["containers"].([]any)[0].(map[string]any)
	if ctr["name"] != "app" || ctr["cpu"].(map[string]any)["usageCoreNanoSeconds"] != float64(2_500_000_000) ||
		ctr["rootfs"].(map[string]any)["usedBytes"] != float64(4096) || ctr["startTime"] != "2026-12-03T14:59:30Z" {
		t.Errorf("container = %v", ctr)
	}
	var sum statsapi.Summary
	if err := json.Unmarshal(rec.Body.Bytes(), &sum); err != nil {
		t.Fatalf("not a stats/v1alpha1 Summary: %v", err)
	}
	rec = httptest.NewRecorder()
	p.SummaryHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/stats/summary?only_cpu_and_memory=true", nil))
	if strings.Contains(rec.Body.String(), "rootfs") || strings.Contains(rec.Body.String(), "imageFs") {
		t.Errorf("only_cpu_and_memory has filesystems: %s", rec.Body)
	}
}

const wantText = `# HELP container_cpu_usage_seconds_total Cumulative CPU time used by the container, in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 2.5 1796310000000
container_cpu_usage_seconds_total{container="side",namespace="default",pod="web"} 0.5 1796310000000
# HELP container_memory_working_set_bytes The container's current working set, in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="app",namespace="default",pod="web"} 1000 1796310000000
container_memory_working_set_bytes{container="side",namespace="default",pod="web"} 24 1796310000000
# HELP container_start_time_seconds When the container started, in seconds since the Unix epoch
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container="app",namespace="default",pod="web"} 1.79630997e+09 1796309970000
container_start_time_seconds{container="side",namespace="default",pod="web"} 1.79630998e+09 1796309980000
# HELP node_cpu_usage_seconds_total Cumulative CPU time used by the node, in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 123.456 1796310000000
# HELP node_memory_working_set_bytes The node's current working set, in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 5.24288e+06 1796310000000
# HELP pod_cpu_usage_seconds_total Cumulative CPU time used by the pod, in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{namespace="default",pod="web"} 3 1796310000000
# HELP pod_memory_working_set_bytes The pod's current working set, in bytes
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{namespace="default",pod="web"} 1024 1796310000000
# HELP resource_scrape_error 1 if reading the containers' metrics failed, else 0
# TYPE resource_scrape_error gauge
resource_scrape_error 0
`

func TestMetricsText(t *testing.T) {
	rt := newFake()
	cpu, at := uint64(123_456_000_000), t0
	p, _ := New(Config{NodeName: "n1", Runtime: rt, Node: fixedNode(&cpu, &at)})
	rec := httptest.NewRecorder()
	p.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/resource", nil))
	if rec.Code != 200 {
		t.Fatalf("answer %d: %s", rec.Code, rec.Body)
	}
	if got := rec.Body.String(); got != wantText {
		t.Errorf("text:\n%s\nwant:\n%s", got, wantText)
	}
	// metrics-server parses the endpoint with expfmt's text parser.
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatalf("expfmt: %v", err)
	}
	ctr := families["container_cpu_usage_seconds_total"].GetMetric()[0]
	if ctr.GetCounter().GetValue() != 2.5 || ctr.GetTimestampMs() != t0.UnixMilli() {
		t.Errorf("container cpu = %v", ctr)
	}
	if len(families) != 8 {
		t.Errorf("%d families, want 8", len(families))
	}
}

func TestMetricsScrapeError(t *testing.T) {
	rt := newFake()
	rt.err = errors.New("runtime down")
	cpu, at := uint64(1_000_000_000), t0
	p, _ := New(Config{NodeName: "n1", Runtime: rt, Node: fixedNode(&cpu, &at)})
	rec := httptest.NewRecorder()
	p.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/resource", nil))
	body := rec.Body.String()
	if rec.Code != 200 || !strings.Contains(body, "\nresource_scrape_error 1\n") || !strings.Contains(body, "\nnode_cpu_usage_seconds_total 1 ") ||
		strings.Contains(body, "container_cpu") {
		t.Errorf("answer %d:\n%s", rec.Code, body)
	}
}
