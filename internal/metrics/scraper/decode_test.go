package scraper

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// kubeletText is /metrics/resource as the kubelet (internal/kubelet/stats) renders it:
// HELP and TYPE lines, a millisecond timestamp on every sample.
const kubeletText = `# HELP container_cpu_usage_seconds_total Cumulative CPU time used by the container, in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 12.5 1700000015000
container_cpu_usage_seconds_total{container="side",namespace="default",pod="web"} 0.25 1700000015000
container_cpu_usage_seconds_total{container="only-cpu",namespace="kube-system",pod="half"} 1 1700000015000
# HELP container_memory_working_set_bytes The container's current working set, in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="app",namespace="default",pod="web"} 1.048576e+07 1700000015000
container_memory_working_set_bytes{container="side",namespace="default",pod="web"} 4096 1700000015000
# HELP container_start_time_seconds When the container started, in seconds since the Unix epoch
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container="app",namespace="default",pod="web"} 1.6999e+09 1699900000000
# HELP node_cpu_usage_seconds_total Cumulative CPU time used by the node, in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 3000.5 1700000014000
# HELP node_memory_working_set_bytes The node's current working set, in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 2.147483648e+09 1700000014000
# HELP pod_cpu_usage_seconds_total Cumulative CPU time used by the pod, in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{namespace="default",pod="web"} 12.75 1700000015000
# HELP resource_scrape_error 1 if reading the containers' metrics failed, else 0
# TYPE resource_scrape_error gauge
resource_scrape_error 0
`

func TestDecode(t *testing.T) {
	node, ok, pods, err := Decode([]byte(kubeletText), time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	wantNode := Point{Timestamp: time.UnixMilli(1700000014000), CPU: 3000_500_000_000, Memory: 2147483648}
	if !ok || node != wantNode {
		t.Errorf("node = %+v %v, want %+v", node, ok, wantNode)
	}
	ts := time.UnixMilli(1700000015000)
	want := map[types.NamespacedName]map[string]Point{
		{Namespace: "default", Name: "web"}: {
			"app":  {StartTime: time.Unix(1699900000, 0), Timestamp: ts, CPU: 12_500_000_000, Memory: 10485760},
			"side": {Timestamp: ts, CPU: 250_000_000, Memory: 4096},
		},
		// kube-system/half is left out: its container has no working set.
	}
	if !reflect.DeepEqual(pods, want) {
		t.Errorf("pods = %+v\nwant %+v", pods, want)
	}
}

func TestDecodeIncompleteNodeAndDefaultTime(t *testing.T) {
	at := time.Unix(1700000000, 0)
	node, ok, pods, err := Decode([]byte("node_cpu_usage_seconds_total 5\n"+
		"container_cpu_usage_seconds_total{container=\"c\",namespace=\"n\",pod=\"p\"} 2\n"+
		"container_memory_working_set_bytes{container=\"c\",namespace=\"n\",pod=\"p\"} 100\n"), at)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Errorf("node without a working set is complete: %+v", node)
	}
	got := pods[types.NamespacedName{Namespace: "n", Name: "p"}]["c"]
	if got != (Point{Timestamp: at, CPU: 2_000_000_000, Memory: 100}) {
		t.Errorf("container = %+v, want taken at the scrape time", got)
	}
}

func TestDecodeBadText(t *testing.T) {
	_, _, _, err := Decode([]byte("node_cpu_usage_seconds_total{ 5\n"), time.Now())
	if err == nil || !strings.Contains(err.Error(), "parse the resource metrics") {
		t.Errorf("err = %v, want a parse error", err)
	}
}
