package deployment

import (
	"encoding/json"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func TestSyncDeploymentCreatesReplicaSet(t *testing.T) {
	f := newFixture(t)
	d := newDeployment("foo", 1, nil, nil, nil, map[string]string{"foo": "bar"})
	d.Annotations["kubernetes.io/change-cause"] = "kubectl create deployment foo"
	d.Annotations[corev1.LastAppliedConfigAnnotation] = "{}"
	f.dLister = append(f.dLister, d)
	f.objects = append(f.objects, d)

	hash := computeHash(&d.Spec.Template, nil)
	want := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "foo-" + hash, Namespace: d.Namespace}}
	f.expectCreateRSAction(want)
	f.expectUpdateDeploymentStatusAction(d) // the revision annotation
	f.expectUpdateDeploymentStatusAction(d) // the status
	actions := f.run(keyOf(d))
	if len(actions) != 3 {
		t.Fatalf("got %d actions", len(actions))
	}

	created := actions[0].(clienttesting.CreateAction).GetObject().(*appsv1.ReplicaSet)
	if created.Name != "foo-"+hash {
		t.Errorf("name = %q, want foo-%s", created.Name, hash)
	}
	wantLabels := map[string]string{"foo": "bar", appsv1.DefaultDeploymentUniqueLabelKey: hash}
	if !reflect.DeepEqual(created.Labels, wantLabels) {
		t.Errorf("labels = %v, want %v", created.Labels, wantLabels)
	}
	if !reflect.DeepEqual(created.Spec.Selector.MatchLabels, wantLabels) {
		t.Errorf("selector = %v, want %v", created.Spec.Selector.MatchLabels, wantLabels)
	}
	if !reflect.DeepEqual(created.Spec.Template.Labels, wantLabels) {
		t.Errorf("template labels = %v, want %v", created.Spec.Template.Labels, wantLabels)
	}
	if d.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != "" || d.Spec.Selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] != "" {
		t.Errorf("the deployment's own template or selector was changed")
	}
	wantAnnotations := map[string]string{
		revisionAnnotation:           "1",
		desiredReplicasAnnotation:    "1",
		maxReplicasAnnotation:        "1",
		"kubernetes.io/change-cause": "kubectl create deployment foo",
	}
	if !reflect.DeepEqual(created.Annotations, wantAnnotations) {
		t.Errorf("annotations = %v, want %v", created.Annotations, wantAnnotations)
	}
	if got := *created.Spec.Replicas; got != 1 {
		t.Errorf("replicas = %d, want 1", got)
	}
	if !reflect.DeepEqual(created.OwnerReferences, []metav1.OwnerReference{*ownerRefTo(d)}) {
		t.Errorf("owner references = %+v", created.OwnerReferences)
	}

	revised := actions[1].(clienttesting.UpdateAction).GetObject().(*appsv1.Deployment)
	if revised.Annotations[revisionAnnotation] != "1" {
		t.Errorf("deployment revision = %q, want 1", revised.Annotations[revisionAnnotation])
	}
	status := actions[2].(clienttesting.UpdateAction).GetObject().(*appsv1.Deployment).Status
	if status.ObservedGeneration != 1 {
		t.Errorf("observedGeneration = %d, want 1", status.ObservedGeneration)
	}
	// Created: nothing available yet, with maxUnavailable 0 (→ 1 by the fenceposts) 0 >= 1-1.
	if c := getCondition(status, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionTrue || c.Reason != minimumReplicasAvailable {
		t.Errorf("Available condition = %+v", c)
	}
	if events := drainEvents(f.recorder); !reflect.DeepEqual(events, []string{"Normal ScalingReplicaSet Scaled up replica set foo-" + hash + " from 0 to 1"}) {
		t.Errorf("events = %q", events)
	}
}

func TestSyncDeploymentProgressDeadlineConditions(t *testing.T) {
	f := newFixture(t)
	d := newDeployment("foo", 3, nil, nil, nil, map[string]string{"foo": "bar"})
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	f.dLister = append(f.dLister, d)
	f.objects = append(f.objects, d)
	f.expectCreateRSAction(&appsv1.ReplicaSet{})
	f.expectUpdateDeploymentStatusAction(d)
	f.expectUpdateDeploymentStatusAction(d)
	actions := f.run(keyOf(d))
	if len(actions) != 3 {
		t.Fatalf("got %d actions", len(actions))
	}
	created := actions[0].(clienttesting.CreateAction).GetObject().(*appsv1.ReplicaSet)
	first := actions[1].(clienttesting.UpdateAction).GetObject().(*appsv1.Deployment).Status
	c := getCondition(first, appsv1.DeploymentProgressing)
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason != newRSReason || c.Message != `Created new replica set "`+created.Name+`"` {
		t.Errorf("Progressing after create = %+v", c)
	}
	if !c.LastUpdateTime.Time.Equal(testNow) || !c.LastTransitionTime.Time.Equal(testNow) {
		t.Errorf("condition times = %v, %v; want the clock's", c.LastUpdateTime, c.LastTransitionTime)
	}
	final := actions[2].(clienttesting.UpdateAction).GetObject().(*appsv1.Deployment).Status
	if c := getCondition(final, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionFalse || c.Reason != minimumReplicasUnavailable {
		t.Errorf("Available = %+v, want False/MinimumReplicasUnavailable", c)
	}
}

func TestSyncDeploymentDontDoAnythingDuringDeletion(t *testing.T) {
	f := newFixture(t)
	d := newDeployment("foo", 1, nil, nil, nil, map[string]string{"foo": "bar"})
	now := metav1.Now()
	d.DeletionTimestamp = &now
	f.dLister = append(f.dLister, d)
	f.objects = append(f.objects, d)
	f.expectUpdateDeploymentStatusAction(d)
	f.run(keyOf(d))
}

func TestSyncDeploymentDeletedIsNoop(t *testing.T) {
	f := newFixture(t)
	f.run("default/gone")
}

func TestSyncDeploymentSelectingAll(t *testing.T) {
	f := newFixture(t)
	d := newDeployment("foo", 1, nil, nil, nil, nil)
	d.Spec.Selector = &metav1.LabelSelector{}
	d.Generation = 2
	f.dLister = append(f.dLister, d)
	f.objects = append(f.objects, d)
	f.expectUpdateDeploymentStatusAction(d)
	actions := f.run(keyOf(d))
	if got := actions[0].(clienttesting.UpdateAction).GetObject().(*appsv1.Deployment).Status.ObservedGeneration; got != 2 {
		t.Errorf("observedGeneration = %d, want 2", got)
	}
	if events := drainEvents(f.recorder); len(events) != 1 || events[0] != "Warning SelectingAll This deployment is selecting all pods. A non-empty selector is required." {
		t.Errorf("events = %q", events)
	}
}

func TestSyncDeploymentAdoptsOrphan(t *testing.T) {
	f := newFixture(t)
	d := newDeployment("foo", 1, nil, nil, nil, map[string]string{"foo": "bar"})
	orphan := newReplicaSet(d, "orphan", 1)
	orphan.OwnerReferences = nil
	f.dLister = append(f.dLister, d)
	f.rsLister = append(f.rsLister, orphan)
	f.objects = append(f.objects, d, orphan)

	f.expectGetDeploymentAction(d) // the live recheck before adopting
	f.expectPatchRSAction(orphan)
	// The annotations of the (now owned) new ReplicaSet, once by the scaling
	// check and once by the rollout, both from the same listed copy: as
	// upstream (against a real API server the second one conflicts and the
	// sync is retried).
	f.expectUpdateRSAction(orphan)
	f.expectUpdateRSAction(orphan)
	f.expectUpdateDeploymentStatusAction(d) // status
	actions := f.run(keyOf(d))
	if len(actions) < 2 {
		t.Fatal("no adoption")
	}
	patch := actions[1].(clienttesting.PatchAction)
	var body struct {
		Metadata struct {
			OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
			UID             string                  `json:"uid"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(patch.GetPatch(), &body); err != nil {
		t.Fatal(err)
	}
	if body.Metadata.UID != string(orphan.UID) || len(body.Metadata.OwnerReferences) != 1 || body.Metadata.OwnerReferences[0].UID != d.UID {
		t.Errorf("adopt patch = %s", patch.GetPatch())
	}
}

func TestSyncDeploymentReleasesNonMatching(t *testing.T) {
	f := newFixture(t)
	d := newDeployment("foo", 1, nil, nil, nil, map[string]string{"foo": "bar"})
	other := newReplicaSet(d, "other", 1)
	other.Labels = map[string]string{"foo": "other"}
	f.dLister = append(f.dLister, d)
	f.rsLister = append(f.rsLister, other)
	f.objects = append(f.objects, d, other)

	f.expectPatchRSAction(other) // release
	f.expectCreateRSAction(&appsv1.ReplicaSet{})
	f.expectUpdateDeploymentStatusAction(d)
	f.expectUpdateDeploymentStatusAction(d)
	actions := f.run(keyOf(d))
	if string(actions[0].(clienttesting.PatchAction).GetPatch()) != `{"metadata":{"ownerReferences":[{"$patch":"delete","uid":"`+string(d.UID)+`"}],"uid":"`+string(other.UID)+`"}}` {
		t.Errorf("release patch = %s", actions[0].(clienttesting.PatchAction).GetPatch())
	}
}

func TestSyncDeploymentIgnoresOtherControllersReplicaSets(t *testing.T) {
	f := newFixture(t)
	d := newDeployment("foo", 1, nil, nil, nil, map[string]string{"foo": "bar"})
	stranger := newDeployment("bar", 1, nil, nil, nil, map[string]string{"foo": "bar"})
	theirs := newReplicaSet(stranger, "theirs", 1)
	f.dLister = append(f.dLister, d)
	f.rsLister = append(f.rsLister, theirs)
	f.objects = append(f.objects, d, theirs)
	f.expectCreateRSAction(&appsv1.ReplicaSet{})
	f.expectUpdateDeploymentStatusAction(d)
	f.expectUpdateDeploymentStatusAction(d)
	f.run(keyOf(d))
}

// A paused Deployment with a new template does not roll out; a scaling event
// still resizes the ReplicaSet.
func TestSyncPausedDeployment(t *testing.T) {
	f := newFixture(t)
	d := newDeployment("foo", 5, nil, nil, nil, map[string]string{"foo": "bar"})
	old := newReplicaSet(d, "foo-old", 3)
	old.Annotations = map[string]string{revisionAnnotation: "1", desiredReplicasAnnotation: "3", maxReplicasAnnotation: "3"}
	d.Spec.Template.Spec.Containers[0].Image = "foo/bar:v2"
	d.Spec.Paused = true
	f.dLister = append(f.dLister, d)
	f.rsLister = append(f.rsLister, old)
	f.objects = append(f.objects, d, old)
	f.expectUpdateRSAction(old) // 3 -> 5, no new ReplicaSet
	f.expectUpdateDeploymentStatusAction(d)
	actions := f.run(keyOf(d))
	if got := *actions[0].(clienttesting.UpdateAction).GetObject().(*appsv1.ReplicaSet).Spec.Replicas; got != 5 {
		t.Errorf("replicas = %d, want 5", got)
	}
}

func TestSyncPausedConditions(t *testing.T) {
	f := newFixture(t)
	d := newDeployment("foo", 1, nil, nil, nil, map[string]string{"foo": "bar"})
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	d.Spec.Paused = true
	rs := newReplicaSet(d, "foo-1", 1)
	rs.Annotations = map[string]string{revisionAnnotation: "1", desiredReplicasAnnotation: "1", maxReplicasAnnotation: "1"}
	d.Annotations[revisionAnnotation] = "1"
	f.dLister = append(f.dLister, d)
	f.rsLister = append(f.rsLister, rs)
	f.objects = append(f.objects, d, rs)
	f.expectUpdateDeploymentStatusAction(d) // Progressing Unknown DeploymentPaused
	f.expectUpdateDeploymentStatusAction(d) // counts and Available
	actions := f.run(keyOf(d))
	st := actions[0].(clienttesting.UpdateAction).GetObject().(*appsv1.Deployment).Status
	if c := getCondition(st, appsv1.DeploymentProgressing); c == nil || c.Status != corev1.ConditionUnknown || c.Reason != pausedReason {
		t.Errorf("Progressing = %+v", c)
	}
}

func TestRecreateWaitsForOldPods(t *testing.T) {
	sel := map[string]string{"foo": "bar"}
	recreate := func() (*appsv1.Deployment, *appsv1.ReplicaSet) {
		d := newDeployment("foo", 3, nil, nil, nil, sel)
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		old := newReplicaSet(d, "foo-old", 3)
		old.Annotations = map[string]string{revisionAnnotation: "1", desiredReplicasAnnotation: "3", maxReplicasAnnotation: "3"}
		d.Spec.Template.Spec.Containers[0].Image = "foo/bar:v2"
		return d, old
	}

	t.Run("scales old down first", func(t *testing.T) {
		f := newFixture(t)
		d, old := recreate()
		old.Status.Replicas = 3
		f.dLister, f.rsLister, f.objects = []*appsv1.Deployment{d}, []*appsv1.ReplicaSet{old}, []runtime.Object{d, old}
		f.expectUpdateRSAction(old)
		f.expectUpdateDeploymentStatusAction(d)
		actions := f.run(keyOf(d))
		if got := *actions[0].(clienttesting.UpdateAction).GetObject().(*appsv1.ReplicaSet).Spec.Replicas; got != 0 {
			t.Errorf("old replicas = %d, want 0", got)
		}
	})
	t.Run("waits while old pods run", func(t *testing.T) {
		f := newFixture(t)
		d, old := recreate()
		*old.Spec.Replicas = 0
		old.Status.Replicas = 0 // status already says none, but a pod still runs
		f.dLister, f.rsLister, f.objects = []*appsv1.Deployment{d}, []*appsv1.ReplicaSet{old}, []runtime.Object{d, old}
		f.podLister = []*corev1.Pod{newPod("p1", old, corev1.PodRunning)}
		f.expectUpdateDeploymentStatusAction(d)
		f.run(keyOf(d))
	})
	t.Run("terminal old pods do not block", func(t *testing.T) {
		f := newFixture(t)
		d, old := recreate()
		*old.Spec.Replicas = 0
		f.dLister, f.rsLister, f.objects = []*appsv1.Deployment{d}, []*appsv1.ReplicaSet{old}, []runtime.Object{d, old}
		f.podLister = []*corev1.Pod{newPod("p1", old, corev1.PodSucceeded), newPod("p2", old, corev1.PodFailed)}
		f.expectCreateRSAction(&appsv1.ReplicaSet{})
		f.expectUpdateDeploymentStatusAction(d)
		f.expectUpdateDeploymentStatusAction(d)
		actions := f.run(keyOf(d))
		created := actions[0].(clienttesting.CreateAction).GetObject().(*appsv1.ReplicaSet)
		if *created.Spec.Replicas != 3 || created.Annotations[revisionAnnotation] != "2" {
			t.Errorf("created replicas %d revision %q, want 3 and 2", *created.Spec.Replicas, created.Annotations[revisionAnnotation])
		}
	})
}
