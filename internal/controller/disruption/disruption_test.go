package disruption

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

func readyPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
}

// A pod granted an eviction is not healthy until DeletionTimeout passed; then it is
// dropped from disruptedPods (with an event) and counts again.
func TestDisruptedPodsTimeout(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rec := record.NewFakeRecorder(10)
	c := &Controller{clock: clocktesting.NewFakeClock(now), recorder: rec}
	pods := []*corev1.Pod{readyPod("a"), readyPod("b"), readyPod("c")}
	gone := readyPod("d")
	gone.DeletionTimestamp = &metav1.Time{Time: now}
	pods = append(pods, gone)
	pdb := &policyv1.PodDisruptionBudget{Status: policyv1.PodDisruptionBudgetStatus{DisruptedPods: map[string]metav1.Time{
		"a": metav1.NewTime(now.Add(-time.Minute)),     // granted a minute ago: still waiting
		"b": metav1.NewTime(now.Add(-3 * time.Minute)), // never deleted: expired
		"d": metav1.NewTime(now),                       // being deleted: dropped
	}}}
	disrupted, recheck := c.disruptedPods(pods, pdb, now)
	if len(disrupted) != 1 || disrupted["a"].Time.IsZero() {
		t.Fatalf("disrupted %v", disrupted)
	}
	if recheck == nil || !recheck.Equal(now.Add(time.Minute)) {
		t.Fatalf("recheck %v", recheck)
	}
	if len(rec.Events) != 1 {
		t.Fatalf("%d events for the pod that was not deleted", len(rec.Events))
	}
	if n := countHealthy(pods, disrupted, now); n != 2 {
		t.Fatalf("healthy %d, want 2 (b and c)", n)
	}
}

func TestStaleDisruptionTarget(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	c := &Controller{clock: clocktesting.NewFakeClock(now)}
	p := readyPod("a")
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: "EvictionByEvictionAPI", LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))})
	if has, after := c.staleDisruptionTarget(p); !has || after != time.Minute {
		t.Fatalf("stale %v in %v", has, after)
	}
	p.Status.Conditions[1].Reason = corev1.PodReasonTerminationByKubelet
	if has, _ := c.staleDisruptionTarget(p); has {
		t.Fatal("the kubelet's condition is never stale")
	}
}
