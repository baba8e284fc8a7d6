package registry

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestVolumeStatusUpdatePhaseTime checks the stamping of a volume's
// lastPhaseTransitionTime by status updates, as upstream's status strategy.
func TestVolumeStatusUpdatePhaseTime(t *testing.T) {
	long := metav1.NewTime(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	mine := metav1.NewTime(time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC))
	old := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "v", Labels: map[string]string{"a": "b"}},
		Spec:       corev1.PersistentVolumeSpec{StorageClassName: "gold"},
		Status:     corev1.PersistentVolumeStatus{Phase: corev1.VolumeAvailable, LastPhaseTransitionTime: &long},
	}
	for _, tc := range []struct {
		name  string
		phase corev1.PersistentVolumePhase
		set   *metav1.Time
		check func(*metav1.Time) bool
	}{
		{name: "same phase, no time: kept", phase: corev1.VolumeAvailable, check: func(got *metav1.Time) bool { return got.Equal(&long) }},
		{name: "new phase, no time: now", phase: corev1.VolumeBound, check: func(got *metav1.Time) bool { return got != nil && got.After(mine.Time) }},
		{name: "new phase, old time: now", phase: corev1.VolumeBound, set: &long, check: func(got *metav1.Time) bool { return got != nil && got.After(mine.Time) }},
		{name: "new phase, own time: kept", phase: corev1.VolumeBound, set: &mine, check: func(got *metav1.Time) bool { return got.Equal(&mine) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pv := old.DeepCopy()
			pv.Labels, pv.Spec.StorageClassName = nil, "changed"
			pv.Status.Phase, pv.Status.LastPhaseTransitionTime = tc.phase, tc.set
			got := volumeStatusUpdate(pv, old.DeepCopy()).(*corev1.PersistentVolume)
			if !tc.check(got.Status.LastPhaseTransitionTime) {
				t.Errorf("lastPhaseTransitionTime = %v", got.Status.LastPhaseTransitionTime)
			}
			if got.Spec.StorageClassName != "gold" || got.Labels["a"] != "b" {
				t.Errorf("status update changed the spec or labels: %v %v", got.Spec.StorageClassName, got.Labels)
			}
		})
	}
}
