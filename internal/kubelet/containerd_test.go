package kubelet

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/kubette/kubette/internal/kubelet/cri"
	"github.com/kubette/kubette/internal/testenv/needs"
	"github.com/kubette/kubette/internal/testenv/testimage"
)

// containerdConfig is the containerd 1.6 configuration of TestContainerd: its own root, state
// and socket, the CRI plugin's sandbox image a local busybox that sleeps (nothing can be
// pulled here), oom_score_adj restricted (root lacks CAP_SYS_RESOURCE on these machines, and
// a negative one makes runc fail), cgroupfs, and Debian's CNI plugins. docs/node.md shows the
// same settings for a containerd a user runs.
const containerdConfig = `version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = %[3]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[4]q
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[5]q
    conf_dir = %[6]q
`

// TestContainerd runs the kubelet's real-runtime tests against Debian's containerd instead of
// kubette's own runtime (`kubette kubelet --container-runtime-endpoint`): it starts a
// containerd of its own, imports a busybox image into it with ctr, and points
// TestRealRuntime and TestRealRuntimeRestartsAndAdoption at it.
func TestContainerd(t *testing.T) {
	needs.Root(t)
	containerd := needs.Binary(t, "containerd", "containerd")
	ctr := needs.Binary(t, "ctr", "containerd")
	cniDir := needs.CNIPlugins(t)
	// The socket's path must fit a sockaddr_un: a short directory of its own.
	dir, err := os.MkdirTemp("", "kctd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "c.sock")
	root, state, cniConf := filepath.Join(dir, "root"), filepath.Join(dir, "state"), filepath.Join(dir, "cni")
	if err := os.MkdirAll(cniConf, 0o755); err != nil {
		t.Fatal(err)
	}
	const image, pause = "kubette.test/busybox:1", "kubette.test/pause:1"
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, containerdConfig, root, state, sock, pause, cniDir, cniConf), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(containerd, "--config", cfg)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		// containerd leaves its shims' tasks and the overlay snapshots mounted below root
		// when a test failed half-way: unmount whatever is left before the directory goes.
		unmountBelow(t, dir)
		if t.Failed() {
			if b, err := os.ReadFile(logFile.Name()); err == nil {
				t.Logf("containerd's log (end):\n%s", tailLines(string(b), 40))
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := waitForSocket(ctx, sock); err != nil {
		t.Fatalf("containerd did not come up: %v", err)
	}
	// The test image (busybox with sh, echo and sleep) under both names: the sandbox image
	// only needs a command that sleeps, and containerd's pause containers run its default
	// command, so pause gets one.
	imgDir := t.TempDir()
	busybox := testimage.Busybox(t)
	tars := []string{testimage.WriteTarball(t, imgDir, image, busybox)}
	cf, err := busybox.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	pauseCfg := cf.Config
	pauseCfg.Cmd = []string{"/bin/busybox", "sleep", "2147483647"}
	pauseImg, err := mutate.Config(busybox, pauseCfg)
	if err != nil {
		t.Fatal(err)
	}
	tars = append(tars, testimage.WriteTarball(t, imgDir, pause, pauseImg))
	for _, tar := range tars {
		if out, err := exec.CommandContext(ctx, ctr, "--address", sock, "-n", "k8s.io", "images", "import", tar).CombinedOutput(); err != nil {
			t.Fatalf("ctr images import %s: %v: %s", tar, err, out)
		}
	}
	// The kubelet reaches containerd through the same CRI client as kubette's runtime.
	client, err := cri.Dial(ctx, "unix://"+sock)
	if err != nil {
		t.Fatal(err)
	}
	v, err := client.Version(ctx, "0.1.0")
	client.Close()
	if err != nil {
		t.Fatalf("CRI version from containerd: %v", err)
	}
	t.Logf("containerd: %s %s (CRI %s)", v.GetRuntimeName(), v.GetRuntimeVersion(), v.GetRuntimeApiVersion())
	t.Setenv("KUBETTE_TEST_CRI_ENDPOINT", "unix://"+sock)
	t.Setenv("KUBETTE_TEST_IMAGE", image)
	t.Run("RealRuntime", TestRealRuntime)
	t.Run("RestartsAndAdoption", TestRealRuntimeRestartsAndAdoption)
}

// waitForSocket waits until a unix socket accepts connections.
func waitForSocket(ctx context.Context, path string) error {
	for {
		if c, err := cri.Dial(ctx, "unix://"+path); err == nil {
			_, verr := c.Version(ctx, "0.1.0")
			c.Close()
			if verr == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// unmountBelow lazily unmounts every mount point below dir, deepest first.
func unmountBelow(t *testing.T, dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Logf("mount table: %v", err)
		return
	}
	var mps []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			mps = append(mps, f[4])
		}
	}
	for i := len(mps) - 1; i >= 0; i-- {
		if out, err := exec.Command("umount", "-l", mps[i]).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v: %s", mps[i], err, out)
		}
	}
}

// tailLines is the last n lines of s.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
