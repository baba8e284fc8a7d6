package runtime

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubette/kubette/internal/testenv/needs"
	"github.com/kubette/kubette/internal/testenv/testimage"
)

// BenchmarkPodStartup measures what a pod's start costs the runtime through its CRI socket:
// RunPodSandbox, CreateContainer and StartContainer of a busybox `sleep` container, one pod at
// a time and ten at a time. It reports each call's mean in ms/pod (sandbox-ms, create-ms,
// start-ms) and their sum (pod-ms). The shim is the test binary unless KUBETTE_BENCH_SHIM
// names another argv[0] that runs the shim as `<binary> shim` (e.g. the kubette binary, to
// measure the cost of re-executing it).
//
//	go test -run '^$' -bench PodStartup -benchtime 20x ./internal/runtime/
func BenchmarkPodStartup(b *testing.B) {
	needs.Root(b)
	runcBin := needs.Binary(b, "runc", "runc")
	pluginDir := needs.CNIPlugins(b)
	var shim []string
	if s := os.Getenv("KUBETTE_BENCH_SHIM"); s != "" {
		shim = []string{s, "shim"}
	} else {
		exe, err := os.Executable()
		if err != nil {
			b.Fatal(err)
		}
		shim = []string{exe}
	}
	registry := testimage.Registry(b)
	testimage.Push(b, registry, "busybox:v1", testimage.Busybox(b))
	dataDir, err := os.MkdirTemp("", "kbench")
	if err != nil {
		b.Fatal(err)
	}
	cfg := Config{DataDir: dataDir, Runc: runcBin, Shim: shim, CNIPluginDirs: []string{pluginDir}, Bridge: "kbench0", Version: "bench"}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	conn, err := grpc.NewClient("unix://"+SocketPath(cfg.DataDir), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.WaitForReady(true)))
	if err != nil {
		b.Fatal(err)
	}
	rs, is := runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
	b.Cleanup(func() {
		_ = conn.Close()
		cancel()
		if err := <-done; err != nil {
			b.Errorf("Run: %v", err)
		}
		dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer dcancel()
		if err := Down(dctx, cfg); err != nil {
			b.Errorf("Down: %v", err)
		}
		if err := os.RemoveAll(dataDir); err != nil {
			b.Errorf("remove data dir: %v", err)
		}
	})
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Minute)
	b.Cleanup(ccancel)
	if _, err := rs.UpdateRuntimeConfig(cctx, &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: &runtimeapi.RuntimeConfig{
		NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: "10.89.79.0/24"}}}); err != nil {
		b.Fatal(err)
	}
	image := registry + "/busybox:v1"
	if _, err := is.PullImage(cctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}}); err != nil {
		b.Fatal(err)
	}
	var seq int
	var seqMu sync.Mutex
	// startPod runs one pod and returns the durations of its three calls.
	startPod := func() (sandboxID string, d [3]time.Duration, err error) {
		seqMu.Lock()
		seq++
		n := seq
		seqMu.Unlock()
		name := fmt.Sprintf("pod-%d", n)
		sbCfg := &runtimeapi.PodSandboxConfig{
			Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "bench", Uid: name},
			Hostname:     name,
			LogDirectory: dataDir + "/logs/" + name,
		}
		t0 := time.Now()
		sb, err := rs.RunPodSandbox(cctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
		if err != nil {
			return "", d, err
		}
		t1 := time.Now()
		c, err := rs.CreateContainer(cctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, SandboxConfig: sbCfg,
			Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: image},
				Command: []string{"sleep", "3600"}, LogPath: "c/0.log"}})
		if err != nil {
			return sb.PodSandboxId, d, err
		}
		t2 := time.Now()
		if _, err := rs.StartContainer(cctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
			return sb.PodSandboxId, d, err
		}
		t3 := time.Now()
		return sb.PodSandboxId, [3]time.Duration{t1.Sub(t0), t2.Sub(t1), t3.Sub(t2)}, nil
	}
	remove := func(ids []string) {
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Go(func() {
				if _, err := rs.RemovePodSandbox(cctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
					b.Errorf("RemovePodSandbox: %v", err)
				}
			})
		}
		wg.Wait()
	}
	// Warm-up: the first pod creates the bridge.
	id, _, err := startPod()
	if err != nil {
		b.Fatal(err)
	}
	remove([]string{id})

	for _, at := range []int{1, 10} {
		b.Run(fmt.Sprintf("at-%d", at), func(b *testing.B) {
			var sum [3]time.Duration
			var mu sync.Mutex
			var ids []string
			sem := make(chan struct{}, at)
			var wg sync.WaitGroup
			for range b.N { // not b.Loop: the timer must run until the last pod has started
				sem <- struct{}{}
				wg.Go(func() {
					defer func() { <-sem }()
					id, d, err := startPod()
					mu.Lock()
					defer mu.Unlock()
					if id != "" {
						ids = append(ids, id)
					}
					if err != nil {
						b.Errorf("start pod: %v", err)
						return
					}
					for i := range d {
						sum[i] += d[i]
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			n := float64(b.N)
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / n }
			b.ReportMetric(ms(sum[0]), "sandbox-ms")
			b.ReportMetric(ms(sum[1]), "create-ms")
			b.ReportMetric(ms(sum[2]), "start-ms")
			b.ReportMetric(ms(sum[0]+sum[1]+sum[2]), "pod-ms")
			remove(ids)
		})
	}
}
