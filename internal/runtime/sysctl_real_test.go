package runtime

import (
	"os"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestPodSysctls runs, on the real runc, a pod whose sandbox config carries sysctls of the IPC
// and the network namespace: each container sees them set, the host keeps its own values.
func TestPodSysctls(t *testing.T) {
	r, image := startWithBusybox(t, "ksys", "10.89.84.0/24", Config{Bridge: "ksys0", Version: "v-test"})
	ctx := callCtx(t)
	hostShm, err := os.ReadFile("/proc/sys/kernel/shm_rmid_forced")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"kernel.shm_rmid_forced": "1", "net.ipv4.ip_unprivileged_port_start": "1000"}
	if strings.TrimSpace(string(hostShm)) == "1" {
		want["kernel.shm_rmid_forced"] = "0" // differ from the host's value either way
	}
	opts := &runtimeapi.NamespaceOption{Ipc: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER}
	sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "sysctl", Namespace: "default", Uid: "uid-sysctl"}, Hostname: "sysctl",
		Linux: &runtimeapi.LinuxPodSandboxConfig{Sysctls: want, SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: opts}}}
	sb, err := r.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	for _, name := range []string{"a", "b"} {
		resp, err := r.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, SandboxConfig: sbCfg,
			Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: image}, Command: []string{"sleep", "3600"},
				Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: opts}}}})
		if err != nil {
			t.Fatalf("CreateContainer %s: %v", name, err)
		}
		if _, err := r.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: resp.ContainerId}); err != nil {
			t.Fatalf("StartContainer %s: %v", name, err)
		}
		for key, value := range want {
			path := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
			out, err := r.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: resp.ContainerId, Cmd: []string{"cat", path}, Timeout: 30})
			if err != nil || out.ExitCode != 0 {
				t.Fatalf("exec cat %s in %s: %v %v: %s", path, name, err, out.GetExitCode(), out.GetStderr())
			}
			if got := strings.TrimSpace(string(out.Stdout)); got != value {
				t.Errorf("container %s: %s = %q, want %q", name, key, got, value)
			}
		}
	}
	if after, _ := os.ReadFile("/proc/sys/kernel/shm_rmid_forced"); string(after) != string(hostShm) {
		t.Errorf("the host's kernel.shm_rmid_forced changed from %q to %q", hostShm, after)
	}
}
