package runtime

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubette/kubette/internal/runtime/runc"
	"github.com/kubette/kubette/internal/testenv/needs"
	"github.com/kubette/kubette/internal/testenv/testimage"
)

func TestMain(m *testing.M) {
	runc.MaybeRunShim() // the test binary is the containers' shim
	os.Exit(m.Run())
}

// runtimeUnderTest is a Run on a data directory, restartable.
type runtimeUnderTest struct {
	t      *testing.T
	cfg    Config
	cancel context.CancelFunc
	done   chan error
	rs     runtimeapi.RuntimeServiceClient
	is     runtimeapi.ImageServiceClient
	conn   *grpc.ClientConn
}

func (r *runtimeUnderTest) start() {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan error, 1)
	go func() { r.done <- Run(ctx, r.cfg) }()
	conn, err := grpc.NewClient("unix://"+SocketPath(r.cfg.DataDir), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.WaitForReady(true)))
	if err != nil {
		r.t.Fatal(err)
	}
	r.conn, r.rs, r.is = conn, runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
}

func (r *runtimeUnderTest) stop() {
	r.t.Helper()
	if r.cancel == nil {
		return
	}
	_ = r.conn.Close()
	r.cancel()
	r.cancel = nil
	if err := <-r.done; err != nil {
		r.t.Errorf("Run: %v", err)
	}
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds, failing after a generous deadline.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s: %s", what, last)
}

// startRealRuntime runs a runtime on the real runc and CNI plugins for a test (root only),
// with cfg's Bridge, Version, Client and NodeName, a short data directory named after prefix
// (the socket path is limited) and the pod range podCIDR. At the end it is stopped, taken down
// with Down and checked to have left nothing behind.
func startRealRuntime(t *testing.T, prefix, podCIDR string, cfg Config) *runtimeUnderTest {
	t.Helper()
	needs.Root(t)
	runcBin := needs.Binary(t, "runc", "runc")
	pluginDir := needs.CNIPlugins(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dataDir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir, cfg.Runc, cfg.Shim, cfg.CNIPluginDirs = dataDir, runcBin, []string{exe}, []string{pluginDir}
	r := &runtimeUnderTest{t: t, cfg: cfg}
	t.Cleanup(func() {
		r.stop()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := Down(ctx, r.cfg); err != nil {
			t.Errorf("Down: %v", err)
		}
		checkNothingLeft(t, dataDir, runcBin, cfg.Bridge)
		if err := os.RemoveAll(dataDir); err != nil {
			t.Errorf("remove data dir: %v", err)
		}
	})
	r.start()
	if _, err := r.rs.UpdateRuntimeConfig(callCtx(t), &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: &runtimeapi.RuntimeConfig{
		// Pod ranges of tests stay out of the service range 10.96.0.0/12 and the cluster range
		// 10.244.0.0/16: a kubette proxy running on this machine (an e2e test's) rejects those.
		NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: podCIDR}}}); err != nil {
		t.Fatal(err)
	}
	return r
}

// startWithBusybox is startRealRuntime with the test busybox image (sh, sleep, ps, cat...)
// pushed to a registry of the test's and pulled; it returns the image's reference too.
func startWithBusybox(t *testing.T, prefix, podCIDR string, cfg Config) (*runtimeUnderTest, string) {
	t.Helper()
	needs.Root(t)
	registry := testimage.Registry(t)
	testimage.Push(t, registry, "busybox:v1", testimage.Busybox(t))
	r := startRealRuntime(t, prefix, podCIDR, cfg)
	image := registry + "/busybox:v1"
	if _, err := r.is.PullImage(callCtx(t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}}); err != nil {
		t.Fatal(err)
	}
	return r, image
}

func TestRuntimeEndToEnd(t *testing.T) {
	needs.Root(t)
	registry := testimage.Registry(t)
	testimage.Push(t, registry, "busybox:v1", testimage.Busybox(t))
	testimage.Push(t, registry, "http:v1", testimage.HTTPServer(t))
	r := startRealRuntime(t, "kcri", "10.89.77.0/24", Config{Bridge: "kcri0", Version: "v-test"})
	dataDir := r.cfg.DataDir
	ctx := callCtx(t)

	v, err := r.rs.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil || v.RuntimeName != "kubette" || v.RuntimeVersion != "v-test" {
		t.Fatalf("Version = %v, %v", v, err)
	}
	st, err := r.rs.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st.Status.Conditions {
		if !c.Status {
			t.Fatalf("condition %s not ready: %s %s", c.Type, c.Reason, c.Message)
		}
	}

	busybox, httpImage := registry+"/busybox:v1", registry+"/http:v1"
	for _, ref := range []string{busybox, httpImage} {
		if _, err := r.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
			t.Fatalf("PullImage %s: %v", ref, err)
		}
	}
	if _, err := r.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: registry + "/absent:v1"}}); err == nil {
		t.Error("pull of an absent image succeeded")
	}

	logDir := filepath.Join(dataDir, "logs", "default_pod_uid1")
	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "pod", Namespace: "default", Uid: "uid1"},
		Hostname:     "pod",
		LogDirectory: logDir,
		DnsConfig:    &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}},
		// As the kubelet asks: each container its own pid namespace (its process is pid 1).
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER}}},
	}
	sb, err := r.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	sbStatus, err := r.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.PodSandboxId})
	if err != nil {
		t.Fatal(err)
	}
	podIP := sbStatus.Status.Network.GetIp()
	if !strings.HasPrefix(podIP, "10.89.77.") {
		t.Fatalf("pod IP %q not from the pod CIDR", podIP)
	}

	create := func(name, image string, cmd ...string) string {
		t.Helper()
		resp, err := r.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, SandboxConfig: sbCfg,
			Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: image},
				Command: cmd, LogPath: name + "/0.log"}})
		if err != nil {
			t.Fatalf("CreateContainer %s: %v", name, err)
		}
		if _, err := r.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: resp.ContainerId}); err != nil {
			t.Fatalf("StartContainer %s: %v", name, err)
		}
		return resp.ContainerId
	}
	status := func(id string) *runtimeapi.ContainerStatus {
		t.Helper()
		resp, err := r.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
		if err != nil {
			t.Fatalf("ContainerStatus: %v", err)
		}
		return resp.Status
	}
	waitExited := func(id string) *runtimeapi.ContainerStatus {
		t.Helper()
		var s *runtimeapi.ContainerStatus
		waitFor(t, "container "+id[:12]+" to exit", func() (bool, string) {
			s = status(id)
			return s.State == runtimeapi.ContainerState_CONTAINER_EXITED, s.State.String()
		})
		return s
	}

	// A container that echoes: its output lands in the log in the CRI format.
	echo := create("echo", busybox, "sh", "-c", "echo hello; echo oops >&2; cat /etc/hostname")
	if s := waitExited(echo); s.ExitCode != 0 || s.Reason != "Completed" || s.StartedAt == 0 || s.FinishedAt < s.StartedAt {
		t.Errorf("echo: %v", s)
	}
	var logText string
	waitFor(t, "the echo container's log", func() (bool, string) {
		b, _ := os.ReadFile(filepath.Join(logDir, "echo", "0.log"))
		logText = string(b)
		return strings.Contains(logText, " stdout F hello\n") && strings.Contains(logText, " stderr F oops\n") &&
			strings.Contains(logText, " stdout F pod\n"), logText
	})

	// Exit 3 is an Error.
	fail := create("fail", busybox, "sh", "-c", "exit 3")
	if s := waitExited(fail); s.ExitCode != 3 || s.Reason != "Error" {
		t.Errorf("fail: %v", s)
	}

	// The HTTP server answers on the pod IP from the host.
	server := create("server", httpImage)
	client := &http.Client{Timeout: 2 * time.Second}
	waitFor(t, "the HTTP server on the pod IP", func() (bool, string) {
		resp, err := client.Get("http://" + podIP + ":8080/")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == 200 && strings.Contains(string(b), "hostname=pod"), resp.Status + ": " + string(b)
	})
	ex, err := r.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: server, Cmd: []string{"sh", "-c", "echo in; exit 4"}, Timeout: 30})
	if err != nil || string(ex.Stdout) != "in\n" || ex.ExitCode != 4 {
		t.Errorf("ExecSync = %v, %v", ex, err)
	}

	// StopContainer on a sleeping shell (pid 1 ignores SIGTERM): SIGKILL after the timeout.
	sleeper := create("sleeper", busybox, "sh", "-c", "sleep 1000")
	waitFor(t, "sleeper running", func() (bool, string) {
		s := status(sleeper)
		return s.State == runtimeapi.ContainerState_CONTAINER_RUNNING, s.State.String()
	})
	if _, err := r.rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: sleeper, Timeout: 1}); err != nil {
		t.Fatal(err)
	}
	if s := status(sleeper); s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.ExitCode != 137 {
		b, _ := os.ReadFile(s.LogPath)
		t.Errorf("sleeper after StopContainer: %v; log:\n%s", s, b)
	}

	// Restart the runtime: a running container stays running, the same process.
	keeper := create("keeper", busybox, "sh", "-c", "sleep 1000")
	procStart := func() string {
		t.Helper()
		ex, err := r.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: keeper, Cmd: []string{"cat", "/proc/1/stat"}, Timeout: 30})
		if err != nil || ex.ExitCode != 0 {
			t.Fatalf("ExecSync: %v, %v", ex, err)
		}
		f := strings.Fields(string(ex.Stdout))
		if len(f) < 22 {
			t.Fatalf("/proc/1/stat = %q", ex.Stdout)
		}
		return f[21] // starttime
	}
	waitFor(t, "keeper running", func() (bool, string) {
		s := status(keeper)
		return s.State == runtimeapi.ContainerState_CONTAINER_RUNNING, s.State.String()
	})
	before, startedAt := procStart(), status(keeper).StartedAt
	r.stop()
	r.start()
	ctx = callCtx(t)
	if s := status(keeper); s.State != runtimeapi.ContainerState_CONTAINER_RUNNING || s.StartedAt != startedAt {
		t.Errorf("keeper after restart: %v", s)
	}
	if after := procStart(); after != before {
		t.Errorf("keeper's init changed across the restart: start time %s, then %s", before, after)
	}
	if s := status(fail); s.State != runtimeapi.ContainerState_CONTAINER_EXITED || s.ExitCode != 3 {
		t.Errorf("fail after restart: %v", s)
	}
	resp, err := client.Get("http://" + podIP + ":8080/healthz")
	if err != nil {
		t.Errorf("server after restart: %v", err)
	} else {
		resp.Body.Close()
	}

	if _, err := r.rs.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: keeper,
		Linux: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 64 << 20, CpuShares: 256}}); err != nil {
		t.Errorf("UpdateContainerResources: %v", err)
	}
	cg := filepath.Join("kubette", "pod-"+sb.PodSandboxId[:12], keeper)
	if b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", cg, "memory.limit_in_bytes")); err != nil || strings.TrimSpace(string(b)) != "67108864" {
		t.Errorf("memory limit after update: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpu", cg, "cpu.shares")); err != nil || strings.TrimSpace(string(b)) != "256" {
		t.Errorf("cpu shares after update: %q, %v", b, err)
	}

	stats, err := r.rs.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: keeper})
	if err != nil || stats.Stats.GetCpu().GetUsageCoreNanoSeconds().GetValue() == 0 || stats.Stats.GetMemory().GetWorkingSetBytes() == nil {
		t.Errorf("ContainerStats = %v, %v", stats, err)
	}

	if _, err := r.rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
		t.Fatal(err)
	}
	if s := status(keeper); s.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("keeper after StopPodSandbox: %v", s)
	}
	if _, err := r.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"memory", "cpu", "pids"} {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", h, "kubette", "pod-"+sb.PodSandboxId[:12])); !os.IsNotExist(err) {
			t.Errorf("the sandbox's %s cgroup is left: %v", h, err)
		}
	}
	list, err := r.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(list.Containers) != 0 {
		t.Errorf("containers after RemovePodSandbox: %v, %v", list, err)
	}
	for _, ref := range []string{busybox, httpImage} {
		if _, err := r.is.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
			t.Errorf("RemoveImage %s: %v", ref, err)
		}
	}
}

// checkNothingLeft fails t if a mount, runc container or network namespace of dataDir, or
// the bridge or its pod masquerade, is left.
func checkNothingLeft(t *testing.T, dataDir, runcBin, bridge string) {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		if strings.Contains(line, dataDir) {
			t.Errorf("mount left: %s", line)
		}
	}
	out, err := exec.Command(runcBin, "--root", filepath.Join(dataDir, "runtime", "runc"), "list", "-q").CombinedOutput()
	if err != nil {
		t.Errorf("runc list: %v: %s", err, out)
	} else if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("runc containers left: %s", s)
	}
	if out, err := exec.Command("ip", "link", "show", bridge).CombinedOutput(); err == nil {
		t.Errorf("bridge left: %s", out)
	}
	if out, err := exec.Command("iptables-save", "-t", "nat").CombinedOutput(); err != nil {
		t.Errorf("iptables-save: %v: %s", err, out)
	} else if strings.Contains(string(out), "KUBETTE-MASQ-"+bridge) {
		t.Errorf("pod masquerade of %s left:\n%s", bridge, out)
	}
	ents, _ := os.ReadDir(filepath.Join(dataDir, "runtime", "netns"))
	for _, e := range ents {
		t.Errorf("netns left: %s", e.Name())
	}
}

func TestDownRemovesRunningPods(t *testing.T) {
	needs.Root(t)
	runcBin := needs.Binary(t, "runc", "runc")
	pluginDir := needs.CNIPlugins(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	registry := testimage.Registry(t)
	testimage.Push(t, registry, "busybox:v1", testimage.Busybox(t))
	dataDir, err := os.MkdirTemp("", "kcri")
	if err != nil {
		t.Fatal(err)
	}
	r := &runtimeUnderTest{t: t, cfg: Config{DataDir: dataDir, Runc: runcBin, Shim: []string{exe},
		CNIPluginDirs: []string{pluginDir}, Bridge: "kcri1"}}
	downDone := false
	t.Cleanup(func() {
		r.stop()
		if !downDone { // the test failed before Down: clean up anyway
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := Down(ctx, r.cfg); err != nil {
				t.Errorf("Down: %v", err)
			}
		}
		_ = os.RemoveAll(dataDir)
	})
	r.start()
	ctx := callCtx(t)
	if _, err := r.rs.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: &runtimeapi.RuntimeConfig{
		NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: "10.89.78.0/24"}}}); err != nil {
		t.Fatal(err)
	}
	image := registry + "/busybox:v1"
	if _, err := r.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}}); err != nil {
		t.Fatal(err)
	}
	var sandboxes []string
	for _, name := range []string{"a", "b"} {
		sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: name},
			Hostname: name, LogDirectory: filepath.Join(dataDir, "logs", name)}
		sb, err := r.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
		if err != nil {
			t.Fatal(err)
		}
		sandboxes = append(sandboxes, sb.PodSandboxId)
		c, err := r.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, SandboxConfig: sbCfg,
			Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "sleep"}, Image: &runtimeapi.ImageSpec{Image: image},
				Command: []string{"sleep", "1000"}, LogPath: "sleep/0.log"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
			t.Fatal(err)
		}
	}
	r.stop()
	dctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	downDone = true
	// Down is not told the bridge (kcri1): it reads it from the conflist the runtime wrote.
	downCfg := r.cfg
	downCfg.Bridge = ""
	if err := Down(dctx, downCfg); err != nil {
		t.Fatalf("Down: %v", err)
	}
	checkNothingLeft(t, dataDir, runcBin, "kcri1")
	for _, sb := range sandboxes {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/memory/kubette", "pod-"+sb[:12])); !os.IsNotExist(err) {
			t.Errorf("cgroup of sandbox %s left: %v", sb[:12], err)
		}
	}
	for _, d := range []string{"sandboxes", "containers"} {
		if ents, _ := os.ReadDir(filepath.Join(dataDir, "runtime", d)); len(ents) != 0 {
			t.Errorf("%s left: %d", d, len(ents))
		}
	}
}
