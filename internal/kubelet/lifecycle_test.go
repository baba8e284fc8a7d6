package kubelet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"

	"github.com/kubette/kubette/internal/kubelet/cri"
)

// hookRuntime is the CRI fake with ExecSync answered by exec, and a log of the exec and stop
// calls in their order ("exec <cmd>", "stop <name> <timeout>") and of the created configs.
type hookRuntime struct {
	*critest.FakeRuntimeService
	exec func(cmd []string) (stdout, stderr []byte, err error)

	mu      sync.Mutex
	calls   []string
	created []*runtimeapi.ContainerConfig
}

func (r *hookRuntime) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	r.mu.Lock()
	r.calls = append(r.calls, "exec "+strings.Join(cmd, " "))
	r.mu.Unlock()
	if r.exec == nil {
		return nil, nil, nil
	}
	return r.exec(cmd)
}

func (r *hookRuntime) StopContainer(ctx context.Context, id string, timeout int64) error {
	r.FakeRuntimeService.Lock()
	name := ""
	if c := r.Containers[id]; c != nil {
		name = c.Metadata.Name
	}
	r.FakeRuntimeService.Unlock()
	r.mu.Lock()
	r.calls = append(r.calls, fmt.Sprintf("stop %s %d", name, timeout))
	r.mu.Unlock()
	return r.FakeRuntimeService.StopContainer(ctx, id, timeout)
}

func (r *hookRuntime) CreateContainer(ctx context.Context, sandboxID string, cfg *runtimeapi.ContainerConfig, sbCfg *runtimeapi.PodSandboxConfig) (string, error) {
	r.mu.Lock()
	r.created = append(r.created, cfg)
	r.mu.Unlock()
	return r.FakeRuntimeService.CreateContainer(ctx, sandboxID, cfg, sbCfg)
}

func (r *hookRuntime) log() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// fakeHTTPHooks records httpGet hooks and answers them with err.
type fakeHTTPHooks struct {
	mu    sync.Mutex
	calls []string // "<path> <podIP>"
	err   error
}

func (f *fakeHTTPHooks) RunHTTPHook(_ context.Context, _ *v1.Pod, _ *v1.Container, g *v1.HTTPGetAction, podIP string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, g.Path+" "+podIP)
	return "", f.err
}

// hookHarness is a harness whose runtime is a hookRuntime and whose HTTP hooks are faked.
func hookHarness(t *testing.T) (*harness, *hookRuntime, *fakeHTTPHooks) {
	h := newHarness(t)
	hr := &hookRuntime{FakeRuntimeService: h.rt}
	hh := &fakeHTTPHooks{}
	h.k.cfg.Runtime = hr
	h.k.cfg.HTTPHooks = hh
	return h, hr, hh
}

func hasEvent(t *testing.T, events []string, want string) {
	t.Helper()
	for _, e := range events {
		if strings.Contains(e, want) {
			return
		}
	}
	t.Errorf("no event %q in\n%s", want, strings.Join(events, "\n"))
}

func TestPostStartExecRunsBeforeTheContainerIsReported(t *testing.T) {
	h, hr, _ := hookHarness(t)
	c := containerNamed("a", "img")
	c.Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "touch /ready"}}}}
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{c}}})
	p := h.sync(pod)
	if got := hr.log(); len(got) != 1 || got[0] != "exec sh -c touch /ready" {
		t.Fatalf("runtime calls %q, want the postStart exec", got)
	}
	cs := p.Status.ContainerStatuses[0]
	if cs.State.Running == nil || cs.Started == nil || !*cs.Started || p.Status.Phase != v1.PodRunning {
		t.Fatalf("status after a successful postStart: %+v", p.Status)
	}
	h.sync(pod)
	if n := len(hr.log()); n != 1 {
		t.Errorf("postStart ran again on a later sync (%d calls)", n)
	}
}

func TestPostStartFailureKillsTheContainer(t *testing.T) {
	h, hr, _ := hookHarness(t)
	hr.exec = func([]string) ([]byte, []byte, error) {
		return []byte("out\n"), []byte("boom\n"), &cri.ExitError{Code: 3}
	}
	c := containerNamed("a", "img")
	c.Lifecycle = &v1.Lifecycle{
		PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "exit 3"}}},
		PreStop:   &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 0}},
	}
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{c}}})
	p := h.sync(pod)
	first := h.container(pod, "a")
	if first.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Fatalf("container state %s after a failed postStart, want exited", first.State)
	}
	if got := hr.log(); len(got) != 2 || got[1] != "stop a 30" {
		t.Errorf("runtime calls %q, want the exec then the stop with the pod's grace", got)
	}
	cs := p.Status.ContainerStatuses[0]
	want := `Exec lifecycle hook ([sh -c exit 3]) for Container "a" in Pod "p_default(uid-p)" failed - error: command 'sh -c exit 3' exited with 3: boom` + "\n" + `, message: "out\nboom\n"`
	if cs.State.Waiting == nil || cs.State.Waiting.Reason != reasonPostStartHookError || cs.State.Waiting.Message != want {
		t.Errorf("waiting state %+v, want %s %q", cs.State.Waiting, reasonPostStartHookError, want)
	}
	if cs.Started == nil || *cs.Started || cs.Ready || cs.LastTerminationState.Terminated == nil {
		t.Errorf("container status %+v", cs)
	}
	ev := h.events()
	hasEvent(t, ev, "Warning FailedPostStartHook PostStartHook failed")
	hasEvent(t, ev, "Normal Killing FailedPostStartHook")
	// The next sync restarts it (the restart policy is Always).
	hr.exec = nil
	p = h.sync(pod)
	if h.container(pod, "a").Id == first.Id || p.Status.ContainerStatuses[0].State.Running == nil {
		t.Fatalf("not restarted after the failed postStart: %+v", p.Status.ContainerStatuses[0])
	}
}

func TestPostStartHTTPGetGoesToThePodIP(t *testing.T) {
	h, _, hh := hookHarness(t)
	c := containerNamed("a", "img")
	c.Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/started", Port: intstr.FromInt32(8080)}}}
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{c}}})
	p := h.sync(pod)
	if len(hh.calls) != 1 || hh.calls[0] != "/started "+p.Status.PodIP || p.Status.PodIP == "" {
		t.Fatalf("HTTP hooks %q, pod IP %q", hh.calls, p.Status.PodIP)
	}
	// A failing GET fails the hook with upstream's message.
	hh.err = errors.New("connection refused")
	h.exit(h.container(pod, "a"), 1)
	p = h.sync(pod)
	want := `HTTP lifecycle hook (/started) for Container "a" in Pod "p_default(uid-p)" failed - error: connection refused`
	if w := p.Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != reasonPostStartHookError || w.Message != want {
		t.Errorf("waiting %+v, want %q", w, want)
	}
}

func TestHTTPHookWithoutRunnerFails(t *testing.T) {
	h, _, _ := hookHarness(t)
	h.k.cfg.HTTPHooks = nil
	c := containerNamed("a", "img")
	c.Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/x", Port: intstr.FromInt32(80)}}}
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{c}}})
	p := h.sync(pod)
	if w := p.Status.ContainerStatuses[0].State.Waiting; w == nil || !strings.Contains(w.Message, "no HTTP hook runner") {
		t.Errorf("waiting %+v", w)
	}
}

func TestPreStopRunsBeforeTheStopOnDeletion(t *testing.T) {
	h, hr, _ := hookHarness(t)
	a, b := containerNamed("a", "img"), containerNamed("b", "img")
	a.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"drain"}}}}
	grace := int64(20)
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{
		TerminationGracePeriodSeconds: &grace, Containers: []v1.Container{a, b}}})
	p := h.sync(pod)
	now := metav1.NewTime(h.clock.Now())
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace
	h.setPod(p)
	h.sync(p)
	got := hr.log()
	idx := map[string]int{}
	for i, c := range got {
		idx[c] = i + 1
	}
	if idx["exec drain"] == 0 || idx["stop a 20"] == 0 || idx["exec drain"] > idx["stop a 20"] || idx["stop b 20"] == 0 {
		t.Fatalf("runtime calls %q: want the preStop exec before a's stop, b stopped without a hook", got)
	}
}

func TestPreStopFailureRecordsAnEvent(t *testing.T) {
	h, hr, _ := hookHarness(t)
	hr.exec = func([]string) ([]byte, []byte, error) { return nil, nil, &cri.ExitError{Code: 1} }
	a := containerNamed("a", "img")
	a.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"false"}}}}
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{a}}})
	h.sync(pod)
	inst := h.container(pod, "a")
	if err := h.k.killContainer(context.Background(), pod, inst.Id, "a", inst.SandboxID, 30, ""); err != nil {
		t.Fatal(err)
	}
	ev := h.events()
	hasEvent(t, ev, "Normal Killing Stopping container a")
	hasEvent(t, ev, "Warning FailedPreStopHook PreStopHook failed")
	if got := hr.log(); got[len(got)-1] != "stop a 30" {
		t.Errorf("runtime calls %q", got)
	}
}

// killInBackground runs killContainer and returns its result channel.
func killInBackground(h *harness, pod *v1.Pod, grace int64) <-chan error {
	inst := h.container(pod, "a")
	done := make(chan error, 1)
	go func() { done <- h.k.killContainer(context.Background(), pod, inst.Id, "a", inst.SandboxID, grace, "") }()
	return done
}

// waitForTimers waits until n timers wait on the fake clock.
func waitForTimers(t *testing.T, h *harness, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for h.clock.Waiters() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d timers wait on the clock, want %d", h.clock.Waiters(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPreStopSleepCountsAgainstTheGracePeriod(t *testing.T) {
	for _, tc := range []struct {
		name        string
		sleep, step int64
		wantStop    string
	}{
		{"sleep shorter than the grace", 5, 5, "stop a 25"},
		{"sleep longer than the grace", 40, 30, "stop a 2"}, // cut at the grace, then the minimum
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, hr, _ := hookHarness(t)
			a := containerNamed("a", "img")
			a.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: tc.sleep}}}
			pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{a}}})
			h.sync(pod)
			base := h.clock.Waiters()
			done := killInBackground(h, pod, 30)
			waitForTimers(t, h, base+2) // the sleep and the grace period
			h.clock.Step(time.Duration(tc.step) * time.Second)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := hr.log(); len(got) != 1 || got[0] != tc.wantStop {
				t.Errorf("runtime calls %q, want %q", got, tc.wantStop)
			}
			for _, e := range h.events() {
				if strings.Contains(e, "FailedPreStopHook") {
					t.Errorf("a sleep cut by the grace period is no failure: %s", e)
				}
			}
		})
	}
}

func TestActiveDeadlineFailsThePod(t *testing.T) {
	h, hr, _ := hookHarness(t)
	deadline := int64(60)
	a := containerNamed("a", "img")
	a.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"bye"}}}}
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{
		ActiveDeadlineSeconds: &deadline, Containers: []v1.Container{a}}})
	p := h.sync(pod)
	if p.Status.Phase != v1.PodRunning || p.Status.StartTime == nil {
		t.Fatalf("status %+v", p.Status)
	}
	h.clock.Step(59 * time.Second)
	if p = h.sync(pod); p.Status.Phase != v1.PodRunning {
		t.Fatalf("failed before the deadline: %s", p.Status.Phase)
	}
	h.clock.Step(2 * time.Second)
	p = h.sync(pod)
	if p.Status.Phase != v1.PodFailed || p.Status.Reason != reasonDeadlineExceeded || p.Status.Message != messageDeadlineExceeded {
		t.Fatalf("phase %s reason %q message %q", p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
	if cs := p.Status.ContainerStatuses[0]; cs.State.Terminated == nil || cs.Ready {
		t.Errorf("container after the deadline: %+v", cs)
	}
	if got := hr.log(); len(got) != 2 || got[0] != "exec bye" || got[1] != "stop a 30" {
		t.Errorf("runtime calls %q: want the preStop hook, then the stop", got)
	}
	hasEvent(t, h.events(), "Normal DeadlineExceeded Pod was active on the node longer than the specified deadline")
	first := h.container(pod, "a").Id
	p = h.sync(pod)
	if h.container(pod, "a").Id != first || p.Status.Phase != v1.PodFailed || p.Status.Reason != reasonDeadlineExceeded {
		t.Errorf("the failed pod ran again or lost its reason: %+v", p.Status)
	}
}

func TestEphemeralContainersStartOnceWithTheirTarget(t *testing.T) {
	h, hr, _ := hookHarness(t)
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{
		RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{containerNamed("a", "img")}}})
	p := h.sync(pod)
	if len(p.Status.EphemeralContainerStatuses) != 0 {
		t.Fatalf("ephemeral statuses before any: %+v", p.Status.EphemeralContainerStatuses)
	}
	p.Spec.EphemeralContainers = []v1.EphemeralContainer{
		{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger", Image: "img", Command: []string{"sh"}, TerminationMessagePath: "/dev/termination-log"}},
		{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "peek", Image: "img"}, TargetContainerName: "a"},
	}
	h.setPod(p)
	p = h.sync(p)
	dbg := h.container(pod, "debugger")
	if dbg == nil || dbg.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatal("the ephemeral container did not start")
	}
	if dbg.SandboxID != h.container(pod, "a").SandboxID {
		t.Error("the ephemeral container is not in the pod's sandbox")
	}
	var peek *runtimeapi.ContainerConfig
	for _, cfg := range hr.created {
		if cfg.Metadata.Name == "peek" {
			peek = cfg
		}
	}
	ns := peek.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns.GetPid() != runtimeapi.NamespaceMode_TARGET || ns.GetTargetId() != h.container(pod, "a").Id {
		t.Errorf("peek's namespaces %+v, want the PID namespace of a (%s)", ns, h.container(pod, "a").Id)
	}
	if len(p.Status.EphemeralContainerStatuses) != 2 {
		t.Fatalf("ephemeral statuses %+v", p.Status.EphemeralContainerStatuses)
	}
	es := p.Status.EphemeralContainerStatuses[0]
	if es.Name != "debugger" || es.State.Running == nil || es.Ready || es.Started != nil || es.ContainerID == "" {
		t.Errorf("debugger status %+v", es)
	}
	hasEvent(t, h.events(), "Normal Started Started container debugger")
	// Once it exited it stays exited, whatever the pod's restart policy.
	h.exit(dbg, 0)
	p = h.sync(p)
	if h.container(pod, "debugger").Id != dbg.Id {
		t.Error("the ephemeral container was restarted")
	}
	if es := p.Status.EphemeralContainerStatuses[0]; es.State.Terminated == nil || es.State.Terminated.Reason != "Completed" {
		t.Errorf("debugger status after exit %+v", es)
	}
	if p.Status.Phase != v1.PodRunning {
		t.Errorf("phase %s", p.Status.Phase)
	}
}

func TestEphemeralContainerFieldPath(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers:      []v1.Container{{Name: "i"}},
		Containers:          []v1.Container{{Name: "a"}},
		EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "e"}}},
	}}
	for name, want := range map[string]string{"i": "spec.initContainers{i}", "a": "spec.containers{a}", "e": "spec.ephemeralContainers{e}"} {
		if got := fieldPath(pod, &v1.Container{Name: name}); got != want {
			t.Errorf("fieldPath(%s) = %s, want %s", name, got, want)
		}
		if containerSpec(pod, name) == nil {
			t.Errorf("containerSpec(%s) = nil", name)
		}
	}
}
