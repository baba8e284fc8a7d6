package scraper

import (
	"bytes"
	"fmt"
	"math"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/types"
)

// The kubelet's /metrics/resource series the scraper reads, as metrics-server does.
const (
	nodeCPUMetric       = "node_cpu_usage_seconds_total"
	nodeMemoryMetric    = "node_memory_working_set_bytes"
	containerCPUMetric  = "container_cpu_usage_seconds_total"
	containerMemMetric  = "container_memory_working_set_bytes"
	containerStartTime  = "container_start_time_seconds"
	labelContainer      = "container"
	labelPod            = "pod"
	labelNamespace      = "namespace"
	nanosecondsInSecond = 1e9
)

// Point is one sample of a node or container: its cumulative CPU time and working set
// at a time.
type Point struct {
	// StartTime is when the container started (zero for a node, or when the kubelet
	// does not say); its CPU counter was zero then.
	StartTime time.Time
	// Timestamp is when the CPU counter was read (the memory reading's time when the
	// kubelet gave no CPU time: such a point is never complete).
	Timestamp time.Time
	// CPU is the cumulative CPU time in nanocore-seconds (nanoseconds of one core).
	CPU uint64
	// Memory is the working set in bytes.
	Memory uint64
}

// Batch is what one scrape read: the points of the nodes and of every container of
// their pods (by pod, then container name).
type Batch struct {
	Nodes map[string]Point
	Pods  map[types.NamespacedName]map[string]Point
}

// sample collects what the text says of one node or container.
type sample struct {
	Point
	hasCPU, hasMemory bool
}

// Decode reads one kubelet's /metrics/resource (Prometheus text format) into the
// node's point (ok false when the node's CPU time or working set is missing) and its
// pods' container points. A sample without a timestamp is taken at defaultTime. A pod
// some container of which lacks its CPU time or working set is left out, as
// metrics-server leaves out incomplete pods.
func Decode(text []byte, defaultTime time.Time) (node Point, ok bool, pods map[types.NamespacedName]map[string]Point, err error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return Point{}, false, nil, fmt.Errorf("parse the resource metrics: %w", err)
	}
	var n sample
	for _, m := range families[nodeCPUMetric].GetMetric() {
		n.CPU, n.Timestamp, n.hasCPU = cpuNanos(value(m)), at(m, defaultTime), true
	}
	for _, m := range families[nodeMemoryMetric].GetMetric() {
		n.Memory, n.hasMemory = bytesOf(value(m)), true
		if !n.hasCPU {
			n.Timestamp = at(m, defaultTime)
		}
	}
	containers := map[types.NamespacedName]map[string]*sample{}
	get := func(m *dto.Metric) *sample {
		ref := types.NamespacedName{Namespace: label(m, labelNamespace), Name: label(m, labelPod)}
		name := label(m, labelContainer)
		if ref.Name == "" || ref.Namespace == "" || name == "" {
			return nil
		}
		pod := containers[ref]
		if pod == nil {
			pod = map[string]*sample{}
			containers[ref] = pod
		}
		c := pod[name]
		if c == nil {
			c = &sample{}
			pod[name] = c
		}
		return c
	}
	for _, m := range families[containerCPUMetric].GetMetric() {
		if c := get(m); c != nil {
			c.CPU, c.Timestamp, c.hasCPU = cpuNanos(value(m)), at(m, defaultTime), true
		}
	}
	for _, m := range families[containerMemMetric].GetMetric() {
		if c := get(m); c != nil {
			c.Memory, c.hasMemory = bytesOf(value(m)), true
			if !c.hasCPU {
				c.Timestamp = at(m, defaultTime)
			}
		}
	}
	for _, m := range families[containerStartTime].GetMetric() {
		if c := get(m); c != nil {
			if v := value(m); v > 0 && !math.IsInf(v, 0) {
				c.StartTime = time.Unix(0, int64(v*nanosecondsInSecond))
			}
		}
	}
	pods = make(map[types.NamespacedName]map[string]Point, len(containers))
pods:
	for ref, cs := range containers {
		points := make(map[string]Point, len(cs))
		for name, c := range cs {
			if !c.hasCPU || !c.hasMemory {
				continue pods
			}
			points[name] = c.Point
		}
		pods[ref] = points
	}
	return n.Point, n.hasCPU && n.hasMemory, pods, nil
}

// value is a sample's value, whichever its type.
func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	default:
		return m.GetUntyped().GetValue()
	}
}

// at is a sample's time: its timestamp, else def.
func at(m *dto.Metric, def time.Time) time.Time {
	if m.TimestampMs == nil {
		return def
	}
	return time.UnixMilli(m.GetTimestampMs())
}

// cpuNanos converts core-seconds to nanocore-seconds; a negative or invalid value is 0.
func cpuNanos(seconds float64) uint64 {
	return nonNegative(seconds * nanosecondsInSecond)
}

func bytesOf(v float64) uint64 { return nonNegative(v) }

func nonNegative(v float64) uint64 {
	if math.IsNaN(v) || v <= 0 {
		return 0
	}
	if v >= math.MaxUint64 {
		return math.MaxUint64
	}
	return uint64(v)
}

func label(m *dto.Metric, name string) string {
	for _, p := range m.GetLabel() {
		if p.GetName() == name {
			return p.GetValue()
		}
	}
	return ""
}
