package runtime

import (
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestPodSharesIPCAndProcesses runs, on the real runc, pods of two containers: their
// containers share the pod's IPC namespace and /dev/shm, and with shareProcessNamespace (pid
// POD) see each other's processes, as under containerd's pause container; with the pid mode
// CONTAINER (the kubelet's default) they do not.
func TestPodSharesIPCAndProcesses(t *testing.T) {
	r, image := startWithBusybox(t, "kns", "10.89.82.0/24", Config{Bridge: "kns0", Version: "v-test"})
	ctx := callCtx(t)
	exec := func(id string, cmd ...string) string {
		t.Helper()
		resp, err := r.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: 30})
		if err != nil || resp.ExitCode != 0 {
			t.Fatalf("exec %q: %v %v: %s %s", cmd, err, resp.GetExitCode(), resp.GetStdout(), resp.GetStderr())
		}
		return strings.TrimSpace(string(resp.Stdout))
	}
	pod := func(name string, pid runtimeapi.NamespaceMode) (a, b string) {
		t.Helper()
		opts := &runtimeapi.NamespaceOption{Ipc: runtimeapi.NamespaceMode_POD, Pid: pid}
		sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name}, Hostname: name,
			Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: opts}}}
		sb, err := r.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
		if err != nil {
			t.Fatalf("RunPodSandbox: %v", err)
		}
		run := func(c string, cmd ...string) string {
			resp, err := r.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, SandboxConfig: sbCfg,
				Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: c}, Image: &runtimeapi.ImageSpec{Image: image}, Command: cmd,
					Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: opts}}}})
			if err != nil {
				t.Fatalf("CreateContainer %s: %v", c, err)
			}
			if _, err := r.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: resp.ContainerId}); err != nil {
				t.Fatalf("StartContainer %s: %v", c, err)
			}
			return resp.ContainerId
		}
		return run("a", "sleep", "3601"), run("b", "sleep", "3602")
	}

	// Shared processes, IPC namespace and /dev/shm.
	a, b := pod("shared", runtimeapi.NamespaceMode_POD)
	if ia, ib := exec(a, "busybox", "readlink", "/proc/self/ns/ipc"), exec(b, "busybox", "readlink", "/proc/self/ns/ipc"); ia != ib {
		t.Errorf("IPC namespaces %s and %s: not shared", ia, ib)
	}
	exec(a, "sh", "-c", "echo from-a > /dev/shm/note")
	if got := exec(b, "cat", "/dev/shm/note"); got != "from-a" {
		t.Errorf("b reads %q from the pod's /dev/shm, want what a wrote", got)
	}
	if ps := exec(b, "ps", "-o", "args"); !strings.Contains(ps, "sleep 3601") || !strings.Contains(ps, "sleep 3602") {
		t.Errorf("with a shared pid namespace b sees:\n%s\nwant both sleeps", ps)
	}
	if pa, pb := exec(a, "busybox", "readlink", "/proc/self/ns/pid"), exec(b, "busybox", "readlink", "/proc/self/ns/pid"); pa != pb {
		t.Errorf("pid namespaces %s and %s: not shared", pa, pb)
	}

	// The default pid mode: IPC shared, processes not.
	a, b = pod("apart", runtimeapi.NamespaceMode_CONTAINER)
	if ia, ib := exec(a, "busybox", "readlink", "/proc/self/ns/ipc"), exec(b, "busybox", "readlink", "/proc/self/ns/ipc"); ia != ib {
		t.Errorf("IPC namespaces %s and %s: not shared", ia, ib)
	}
	if ps := exec(b, "ps", "-o", "args"); strings.Contains(ps, "sleep 3601") {
		t.Errorf("with pid mode CONTAINER b sees a's process:\n%s", ps)
	}
}
