package network

import (
	"context"
	"testing"
	"time"
)

// BenchmarkSetupTeardown measures one sandbox's Setup (netns, CNI ADD) and Teardown (CNI DEL,
// netns removal) with the real plugins, for a pod without hostPorts and for one with a
// hostPort. It reports each half's mean as setup-ms and teardown-ms.
func BenchmarkSetupTeardown(b *testing.B) {
	e := newTestEnv(b)
	for _, tc := range []struct {
		name  string
		ports bool
	}{{"no-hostport", false}, {"hostport", true}} {
		b.Run(tc.name, func(b *testing.B) {
			var setup, teardown time.Duration
			for b.Loop() {
				pod := Pod{SandboxID: e.newID(), Namespace: "bench", Name: "p", UID: "u"}
				if tc.ports {
					pod.Ports = []PortMapping{{ContainerPort: 80, HostPort: int32(freeHostPort(b))}}
				}
				t0 := time.Now()
				if _, err := e.m.Setup(context.Background(), pod); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := e.m.Teardown(context.Background(), pod.SandboxID); err != nil {
					b.Fatal(err)
				}
				setup, teardown = setup+t1.Sub(t0), teardown+time.Since(t1)
			}
			b.ReportMetric(float64(setup)/float64(time.Millisecond)/float64(b.N), "setup-ms")
			b.ReportMetric(float64(teardown)/float64(time.Millisecond)/float64(b.N), "teardown-ms")
		})
	}
}
