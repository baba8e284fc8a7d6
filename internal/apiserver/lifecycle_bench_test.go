package apiserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubette/kubette/internal/storage/etcd"
)

// BenchmarkPodWrites measures what one scheduled pod costs the API server: a create,
// a binding, a status patch as the sim and the kubelet send it, each event delivered to
// four pod watchers (two protobuf, two JSON) that read without decoding. It reports the process's CPU time per pod
// (cpu-ms/pod) besides the wall time: on a shared host the CPU time moves less.
func BenchmarkPodWrites(b *testing.B) {
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

	// Watchers that read the stream without decoding it, so that the CPU measured is
	// the server's (the clients share the process).
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	for _, accept := range []string{"application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf", "application/json", "application/json"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+"/api/v1/pods?watch=true", nil)
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Accept", accept)
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatalf("watch: %v", err)
		}
		go func() {
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
		}()
	}
	status := []byte(`{"status":{"phase":"Running","podIP":"10.1.0.2","podIPs":[{"ip":"10.1.0.2"}],"startTime":"2026-01-01T00:00:00Z",` +
		`"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z"},{"type":"ContainersReady","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z"}],` +
		`"containerStatuses":[{"name":"c","ready":true,"started":true,"image":"i","imageID":"","restartCount":0,"state":{"running":{"startedAt":"2026-01-01T00:00:00Z"}}}]}}`)
	const workers = 8
	cpu0 := cpuTime()
	start := time.Now()
	b.ResetTimer()
	var next sync.Mutex
	n := 0
	var bwg sync.WaitGroup
	for range workers {
		bwg.Go(func() {
			for {
				next.Lock()
				i := n
				n++
				next.Unlock()
				if i >= b.N {
					return
				}
				name := fmt.Sprintf("p%d", i)
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("10Mi")}}}}}}
				if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
				if err := pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name}, Target: corev1.ObjectReference{Kind: "Node", Name: "n"}}, metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
				if _, err := pods.Patch(ctx, name, types.StrategicMergePatchType, status, metav1.PatchOptions{}, "status"); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	bwg.Wait()
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/pod")
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pods/s")
	cancel()
	hs.CloseClientConnections()
}

// cpuTime is the user+system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
