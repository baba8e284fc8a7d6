package apiserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubette/kubette/internal/storage/etcd"
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
	e, err := etcd.StartEmbedded(ctx, etcd.EmbeddedConfig{DataDir: b.TempDir()})
	if err != nil {
		b.Fatalf("start etcd: %v", err)
	}
	defer e.Close()
	st, err := e.InProcessStore()
	if err != nil {
		b.Fatal(err)
	}
	srv, err := New(ctx, Config{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	if err := srv.EnsureNamespaces(ctx, "default"); err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv.Handler(nil, nil))
	hs.EnableHTTP2 = true
	hs.StartTLS()
	defer hs.Close()
	cfg := &rest.Config{Host: hs.URL, QPS: -1, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	pb := rest.CopyConfig(cfg)
	pb.ContentType, pb.AcceptContentTypes = "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf,application/json"
	cs := kubernetes.NewForConfigOrDie(pb)
	pods := cs.CoreV1().Pods("default")
	events := cs.EventsV1().Events("default")

	const workers = 8
	create := func(from, to int) {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := from + w; i < to; i += workers {
					p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Labels: map[string]string{"app": "bench"}},
						Spec: corev1.PodSpec{SchedulerName: "bench", Containers: []corev1.Container{{Name: "c", Image: "i", Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("10Mi")}}}}}}
					if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	for _, path := range []string{"/api/v1/pods?watch=true", "/apis/events.k8s.io/v1/events?watch=true"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+path, nil)
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Accept", "application/vnd.kubernetes.protobuf")
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatalf("watch: %v", err)
		}
		go func() {
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
		}()
	}
	b.StopTimer()
	create(0, b.N)
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.StartTimer()
	var next sync.Mutex
	n := 0
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				next.Lock()
				i := n
				n++
				next.Unlock()
				if i >= b.N {
					return
				}
				name := fmt.Sprintf("p%d", i)
				if err := pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name}, Target: corev1.ObjectReference{Kind: "Node", Name: "n"}}, metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
				now := time.Now()
				ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", name, now.UnixNano())},
					EventTime: metav1.NewMicroTime(now), Reason: "Scheduled", Note: "Successfully assigned default/" + name + " to n",
					Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: name, APIVersion: "v1"},
					Action:    "Binding", ReportingController: "default-scheduler", ReportingInstance: "default-scheduler-h", Type: corev1.EventTypeNormal}
				if _, err := events.Create(ctx, ev, metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/pod")
	cancel()
	hs.CloseClientConnections()
}
