package kubelet

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"

	"github.com/kubette/kubette/internal/kubelet/server"
)

// attempt is one runtime container of a pod's container, as the fake runtime lists it.
type attempt struct {
	id, container string
	n             uint32
	createdAt     int64
	state         runtimeapi.ContainerState
	logPath       string
}

// setAttempts makes the fake runtime hold exactly these containers of pod (and other's).
func setAttempts(h *harness, pod *v1.Pod, as []attempt, others ...*critest.FakeContainer) {
	var list []*critest.FakeContainer
	for _, a := range as {
		list = append(list, &critest.FakeContainer{SandboxID: "sb-" + string(pod.UID), ContainerStatus: runtimeapi.ContainerStatus{
			Id: a.id, Metadata: &runtimeapi.ContainerMetadata{Name: a.container, Attempt: a.n},
			CreatedAt: a.createdAt, State: a.state, LogPath: a.logPath,
			Labels: map[string]string{labelPodUID: string(pod.UID), labelContainerName: a.container},
		}})
	}
	h.rt.SetFakeContainers(append(list, others...))
}

func logsPod(statuses ...v1.ContainerStatus) *v1.Pod {
	return &v1.Pod{
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "init", Image: "busybox"}},
			Containers:     []v1.Container{{Name: "c", Image: "busybox"}, {Name: "side", Image: "busybox"}},
		},
		Status: v1.PodStatus{ContainerStatuses: statuses},
	}
}

// lastTerminated is a container status naming id as the last termination, as status.go
// writes it while a crashed container waits out its back-off (waiting) or runs again.
func lastTerminated(name, id string, waiting bool) v1.ContainerStatus {
	cs := v1.ContainerStatus{Name: name, LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
		ExitCode: 1, ContainerID: containerIDPrefix + id,
	}}}
	if waiting {
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
	} else {
		cs.State.Running = &v1.ContainerStateRunning{}
	}
	return cs
}

func TestContainerLogsPicksAttempts(t *testing.T) {
	exited, running := runtimeapi.ContainerState_CONTAINER_EXITED, runtimeapi.ContainerState_CONTAINER_RUNNING
	three := []attempt{ // listed oldest last, not in order
		{id: "a1", container: "c", n: 1, createdAt: 20, state: exited, logPath: "c/1.log"},
		{id: "a0", container: "c", n: 0, createdAt: 10, state: exited, logPath: "c/0.log"},
		{id: "a2", container: "c", n: 2, createdAt: 30, state: running, logPath: "c/2.log"},
	}
	for _, tc := range []struct {
		name          string
		statuses      []v1.ContainerStatus
		attempts      []attempt
		container     string
		current, prev string // log file names relative to the pod's log dir; "" for an error
	}{
		{name: "running, status names the previous", statuses: []v1.ContainerStatus{lastTerminated("c", "a1", false)},
			attempts: three, container: "c", current: "c/2.log", prev: "c/1.log"},
		{name: "status not written yet: the attempt before the newest", attempts: three, container: "c",
			current: "c/2.log", prev: "c/1.log"},
		{name: "crash loop back-off: previous is the newest crash", statuses: []v1.ContainerStatus{lastTerminated("c", "a2", true)},
			attempts: []attempt{
				{id: "a0", container: "c", n: 0, createdAt: 10, state: exited, logPath: "c/0.log"},
				{id: "a1", container: "c", n: 1, createdAt: 20, state: exited, logPath: "c/1.log"},
				{id: "a2", container: "c", n: 2, createdAt: 30, state: exited, logPath: "c/2.log"},
			}, container: "c", current: "c/2.log", prev: "c/2.log"},
		{name: "first crash, back-off: its only attempt is the previous", statuses: []v1.ContainerStatus{lastTerminated("c", "a0", true)},
			attempts:  []attempt{{id: "a0", container: "c", n: 0, createdAt: 10, state: exited, logPath: "c/0.log"}},
			container: "c", current: "c/0.log", prev: "c/0.log"},
		{name: "status names a removed container: the attempt before the newest", statuses: []v1.ContainerStatus{lastTerminated("c", "gone", false)},
			attempts: three, container: "c", current: "c/2.log", prev: "c/1.log"},
		{name: "one attempt, never restarted", attempts: []attempt{{id: "a0", container: "c", n: 0, createdAt: 10, state: running, logPath: "c/0.log"}},
			container: "c", current: "c/0.log"},
		{name: "same attempt number: the newer creation wins", attempts: []attempt{
			{id: "old", container: "c", n: 0, createdAt: 10, state: exited, logPath: "c/old.log"},
			{id: "new", container: "c", n: 0, createdAt: 50, state: running, logPath: "c/new.log"},
		}, container: "c", current: "c/new.log", prev: "c/old.log"},
		{name: "the other container's attempts are not this one's", attempts: append([]attempt{
			{id: "s0", container: "side", n: 0, createdAt: 5, state: running, logPath: "side/0.log"}}, three...),
			container: "side", current: "side/0.log"},
		{name: "init container", attempts: []attempt{
			{id: "i0", container: "init", n: 0, createdAt: 1, state: exited, logPath: "init/0.log"},
			{id: "i1", container: "init", n: 1, createdAt: 2, state: exited, logPath: "init/1.log"},
		}, container: "init", current: "init/1.log", prev: "init/0.log"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			pod := logsPod(tc.statuses...)
			pod.Name, pod.Namespace, pod.UID = "p", "default", "uid-p"
			h.setPod(pod)
			// Another pod's container of the same name and a newer attempt must not count.
			other := &critest.FakeContainer{SandboxID: "sb-other", ContainerStatus: runtimeapi.ContainerStatus{
				Id: "other", Metadata: &runtimeapi.ContainerMetadata{Name: tc.container, Attempt: 9}, CreatedAt: 99,
				State: running, LogPath: "other.log", Labels: map[string]string{labelPodUID: "uid-other", labelContainerName: tc.container},
			}}
			setAttempts(h, pod, tc.attempts, other)
			dir := podLogDir(h.k.cfg.LogDir, pod)
			check := func(previous bool, want string) {
				t.Helper()
				got, err := h.k.ContainerLogs("default", "p", tc.container, previous)
				switch {
				case want == "" && !errors.Is(err, server.ErrNoPreviousContainer):
					t.Errorf("ContainerLogs(previous=%v) = %q, %v; want ErrNoPreviousContainer", previous, got, err)
				case want != "" && (err != nil || got != filepath.Join(dir, want)):
					t.Errorf("ContainerLogs(previous=%v) = %q, %v; want %s", previous, got, err, filepath.Join(dir, want))
				}
			}
			check(false, tc.current)
			check(true, tc.prev)
		})
	}
}

func TestContainerLogsErrors(t *testing.T) {
	h := newHarness(t)
	pod := logsPod(v1.ContainerStatus{Name: "c", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ErrImagePull"}}})
	pod.Name, pod.Namespace, pod.UID = "p", "default", "uid-p"
	h.setPod(pod)
	setAttempts(h, pod, []attempt{{id: "s0", container: "side", state: runtimeapi.ContainerState_CONTAINER_RUNNING, logPath: "/abs/side.log"}})

	if _, err := h.k.ContainerLogs("default", "p", "nope", false); !errors.Is(err, server.ErrContainerNotFound) {
		t.Errorf("unknown container: err = %v, want ErrContainerNotFound", err)
	}
	if _, err := h.k.ContainerLogs("default", "nopod", "c", false); !errors.Is(err, server.ErrPodNotFound) {
		t.Errorf("unknown pod: err = %v, want ErrPodNotFound", err)
	}
	if _, err := h.k.ContainerLogs("other", "p", "c", false); !errors.Is(err, server.ErrPodNotFound) {
		t.Errorf("pod of another namespace: err = %v, want ErrPodNotFound", err)
	}
	// No attempt yet: the waiting reason of the status.
	_, err := h.k.ContainerLogs("default", "p", "c", false)
	if err == nil || err.Error() != `container "c" in pod "p" is waiting to start: ErrImagePull` {
		t.Errorf("no attempt: err = %v", err)
	}
	if _, err := h.k.ContainerLogs("default", "p", "c", true); !errors.Is(err, server.ErrNoPreviousContainer) {
		t.Errorf("no attempt, previous: err = %v, want ErrNoPreviousContainer", err)
	}
	// An absolute log path is kept as the runtime reports it.
	if got, err := h.k.ContainerLogs("default", "p", "side", false); err != nil || got != "/abs/side.log" {
		t.Errorf("absolute log path: %q, %v", got, err)
	}
	// A runtime without a log path for the container.
	setAttempts(h, pod, []attempt{{id: "s0", container: "side", state: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if _, err := h.k.ContainerLogs("default", "p", "side", false); err == nil || !strings.Contains(err.Error(), "has no log file") {
		t.Errorf("no log path: err = %v", err)
	}
	// ContainerRunning follows the newest attempt.
	if !h.k.ContainerRunning("default", "p", "side") || h.k.ContainerRunning("default", "p", "c") || h.k.ContainerRunning("default", "p", "nope") {
		t.Errorf("ContainerRunning: side %v, c %v, nope %v; want true, false, false",
			h.k.ContainerRunning("default", "p", "side"), h.k.ContainerRunning("default", "p", "c"), h.k.ContainerRunning("default", "p", "nope"))
	}
}
