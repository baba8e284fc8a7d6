package deployment

import (
	"context"
	"math"
	"reflect"
	"sort"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// newScaleController is a controller over an empty fake clientset, for
// calling its steps directly.
func newScaleController(t *testing.T, rss ...*appsv1.ReplicaSet) (*Controller, *fake.Clientset, *record.FakeRecorder) {
	t.Helper()
	f := newFixture(t)
	for _, r := range rss {
		if r != nil {
			f.objects = append(f.objects, r.DeepCopy())
		}
	}
	c := f.newController()
	return c, f.client, f.recorder
}

// TestScale is upstream's sync_test.go TestScale (the cases without pod
// replacement policies): proportional scaling in the middle of a rollout.
func TestScale(t *testing.T) {
	newTimestamp := metav1.Date(2016, 5, 20, 2, 0, 0, 0, time.UTC)
	oldTimestamp := metav1.Date(2016, 5, 20, 1, 0, 0, 0, time.UTC)
	olderTimestamp := metav1.Date(2016, 5, 20, 0, 0, 0, 0, time.UTC)

	updatedTemplate := func(replicas int32) *appsv1.Deployment {
		d := newDeployment("foo", replicas, nil, nil, nil, map[string]string{"foo": "bar"})
		d.Spec.Template.Labels["another"] = "label"
		return d
	}

	tests := []struct {
		name string

		deployment    *appsv1.Deployment
		oldDeployment *appsv1.Deployment

		newRS  *appsv1.ReplicaSet
		oldRSs []*appsv1.ReplicaSet

		expectedNew  *appsv1.ReplicaSet
		expectedOld  []*appsv1.ReplicaSet
		wasntUpdated map[string]bool

		desiredReplicasAnnotations map[string]int32
	}{
		{
			name:          "normal scaling event: 10 -> 12",
			deployment:    newDeployment("foo", 12, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 10, nil, nil, nil, nil),
			newRS:         rs("foo-v1", 10, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{},
			expectedNew:   rs("foo-v1", 12, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{},
		},
		{
			name:          "normal scaling event: 10 -> 5",
			deployment:    newDeployment("foo", 5, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 10, nil, nil, nil, nil),
			newRS:         rs("foo-v1", 10, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{},
			expectedNew:   rs("foo-v1", 5, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{},
		},
		{
			name:          "proportional scaling: 5 -> 10",
			deployment:    newDeployment("foo", 10, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 5, nil, nil, nil, nil),
			newRS:         rs("foo-v2", 2, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v1", 3, nil, oldTimestamp)},
			expectedNew:   rs("foo-v2", 4, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v1", 6, nil, oldTimestamp)},
		},
		{
			name:          "proportional scaling: 5 -> 3",
			deployment:    newDeployment("foo", 3, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 5, nil, nil, nil, nil),
			newRS:         rs("foo-v2", 2, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v1", 3, nil, oldTimestamp)},
			expectedNew:   rs("foo-v2", 1, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v1", 2, nil, oldTimestamp)},
		},
		{
			name:          "proportional scaling: 9 -> 4",
			deployment:    newDeployment("foo", 4, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 9, nil, nil, nil, nil),
			newRS:         rs("foo-v2", 8, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v1", 1, nil, oldTimestamp)},
			expectedNew:   rs("foo-v2", 4, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v1", 0, nil, oldTimestamp)},
		},
		{
			name:          "proportional scaling: 7 -> 10",
			deployment:    newDeployment("foo", 10, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 7, nil, nil, nil, nil),
			newRS:         rs("foo-v3", 2, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v2", 3, nil, oldTimestamp), rs("foo-v1", 2, nil, olderTimestamp)},
			expectedNew:   rs("foo-v3", 3, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v2", 4, nil, oldTimestamp), rs("foo-v1", 3, nil, olderTimestamp)},
		},
		{
			name:          "proportional scaling: 13 -> 8",
			deployment:    newDeployment("foo", 8, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 13, nil, nil, nil, nil),
			newRS:         rs("foo-v3", 2, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v2", 8, nil, oldTimestamp), rs("foo-v1", 3, nil, olderTimestamp)},
			expectedNew:   rs("foo-v3", 1, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v2", 5, nil, oldTimestamp), rs("foo-v1", 2, nil, olderTimestamp)},
		},
		// Scales up the new replica set.
		{
			name:          "leftover distribution: 3 -> 4",
			deployment:    newDeployment("foo", 4, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 3, nil, nil, nil, nil),
			newRS:         rs("foo-v3", 1, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v2", 1, nil, oldTimestamp), rs("foo-v1", 1, nil, olderTimestamp)},
			expectedNew:   rs("foo-v3", 2, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v2", 1, nil, oldTimestamp), rs("foo-v1", 1, nil, olderTimestamp)},
		},
		// Scales down the older replica set.
		{
			name:          "leftover distribution: 3 -> 2",
			deployment:    newDeployment("foo", 2, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 3, nil, nil, nil, nil),
			newRS:         rs("foo-v3", 1, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v2", 1, nil, oldTimestamp), rs("foo-v1", 1, nil, olderTimestamp)},
			expectedNew:   rs("foo-v3", 1, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v2", 1, nil, oldTimestamp), rs("foo-v1", 0, nil, olderTimestamp)},
		},
		// Scales up the latest replica set first.
		{
			name:          "proportional scaling (no new rs): 4 -> 5",
			deployment:    newDeployment("foo", 5, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 4, nil, nil, nil, nil),
			newRS:         nil,
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v2", 2, nil, oldTimestamp), rs("foo-v1", 2, nil, olderTimestamp)},
			expectedNew:   nil,
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v2", 3, nil, oldTimestamp), rs("foo-v1", 2, nil, olderTimestamp)},
		},
		// Scales down to zero.
		{
			name:          "proportional scaling: 6 -> 0",
			deployment:    newDeployment("foo", 0, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 6, nil, nil, nil, nil),
			newRS:         rs("foo-v3", 3, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v2", 2, nil, oldTimestamp), rs("foo-v1", 1, nil, olderTimestamp)},
			expectedNew:   rs("foo-v3", 0, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v2", 0, nil, oldTimestamp), rs("foo-v1", 0, nil, olderTimestamp)},
		},
		// Scales up from zero.
		{
			name:          "proportional scaling: 0 -> 6",
			deployment:    newDeployment("foo", 6, nil, nil, nil, nil),
			oldDeployment: newDeployment("foo", 6, nil, nil, nil, nil),
			newRS:         rs("foo-v3", 0, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v2", 0, nil, oldTimestamp), rs("foo-v1", 0, nil, olderTimestamp)},
			expectedNew:   rs("foo-v3", 6, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v2", 0, nil, oldTimestamp), rs("foo-v1", 0, nil, olderTimestamp)},
			wasntUpdated:  map[string]bool{"foo-v2": true, "foo-v1": true},
		},
		// Scenario: deployment.spec.replicas == 3 (foo-v1, foo-v2, foo-v3 have 1
		// each). Scaled to 5, foo-v3 and foo-v2 should grow by 1 but foo-v2
		// failed to update before.
		{
			name:                       "failed rs update",
			deployment:                 newDeployment("foo", 5, nil, nil, nil, nil),
			oldDeployment:              newDeployment("foo", 5, nil, nil, nil, nil),
			newRS:                      rs("foo-v3", 2, nil, newTimestamp),
			oldRSs:                     []*appsv1.ReplicaSet{rs("foo-v2", 1, nil, oldTimestamp), rs("foo-v1", 1, nil, olderTimestamp)},
			expectedNew:                rs("foo-v3", 2, nil, newTimestamp),
			expectedOld:                []*appsv1.ReplicaSet{rs("foo-v2", 2, nil, oldTimestamp), rs("foo-v1", 1, nil, olderTimestamp)},
			wasntUpdated:               map[string]bool{"foo-v3": true, "foo-v1": true},
			desiredReplicasAnnotations: map[string]int32{"foo-v2": 3},
		},
		{
			name:          "deployment with surge pods",
			deployment:    newDeployment("foo", 20, nil, ptr.To(intstr.FromInt32(2)), nil, nil),
			oldDeployment: newDeployment("foo", 10, nil, ptr.To(intstr.FromInt32(2)), nil, nil),
			newRS:         rs("foo-v2", 6, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v1", 6, nil, oldTimestamp)},
			expectedNew:   rs("foo-v2", 11, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v1", 11, nil, oldTimestamp)},
		},
		{
			name:          "change both surge and size",
			deployment:    newDeployment("foo", 50, nil, ptr.To(intstr.FromInt32(6)), nil, nil),
			oldDeployment: newDeployment("foo", 10, nil, ptr.To(intstr.FromInt32(3)), nil, nil),
			newRS:         rs("foo-v2", 5, nil, newTimestamp),
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v1", 8, nil, oldTimestamp)},
			expectedNew:   rs("foo-v2", 22, nil, newTimestamp),
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v1", 34, nil, oldTimestamp)},
		},
		{
			name:          "change both size and template",
			deployment:    updatedTemplate(14),
			oldDeployment: newDeployment("foo", 10, nil, nil, nil, map[string]string{"foo": "bar"}),
			newRS:         nil,
			oldRSs:        []*appsv1.ReplicaSet{rs("foo-v2", 7, nil, newTimestamp), rs("foo-v1", 3, nil, oldTimestamp)},
			expectedNew:   nil,
			expectedOld:   []*appsv1.ReplicaSet{rs("foo-v2", 10, nil, newTimestamp), rs("foo-v1", 4, nil, oldTimestamp)},
		},
		{
			name:          "saturated but broken new replica set does not affect old pods",
			deployment:    newDeployment("foo", 2, nil, ptr.To(intstr.FromInt32(1)), ptr.To(intstr.FromInt32(1)), nil),
			oldDeployment: newDeployment("foo", 2, nil, ptr.To(intstr.FromInt32(1)), ptr.To(intstr.FromInt32(1)), nil),
			newRS: func() *appsv1.ReplicaSet {
				r := rs("foo-v2", 2, nil, newTimestamp)
				r.Status.AvailableReplicas = 0
				return r
			}(),
			oldRSs:      []*appsv1.ReplicaSet{rs("foo-v1", 1, nil, oldTimestamp)},
			expectedNew: rs("foo-v2", 2, nil, newTimestamp),
			expectedOld: []*appsv1.ReplicaSet{rs("foo-v1", 1, nil, oldTimestamp)},
		},
	}

	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			c, client, _ := newScaleController(t, append(test.oldRSs, test.newRS)...)
			annotate := func(r *appsv1.ReplicaSet) {
				desired := *test.oldDeployment.Spec.Replicas
				if v, ok := test.desiredReplicasAnnotations[r.Name]; ok {
					desired = v
				}
				setReplicasAnnotations(r, desired, desired+maxSurge(test.oldDeployment))
			}
			if test.newRS != nil {
				annotate(test.newRS)
			}
			for _, r := range test.oldRSs {
				annotate(r)
			}

			if err := c.scale(context.Background(), test.deployment, test.newRS, test.oldRSs); err != nil {
				t.Fatalf("scale: %v", err)
			}

			updated := map[string]*appsv1.ReplicaSet{}
			if test.newRS != nil {
				updated[test.newRS.Name] = test.newRS
			}
			for _, r := range test.oldRSs {
				updated[r.Name] = r
			}
			for _, action := range client.Actions() {
				r := action.(clienttesting.UpdateAction).GetObject().(*appsv1.ReplicaSet)
				if !test.wasntUpdated[r.Name] {
					updated[r.Name] = r
				}
			}
			if test.expectedNew != nil && test.newRS != nil {
				if want, got := *test.expectedNew.Spec.Replicas, *updated[test.newRS.Name].Spec.Replicas; want != got {
					t.Errorf("new replicas = %d, want %d", got, want)
				}
			}
			if len(test.expectedOld) != len(test.oldRSs) {
				t.Fatalf("%d old replica sets, want %d", len(test.oldRSs), len(test.expectedOld))
			}
			for _, want := range test.expectedOld {
				if got := *updated[want.Name].Spec.Replicas; got != *want.Spec.Replicas {
					t.Errorf("old %s replicas = %d, want %d", want.Name, got, *want.Spec.Replicas)
				}
			}
		})
	}
}

// A scaling event records the new size on the ReplicaSets' annotations and
// reports each resize as an event.
func TestScaleAnnotationsAndEvents(t *testing.T) {
	d := newDeployment("foo", 10, nil, ptr.To(intstr.FromInt32(2)), nil, nil)
	newRS := rs("foo-v2", 2, nil, metav1.Date(2016, 5, 20, 2, 0, 0, 0, time.UTC))
	oldRS := rs("foo-v1", 3, nil, metav1.Date(2016, 5, 20, 1, 0, 0, 0, time.UTC))
	setReplicasAnnotations(newRS, 5, 7)
	setReplicasAnnotations(oldRS, 5, 7)
	c, client, recorder := newScaleController(t, newRS, oldRS)
	if err := c.scale(context.Background(), d, newRS, []*appsv1.ReplicaSet{oldRS}); err != nil {
		t.Fatal(err)
	}
	// 12 allowed, 5 there: 7 to add. foo-v1 3*12/7 = 5.1 → +2, foo-v2
	// 2*12/7 = 3.4 → +1, and the leftover 4 goes to the first (foo-v1 → 9).
	got := map[string]*appsv1.ReplicaSet{}
	for _, a := range client.Actions() {
		r := a.(clienttesting.UpdateAction).GetObject().(*appsv1.ReplicaSet)
		got[r.Name] = r
	}
	if *got["foo-v1"].Spec.Replicas != 9 || *got["foo-v2"].Spec.Replicas != 3 {
		t.Errorf("sizes = %d, %d; want 9, 3", *got["foo-v1"].Spec.Replicas, *got["foo-v2"].Spec.Replicas)
	}
	for name, r := range got {
		if r.Annotations[desiredReplicasAnnotation] != "10" || r.Annotations[maxReplicasAnnotation] != "12" {
			t.Errorf("%s annotations = %v", name, r.Annotations)
		}
	}
	want := []string{
		"Normal ScalingReplicaSet Scaled up replica set foo-v1 from 3 to 9",
		"Normal ScalingReplicaSet Scaled up replica set foo-v2 from 2 to 3",
	}
	if events := drainEvents(recorder); !reflect.DeepEqual(events, want) {
		t.Errorf("events = %q, want %q", events, want)
	}
}

// TestCleanupDeployment is upstream's cleanupDeployment table.
func TestCleanupDeployment(t *testing.T) {
	selector := map[string]string{"foo": "bar"}
	alreadyDeleted := newRSWithStatus("foo-1", 0, 0, selector)
	now := metav1.Now()
	alreadyDeleted.DeletionTimestamp = &now
	terminating := newRSWithStatus("foo-2", 0, 0, selector)
	terminating.Status.TerminatingReplicas = ptr.To[int32](1)
	unknownTerminating := newRSWithStatus("foo-3", 0, 0, selector)
	unknownTerminating.Status.ObservedGeneration = 1
	unsynced := newRSWithStatus("foo-4", 0, 0, selector)
	unsynced.Generation = 2
	unsynced.Status.ObservedGeneration = 1

	tests := []struct {
		name                 string
		oldRSs               []*appsv1.ReplicaSet
		revisionHistoryLimit int32
		expectedDeletions    int
	}{
		{
			name: "beyond the limit",
			oldRSs: []*appsv1.ReplicaSet{
				newRSWithStatus("foo-1", 0, 0, selector),
				newRSWithStatus("foo-2", 0, 0, selector),
				newRSWithStatus("foo-3", 0, 0, selector),
			},
			revisionHistoryLimit: 1,
			expectedDeletions:    2,
		},
		{
			name: "only replica sets with spec.replicas = status.replicas = 0",
			oldRSs: []*appsv1.ReplicaSet{
				newRSWithStatus("foo-1", 0, 0, selector),
				newRSWithStatus("foo-2", 0, 1, selector),
				newRSWithStatus("foo-3", 1, 0, selector),
				newRSWithStatus("foo-4", 1, 1, selector),
			},
			revisionHistoryLimit: 0,
			expectedDeletions:    1,
		},
		{
			name:                 "zero limit",
			oldRSs:               []*appsv1.ReplicaSet{newRSWithStatus("foo-1", 0, 0, selector), newRSWithStatus("foo-2", 0, 0, selector)},
			revisionHistoryLimit: 0,
			expectedDeletions:    2,
		},
		{
			name:                 "replicas left",
			oldRSs:               []*appsv1.ReplicaSet{newRSWithStatus("foo-1", 1, 1, selector), newRSWithStatus("foo-2", 1, 1, selector)},
			revisionHistoryLimit: 0,
			expectedDeletions:    0,
		},
		{
			name:                 "already being deleted",
			oldRSs:               []*appsv1.ReplicaSet{alreadyDeleted},
			revisionHistoryLimit: 0,
			expectedDeletions:    0,
		},
		{
			name:                 "terminating pods, unsynced status; an unknown terminating count is no obstacle",
			oldRSs:               []*appsv1.ReplicaSet{terminating, unknownTerminating, unsynced},
			revisionHistoryLimit: 0,
			expectedDeletions:    1,
		},
		{
			name: "unlimited history",
			oldRSs: []*appsv1.ReplicaSet{
				newRSWithStatus("foo-1", 0, 0, selector),
				newRSWithStatus("foo-2", 0, 0, selector),
				newRSWithStatus("foo-3", 0, 0, selector),
			},
			revisionHistoryLimit: math.MaxInt32,
			expectedDeletions:    0,
		},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			c, client, _ := newScaleController(t, test.oldRSs...)
			d := newDeployment("foo", 1, &test.revisionHistoryLimit, nil, nil, selector)
			if err := c.cleanupDeployment(context.Background(), test.oldRSs, d); err != nil {
				t.Fatal(err)
			}
			deletions := 0
			for _, a := range client.Actions() {
				if a.GetVerb() == "delete" {
					deletions++
				}
			}
			if deletions != test.expectedDeletions {
				t.Errorf("%d deletions, want %d", deletions, test.expectedDeletions)
			}
		})
	}
}

// TestCleanupDeploymentOrder is upstream's: the lowest revisions go first.
func TestCleanupDeploymentOrder(t *testing.T) {
	selector := map[string]string{"foo": "bar"}
	now := metav1.Now()
	minute := time.Minute
	withRevision := func(name string, replicas int32, at time.Time, revision string) *appsv1.ReplicaSet {
		r := rs(name, replicas, selector, metav1.NewTime(at))
		if revision != "" {
			r.Annotations = map[string]string{revisionAnnotation: revision}
		}
		r.Status = appsv1.ReplicaSetStatus{Replicas: replicas}
		return r
	}
	tests := []struct {
		oldRSs  []*appsv1.ReplicaSet
		limit   int32
		deleted []string
	}{
		{[]*appsv1.ReplicaSet{withRevision("foo-1", 0, now.Add(-minute), "1"), withRevision("foo-2", 0, now.Time, "2")}, 1, []string{"foo-1"}},
		{[]*appsv1.ReplicaSet{withRevision("foo-1", 0, now.Add(-minute), "2"), withRevision("foo-2", 0, now.Time, "1")}, 1, []string{"foo-2"}},
		{[]*appsv1.ReplicaSet{withRevision("foo-1", 0, now.Add(-minute), "1"), withRevision("foo-2", 0, now.Time, "")}, 1, []string{"foo-2"}},
		{[]*appsv1.ReplicaSet{withRevision("foo-1", 0, now.Add(-minute), ""), withRevision("foo-2", 0, now.Time, "2")}, 1, []string{"foo-1"}},
		{[]*appsv1.ReplicaSet{withRevision("foo-1", 1, now.Add(-minute), "1"), withRevision("foo-2", 0, now.Time, "2"), withRevision("foo-3", 0, now.Add(minute), "3")}, 1, []string{"foo-2"}},
		{[]*appsv1.ReplicaSet{withRevision("foo-1", 1, now.Add(-minute), "1"), withRevision("foo-2", 1, now.Time, "2"), withRevision("foo-3", 0, now.Add(minute), "3")}, 1, nil},
		{[]*appsv1.ReplicaSet{
			withRevision("foo-1", 0, now.Add(-minute), "3"), withRevision("foo-2", 0, now.Time, "1"),
			withRevision("foo-3", 0, now.Add(minute), "4"), withRevision("foo-4", 0, now.Add(2*minute), "2"),
		}, 2, []string{"foo-2", "foo-4"}},
	}
	for i, test := range tests {
		c, client, _ := newScaleController(t, test.oldRSs...)
		d := newDeployment("foo", 1, &test.limit, nil, nil, selector)
		if err := c.cleanupDeployment(context.Background(), test.oldRSs, d); err != nil {
			t.Fatal(err)
		}
		var deleted []string
		for _, a := range client.Actions() {
			if del, ok := a.(clienttesting.DeleteAction); ok && del.GetResource().Resource == "replicasets" {
				deleted = append(deleted, del.GetName())
			}
		}
		sort.Strings(deleted)
		if !reflect.DeepEqual(deleted, test.deleted) {
			t.Errorf("case %d: deleted %v, want %v", i, deleted, test.deleted)
		}
	}
}

func TestCalculateStatus(t *testing.T) {
	c, _, _ := newScaleController(t)
	d := newDeployment("foo", 3, nil, ptr.To(intstr.FromInt32(1)), ptr.To(intstr.FromInt32(1)), nil)
	d.Generation = 4
	d.Status.CollisionCount = ptr.To[int32](2)
	newRS := rs("foo-new", 2, nil, metav1.Time{})
	newRS.Status = appsv1.ReplicaSetStatus{Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 1, ObservedGeneration: 1, TerminatingReplicas: ptr.To[int32](0)}
	oldRS := rs("foo-old", 2, nil, metav1.Time{})
	oldRS.Status = appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, ObservedGeneration: 1, TerminatingReplicas: ptr.To[int32](1)}

	status := c.calculateStatus([]*appsv1.ReplicaSet{oldRS, newRS}, newRS, d)
	want := appsv1.DeploymentStatus{
		ObservedGeneration:  4,
		Replicas:            5,
		UpdatedReplicas:     2,
		ReadyReplicas:       5,
		AvailableReplicas:   4,
		UnavailableReplicas: 0, // 4 spec - 4 available
		TerminatingReplicas: ptr.To[int32](1),
		CollisionCount:      ptr.To[int32](2),
		Conditions: []appsv1.DeploymentCondition{{
			Type: appsv1.DeploymentAvailable, Status: "True", Reason: minimumReplicasAvailable,
			Message: "Deployment has minimum availability.", LastUpdateTime: metav1.NewTime(testNow), LastTransitionTime: metav1.NewTime(testNow),
		}},
	}
	if !reflect.DeepEqual(status, want) {
		t.Errorf("status =\n%+v\nwant\n%+v", status, want)
	}

	// 1 available of 3 with maxUnavailable 1: not available.
	oldRS.Status.AvailableReplicas = 0
	status = c.calculateStatus([]*appsv1.ReplicaSet{oldRS, newRS}, newRS, d)
	if cond := getCondition(status, appsv1.DeploymentAvailable); cond.Status != "False" || cond.Reason != minimumReplicasUnavailable {
		t.Errorf("Available = %+v", cond)
	}
	if status.UnavailableReplicas != 3 {
		t.Errorf("unavailable = %d, want 3", status.UnavailableReplicas)
	}
}

func TestIsScalingEvent(t *testing.T) {
	d := newDeployment("foo", 5, nil, nil, nil, map[string]string{"foo": "bar"})
	r := newReplicaSet(d, "foo-1", 3)
	r.Annotations = map[string]string{revisionAnnotation: "1", desiredReplicasAnnotation: "3", maxReplicasAnnotation: "3"}
	d.Annotations[revisionAnnotation] = "1"
	c, _, _ := newScaleController(t)
	c.clock = clocktesting.NewFakePassiveClock(testNow)
	got, err := c.isScalingEvent(context.Background(), d, []*appsv1.ReplicaSet{r})
	if err != nil || !got {
		t.Errorf("isScalingEvent = %v, %v; want true", got, err)
	}
	r.Annotations[desiredReplicasAnnotation] = "5"
	got, err = c.isScalingEvent(context.Background(), d, []*appsv1.ReplicaSet{r})
	if err != nil || got {
		t.Errorf("isScalingEvent = %v, %v; want false", got, err)
	}
}
