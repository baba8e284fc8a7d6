package apiserver

import (
	"context"
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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubette/kubette/internal/storage/etcd"
)

// benchServer is an API server over embedded etcd behind HTTP/2 TLS, for the
// benchmarks that measure what requests cost the server; it stops with ctx and b.
type benchServer struct {
	url string
	// cfg is a JSON client configuration without client-side rate limits.
	cfg *rest.Config
	// client speaks protobuf, as the controllers, the scheduler and the kubelet do.
	client kubernetes.Interface
	hs     *httptest.Server
	// etcd is the embedded etcd the server stores into, through store.
	etcd  *etcd.Embedded
	store *etcd.Store
}

func startBenchServer(ctx context.Context, b *testing.B) *benchServer {
	b.Helper()
	return startServer(ctx, b, Config{}, etcd.EmbeddedConfig{})
}

// startServer is startBenchServer with a configuration of the server (its Store is set
// here) and of the embedded etcd (its DataDir too), for tests as well as benchmarks.
func startServer(ctx context.Context, b testing.TB, cfg Config, ecfg etcd.EmbeddedConfig) *benchServer {
	b.Helper()
	ecfg.DataDir = b.TempDir()
	e, err := etcd.StartEmbedded(ctx, ecfg)
	if err != nil {
		b.Fatalf("start etcd: %v", err)
	}
	b.Cleanup(func() { e.Close() })
	s := &benchServer{}
	st, err := e.InProcessStore()
	if err != nil {
		b.Fatal(err)
	}
	s.etcd, s.store = e, st
	cfg.Store = st
	srv, err := New(ctx, cfg)
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
	b.Cleanup(hs.Close)
	rcfg := &rest.Config{Host: hs.URL, QPS: -1, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	pb := rest.CopyConfig(rcfg)
	pb.ContentType, pb.AcceptContentTypes = "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf,application/json"
	s.url, s.cfg, s.client, s.hs = hs.URL, rcfg, kubernetes.NewForConfigOrDie(pb), hs
	return s
}

// drainWatch opens a watch on path that reads the stream in accept's encoding
// without decoding it, so that the CPU measured is the server's (the clients
// share the process); it ends with ctx.
func (s *benchServer) drainWatch(ctx context.Context, b *testing.B, path, accept string) {
	b.Helper()
	hc, err := rest.HTTPClientFor(s.cfg)
	if err != nil {
		b.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+path, nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := hc.Do(req)
	if err != nil {
		b.Fatalf("watch %s: %v", path, err)
	}
	go func() {
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
	}()
}

// parallel calls f for every index below n from workers goroutines, each
// taking the next index, and stops a worker at its first error (reported to b).
func parallel(b *testing.B, workers, n int, f func(i int) error) {
	var mu sync.Mutex
	next := 0
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// benchPod is a one-container pod requesting 10m CPU and 10Mi memory.
func benchPod(name, schedulerName string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{SchedulerName: schedulerName, Containers: []corev1.Container{{Name: "c", Image: "i", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("10Mi")}}}}}}
}

// cpuTime is the user+system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
