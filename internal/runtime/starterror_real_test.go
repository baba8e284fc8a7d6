package runtime

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestInvalidCommandIsAStartError runs, on the real runc, a container whose command does not
// exist: CreateContainer succeeds (runc create is StartContainer's, as containerd's CRI plugin
// creates the task at start), StartContainer fails with runc's message, and the container is
// EXITED with exit code 128 and reason StartError, as the kubelet shows it. A container created
// but not started stays CREATED across a restart of the runtime, and starts.
func TestInvalidCommandIsAStartError(t *testing.T) {
	r, image := startWithBusybox(t, "kse", "10.89.81.0/24", Config{Bridge: "kse0", Version: "v-test"})
	ctx := callCtx(t)
	sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "bad", Namespace: "default", Uid: "uid-bad"}, Hostname: "bad"}
	sb, err := r.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	create := func(name string, cmd ...string) string {
		t.Helper()
		c, err := r.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, SandboxConfig: sbCfg,
			Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: image}, Command: cmd}})
		if err != nil {
			t.Fatalf("CreateContainer %s: %v", name, err)
		}
		return c.ContainerId
	}
	state := func(id string) *runtimeapi.ContainerStatus {
		t.Helper()
		st, err := r.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
		if err != nil {
			t.Fatalf("ContainerStatus: %v", err)
		}
		return st.Status
	}

	bad := create("bad", "/no/such/binary")
	if st := state(bad); st.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		t.Fatalf("after CreateContainer: %v", st)
	}
	_, err = r.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: bad})
	if status.Code(err) != codes.Unknown || !strings.Contains(err.Error(), "/no/such/binary") {
		t.Fatalf("StartContainer of a missing binary: %v, want gRPC Unknown with runc's message", err)
	}
	st := state(bad)
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.Reason != "StartError" || st.ExitCode != 128 ||
		!strings.Contains(st.Message, "/no/such/binary") || st.FinishedAt == 0 {
		t.Fatalf("status after the failed start = %v", st)
	}
	t.Logf("StartError message: %s", st.Message)

	good := create("good", "sleep", "3600")
	r.stop()
	r.start()
	if st := state(good); st.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		t.Fatalf("created container after a restart: %v", st)
	}
	if st := state(bad); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.Reason != "StartError" {
		t.Fatalf("StartError container after a restart: %v", st)
	}
	if _, err := r.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: good}); err != nil {
		t.Fatalf("StartContainer after a restart: %v", err)
	}
	if st := state(good); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("started after a restart: %v", st)
	}
	if _, err := r.rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}
	if _, err := r.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
		t.Fatalf("RemovePodSandbox: %v", err)
	}
}
