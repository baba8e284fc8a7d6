package cri

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// podNSRequest runs a sandbox with the namespace options and creates a container in it with
// the same options, returning the sandbox ID and the container's create error.
func podNSRequest(e *env, name string, opts *runtimeapi.NamespaceOption) (string, error) {
	e.t.Helper()
	cfg := sandboxConfig(name, nil)
	cfg.LogDirectory = filepath.Join(e.dir, "logs", name)
	cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: opts}}
	resp, err := e.srv.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		e.t.Fatalf("RunPodSandbox: %v", err)
	}
	cc := containerConfig("app", nil)
	cc.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: opts}}
	_, err = e.srv.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: resp.PodSandboxId, Config: cc, SandboxConfig: cfg})
	return resp.PodSandboxId, err
}

func TestPodNamespaces(t *testing.T) {
	e := newEnv(t)
	start, ok := procStart("/proc", os.Getpid())
	if !ok {
		t.Fatal("no start time of this process")
	}
	e.ctrs.holder = &PIDHolder{Pid: os.Getpid(), Start: start} // a live process as the holder

	// shareProcessNamespace: the pod's IPC namespace, shm and pid namespace.
	sb, err := podNSRequest(e, "shared", &runtimeapi.NamespaceOption{Ipc: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_POD})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	dir := e.srv.sandboxDir(sb)
	in := e.spec.last()
	if want := fmt.Sprintf("/proc/%d/ns/pid", os.Getpid()); in.PodPIDNamespace != want {
		t.Errorf("PodPIDNamespace = %q, want the holder's %q", in.PodPIDNamespace, want)
	}
	if in.IPCNamespace != filepath.Join(dir, "ipc") || in.SandboxFiles.Shm != filepath.Join(dir, "shm") {
		t.Errorf("IPCNamespace, Shm = %q, %q; want the sandbox's ipc and shm", in.IPCNamespace, in.SandboxFiles.Shm)
	}

	// The default: a shared IPC namespace and shm, each container its own pid namespace.
	if _, err := podNSRequest(e, "default", &runtimeapi.NamespaceOption{Ipc: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER}); err != nil {
		t.Fatal(err)
	}
	if in := e.spec.last(); in.PodPIDNamespace != "" || in.IPCNamespace == "" {
		t.Errorf("default pod: PodPIDNamespace %q (want none), IPCNamespace %q (want the pod's)", in.PodPIDNamespace, in.IPCNamespace)
	}
	// The host's IPC: nothing of the pod's.
	if _, err := podNSRequest(e, "hostipc", &runtimeapi.NamespaceOption{Ipc: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_CONTAINER}); err != nil {
		t.Fatal(err)
	}
	if in := e.spec.last(); in.IPCNamespace != "" || in.SandboxFiles.Shm != "" {
		t.Errorf("host IPC: IPCNamespace %q, Shm %q; want none", in.IPCNamespace, in.SandboxFiles.Shm)
	}
	if want := []string{"setup ipc=true pid=true", "setup ipc=true pid=false", "setup ipc=false pid=false"}; !slices.Equal(e.ctrs.podNS, want) {
		t.Errorf("pod namespace calls %q, want %q", e.ctrs.podNS, want)
	}

	// A holder that has exited makes the sandbox NOTREADY and refuses its containers.
	e.ctrs.holder = &PIDHolder{Pid: os.Getpid(), Start: start + "0"}
	dead, err := podNSRequest(e, "dead", &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_POD})
	wantCode(t, err, codes.FailedPrecondition)
	st, err := e.srv.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: dead})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Errorf("sandbox with a dead holder is %v, want NOTREADY", st.Status.State)
	}

	// Stop ends the pid namespace; removal removes them all.
	e.ctrs.podNS = nil
	if _, err := e.srv.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(e.ctrs.podNS, "stop") || e.ctrs.podNS[len(e.ctrs.podNS)-1] != "remove" {
		t.Errorf("pod namespace calls on stop and remove: %q", e.ctrs.podNS)
	}
}
