package scraper

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// nodeText is /metrics/resource of a node running pods pods of two containers each
// (110 is the kubelet's default maxPods).
func nodeText(pods int, ts time.Time) []byte {
	var b strings.Builder
	ms := ts.UnixMilli()
	fmt.Fprintf(&b, "# TYPE node_cpu_usage_seconds_total counter\nnode_cpu_usage_seconds_total 12345.6 %d\n", ms)
	fmt.Fprintf(&b, "# TYPE node_memory_working_set_bytes gauge\nnode_memory_working_set_bytes 4.2e+09 %d\n", ms)
	for _, metric := range []string{"container_cpu_usage_seconds_total", "container_memory_working_set_bytes", "container_start_time_seconds"} {
		fmt.Fprintf(&b, "# TYPE %s gauge\n", metric)
		for p := range pods {
			for _, c := range []string{"app", "sidecar"} {
				fmt.Fprintf(&b, "%s{container=%q,namespace=\"default\",pod=\"pod-%d\"} %d %d\n", metric, c, p, 1000+p, ms)
			}
		}
	}
	return []byte(b.String())
}

// BenchmarkDecode is the parse of one node's answer (110 pods).
func BenchmarkDecode(b *testing.B) {
	text := nodeText(110, time.Unix(1700000000, 0))
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := Decode(text, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStoreAdd is the store's work for one scrape of one node (110 pods).
func BenchmarkStoreAdd(b *testing.B) {
	_, _, pods, err := Decode(nodeText(110, time.Unix(1700000000, 0)), time.Now())
	if err != nil {
		b.Fatal(err)
	}
	s := NewStore(DefaultResolution)
	b.ReportAllocs()
	for b.Loop() {
		s.Add(Batch{Pods: pods})
	}
}
