package sim

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestDeletionDeadline checks that a pod stays Terminating for at least
// min(grace, max) after the request, whatever the request's sub-second part
// that deletionTimestamp's truncation to the second dropped.
func TestDeletionDeadline(t *testing.T) {
	base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		grace    int64
		maxGrace time.Duration
		want     time.Duration // the least time Terminating
	}{
		{grace: 30, maxGrace: time.Second, want: time.Second},
		{grace: 30, maxGrace: 0, want: 0},
		{grace: 2, maxGrace: 5 * time.Second, want: 2 * time.Second},
		{grace: 3, maxGrace: -1, want: 3 * time.Second},
	} {
		for _, sub := range []time.Duration{0, time.Millisecond, 500 * time.Millisecond, 999 * time.Millisecond} {
			request := base.Add(sub)
			ts := metav1.NewTime(request.Add(time.Duration(tc.grace) * time.Second).Truncate(time.Second))
			meta := metav1.ObjectMeta{DeletionTimestamp: &ts, DeletionGracePeriodSeconds: ptr.To(tc.grace)}
			got := deletionDeadline(meta, tc.maxGrace).Sub(request)
			if got < tc.want || got > tc.want+time.Second {
				t.Errorf("grace %ds, max %v, request at +%v: deleted %v after the request, want within [%v, %v]",
					tc.grace, tc.maxGrace, sub, got, tc.want, tc.want+time.Second)
			}
		}
	}
}
