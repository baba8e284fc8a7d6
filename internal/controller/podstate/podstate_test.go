package podstate

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func readyPod(status corev1.ConditionStatus, since time.Time) *corev1.Pod {
	return &corev1.Pod{Status: corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(since)},
		},
	}}
}

func TestIsPodReady(t *testing.T) {
	now := time.Now()
	if !IsPodReady(readyPod(corev1.ConditionTrue, now)) {
		t.Error("ready pod not ready")
	}
	if IsPodReady(readyPod(corev1.ConditionFalse, now)) {
		t.Error("not-ready pod ready")
	}
	if IsPodReady(&corev1.Pod{}) || IsPodReady(nil) {
		t.Error("pod without conditions ready")
	}
}

func TestIsPodAvailable(t *testing.T) {
	now := metav1.NewTime(time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC))
	tests := []struct {
		name   string
		pod    *corev1.Pod
		minRdy int32
		want   bool
	}{
		{"not ready", readyPod(corev1.ConditionFalse, now.Add(-time.Hour)), 0, false},
		{"ready, no minReadySeconds", readyPod(corev1.ConditionTrue, now.Time), 0, true},
		{"ready long enough", readyPod(corev1.ConditionTrue, now.Add(-11*time.Second)), 10, true},
		{"ready exactly minReadySeconds", readyPod(corev1.ConditionTrue, now.Add(-10*time.Second)), 10, false},
		{"ready too recently", readyPod(corev1.ConditionTrue, now.Add(-5*time.Second)), 10, false},
		{"ready without transition time", readyPod(corev1.ConditionTrue, time.Time{}), 10, false},
	}
	for _, tc := range tests {
		if got := IsPodAvailable(tc.pod, tc.minRdy, now); got != tc.want {
			t.Errorf("%s: IsPodAvailable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestActiveAndTerminating(t *testing.T) {
	deleted := metav1.Now()
	tests := []struct {
		name              string
		phase             corev1.PodPhase
		deletion          *metav1.Time
		active, terminate bool
	}{
		{"pending", corev1.PodPending, nil, true, false},
		{"running", corev1.PodRunning, nil, true, false},
		{"unknown", corev1.PodUnknown, nil, true, false},
		{"succeeded", corev1.PodSucceeded, nil, false, false},
		{"failed", corev1.PodFailed, nil, false, false},
		{"running, deleting", corev1.PodRunning, &deleted, false, true},
		{"failed, deleting", corev1.PodFailed, &deleted, false, false},
	}
	for _, tc := range tests {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: tc.deletion}, Status: corev1.PodStatus{Phase: tc.phase}}
		if got := IsPodActive(p); got != tc.active {
			t.Errorf("%s: IsPodActive = %v, want %v", tc.name, got, tc.active)
		}
		if got := IsPodTerminating(p); got != tc.terminate {
			t.Errorf("%s: IsPodTerminating = %v, want %v", tc.name, got, tc.terminate)
		}
	}
	a := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	b := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Status: corev1.PodStatus{Phase: corev1.PodFailed}}
	c := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
	if got := FilterActive([]*corev1.Pod{a, b, c}); len(got) != 2 || got[0] != a || got[1] != c {
		t.Errorf("FilterActive = %v", got)
	}
}
