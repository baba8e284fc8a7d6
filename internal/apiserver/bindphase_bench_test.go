package apiserver

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/storage/etcd"
)

// BenchmarkBindPhase measures what the scheduler's part of one pod costs the API
// server, as bench/scheduler --pods-first's bind phase: a binding of an existing pod
// and the Scheduled Event (events.k8s.io/v1), each delivered to a protobuf watcher of
// pods and of events that reads without decoding. The pods are created before the
// timer starts. It reports the process's CPU time per pod (cpu-ms/pod); allocs/op
// counts the client's allocations too, which the server's changes leave as they are.
func BenchmarkBindPhase(b *testing.B) { benchBindPhase(b, Config{}, true) }

// BenchmarkBindPhaseNoEventWatcher is BenchmarkBindPhase without the watcher of events,
// as in the bind phase of `kubette up`, where nothing watches Events: what the Scheduled
// Event costs the server when only etcd keeps it.
func BenchmarkBindPhaseNoEventWatcher(b *testing.B) { benchBindPhase(b, Config{}, false) }

// BenchmarkBindPhaseEventTTL is BenchmarkBindPhase with Events written under a lease,
// as `kubette up` does by default (--event-ttl 1h).
func BenchmarkBindPhaseEventTTL(b *testing.B) { benchBindPhase(b, Config{EventTTL: time.Hour}, true) }

func benchBindPhase(b *testing.B, cfg Config, eventWatcher bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := startServer(ctx, b, cfg, etcd.EmbeddedConfig{})
	pods := s.client.CoreV1().Pods("default")
	events := s.client.EventsV1().Events("default")
	const workers = 8
	s.drainWatch(ctx, b, "/api/v1/pods?watch=true", "application/vnd.kubernetes.protobuf")
	if eventWatcher {
		s.drainWatch(ctx, b, "/apis/events.k8s.io/v1/events?watch=true", "application/vnd.kubernetes.protobuf")
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

// BenchmarkEventCreate measures an Event create (events.k8s.io/v1, protobuf, 8 clients,
// a protobuf watcher of events) without and with the event TTL, which adds a lease to
// the etcd put (one grant per minute, reused by the writes in between). It reports the
// process's CPU time per Event (cpu-ms/event).
func BenchmarkEventCreate(b *testing.B) {
	for _, tc := range []struct {
		name string
		ttl  time.Duration
	}{{"ttl=0", 0}, {"ttl=1h", time.Hour}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := startServer(ctx, b, Config{EventTTL: tc.ttl}, etcd.EmbeddedConfig{})
			events := s.client.EventsV1().Events("default")
			s.drainWatch(ctx, b, "/apis/events.k8s.io/v1/events?watch=true", "application/vnd.kubernetes.protobuf")
			b.ReportAllocs()
			cpu0 := cpuTime()
			b.ResetTimer()
			parallel(b, 8, b.N, func(i int) error {
				now := time.Now()
				ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d.%x", i, now.UnixNano())},
					EventTime: metav1.NewMicroTime(now), Reason: "Scheduled", Note: "Successfully assigned default/p to n",
					Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: fmt.Sprintf("p%d", i), APIVersion: "v1"},
					Action:    "Binding", ReportingController: "default-scheduler", ReportingInstance: "default-scheduler-h", Type: corev1.EventTypeNormal}
				_, err := events.Create(ctx, ev, metav1.CreateOptions{})
				return err
			})
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/event")
			if st := s.store.LeaseStats(); tc.ttl > 0 {
				b.ReportMetric(float64(st.Grants), "grants")
			}
			cancel()
			s.hs.CloseClientConnections()
		})
	}
}
