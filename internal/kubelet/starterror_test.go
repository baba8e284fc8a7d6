package kubelet

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// runcNotFound is what kubette's runtime (and containerd's) says when runc create cannot find
// the container's command.
const runcNotFound = `failed to start container 0123: create container 0123: runc create: exit status 1: runc create failed: ` +
	`unable to start container process: exec: "/no/such/binary": stat /no/such/binary: no such file or directory`

// failsOnStart is a runtime whose StartContainer fails as a CRI runtime fails it when the
// container's command does not exist: the container ends EXITED, exit code 128, reason
// StartError with the runtime's message, and the call returns the error (gRPC Unknown).
type failsOnStart struct {
	RuntimeService
	h *harness
}

func (f failsOnStart) StartContainer(_ context.Context, id string) error {
	f.h.rt.Lock()
	defer f.h.rt.Unlock()
	c := f.h.rt.Containers[id]
	now := f.h.clock.Now().UnixNano()
	c.State, c.ExitCode, c.Reason, c.Message = runtimeapi.ContainerState_CONTAINER_EXITED, 128, "StartError", runcNotFound
	c.StartedAt, c.FinishedAt = now, now
	return status.Error(codes.Unknown, runcNotFound)
}

// TestStartErrorAsUpstream: a container whose start fails is reported as upstream's kubelet
// reports it: a Warning Failed Event "Error: <the runtime's message>", Waiting
// RunContainerError with the message and the failed instance as lastState (Terminated
// StartError, 128), then, restartPolicy Always, a restart at once and CrashLoopBackOff.
func TestStartErrorAsUpstream(t *testing.T) {
	h := newHarness(t)
	h.k.cfg.Runtime = failsOnStart{RuntimeService: h.rt, h: h}
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: v1.PodSpec{
		Containers: []v1.Container{{Name: "app", Image: "img", Command: []string{"/no/such/binary"}}},
	}})
	p := h.sync(pod)
	events := strings.Join(h.events(), "\n")
	if !strings.Contains(events, "Normal Created Created container: app") ||
		!strings.Contains(events, "Warning Failed Error: "+runcNotFound) || strings.Contains(events, "Started container") {
		t.Errorf("events:\n%s", events)
	}
	checkLast := func(when string, cs v1.ContainerStatus) {
		t.Helper()
		last := cs.LastTerminationState.Terminated
		if last == nil || last.Reason != "StartError" || last.ExitCode != 128 || last.Message != runcNotFound || last.FinishedAt.IsZero() {
			t.Errorf("%s: lastState %+v", when, cs.LastTerminationState)
		}
	}
	cs := p.Status.ContainerStatuses[0]
	if w := cs.State.Waiting; w == nil || w.Reason != reasonRunContainerError || w.Message != runcNotFound {
		t.Errorf("after the failed start: state %+v", cs.State)
	}
	checkLast("after the failed start", cs)
	// Waiting with a last termination, restartPolicy Always: Running, as upstream's getPhase.
	if p.Status.Phase != v1.PodRunning || cs.Ready || cs.RestartCount != 0 {
		t.Errorf("after the failed start: phase %s, ready %v, restarts %d", p.Status.Phase, cs.Ready, cs.RestartCount)
	}

	// The first restart is at once and fails the same way.
	p = h.sync(pod)
	if n := h.container(pod, "app").Metadata.Attempt; n != 1 {
		t.Fatalf("attempt %d after the second sync, want the restart at once", n)
	}
	cs = p.Status.ContainerStatuses[0]
	if w := cs.State.Waiting; w == nil || w.Reason != reasonRunContainerError || cs.RestartCount != 1 {
		t.Errorf("after the failed restart: state %+v, restarts %d", cs.State, cs.RestartCount)
	}
	checkLast("after the failed restart", cs)

	// Then the back-off holds it: CrashLoopBackOff, the StartError still the last state.
	p = h.sync(pod)
	cs = p.Status.ContainerStatuses[0]
	if w := cs.State.Waiting; w == nil || w.Reason != reasonCrashLoopBackOff || !strings.HasPrefix(w.Message, "back-off 10s restarting failed container=app") {
		t.Errorf("in the back-off: state %+v", cs.State)
	}
	checkLast("in the back-off", cs)
	if n := h.container(pod, "app").Metadata.Attempt; n != 1 {
		t.Errorf("restarted during the back-off (attempt %d)", n)
	}
	h.clock.Step(11 * time.Second)
	h.sync(pod)
	if n := h.container(pod, "app").Metadata.Attempt; n != 2 {
		t.Errorf("not restarted after the back-off (attempt %d)", n)
	}
}

// TestStartErrorWithRestartNeverFailsThePod: with restartPolicy Never a container that could
// not start is Terminated StartError and the pod Failed.
func TestStartErrorWithRestartNeverFailsThePod(t *testing.T) {
	h := newHarness(t)
	h.k.cfg.Runtime = failsOnStart{RuntimeService: h.rt, h: h}
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: v1.PodSpec{
		RestartPolicy: v1.RestartPolicyNever,
		Containers:    []v1.Container{{Name: "app", Image: "img", Command: []string{"/no/such/binary"}}},
	}})
	h.sync(pod)
	p := h.sync(pod)
	cs := p.Status.ContainerStatuses[0]
	if term := cs.State.Terminated; term == nil || term.Reason != "StartError" || term.ExitCode != 128 || term.Message != runcNotFound {
		t.Errorf("state %+v", cs.State)
	}
	if p.Status.Phase != v1.PodFailed {
		t.Errorf("phase %s, want Failed", p.Status.Phase)
	}
	if n := h.container(pod, "app").Metadata.Attempt; n != 0 {
		t.Errorf("restarted with restartPolicy Never (attempt %d)", n)
	}
}
