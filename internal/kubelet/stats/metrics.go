package stats

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The resource metrics, named and labelled as upstream kubelet's /metrics/resource.
var (
	nodeCPUDesc = prometheus.NewDesc("node_cpu_usage_seconds_total",
		"Cumulative CPU time used by the node, in core-seconds", nil, nil)
	nodeMemDesc = prometheus.NewDesc("node_memory_working_set_bytes",
		"The node's current working set, in bytes", nil, nil)
	podCPUDesc = prometheus.NewDesc("pod_cpu_usage_seconds_total",
		"Cumulative CPU time used by the pod, in core-seconds", []string{"pod", "namespace"}, nil)
	podMemDesc = prometheus.NewDesc("pod_memory_working_set_bytes",
		"The pod's current working set, in bytes", []string{"pod", "namespace"}, nil)
	ctrCPUDesc = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"Cumulative CPU time used by the container, in core-seconds", []string{"container", "pod", "namespace"}, nil)
	ctrMemDesc = prometheus.NewDesc("container_memory_working_set_bytes",
		"The container's current working set, in bytes", []string{"container", "pod", "namespace"}, nil)
	ctrStartDesc = prometheus.NewDesc("container_start_time_seconds",
		"When the container started, in seconds since the Unix epoch", []string{"container", "pod", "namespace"}, nil)
	scrapeErrDesc = prometheus.NewDesc("resource_scrape_error",
		"1 if reading the containers' metrics failed, else 0", nil, nil)
)

// summaryCollector renders one summary (and whether building it failed) as resource metrics.
type summaryCollector struct {
	sum *statsapi.Summary
	err error
}

func (c summaryCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodeCPUDesc, nodeMemDesc, podCPUDesc, podMemDesc, ctrCPUDesc, ctrMemDesc, ctrStartDesc, scrapeErrDesc} {
		ch <- d
	}
}

func (c summaryCollector) Collect(ch chan<- prometheus.Metric) {
	scrapeErr := 0.0
	if c.err != nil {
		scrapeErr = 1
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrDesc, prometheus.GaugeValue, scrapeErr)
	if c.sum == nil {
		return
	}
	emit := func(d *prometheus.Desc, t prometheus.ValueType, at time.Time, v float64, labels ...string) {
		ch <- prometheus.NewMetricWithTimestamp(at, prometheus.MustNewConstMetric(d, t, v, labels...))
	}
	cpu := func(d *prometheus.Desc, s *statsapi.CPUStats, labels ...string) {
		if s != nil && s.UsageCoreNanoSeconds != nil {
			emit(d, prometheus.CounterValue, s.Time.Time, float64(*s.UsageCoreNanoSeconds)/float64(time.Second), labels...)
		}
	}
	mem := func(d *prometheus.Desc, s *statsapi.MemoryStats, labels ...string) {
		if s != nil && s.WorkingSetBytes != nil {
			emit(d, prometheus.GaugeValue, s.Time.Time, float64(*s.WorkingSetBytes), labels...)
		}
	}
	cpu(nodeCPUDesc, c.sum.Node.CPU)
	mem(nodeMemDesc, c.sum.Node.Memory)
	for _, p := range c.sum.Pods {
		cpu(podCPUDesc, p.CPU, p.PodRef.Name, p.PodRef.Namespace)
		mem(podMemDesc, p.Memory, p.PodRef.Name, p.PodRef.Namespace)
		for _, ctr := range p.Containers {
			labels := []string{ctr.Name, p.PodRef.Name, p.PodRef.Namespace}
			if !ctr.StartTime.IsZero() {
				st := ctr.StartTime.Time
				emit(ctrStartDesc, prometheus.GaugeValue, st, float64(st.UnixNano())/float64(time.Second), labels...)
			}
			cpu(ctrCPUDesc, ctr.CPU, labels...)
			mem(ctrMemDesc, ctr.Memory, labels...)
		}
	}
}

// MetricsHandler serves /metrics/resource: a fresh summary per scrape, in the Prometheus
// format the client asks for (text by default). A failed runtime read still answers, with
// the node's figures and resource_scrape_error 1.
func (p *Provider) MetricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sum, err := p.Summary(r.Context())
		reg := prometheus.NewPedanticRegistry()
		if rerr := reg.Register(summaryCollector{sum: sum, err: err}); rerr != nil {
			http.Error(w, rerr.Error(), http.StatusInternalServerError)
			return
		}
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
	})
}

// SummaryHandler serves /stats/summary as upstream's JSON. ?only_cpu_and_memory=true leaves
// out what metrics-server does not read (filesystems), as upstream.
func (p *Provider) SummaryHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sum, err := p.Summary(r.Context())
		if err != nil {
			http.Error(w, "failed to get the stats summary: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if r.URL.Query().Get("only_cpu_and_memory") == "true" {
			sum = cpuAndMemory(sum)
		}
		writeJSON(w, sum)
	})
}

func cpuAndMemory(s *statsapi.Summary) *statsapi.Summary {
	out := &statsapi.Summary{Node: statsapi.NodeStats{NodeName: s.Node.NodeName, StartTime: s.Node.StartTime,
		CPU: s.Node.CPU, Memory: s.Node.Memory}, Pods: make([]statsapi.PodStats, 0, len(s.Pods))}
	for _, p := range s.Pods {
		q := statsapi.PodStats{PodRef: p.PodRef, StartTime: p.StartTime, CPU: p.CPU, Memory: p.Memory}
		for _, c := range p.Containers {
			q.Containers = append(q.Containers, statsapi.ContainerStats{Name: c.Name, StartTime: c.StartTime, CPU: c.CPU, Memory: c.Memory})
		}
		out.Pods = append(out.Pods, q)
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, "failed to encode the stats summary: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
