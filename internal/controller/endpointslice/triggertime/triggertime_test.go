package triggertime

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pod(name string, readySince time.Time) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
			Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(readySince),
		}}},
	}
}

func TestCompute(t *testing.T) {
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", CreationTimestamp: metav1.NewTime(t0)}}
	tr := New()
	if got := tr.Compute(svc, []*corev1.Pod{pod("a", t0.Add(time.Minute))}); !got.Equal(t0) {
		t.Errorf("first sync: %v, want the Service's creation", got)
	}
	if got := tr.Compute(svc, []*corev1.Pod{pod("a", t0.Add(time.Minute))}); !got.IsZero() {
		t.Errorf("nothing changed: %v", got)
	}
	got := tr.Compute(svc, []*corev1.Pod{pod("a", t0.Add(3*time.Minute)), pod("b", t0.Add(2*time.Minute))})
	if !got.Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("two pods changed: %v, want the earlier", got)
	}
	tr.Delete("ns", "web")
	if got := tr.Compute(svc, nil); !got.Equal(t0) {
		t.Errorf("after Delete: %v", got)
	}
}
