package runtime

import (
	"fmt"
	"regexp"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubette/kubette/internal/runtime/steps"
)

// TestStepEventsOfARealPod runs a pod on the real runtime with a Client and checks the
// Events of its steps: the sandbox's CNI ADD with the pod's address and gateway, runc
// create, start with the init's pid, kill with the exit code, delete.
func TestStepEventsOfARealPod(t *testing.T) {
	client := fake.NewClientset()
	r, image := startWithBusybox(t, "kstp", "10.89.78.0/24", Config{Bridge: "kstp0", Version: "v-test", Client: client, NodeName: "node-s"})
	ctx := callCtx(t)
	sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "stepper", Namespace: "default", Uid: "uid-s"}, Hostname: "stepper"}
	sb, err := r.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	c, err := r.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, SandboxConfig: sbCfg,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "sleeper"}, Image: &runtimeapi.ImageSpec{Image: image},
			Command: []string{"sleep", "3600"}}})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if _, err := r.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	if _, err := r.rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c.ContainerId, Timeout: 10}); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	if _, err := r.rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c.ContainerId}); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}

	want := map[string]*regexp.Regexp{
		steps.ReasonNetworkReady: regexp.MustCompile(`^CNI kubette: bridge\+host-local → eth0 10\.89\.78\.\d+/24 gw 10\.89\.78\.1 in [0-9.]+[µm]?s$`),
		steps.ReasonRuncCreated:  regexp.MustCompile(`^runc create sleeper in [0-9.]+[µm]?s$`),
		steps.ReasonRuncStarted:  regexp.MustCompile(`^runc start sleeper: pid [1-9]\d* in [0-9.]+[µm]?s$`),
		// SIGKILL follows only if sleep outlives the grace.
		steps.ReasonRuncStopped: regexp.MustCompile(`^runc kill sleeper SIGTERM(, SIGKILL)?: exited \d+ in [0-9.]+[µm]?s$`),
		steps.ReasonRuncDeleted: regexp.MustCompile(`^runc delete sleeper in [0-9.]+[µm]?s$`),
	}
	waitFor(t, "the steps' Events", func() (bool, string) {
		list, err := client.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		seen := map[string]bool{}
		for _, e := range list.Items {
			re, ok := want[e.Reason]
			if !ok || !re.MatchString(e.Note) || e.ReportingController != steps.Controller || e.ReportingInstance != "node-s" ||
				e.Regarding.Name != "stepper" || e.Regarding.UID != "uid-s" {
				t.Fatalf("unexpected Event %s (%s on %s about %s/%s): %s", e.Reason, e.ReportingController, e.ReportingInstance, e.Regarding.Name, e.Regarding.UID, e.Note)
			}
			seen[e.Reason] = true
		}
		return len(seen) == len(want), fmt.Sprintf("seen %v", seen)
	})
}
