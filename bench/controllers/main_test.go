package main

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRolloutComplete(t *testing.T) {
	n := int32(3)
	d := func(gen, observed int64, replicas, updated, available int32) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Generation: gen},
			Spec:       appsv1.DeploymentSpec{Replicas: &n},
			Status: appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: replicas,
				UpdatedReplicas: updated, AvailableReplicas: available},
		}
	}
	for _, tc := range []struct {
		name string
		d    *appsv1.Deployment
		want bool
	}{
		{"done", d(1, 1, 3, 3, 3), true},
		{"status of an older generation", d(2, 1, 3, 3, 3), false},
		{"not all updated", d(1, 1, 3, 2, 3), false},
		{"old replicas left", d(1, 1, 4, 3, 3), false},
		{"not all available", d(1, 1, 3, 3, 2), false},
	} {
		if got := rolloutComplete(n)(&snapshot{deployment: tc.d}); got != tc.want {
			t.Errorf("%s: rolloutComplete = %v, want %v", tc.name, got, tc.want)
		}
	}
	timedOut := d(1, 1, 3, 3, 3)
	timedOut.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Reason: "ProgressDeadlineExceeded"}}
	if rolloutComplete(n)(&snapshot{deployment: timedOut}) {
		t.Error("rolloutComplete with an exceeded progress deadline = true, want false")
	}
}

func TestTrackerRecordsTheEventThatSatisfiedAWaiter(t *testing.T) {
	tr := newTracker("d")
	h := tr.podHandler(func(string, *corev1.Pod) {})
	w := tr.expect(func(s *snapshot) bool { return s.ready == 2 })
	ready := func(name string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Status: corev1.PodStatus{Phase: corev1.PodRunning,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		}
	}
	h.OnAdd(ready("a"), false)
	before := time.Now()
	h.OnAdd(ready("b"), false)
	after := time.Now()
	time.Sleep(10 * time.Millisecond)
	at, err := tr.wait(context.Background(), w, time.Now().Add(time.Second), "two ready")
	if err != nil {
		t.Fatal(err)
	}
	if at.Before(before) || at.After(after) {
		t.Errorf("recorded %v, want the time of the second add (between %v and %v)", at, before, after)
	}
	h.OnDelete(ready("a"))
	gone := tr.expect(func(s *snapshot) bool { return len(s.pods) == 0 })
	if _, err := tr.wait(context.Background(), gone, time.Now().Add(20*time.Millisecond), "all gone"); err == nil {
		t.Error("wait for an unmet condition returned no error")
	}
}

func TestRequestDelta(t *testing.T) {
	line := `apiserver_request_total{code="409",group="apps",resource="replicasets",subresource="status",verb="update"} 7`
	name, labels, v, err := parseSample(line)
	if err != nil || name != "apiserver_request_total" || labels["code"] != "409" || v != 7 {
		t.Fatalf("parseSample = %q %v %v %v", name, labels, v, err)
	}
	key := func(code string) requestKey { return requestKey{"update", "replicasets", "status", code} }
	before := &scrape{requests: map[requestKey]float64{key("200"): 10, key("409"): 1}}
	after := &scrape{requests: map[requestKey]float64{key("200"): 40, key("409"): 5, {"watch", "pods", "", "200"}: 3},
		latSum: map[requestKey]float64{key(""): 0.34}, latCount: map[requestKey]float64{key(""): 34}}
	rows := requestDelta(before, after)
	if len(rows) != 1 {
		t.Fatalf("rows = %+v, want one (watches left out)", rows)
	}
	if got, want := formatRequests(rows), "update replicasets/status 34 (mean 10.0ms, 409×4)"; got != want {
		t.Errorf("formatRequests = %q, want %q", got, want)
	}
}
