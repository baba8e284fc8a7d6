package deployment

import (
	"context"
	"math"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// progressingDeployment is a Deployment of 3 with a 60 s deadline whose last
// status had the given counts and Progressing condition.
func progressingDeployment(replicas, updated, available int32, reason string, status corev1.ConditionStatus, lastUpdate time.Time) *appsv1.Deployment {
	d := newDeployment("foo", 3, nil, nil, nil, map[string]string{"foo": "bar"})
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](60)
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: replicas, UpdatedReplicas: updated, AvailableReplicas: available, ReadyReplicas: available}
	if reason != "" {
		d.Status.Conditions = []appsv1.DeploymentCondition{{
			Type: appsv1.DeploymentProgressing, Status: status, Reason: reason,
			LastUpdateTime: metav1.NewTime(lastUpdate), LastTransitionTime: metav1.NewTime(lastUpdate.Add(-time.Hour)),
		}}
	}
	return d
}

func rsWithStatus(name string, replicas, available int32) *appsv1.ReplicaSet {
	r := rs(name, replicas, nil, metav1.Time{})
	r.Status = appsv1.ReplicaSetStatus{Replicas: replicas, ReadyReplicas: available, AvailableReplicas: available}
	return r
}

func TestSyncRolloutStatus(t *testing.T) {
	longAgo := testNow.Add(-2 * time.Minute)
	recently := testNow.Add(-10 * time.Second)
	tests := []struct {
		name       string
		d          *appsv1.Deployment
		newRS      *appsv1.ReplicaSet
		oldRS      *appsv1.ReplicaSet
		wantStatus corev1.ConditionStatus
		wantReason string
		wantMsg    string
		// keepsTransition: lastTransitionTime stays that of the previous condition.
		keepsTransition bool
		wantUpdate      bool
		// settled: d's status already has the counts the ReplicaSets give.
		settled bool
	}{
		{
			name:       "complete",
			d:          progressingDeployment(3, 3, 2, rsUpdatedReason, corev1.ConditionTrue, recently),
			newRS:      rsWithStatus("foo-new", 3, 3),
			wantStatus: corev1.ConditionTrue, wantReason: newRSAvailableReason,
			wantMsg:         `ReplicaSet "foo-new" has successfully progressed.`,
			keepsTransition: true, wantUpdate: true,
		},
		{
			name:       "progressing: more updated replicas",
			d:          progressingDeployment(4, 1, 3, newRSReason, corev1.ConditionTrue, longAgo),
			newRS:      rsWithStatus("foo-new", 2, 0),
			oldRS:      rsWithStatus("foo-old", 2, 2),
			wantStatus: corev1.ConditionTrue, wantReason: rsUpdatedReason,
			wantMsg:         `ReplicaSet "foo-new" is progressing.`,
			keepsTransition: true, wantUpdate: true,
		},
		{
			name:       "timed out",
			d:          progressingDeployment(4, 1, 3, rsUpdatedReason, corev1.ConditionTrue, longAgo),
			newRS:      rsWithStatus("foo-new", 1, 0),
			oldRS:      rsWithStatus("foo-old", 3, 3),
			wantStatus: corev1.ConditionFalse, wantReason: timedOutReason,
			wantMsg:    `ReplicaSet "foo-new" has timed out progressing.`,
			wantUpdate: true,
		},
		{
			name:       "no progress yet, within the deadline",
			d:          progressingDeployment(4, 1, 3, rsUpdatedReason, corev1.ConditionTrue, recently),
			newRS:      rsWithStatus("foo-new", 1, 0),
			oldRS:      rsWithStatus("foo-old", 3, 3),
			wantStatus: corev1.ConditionTrue, wantReason: rsUpdatedReason,
			keepsTransition: true, settled: true,
		},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			all := []*appsv1.ReplicaSet{test.newRS}
			if test.oldRS != nil {
				all = append(all, test.oldRS)
			}
			f := newFixture(t)
			f.objects = append(f.objects, test.d)
			c := f.newController()
			// The status as it stands already holds the Available condition, so
			// that "no update" cases compare equal.
			st := c.calculateStatus(all, test.newRS, test.d)
			if test.settled {
				test.d.Status = st
			}
			test.d.Status.Conditions = st.Conditions
			prev := *getCondition(test.d.Status, appsv1.DeploymentProgressing)

			if err := c.syncRolloutStatus(context.Background(), all, test.newRS, test.d); err != nil {
				t.Fatal(err)
			}
			actions := f.client.Actions()
			if test.wantUpdate != (len(actions) == 1) {
				t.Fatalf("actions %s; want an update: %v", describeActions(actions), test.wantUpdate)
			}
			status := test.d.Status
			if len(actions) == 1 {
				status = actions[0].(clienttesting.UpdateAction).GetObject().(*appsv1.Deployment).Status
			}
			cond := getCondition(status, appsv1.DeploymentProgressing)
			if cond == nil || cond.Status != test.wantStatus || cond.Reason != test.wantReason {
				t.Fatalf("Progressing = %+v, want %s/%s", cond, test.wantStatus, test.wantReason)
			}
			if test.wantMsg != "" && cond.Message != test.wantMsg {
				t.Errorf("message = %q, want %q", cond.Message, test.wantMsg)
			}
			if test.wantUpdate && !cond.LastUpdateTime.Time.Equal(testNow) {
				t.Errorf("lastUpdateTime = %v, want now", cond.LastUpdateTime)
			}
			if test.keepsTransition && !cond.LastTransitionTime.Equal(&prev.LastTransitionTime) {
				t.Errorf("lastTransitionTime = %v, want %v", cond.LastTransitionTime, prev.LastTransitionTime)
			}
		})
	}
}

func TestSyncRolloutStatusWithoutDeadlineRemovesProgressing(t *testing.T) {
	d := progressingDeployment(3, 3, 3, rsUpdatedReason, corev1.ConditionTrue, testNow)
	d.Spec.ProgressDeadlineSeconds = nil
	f := newFixture(t)
	f.objects = append(f.objects, d)
	c := f.newController()
	if err := c.syncRolloutStatus(context.Background(), []*appsv1.ReplicaSet{rsWithStatus("foo-new", 3, 3)}, nil, d); err != nil {
		t.Fatal(err)
	}
	if cond := getCondition(d.Status, appsv1.DeploymentProgressing); cond != nil {
		t.Errorf("Progressing = %+v, want none", cond)
	}
}

func TestReplicaFailureCondition(t *testing.T) {
	d := progressingDeployment(3, 3, 3, "", "", testNow)
	newRS := rsWithStatus("foo-new", 3, 0)
	newRS.Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: "quota"}}
	f := newFixture(t)
	f.objects = append(f.objects, d)
	c := f.newController()
	if err := c.syncRolloutStatus(context.Background(), []*appsv1.ReplicaSet{newRS}, newRS, d); err != nil {
		t.Fatal(err)
	}
	if cond := getCondition(d.Status, appsv1.DeploymentReplicaFailure); cond == nil || cond.Reason != "FailedCreate" || cond.Message != "quota" {
		t.Errorf("ReplicaFailure = %+v", cond)
	}
}

// TestRequeueStuckDeployment follows upstream's progress_test.go table.
func TestRequeueStuckDeployment(t *testing.T) {
	infinite := int32(math.MaxInt32)
	failedAt := testNow.Add(-30 * time.Second)
	tests := []struct {
		name     string
		d        *appsv1.Deployment
		status   appsv1.DeploymentStatus
		expected time.Duration
	}{
		{
			name: "no progress deadline",
			d: func() *appsv1.Deployment {
				d := progressingDeployment(3, 3, 2, rsUpdatedReason, corev1.ConditionTrue, failedAt)
				d.Spec.ProgressDeadlineSeconds = nil
				return d
			}(),
			status:   appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 2},
			expected: -1,
		},
		{
			name: "infinite progress deadline",
			d: func() *appsv1.Deployment {
				d := progressingDeployment(3, 3, 2, rsUpdatedReason, corev1.ConditionTrue, failedAt)
				d.Spec.ProgressDeadlineSeconds = &infinite
				return d
			}(),
			status:   appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 2},
			expected: -1,
		},
		{
			name:     "no progressing condition",
			d:        progressingDeployment(3, 3, 2, "", "", failedAt),
			status:   appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 2},
			expected: -1,
		},
		{
			name:     "complete deployment does not need to be requeued",
			d:        progressingDeployment(3, 3, 3, newRSAvailableReason, corev1.ConditionTrue, failedAt),
			status:   appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3},
			expected: -1,
		},
		{
			name:     "already failed deployment does not need to be requeued",
			d:        progressingDeployment(3, 3, 1, timedOutReason, corev1.ConditionFalse, failedAt),
			status:   appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 1},
			expected: -1,
		},
		{
			name:     "stuck deployment - 30s left",
			d:        progressingDeployment(3, 3, 1, rsUpdatedReason, corev1.ConditionTrue, failedAt),
			status:   appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 1},
			expected: 30 * time.Second,
		},
		{
			name:     "stuck deployment - past the deadline: requeued at once",
			d:        progressingDeployment(3, 3, 1, rsUpdatedReason, corev1.ConditionTrue, testNow.Add(-61*time.Second)),
			status:   appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 1},
			expected: 0,
		},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			f := newFixture(t)
			c := f.newController()
			defer c.queue.ShutDown()
			c.clock = clocktesting.NewFakePassiveClock(testNow)
			if got := c.requeueStuckDeployment(test.d, test.status); got != test.expected {
				t.Errorf("requeue after %v, want %v", got, test.expected)
			}
			if test.expected == 0 && c.queue.Len() != 0 {
				// AddRateLimited queues after the limiter's delay (5 ms first).
				t.Errorf("queued at once, want rate-limited")
			}
		})
	}
}

// TestDeploymentTimedOut is upstream's deployment_util_test.go table.
func TestDeploymentTimedOut(t *testing.T) {
	ten := int32(10)
	infinite := int32(math.MaxInt32)
	at := func(min, sec int) time.Time { return time.Date(2016, 1, 1, 0, min, sec, 0, time.UTC) }
	deployment := func(reason string, pds *int32, from time.Time) *appsv1.Deployment {
		return &appsv1.Deployment{
			Spec: appsv1.DeploymentSpec{ProgressDeadlineSeconds: pds},
			Status: appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{{
				Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: reason, LastUpdateTime: metav1.NewTime(from),
			}}},
		}
	}
	tests := []struct {
		name     string
		d        *appsv1.Deployment
		now      time.Time
		expected bool
	}{
		{"nil progressDeadlineSeconds", deployment("", nil, at(1, 9)), at(1, 20), false},
		{"infinite progressDeadlineSeconds", deployment("", &infinite, at(1, 9)), at(1, 20), false},
		{"10s deadline, 11s since", deployment("", &ten, at(1, 9)), at(1, 20), true},
		{"10s deadline, 9s since", deployment("", &ten, at(1, 11)), at(1, 20), false},
		{"previous status was a complete deployment", deployment(newRSAvailableReason, &ten, time.Time{}), at(1, 20), false},
		{"already timed out", deployment(timedOutReason, &ten, at(1, 19)), at(1, 20), true},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			c := &Controller{clock: clocktesting.NewFakePassiveClock(test.now)}
			if got := c.deploymentTimedOut(test.d, &test.d.Status); got != test.expected {
				t.Errorf("timed out = %v, want %v", got, test.expected)
			}
		})
	}
}
