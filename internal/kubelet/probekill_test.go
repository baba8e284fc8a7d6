package kubelet

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestProbeKillGrace(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	c := &v1.Container{Name: "a",
		LivenessProbe: &v1.Probe{TerminationGracePeriodSeconds: i64(3)},
		StartupProbe:  &v1.Probe{TerminationGracePeriodSeconds: i64(5)},
	}
	plain := &v1.Container{Name: "b", LivenessProbe: &v1.Probe{}}
	pod := &v1.Pod{Spec: v1.PodSpec{TerminationGracePeriodSeconds: i64(40)}}
	deleting := pod.DeepCopy()
	deleting.DeletionGracePeriodSeconds = i64(9)
	for _, tc := range []struct {
		name      string
		pod       *v1.Pod
		c         *v1.Container
		probe     string
		wantGrace int64
		wantMsg   string
	}{
		{"liveness probe's grace", pod, c, ProbeLiveness, 3, "Container a failed liveness probe, will be restarted"},
		{"startup probe's grace", pod, c, ProbeStartup, 5, "Container a failed startup probe, will be restarted"},
		{"no probe grace: the pod's", pod, plain, ProbeLiveness, 40, "Container b failed liveness probe, will be restarted"},
		{"being deleted: the deletion's", deleting, c, ProbeLiveness, 9, "Container a failed liveness probe, will be restarted"},
	} {
		grace, msg := probeKill(tc.pod, tc.c, tc.probe)
		if grace != tc.wantGrace || msg != tc.wantMsg {
			t.Errorf("%s: probeKill = %d, %q; want %d, %q", tc.name, grace, msg, tc.wantGrace, tc.wantMsg)
		}
	}
}

// A container whose startup probe failed is killed with the startup probe's grace period and
// started again, as upstream.
func TestSyncStartupFailureRestarts(t *testing.T) {
	h, hr, _ := hookHarness(t)
	grace := int64(7)
	c := containerNamed("a", "img")
	c.StartupProbe = &v1.Probe{TerminationGracePeriodSeconds: &grace, ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{c}}})
	h.sync(pod)
	first := h.container(pod, "a")
	h.k.probeKills[first.Id] = ProbeStartup
	h.sync(pod) // kills it
	if h.container(pod, "a").State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Fatal("startup probe failure did not stop the container")
	}
	if !slices.Contains(hr.log(), "stop a 7") {
		t.Errorf("runtime calls %q, want the stop with the startup probe's grace (stop a 7)", hr.log())
	}
	hasEvent(t, h.events(), "Normal Killing Container a failed startup probe, will be restarted")
	h.sync(pod) // restarts it
	if c := h.container(pod, "a"); c.Id == first.Id || c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatal("not restarted after the startup probe failure")
	}
}
