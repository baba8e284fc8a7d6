package apiserver

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkBindPhase measures what the scheduler's part of one pod costs the API
// server, as bench/scheduler --pods-first's bind phase: a binding of an existing pod
// and the Scheduled Event (events.k8s.io/v1), each delivered to a protobuf watcher of
// pods and of events that reads without decoding. The pods are created before the
// timer starts. It reports the process's CPU time per pod (cpu-ms/pod); allocs/op
// counts the client's allocations too, which the server's changes leave as they are.
func BenchmarkBindPhase(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := startBenchServer(ctx, b)
	pods := s.client.CoreV1().Pods("default")
	events := s.client.EventsV1().Events("default")
	const workers = 8
	for _, path := range []string{"/api/v1/pods?watch=true", "/apis/events.k8s.io/v1/events?watch=true"} {
		s.drainWatch(ctx, b, path, "application/vnd.kubernetes.protobuf")
	}
	b.StopTimer()
	parallel(b, workers, b.N, func(i int) error {
		_, err := pods.Create(ctx, benchPod(fmt.Sprintf("p%d", i), "bench"), metav1.CreateOptions{})
		return err
	})
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.StartTimer()
	parallel(b, workers, b.N, func(i int) error {
		name := fmt.Sprintf("p%d", i)
		if err := pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name}, Target: corev1.ObjectReference{Kind: "Node", Name: "n"}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		now := time.Now()
		ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", name, now.UnixNano())},
			EventTime: metav1.NewMicroTime(now), Reason: "Scheduled", Note: "Successfully assigned default/" + name + " to n",
			Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: name, APIVersion: "v1"},
			Action:    "Binding", ReportingController: "default-scheduler", ReportingInstance: "default-scheduler-h", Type: corev1.EventTypeNormal}
		_, err := events.Create(ctx, ev, metav1.CreateOptions{})
		return err
	})
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/pod")
	cancel()
	s.hs.CloseClientConnections()
}
