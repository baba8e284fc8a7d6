package runtime

import (
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestRuntimeHandlersOnRealRuntime runs a container in a sandbox of the handler "runc" (a
// RuntimeClass naming the runtime's OCI runtime) on the real runc, and refuses a sandbox of
// a handler the runtime has no OCI runtime for, as containerd does.
func TestRuntimeHandlersOnRealRuntime(t *testing.T) {
	r, busybox := startWithBusybox(t, "krch", "10.89.91.0/24", Config{Bridge: "krch0"})
	ctx := callCtx(t)
	st, err := r.rs.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range st.GetRuntimeHandlers() {
		names = append(names, h.GetName())
	}
	if strings.Join(names, ",") != ",runc" {
		t.Fatalf("handlers %q, want the default and runc", names)
	}
	sbCfg := func(name string) *runtimeapi.PodSandboxConfig {
		return &runtimeapi.PodSandboxConfig{
			Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name},
			Hostname:     name,
			LogDirectory: r.cfg.DataDir + "/logs/" + name,
		}
	}
	_, err = r.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg("odd"), RuntimeHandler: "test-handler"})
	if err == nil || !strings.Contains(err.Error(), `no runtime for "test-handler" is configured`) {
		t.Fatalf("sandbox of an unknown handler: %v", err)
	}
	cfg := sbCfg("runc")
	sb, err := r.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: "runc"})
	if err != nil {
		t.Fatalf("sandbox of handler runc: %v", err)
	}
	sbs, err := r.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.PodSandboxId})
	if err != nil || sbs.GetStatus().GetRuntimeHandler() != "runc" {
		t.Fatalf("sandbox status: %v, %v", sbs, err)
	}
	c, err := r.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, SandboxConfig: cfg,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: busybox},
			Command: []string{"sh", "-c", "exit 3"}, LogPath: "c/0.log"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the container to exit 3", func() (bool, string) {
		s, err := r.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.ContainerId})
		if err != nil {
			return false, err.Error()
		}
		return s.Status.State == runtimeapi.ContainerState_CONTAINER_EXITED && s.Status.ExitCode == 3, s.Status.State.String()
	})
}
