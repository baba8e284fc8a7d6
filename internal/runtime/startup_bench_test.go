package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubette/kubette/internal/runtime/runc"
	"github.com/kubette/kubette/internal/testenv/needs"
	"github.com/kubette/kubette/internal/testenv/testimage"
)

// BenchmarkPodStartup measures what a pod's start costs the runtime through its CRI socket:
// RunPodSandbox, CreateContainer and StartContainer of a busybox `sleep` container, one pod at
// a time and ten at a time. It reports each call's mean in ms/pod (sandbox-ms, create-ms,
// start-ms), their sum (pod-ms), and, on cgroup v1, the CPU time per pod (cpu-ms) of the
// benchmark process and everything it starts (the runtime in process, the shims, runc and its
// init, the CNI plugins: a cpuacct cgroup of their own holds them while the benchmark runs,
// and the pods' cgroups below /kubette, which runc moves each init into; pods of other
// clusters running meanwhile would count too), a
// figure that holds better than wall-clock time on a loaded machine. The shim is the test binary unless KUBETTE_BENCH_SHIM
// names another argv[0] that runs the shim as `<binary> shim` (e.g. the kubette binary, to
// measure the cost of re-executing it) or a kubette-shim binary (what `kubette up` runs when
// it lies beside kubette).
//
//	go test -run '^$' -bench PodStartup -benchtime 20x ./internal/runtime/
func BenchmarkPodStartup(b *testing.B) {
	needs.Root(b)
	runcBin := needs.Binary(b, "runc", "runc")
	pluginDir := needs.CNIPlugins(b)
	cpu := benchCPUGroup(b)
	var shim []string
	if s := os.Getenv("KUBETTE_BENCH_SHIM"); s != "" {
		shim = []string{s, "shim"}
		if filepath.Base(s) == runc.ShimBinary {
			shim = []string{s} // the small shim binary takes the shim's flags only
		}
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
			// The kubelet's namespaces: the pod's IPC, each container its own pid namespace.
			Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER}}},
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
			cpuBefore := cpu.usage(b)
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
			cpuUsed := cpu.usage(b) - cpuBefore
			n := float64(b.N)
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / n }
			b.ReportMetric(ms(sum[0]), "sandbox-ms")
			b.ReportMetric(ms(sum[1]), "create-ms")
			b.ReportMetric(ms(sum[2]), "start-ms")
			b.ReportMetric(ms(sum[0]+sum[1]+sum[2]), "pod-ms")
			if cpu.dir != "" {
				b.ReportMetric(ms(cpuUsed), "cpu-ms")
			}
			remove(ids)
		})
	}
}

// cpuGroup is a cgroup v1 cpuacct directory that holds the benchmark process (and so every
// process it starts); dir is "" where there is none. runc moves each container's init into
// the container's cgroup, below pods (the runtime's /kubette parent), before the init's Go
// part and the container's process run: usage counts both groups.
type cpuGroup struct{ dir, pods string }

// benchCPUGroup moves the benchmark process into a cpuacct cgroup of its own for the rest of
// the benchmark; the cleanup moves it back and removes the group once its last process (a
// shim ending after Down) has left. Without cgroup v1's cpuacct it returns a group without dir.
func benchCPUGroup(b *testing.B) cpuGroup {
	const root = "/sys/fs/cgroup/cpuacct"
	cur, err := ownCPUAcctPath()
	if err != nil {
		b.Logf("no cpu-ms: %v", err)
		return cpuGroup{}
	}
	dir := filepath.Join(root, cur, fmt.Sprintf("kubette-bench-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Logf("no cpu-ms: %v", err)
		return cpuGroup{}
	}
	pid := []byte(strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), pid, 0o644); err != nil {
		_ = os.Remove(dir)
		b.Logf("no cpu-ms: %v", err)
		return cpuGroup{}
	}
	// Registered first, so it runs after the runtime's cleanup (Down) has ended the shims.
	b.Cleanup(func() {
		if err := os.WriteFile(filepath.Join(root, cur, "cgroup.procs"), pid, 0o644); err != nil {
			b.Errorf("leave the benchmark's cpuacct group: %v", err)
		}
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
			err := os.Remove(dir)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				return
			}
			if time.Now().After(deadline) {
				b.Errorf("remove the benchmark's cpuacct group: %v", err)
				return
			}
		}
	})
	return cpuGroup{dir: dir, pods: filepath.Join(root, "kubette")}
}

// usage is the group's CPU time so far (0 without a group).
func (g cpuGroup) usage(b *testing.B) time.Duration {
	if g.dir == "" {
		return 0
	}
	var total time.Duration
	for _, dir := range []string{g.dir, g.pods} {
		raw, err := os.ReadFile(filepath.Join(dir, "cpuacct.usage"))
		if errors.Is(err, os.ErrNotExist) && dir == g.pods {
			continue // no pod has started yet
		}
		if err != nil {
			b.Fatalf("cpu usage: %v", err)
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		if err != nil {
			b.Fatalf("cpu usage %q: %v", raw, err)
		}
		total += time.Duration(ns)
	}
	return total
}

// ownCPUAcctPath is the process's cgroup v1 cpuacct path, from /proc/self/cgroup.
func ownCPUAcctPath() (string, error) {
	raw, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), "cpuacct") {
			return f[2], nil
		}
	}
	return "", errors.New("no cgroup v1 cpuacct hierarchy")
}
