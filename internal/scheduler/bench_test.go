package scheduler

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubette/kubette/internal/scheduler/framework"
	"github.com/kubette/kubette/internal/scheduler/plugins"
)

// noopBinder stands in for DefaultBinder: the benchmark measures the scheduling
// algorithm, not the API server.
type noopBinder struct{}

func (noopBinder) Name() string { return "DefaultBinder" }

func (noopBinder) Bind(context.Context, *framework.CycleState, *corev1.Pod, string) *framework.Status {
	return nil
}

// BenchmarkScheduleOne schedules pods with the default profile on N nodes that
// already run 10 pods each, binding with a no-op binder. ns/op is one scheduling
// cycle (snapshot, filter, score, assume).
func BenchmarkScheduleOne(b *testing.B) {
	for _, nodes := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("%dnodes", nodes), func(b *testing.B) {
			reg, prof := plugins.NewInTreeRegistry(), plugins.DefaultProfile()
			reg["DefaultBinder"] = func(context.Context, any, framework.Handle) (framework.Plugin, error) { return noopBinder{}, nil }
			client := fake.NewSimpleClientset()
			s, err := New(context.Background(), Options{
				Client: client, Informers: informers.NewSharedInformerFactory(client, 0),
				Registry: reg, Profile: prof, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			if err != nil {
				b.Fatal(err)
			}
			zones := []string{"a", "b", "c"}
			for i := range nodes {
				n := testNode(fmt.Sprintf("node-%05d", i), "32")
				n.Labels[corev1.LabelTopologyZone] = zones[i%3]
				n.Status.Allocatable[corev1.ResourceMemory] = resource.MustParse("128Gi")
				s.onNodeAdd(n)
				for j := range 10 {
					p := benchPod(fmt.Sprintf("running-%d-%d", i, j))
					p.Spec.NodeName = n.Name
					s.onPodAdd(p)
				}
			}
			for i := range b.N {
				s.queue.Add(benchPod(fmt.Sprintf("new-%d", i)))
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for range b.N {
				s.scheduleOne(ctx)
			}
			s.binds.Wait()
			cpu := cpuTime() - cpu0
			b.StopTimer()
			if got := s.cache.AssumedPodCount(); got != b.N {
				b.Fatalf("%d pods assumed, want %d", got, b.N)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pods/s")
			// The process's CPU time per cycle moves less than the wall time on a shared host.
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/pod")
		})
	}
}

// cpuTime is the user+system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name), Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{SchedulerName: DefaultSchedulerName, Containers: []corev1.Container{{
			Name: "c", Image: "registry.local/app:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
			}},
		}}},
	}
}
