package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubette/kubette/internal/runtime"
	"github.com/kubette/kubette/internal/testenv/needs"
	"github.com/kubette/kubette/internal/testenv/testimage"
)

// TestRuntimeBinary builds kubette and runs `kubette runtime`: a host-network pod's container
// runs under the binary's own `kubette shim` and logs in the CRI format; SIGTERM stops the
// runtime and removes its socket.
func TestRuntimeBinary(t *testing.T) {
	needs.Root(t)
	needs.Binary(t, "runc", "runc")
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "kubette")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	registry := testimage.Registry(t)
	testimage.Push(t, registry, "busybox:v1", testimage.Busybox(t))
	dataDir, err := os.MkdirTemp("", "kbin")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "runtime", "--data-dir", dataDir, "--bridge", "kcri2")
	stderr := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := runtime.Down(ctx, runtime.Config{DataDir: dataDir, Bridge: "kcri2"}); err != nil {
			t.Errorf("Down: %v", err)
		}
		_ = os.RemoveAll(dataDir)
		if t.Failed() {
			t.Logf("kubette runtime's output:\n%s", stderr.String())
		}
	})

	conn, err := grpc.NewClient("unix://"+filepath.Join(dataDir, "cri.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.WaitForReady(true)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rs, is := runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	v, err := rs.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil || v.RuntimeName != "kubette" || v.RuntimeVersion == "" {
		t.Fatalf("Version = %v, %v", v, err)
	}
	image := registry + "/busybox:v1"
	if _, err := is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}}); err != nil {
		t.Fatal(err)
	}
	logDir := filepath.Join(dataDir, "logs", "pod")
	sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "pod", Namespace: "default", Uid: "u"},
		LogDirectory: logDir, Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}}}}
	sb, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
	if err != nil {
		t.Fatal(err)
	}
	c, err := rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, SandboxConfig: sbCfg,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "echo"}, Image: &runtimeapi.ImageSpec{Image: image},
			Command: []string{"echo", "via the binary"}, LogPath: "echo.log"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		st, err := rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.ContainerId})
		if err != nil {
			t.Fatal(err)
		}
		if st.Status.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			if st.Status.ExitCode != 0 {
				t.Fatalf("container exited: %v", st.Status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("container still %v", st.Status.State)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for b := []byte(nil); !strings.Contains(string(b), " stdout F via the binary\n"); b, _ = os.ReadFile(filepath.Join(logDir, "echo.log")) {
		if time.Now().After(deadline) {
			t.Fatalf("log = %q", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
		t.Fatal(err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("kubette runtime after SIGTERM: %v", err)
		}
		exited <- err // for the cleanup
	case <-time.After(time.Minute):
		t.Fatal("kubette runtime did not stop on SIGTERM")
	}
	if _, err := os.Stat(filepath.Join(dataDir, "cri.sock")); !os.IsNotExist(err) {
		t.Errorf("socket left after SIGTERM: %v", err)
	}
}
