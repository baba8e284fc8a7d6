package apiserver

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkPodWrites measures what one scheduled pod costs the API server: a create,
// a binding, a status patch as the sim and the kubelet send it, each event delivered to
// four pod watchers (two protobuf, two JSON) that read without decoding. It reports the process's CPU time per pod
// (cpu-ms/pod) besides the wall time: on a shared host the CPU time moves less.
func BenchmarkPodWrites(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := startBenchServer(ctx, b)
	pods := s.client.CoreV1().Pods("default")
	for _, accept := range []string{"application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf", "application/json", "application/json"} {
		s.drainWatch(ctx, b, "/api/v1/pods?watch=true", accept)
	}
	status := []byte(`{"status":{"phase":"Running","podIP":"10.1.0.2","podIPs":[{"ip":"10.1.0.2"}],"startTime":"2026-01-01T00:00:00Z",` +
		`"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z"},{"type":"ContainersReady","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z"}],` +
		`"containerStatuses":[{"name":"c","ready":true,"started":true,"image":"i","imageID":"","restartCount":0,"state":{"running":{"startedAt":"2026-01-01T00:00:00Z"}}}]}}`)
	cpu0 := cpuTime()
	start := time.Now()
	b.ResetTimer()
	parallel(b, 8, b.N, func(i int) error {
		name := fmt.Sprintf("p%d", i)
		if _, err := pods.Create(ctx, benchPod(name, ""), metav1.CreateOptions{}); err != nil {
			return err
		}
		if err := pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name}, Target: corev1.ObjectReference{Kind: "Node", Name: "n"}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := pods.Patch(ctx, name, types.StrategicMergePatchType, status, metav1.PatchOptions{}, "status")
		return err
	})
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/pod")
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pods/s")
	cancel()
	s.hs.CloseClientConnections()
}
