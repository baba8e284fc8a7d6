package kubelet

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func condition(p *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func wantCondition(t *testing.T, p *v1.Pod, ct v1.PodConditionType, status v1.ConditionStatus, reason, msg string) {
	t.Helper()
	c := condition(p, ct)
	if c == nil {
		t.Fatalf("no %s condition in %+v", ct, p.Status.Conditions)
	}
	if c.Status != status || c.Reason != reason || c.Message != msg {
		t.Errorf("%s = %s %q %q; want %s %q %q", ct, c.Status, c.Reason, c.Message, status, reason, msg)
	}
	if c.LastTransitionTime.IsZero() {
		t.Errorf("%s has no transition time", ct)
	}
}

func wantWaiting(t *testing.T, what string, cs v1.ContainerStatus, reason string) {
	t.Helper()
	if cs.State.Waiting == nil || cs.State.Waiting.Reason != reason {
		t.Errorf("%s %s: state %+v, want waiting %s", what, cs.Name, cs.State, reason)
	}
}

func initPod(policy v1.RestartPolicy) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{
		RestartPolicy:  policy,
		InitContainers: []v1.Container{containerNamed("init1", "img"), containerNamed("init2", "img")},
		Containers:     []v1.Container{containerNamed("run1", "img")},
	}}
}

// The statuses and conditions a pod with init containers goes through, as the InitContainer
// conformance tests watch them.
func TestInitContainersCompleteAreReadyAndInitialize(t *testing.T) {
	for _, policy := range []v1.RestartPolicy{v1.RestartPolicyNever, v1.RestartPolicyAlways} {
		t.Run(string(policy), func(t *testing.T) {
			h := newHarness(t)
			pod := h.add(initPod(policy))
			p := h.sync(pod)
			// init1 runs; init2 and run1 wait for it, PodInitializing.
			if p.Status.InitContainerStatuses[0].State.Running == nil {
				t.Fatalf("init1: %+v", p.Status.InitContainerStatuses[0])
			}
			wantWaiting(t, "init container", p.Status.InitContainerStatuses[1], reasonPodInitializing)
			wantWaiting(t, "container", p.Status.ContainerStatuses[0], reasonPodInitializing)
			wantCondition(t, p, v1.PodInitialized, v1.ConditionFalse, reasonContainersNotInitialized, "containers with incomplete status: [init1 init2]")
			wantCondition(t, p, v1.ContainersReady, v1.ConditionFalse, reasonContainersNotReady, "containers with unready status: [run1]")
			wantCondition(t, p, v1.PodReady, v1.ConditionFalse, reasonContainersNotReady, "containers with unready status: [run1]")

			h.exit(h.container(pod, "init1"), 0)
			p = h.sync(pod)
			if s := p.Status.InitContainerStatuses[0]; !s.Ready || s.State.Terminated == nil || s.State.Terminated.ExitCode != 0 {
				t.Errorf("completed init1 should be ready and terminated: %+v", s)
			}
			wantWaiting(t, "container", p.Status.ContainerStatuses[0], reasonPodInitializing)
			wantCondition(t, p, v1.PodInitialized, v1.ConditionFalse, reasonContainersNotInitialized, "containers with incomplete status: [init2]")

			h.exit(h.container(pod, "init2"), 0)
			p = h.sync(pod)
			for _, s := range p.Status.InitContainerStatuses {
				if !s.Ready || s.State.Terminated == nil {
					t.Errorf("init container %s should be ready and terminated: %+v", s.Name, s)
				}
			}
			wantCondition(t, p, v1.PodInitialized, v1.ConditionTrue, "", "")
			if p.Status.Phase != v1.PodRunning || p.Status.ContainerStatuses[0].State.Running == nil {
				t.Fatalf("phase %s, run1 %+v", p.Status.Phase, p.Status.ContainerStatuses[0])
			}
			wantCondition(t, p, v1.PodReady, v1.ConditionTrue, "", "")
			if policy != v1.RestartPolicyNever {
				return
			}
			h.exit(h.container(pod, "run1"), 0)
			p = h.sync(pod)
			if p.Status.Phase != v1.PodSucceeded {
				t.Fatalf("phase %s", p.Status.Phase)
			}
			wantCondition(t, p, v1.PodInitialized, v1.ConditionTrue, reasonPodCompleted, "")
			wantCondition(t, p, v1.ContainersReady, v1.ConditionFalse, reasonPodCompleted, "")
			wantCondition(t, p, v1.PodReady, v1.ConditionFalse, reasonPodCompleted, "")
			for _, s := range p.Status.InitContainerStatuses {
				if !s.Ready {
					t.Errorf("init container %s of a succeeded pod should stay ready", s.Name)
				}
			}
		})
	}
}

// A failing init container of a RestartAlways pod restarts with back-off; the next init
// container and the app containers never start and wait PodInitializing.
func TestFailingInitContainerRestartsAndBlocksTheRest(t *testing.T) {
	h := newHarness(t)
	pod := h.add(initPod(v1.RestartPolicyAlways))
	h.sync(pod)
	var p *v1.Pod
	for restarts := 0; restarts < 4; restarts++ {
		h.exit(h.container(pod, "init1"), 1)
		h.clock.Step(10 * time.Minute) // past any back-off
		p = h.sync(pod)
		if h.container(pod, "init2") != nil || h.container(pod, "run1") != nil {
			t.Fatal("init2 or run1 started after init1 failed")
		}
		s := p.Status.InitContainerStatuses[0]
		if s.State.Terminated != nil && s.State.Terminated.ExitCode == 0 {
			t.Fatalf("init1 should not have succeeded: %+v", s)
		}
		if s.LastTerminationState.Terminated == nil || s.LastTerminationState.Terminated.ExitCode != 1 {
			t.Errorf("init1 last state should be the failure: %+v", s)
		}
		wantWaiting(t, "init container", p.Status.InitContainerStatuses[1], reasonPodInitializing)
		wantWaiting(t, "container", p.Status.ContainerStatuses[0], reasonPodInitializing)
		if s := p.Status.ContainerStatuses[0]; s.RestartCount != 0 {
			t.Errorf("run1 restart count %d", s.RestartCount)
		}
	}
	if got := p.Status.InitContainerStatuses[0].RestartCount; got < 3 {
		t.Errorf("init1 restart count %d, want at least 3", got)
	}
	if p.Status.Phase != v1.PodPending {
		t.Errorf("phase %s", p.Status.Phase)
	}
	wantCondition(t, p, v1.PodInitialized, v1.ConditionFalse, reasonContainersNotInitialized, "containers with incomplete status: [init1 init2]")

	// Within the back-off, the failed init1 waits CrashLoopBackOff and stays failed.
	h.exit(h.container(pod, "init1"), 1)
	p = h.sync(pod)
	wantWaiting(t, "init container", p.Status.InitContainerStatuses[0], reasonCrashLoopBackOff)
	wantWaiting(t, "init container", p.Status.InitContainerStatuses[1], reasonPodInitializing)
}

// A failing init container of a RestartNever pod fails the pod; the app container never
// starts and keeps waiting.
func TestFailingInitContainerFailsRestartNeverPod(t *testing.T) {
	h := newHarness(t)
	pod := h.add(initPod(v1.RestartPolicyNever))
	h.sync(pod)
	h.exit(h.container(pod, "init1"), 0)
	h.sync(pod)
	h.exit(h.container(pod, "init2"), 1)
	p := h.sync(pod)
	if p.Status.Phase != v1.PodFailed || h.container(pod, "run1") != nil {
		t.Fatalf("phase %s, run1 started %v", p.Status.Phase, h.container(pod, "run1") != nil)
	}
	wantCondition(t, p, v1.PodInitialized, v1.ConditionFalse, reasonContainersNotInitialized, "containers with incomplete status: [init2]")
	wantCondition(t, p, v1.ContainersReady, v1.ConditionFalse, reasonPodFailed, "")
	wantCondition(t, p, v1.PodReady, v1.ConditionFalse, reasonPodFailed, "")
	if s := p.Status.InitContainerStatuses[1]; s.Ready || s.State.Terminated == nil || s.State.Terminated.ExitCode != 1 {
		t.Errorf("init2: %+v", s)
	}
	wantWaiting(t, "container", p.Status.ContainerStatuses[0], reasonPodInitializing)
}

// Without init containers a container not created yet waits ContainerCreating.
func TestWaitingReasonWithoutInitContainers(t *testing.T) {
	h := newHarness(t)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"}, Spec: v1.PodSpec{Containers: []v1.Container{containerNamed("a", "img")}}}
	rt := &podRuntime{uid: pod.UID}
	cs := h.k.containerStatus(pod, rt, &podWorker{waiting: map[string]waitingReason{}}, &pod.Spec.Containers[0], false)
	wantWaiting(t, "container", cs, reasonContainerCreating)
}

func TestPodReadyConditionReadinessGates(t *testing.T) {
	spec := &v1.PodSpec{
		Containers:     []v1.Container{{Name: "a"}},
		ReadinessGates: []v1.PodReadinessGate{{ConditionType: "g1"}, {ConditionType: "g2"}, {ConditionType: "g3"}},
	}
	all := []v1.ContainerStatus{{Name: "a", Ready: true}}
	conds := []v1.PodCondition{{Type: "g2", Status: v1.ConditionFalse}, {Type: "g3", Status: v1.ConditionTrue}}
	c := podReadyCondition(spec, conds, all, v1.PodRunning)
	want := `corresponding condition of pod readiness gate "g1" does not exist., the status of pod readiness gate "g2" is not "True", but False`
	if c.Status != v1.ConditionFalse || c.Reason != reasonReadinessGatesNotReady || c.Message != want {
		t.Errorf("got %+v", c)
	}
	conds[0].Status = v1.ConditionTrue
	conds = append(conds, v1.PodCondition{Type: "g1", Status: v1.ConditionTrue})
	if c := podReadyCondition(spec, conds, all, v1.PodRunning); c.Status != v1.ConditionTrue {
		t.Errorf("all gates true: %+v", c)
	}
}
