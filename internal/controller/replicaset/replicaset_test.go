package replicaset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// now is the fake clock's time in every unit test.
var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

type fixture struct {
	t        *testing.T
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	recorder *record.FakeRecorder
	clock    *clocktesting.FakeClock
	c        *Controller
}

// newFixture builds a controller over a fake clientset holding objs, with
// the informer indexers preloaded with the same objects. Created pods get
// names "<generateName>00001", "...00002", ... as the API server would give.
func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewSimpleClientset(objs...)
	var seq atomic.Int64
	client.PrependReactor("create", "pods", func(a core.Action) (bool, runtime.Object, error) {
		pod := a.(core.CreateAction).GetObject().(*corev1.Pod)
		if pod.Name == "" && pod.GenerateName != "" {
			pod.Name = fmt.Sprintf("%s%05d", pod.GenerateName, seq.Add(1))
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(1000)
	clk := clocktesting.NewFakeClock(now)
	c, err := newController(controller.Deps{
		Client:    client,
		Informers: factory,
		Recorder:  func(string) record.EventRecorder { return recorder },
	}, Config{}, clk, BurstReplicas)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.queue.ShutDown)
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.ReplicaSet:
			must(t, factory.Apps().V1().ReplicaSets().Informer().GetIndexer().Add(o))
		case *corev1.Pod:
			must(t, factory.Core().V1().Pods().Informer().GetIndexer().Add(o))
		}
	}
	return &fixture{t: t, client: client, factory: factory, recorder: recorder, clock: clk, c: c}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) sync(rs *appsv1.ReplicaSet) error {
	f.t.Helper()
	return f.c.Sync(context.Background(), rs.Namespace+"/"+rs.Name)
}

// events drains the recorded events.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func newRS(name string, replicas int32, lbls map[string]string) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid"), Generation: 1, ResourceVersion: "10"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls, Annotations: map[string]string{"note": "from-template"}},
				Spec: corev1.PodSpec{
					Containers:    []corev1.Container{{Name: "app", Image: "example/app:1"}},
					RestartPolicy: corev1.RestartPolicyAlways,
				},
			},
		},
	}
}

// synced marks the status as already reflecting no pods at the current generation.
func synced(rs *appsv1.ReplicaSet) *appsv1.ReplicaSet {
	rs.Status.ObservedGeneration = rs.Generation
	return rs
}

type podOpt func(*corev1.Pod)

func newPod(name string, owner *appsv1.ReplicaSet, lbls map[string]string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", UID: types.UID(name + "-uid"), Labels: lbls, ResourceVersion: "1",
			CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "ReplicaSet", Name: owner.Name, UID: owner.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}}
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func onNode(n string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = n } }

func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }

func created(ago time.Duration) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(now.Add(-ago)) }
}

// readySince makes the pod Running and Ready since ago before now.
func readySince(ago time.Duration) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-ago)),
		})
	}
}

func restarts(n int32) podOpt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", RestartCount: n}}
	}
}

func deleting() podOpt {
	return func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(now)) }
}

// describe renders an action as "verb resource[/subresource] name" plus, for
// patches, the patch.
func describe(a core.Action) string {
	res := a.GetResource().Resource
	if sub := a.GetSubresource(); sub != "" {
		res += "/" + sub
	}
	var name string
	switch a := a.(type) {
	case core.PatchAction:
		name = a.GetName() + " " + string(a.GetPatch())
	case core.GetAction: // also deletes
		name = a.GetName()
	case core.CreateAction:
		o, _ := a.GetObject().(metav1.Object)
		name = o.GetName()
		if name == "" {
			name = o.GetGenerateName() + "*"
		}
	case core.UpdateAction:
		o, _ := a.GetObject().(metav1.Object)
		name = o.GetName()
	}
	return strings.TrimSpace(a.GetVerb() + " " + res + " " + name)
}

func describeAll(actions []core.Action) []string {
	var out []string
	for _, a := range actions {
		out = append(out, describe(a))
	}
	return out
}

func assertActions(t *testing.T, got []core.Action, want ...string) {
	t.Helper()
	if d := describeAll(got); !slices.Equal(d, want) {
		t.Fatalf("actions:\n  %s\nwant:\n  %s", strings.Join(d, "\n  "), strings.Join(want, "\n  "))
	}
}

func statusOf(t *testing.T, a core.Action) appsv1.ReplicaSetStatus {
	t.Helper()
	u, ok := a.(core.UpdateAction)
	if !ok || a.GetSubresource() != "status" {
		t.Fatalf("not a status update: %s", describe(a))
	}
	return u.GetObject().(*appsv1.ReplicaSet).Status
}

func TestCreatesMissingPods(t *testing.T) {
	lbls := map[string]string{"app": "web"}
	rs := newRS("web", 3, lbls)
	f := newFixture(t, rs)
	must(t, f.sync(rs))

	actions := f.client.Actions()
	assertActions(t, actions,
		"create pods web-*", "create pods web-*", "create pods web-*", "update replicasets/status web")
	for _, a := range actions[:3] {
		pod := a.(core.CreateAction).GetObject().(*corev1.Pod)
		if a.GetNamespace() != "default" || pod.GenerateName != "web-" {
			t.Errorf("create in %q with generateName %q", a.GetNamespace(), pod.GenerateName)
		}
		if !equalMaps(pod.Labels, lbls) || pod.Annotations["note"] != "from-template" {
			t.Errorf("pod labels %v annotations %v", pod.Labels, pod.Annotations)
		}
		want := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "web-uid",
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
		if !equalRefs(pod.OwnerReferences, want) {
			t.Errorf("owner references %+v", pod.OwnerReferences)
		}
		if len(pod.Spec.Containers) != 1 || pod.Spec.Containers[0].Image != "example/app:1" {
			t.Errorf("spec %+v", pod.Spec)
		}
	}
	// The cache has not seen the pods yet: the status counts none.
	if st := statusOf(t, actions[3]); st.Replicas != 0 || st.ObservedGeneration != 1 {
		t.Errorf("status %+v", st)
	}
	wantEvents := []string{
		"Normal SuccessfulCreate Created pod: web-00001",
		"Normal SuccessfulCreate Created pod: web-00002",
		"Normal SuccessfulCreate Created pod: web-00003",
	}
	if ev := f.events(); !slices.Equal(sorted(ev), wantEvents) {
		t.Errorf("events %q, want %q", ev, wantEvents)
	}
	if add, _, _ := f.c.expectations.GetExpectations("default/web"); add != 3 {
		t.Errorf("expected creations = %d, want 3", add)
	}

	// Until the cache shows the pods, another sync must not create more.
	f.client.ClearActions()
	must(t, f.sync(rs))
	assertActions(t, f.client.Actions(), "update replicasets/status web")

	// The informer reports the three pods: expectations are met.
	for i := 1; i <= 3; i++ {
		f.c.addPod(newPod(fmt.Sprintf("web-%05d", i), rs, lbls))
	}
	if !f.c.expectations.SatisfiedExpectations("default/web") {
		t.Error("expectations not satisfied after observing the creations")
	}
	if f.c.queue.Len() != 1 {
		t.Errorf("queue length %d, want 1 (the ReplicaSet key)", f.c.queue.Len())
	}
}

func TestNoActionWhileExpectationsUnsatisfied(t *testing.T) {
	rs := synced(newRS("web", 3, map[string]string{"app": "web"}))
	f := newFixture(t, rs)
	f.c.expectations.ExpectCreations("default/web", 1)
	must(t, f.sync(rs))
	assertActions(t, f.client.Actions())

	f.c.expectations.ExpectDeletions("default/web", []string{"default/gone"})
	must(t, f.sync(rs))
	assertActions(t, f.client.Actions())

	// Expectations expire after five minutes: the controller acts again.
	f.clock.Step(5*time.Minute + time.Second)
	must(t, f.sync(rs))
	if n := len(f.client.Actions()); n != 3 {
		t.Errorf("after expiry: %d actions, want 3 creates", n)
	}
}

func TestDeletesSurplusPodsInPreferenceOrder(t *testing.T) {
	lbls := map[string]string{"app": "web"}
	rs := synced(newRS("web", 3, lbls))
	pods := []*corev1.Pod{
		newPod("ready-old", rs, lbls, onNode("n1"), readySince(time.Hour)),
		newPod("unscheduled", rs, lbls),
		newPod("running-not-ready", rs, lbls, onNode("n2"), phase(corev1.PodRunning)),
		newPod("ready-new", rs, lbls, onNode("n3"), readySince(time.Minute)),
		newPod("scheduled-pending", rs, lbls, onNode("n4")),
		newPod("ready-restarts", rs, lbls, onNode("n5"), readySince(time.Hour), restarts(3)),
	}
	objs := []runtime.Object{rs}
	for _, p := range pods {
		objs = append(objs, p)
	}
	f := newFixture(t, objs...)
	must(t, f.sync(rs))

	actions := f.client.Actions()
	deletes := sorted(describeAll(actions[:3]))
	want := []string{"delete pods running-not-ready", "delete pods scheduled-pending", "delete pods unscheduled"}
	if !slices.Equal(deletes, want) {
		t.Fatalf("deletes %v, want %v", deletes, want)
	}
	assertActions(t, actions[3:], "update replicasets/status web")
	if st := statusOf(t, actions[3]); st.Replicas != 6 || st.ReadyReplicas != 3 || st.AvailableReplicas != 3 {
		t.Errorf("status %+v", st)
	}
	if ev := sorted(f.events()); !slices.Equal(ev, []string{
		"Normal SuccessfulDelete Deleted pod: running-not-ready",
		"Normal SuccessfulDelete Deleted pod: scheduled-pending",
		"Normal SuccessfulDelete Deleted pod: unscheduled",
	}) {
		t.Errorf("events %q", ev)
	}

	// The deletions are expected by name; each counts once, whether seen as
	// a deletionTimestamp or as the delete.
	if got := sorted(f.c.expectations.GetUIDs("default/web").UnsortedList()); !slices.Equal(got,
		[]string{"default/running-not-ready", "default/scheduled-pending", "default/unscheduled"}) {
		t.Errorf("expected deletions %v", got)
	}
	// The informer delivers the written status; the pods are not gone yet.
	must(t, f.factory.Apps().V1().ReplicaSets().Informer().GetIndexer().Update(actions[3].(core.UpdateAction).GetObject()))
	f.client.ClearActions()
	must(t, f.sync(rs))
	assertActions(t, f.client.Actions()) // still waiting: no second round of deletes

	terminating := pods[1].DeepCopy()
	terminating.DeletionTimestamp = ptr.To(metav1.NewTime(now))
	terminating.ResourceVersion = "2"
	f.c.updatePod(pods[1], terminating)
	f.c.deletePod(terminating)
	f.c.deletePod(cache.DeletedFinalStateUnknown{Key: "default/running-not-ready", Obj: pods[2]})
	if _, del, _ := f.c.expectations.GetExpectations("default/web"); del != 1 {
		t.Errorf("outstanding deletions %d, want 1", del)
	}
	f.c.deletePod(pods[4])
	if !f.c.expectations.SatisfiedExpectations("default/web") {
		t.Error("expectations not satisfied after observing every deletion")
	}
}

func TestDeleteFailureLowersExpectations(t *testing.T) {
	lbls := map[string]string{"app": "web"}
	rs := synced(newRS("web", 0, lbls))
	a, b := newPod("a", rs, lbls), newPod("b", rs, lbls)
	f := newFixture(t, rs, a, b)
	f.client.PrependReactor("delete", "pods", func(act core.Action) (bool, runtime.Object, error) {
		if act.(core.DeleteAction).GetName() == "a" {
			return true, nil, apierrors.NewInternalError(errors.New("etcd unhappy"))
		}
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "b")
	})
	err := f.sync(rs)
	if !apierrors.IsInternalError(err) {
		t.Fatalf("Sync error %v, want the internal error", err)
	}
	if !f.c.expectations.SatisfiedExpectations("default/web") {
		t.Error("failed deletions still expected")
	}
	actions := f.client.Actions()
	st := statusOf(t, actions[len(actions)-1])
	if c := getCondition(st, appsv1.ReplicaSetReplicaFailure); c == nil || c.Reason != "FailedDelete" {
		t.Errorf("conditions %+v, want ReplicaFailure FailedDelete", st.Conditions)
	}
	if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning FailedDelete Error deleting:") {
		t.Errorf("events %q", ev)
	}
}

func TestPodsToDeleteRanking(t *testing.T) {
	lbls := map[string]string{"app": "web"}
	rs := newRS("web", 1, lbls)
	cost := func(c string) podOpt {
		return func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.PodDeletionCost: c} }
	}
	tests := []struct {
		name        string
		first, then *corev1.Pod
	}{
		{"unscheduled before scheduled", newPod("a", rs, lbls), newPod("b", rs, lbls, onNode("n"))},
		{"pending before unknown", newPod("a", rs, lbls, onNode("n")), newPod("b", rs, lbls, onNode("n"), phase(corev1.PodUnknown))},
		{"unknown before running", newPod("a", rs, lbls, onNode("n"), phase(corev1.PodUnknown)), newPod("b", rs, lbls, onNode("n"), phase(corev1.PodRunning))},
		{"not ready before ready", newPod("a", rs, lbls, onNode("n"), phase(corev1.PodRunning)), newPod("b", rs, lbls, onNode("n"), readySince(time.Hour))},
		{"lower deletion cost first", newPod("a", rs, lbls, onNode("n"), readySince(time.Hour), cost("-5")), newPod("b", rs, lbls, onNode("n"), readySince(time.Minute))},
		{"ready for less time first", newPod("a", rs, lbls, onNode("n"), readySince(time.Minute)), newPod("b", rs, lbls, onNode("n"), readySince(time.Hour))},
		{"more restarts first", newPod("a", rs, lbls, onNode("n"), readySince(time.Hour), restarts(5)), newPod("b", rs, lbls, onNode("n"), readySince(time.Hour))},
		{"newer first", newPod("a", rs, lbls, onNode("n"), created(time.Minute)), newPod("b", rs, lbls, onNode("n"), created(time.Hour))},
		{"no creation time first", newPod("a", rs, lbls, onNode("n"), created(0), func(p *corev1.Pod) { p.CreationTimestamp = metav1.Time{} }), newPod("b", rs, lbls, onNode("n"))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, order := range [][]*corev1.Pod{{tc.first, tc.then}, {tc.then, tc.first}} {
				got := podsToDelete(order, order, 1, metav1.NewTime(now))
				if got[0] != tc.first {
					t.Errorf("deleted %s first, want %s", got[0].Name, tc.first.Name)
				}
			}
		})
	}

	t.Run("doubled up first", func(t *testing.T) {
		a := newPod("a", rs, lbls, onNode("crowded"), readySince(time.Hour))
		b := newPod("b", rs, lbls, onNode("alone"), readySince(time.Hour))
		sibling := newPod("sibling", nil, lbls, onNode("crowded"))
		for _, order := range [][]*corev1.Pod{{a, b}, {b, a}} {
			if got := podsToDelete(order, []*corev1.Pod{a, b, sibling}, 1, metav1.NewTime(now)); got[0] != a {
				t.Errorf("deleted %s first, want a", got[0].Name)
			}
		}
	})

	t.Run("similar ages are one bucket, ordered by UID", func(t *testing.T) {
		// 60 and 61 minutes old fall in the same power-of-two bucket of nanoseconds.
		a := newPod("a", rs, lbls, onNode("n"), created(61*time.Minute))
		b := newPod("b", rs, lbls, onNode("n"), created(60*time.Minute))
		if got := podsToDelete([]*corev1.Pod{b, a}, nil, 1, metav1.NewTime(now)); got[0] != a {
			t.Errorf("deleted %s first, want a (lower UID)", got[0].Name)
		}
	})

	t.Run("does not reorder the caller's slice", func(t *testing.T) {
		a := newPod("a", rs, lbls, onNode("n"))
		b := newPod("b", rs, lbls)
		in := []*corev1.Pod{a, b}
		podsToDelete(in, in, 1, metav1.NewTime(now))
		if in[0] != a {
			t.Error("input reordered")
		}
	})
}

func TestAdoptsOrphansAndReleasesStrays(t *testing.T) {
	lbls := map[string]string{"app": "web"}
	rs := synced(newRS("web", 2, lbls))
	owned := newPod("owned", rs, lbls)
	orphan := newPod("orphan", nil, lbls)
	stray := newPod("stray", rs, map[string]string{"app": "other"})
	otherOwner := newRS("other", 1, lbls)
	foreign := newPod("foreign", otherOwner, lbls)
	orphanDeleting := newPod("orphan-deleting", nil, lbls, deleting())
	f := newFixture(t, rs, owned, orphan, stray, foreign, orphanDeleting)
	must(t, f.sync(rs))

	actions := f.client.Actions()
	got := describeAll(actions)
	want := []string{
		"get replicasets web",
		`patch pods orphan {"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web","uid":"web-uid","controller":true,"blockOwnerDeletion":true}],"uid":"orphan-uid"}}`,
		`patch pods stray {"metadata":{"ownerReferences":[{"$patch":"delete","uid":"web-uid"}],"uid":"stray-uid"}}`,
		"update replicasets/status web",
	}
	// The cache lists pods in no fixed order: compare as a set, then check
	// the order that matters.
	if !slices.Equal(sorted(got), sorted(want)) {
		t.Fatalf("actions:\n  %s\nwant (any order):\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if slices.Index(got, want[0]) > slices.Index(got, want[1]) {
		t.Error("adopted before re-reading the ReplicaSet")
	}
	if got[len(got)-1] != want[3] {
		t.Error("status not written last")
	}
	for _, a := range actions {
		if p, ok := a.(core.PatchAction); ok && p.GetPatchType() != types.StrategicMergePatchType {
			t.Errorf("patch type %s", p.GetPatchType())
		}
	}
	// owned + adopted orphan = 2 replicas: nothing created or deleted.
	if st := statusOf(t, actions[len(actions)-1]); st.Replicas != 2 || st.FullyLabeledReplicas != 2 {
		t.Errorf("status %+v", st)
	}
	// The patches reached the (fake) API server.
	p, err := f.client.CoreV1().Pods("default").Get(context.Background(), "orphan", metav1.GetOptions{})
	must(t, err)
	if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != "web-uid" {
		t.Errorf("orphan's controller %+v", ref)
	}
	p, err = f.client.CoreV1().Pods("default").Get(context.Background(), "stray", metav1.GetOptions{})
	must(t, err)
	if len(p.OwnerReferences) != 0 {
		t.Errorf("stray still owned: %+v", p.OwnerReferences)
	}
}

func TestNoAdoptionWhenReplicaSetReplaced(t *testing.T) {
	lbls := map[string]string{"app": "web"}
	rs := synced(newRS("web", 1, lbls))
	orphan := newPod("orphan", nil, lbls)
	f := newFixture(t, rs, orphan)
	// The API server holds a new ReplicaSet of the same name.
	fresh := rs.DeepCopy()
	fresh.UID = "new-uid"
	must(t, f.client.Tracker().Update(appsv1.SchemeGroupVersion.WithResource("replicasets"), fresh, "default"))
	err := f.sync(rs)
	if err == nil || !strings.Contains(err.Error(), "is gone") {
		t.Fatalf("Sync error %v, want the owner-is-gone error", err)
	}
	assertActions(t, f.client.Actions(), "get replicasets web")
}

func TestStatus(t *testing.T) {
	lbls := map[string]string{"app": "web"}
	rs := newRS("web", 4, lbls)
	rs.Generation = 2
	rs.Spec.MinReadySeconds = 30
	rs.Spec.Template.Labels = map[string]string{"app": "web", "tier": "front"}
	full := map[string]string{"app": "web", "tier": "front"}
	f := newFixture(t, rs,
		newPod("available", rs, full, readySince(time.Minute)),
		newPod("ready-recently", rs, full, readySince(10*time.Second)),
		newPod("not-ready", rs, lbls, phase(corev1.PodRunning)),
		newPod("partial-labels-ready", rs, lbls, readySince(time.Hour)),
		newPod("failed", rs, full, phase(corev1.PodFailed)),
		newPod("terminating", rs, full, readySince(time.Hour), deleting()),
	)
	must(t, f.sync(rs))
	actions := f.client.Actions()
	assertActions(t, actions, "update replicasets/status web")
	want := appsv1.ReplicaSetStatus{Replicas: 4, FullyLabeledReplicas: 2, ReadyReplicas: 3, AvailableReplicas: 2, ObservedGeneration: 2}
	if st := statusOf(t, actions[0]); !equalStatus(st, want) {
		t.Errorf("status %+v, want %+v", st, want)
	}

	// Written status, nothing changed: no update.
	f.client.ClearActions()
	rs.Status = want
	must(t, f.factory.Apps().V1().ReplicaSets().Informer().GetIndexer().Update(rs))
	must(t, f.sync(rs))
	assertActions(t, f.client.Actions())
}

func TestRequeueAfterMinReadySeconds(t *testing.T) {
	lbls := map[string]string{"app": "web"}
	rs := newRS("web", 2, lbls)
	rs.Spec.MinReadySeconds = 30
	f := newFixture(t, rs,
		newPod("a", rs, lbls, readySince(time.Hour)),
		newPod("b", rs, lbls, readySince(5*time.Second)),
	)
	must(t, f.sync(rs))
	st := statusOf(t, f.client.Actions()[0])
	if st.ReadyReplicas != 2 || st.AvailableReplicas != 1 {
		t.Fatalf("status %+v", st)
	}
	if f.c.queue.Len() != 0 {
		t.Fatal("requeued at once")
	}
	f.clock.Step(30 * time.Second)
	poll.Until(t, "a requeue after minReadySeconds", poll.True(func() bool { return f.c.queue.Len() == 1 }))
}

func TestSlowStartStopsAfterFirstFailure(t *testing.T) {
	lbls := map[string]string{"app": "web"}
	tests := []struct {
		name         string
		okCreates    int64 // creates that succeed before all fail
		wantAttempts int
		wantPending  int64 // creations still expected
	}{
		{"first fails", 0, 1, 0},
		// batches 1 and 2 succeed, all of the batch of 4 fails
		{"third batch fails", 3, 7, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := synced(newRS("web", 10, lbls))
			f := newFixture(t, rs)
			var calls atomic.Int64
			f.client.PrependReactor("create", "pods", func(core.Action) (bool, runtime.Object, error) {
				if calls.Add(1) > tc.okCreates {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("exceeded quota"))
				}
				return false, nil, nil
			})
			err := f.sync(rs)
			if !apierrors.IsForbidden(err) {
				t.Fatalf("Sync error %v, want forbidden", err)
			}
			actions := f.client.Actions()
			creates := 0
			for _, a := range actions {
				if a.GetVerb() == "create" {
					creates++
				}
			}
			if creates != tc.wantAttempts {
				t.Errorf("%d create attempts, want %d", creates, tc.wantAttempts)
			}
			if add, _, _ := f.c.expectations.GetExpectations("default/web"); add != tc.wantPending {
				t.Errorf("creations still expected %d, want %d", add, tc.wantPending)
			}
			st := statusOf(t, actions[len(actions)-1])
			c := getCondition(st, appsv1.ReplicaSetReplicaFailure)
			if c == nil || c.Status != corev1.ConditionTrue || c.Reason != "FailedCreate" || !strings.Contains(c.Message, "exceeded quota") {
				t.Errorf("ReplicaFailure condition %+v", c)
			}
			var failed int
			for _, e := range f.events() {
				if strings.HasPrefix(e, "Warning FailedCreate Error creating:") {
					failed++
				}
			}
			if failed != tc.wantAttempts-int(tc.okCreates) {
				t.Errorf("%d FailedCreate events, want %d", failed, tc.wantAttempts-int(tc.okCreates))
			}
		})
	}
}

func TestFailureConditionClearedOnSuccess(t *testing.T) {
	lbls := map[string]string{"app": "web"}
	rs := synced(newRS("web", 1, lbls))
	rs.Status.Replicas = 1
	rs.Status.FullyLabeledReplicas = 1
	rs.Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate"}}
	f := newFixture(t, rs, newPod("a", rs, lbls))
	must(t, f.sync(rs))
	actions := f.client.Actions()
	assertActions(t, actions, "update replicasets/status web")
	if st := statusOf(t, actions[0]); len(st.Conditions) != 0 {
		t.Errorf("conditions %+v", st.Conditions)
	}
}

func TestBurstReplicas(t *testing.T) {
	rs := synced(newRS("web", 600, map[string]string{"app": "web"}))
	f := newFixture(t, rs)
	must(t, f.sync(rs))
	creates := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "create" {
			creates++
		}
	}
	if creates != BurstReplicas {
		t.Errorf("%d creates, want %d", creates, BurstReplicas)
	}
}

func TestInactivePodsAreReplaced(t *testing.T) {
	lbls := map[string]string{"app": "web"}
	rs := synced(newRS("web", 3, lbls))
	rs.Status.Replicas = 1
	rs.Status.FullyLabeledReplicas = 1
	f := newFixture(t, rs,
		newPod("active", rs, lbls),
		newPod("terminating", rs, lbls, onNode("n"), deleting()),
		newPod("succeeded", rs, lbls, phase(corev1.PodSucceeded)),
	)
	must(t, f.sync(rs))
	assertActions(t, f.client.Actions(), "create pods web-*", "create pods web-*")
}

func TestDeletedReplicaSet(t *testing.T) {
	lbls := map[string]string{"app": "web"}
	rs := synced(newRS("web", 3, lbls))
	rs.DeletionTimestamp = ptr.To(metav1.NewTime(now))
	orphan := newPod("orphan", nil, lbls)
	f := newFixture(t, rs, orphan)
	must(t, f.sync(rs))
	assertActions(t, f.client.Actions()) // no creates, no adoption

	// Gone from the cache: its expectations are dropped.
	f.c.expectations.ExpectCreations("default/gone", 2)
	must(t, f.c.Sync(context.Background(), "default/gone"))
	if _, _, ok := f.c.expectations.GetExpectations("default/gone"); ok {
		t.Error("expectations of a deleted ReplicaSet kept")
	}
	if err := f.c.Sync(context.Background(), "a/b/c"); err == nil {
		t.Error("invalid key accepted")
	}
}

func TestEventHandlersEnqueueOwners(t *testing.T) {
	lbls := map[string]string{"app": "web"}
	web := newRS("web", 1, lbls)
	db := newRS("db", 1, map[string]string{"app": "db"})
	f := newFixture(t, web, db)
	keys := func() []string {
		var out []string
		for f.c.queue.Len() > 0 {
			k, _ := f.c.queue.Get()
			f.c.queue.Done(k)
			f.c.queue.Forget(k)
			out = append(out, k)
		}
		return sorted(out)
	}

	f.c.addPod(newPod("orphan", nil, lbls))
	if got := keys(); !slices.Equal(got, []string{"default/web"}) {
		t.Errorf("orphan add enqueued %v", got)
	}
	f.c.addPod(newPod("owned", db, lbls))
	if got := keys(); !slices.Equal(got, []string{"default/db"}) {
		t.Errorf("owned add enqueued %v", got)
	}
	stale := newPod("stale", newRS("db", 1, nil), lbls) // same name, other UID
	stale.OwnerReferences[0].UID = "old-db-uid"
	f.c.addPod(stale)
	if got := keys(); len(got) != 0 {
		t.Errorf("pod of a replaced ReplicaSet enqueued %v", got)
	}

	// Moving a pod from db to web wakes both.
	old := newPod("moved", db, lbls)
	cur := newPod("moved", web, lbls)
	cur.ResourceVersion = "2"
	f.c.updatePod(old, cur)
	if got := keys(); !slices.Equal(got, []string{"default/db", "default/web"}) {
		t.Errorf("controller change enqueued %v", got)
	}
	// A resync (same resourceVersion) enqueues nothing.
	f.c.updatePod(cur, cur)
	if got := keys(); len(got) != 0 {
		t.Errorf("resync enqueued %v", got)
	}
	// An orphan relabelled to match db.
	o1 := newPod("relabelled", nil, lbls)
	o2 := newPod("relabelled", nil, map[string]string{"app": "db"})
	o2.ResourceVersion = "2"
	f.c.updatePod(o1, o2)
	if got := keys(); !slices.Equal(got, []string{"default/db"}) {
		t.Errorf("relabel enqueued %v", got)
	}
	f.c.deletePod(newPod("orphan", nil, lbls))
	if got := keys(); len(got) != 0 {
		t.Errorf("orphan delete enqueued %v", got)
	}
	f.c.deleteRS(cache.DeletedFinalStateUnknown{Key: "default/web", Obj: web})
	if got := keys(); !slices.Equal(got, []string{"default/web"}) {
		t.Errorf("ReplicaSet delete enqueued %v", got)
	}
	f.c.updateRS(web, web)
	if got := keys(); !slices.Equal(got, []string{"default/web"}) {
		t.Errorf("ReplicaSet update enqueued %v", got)
	}
}

func TestPodNamePrefix(t *testing.T) {
	if got := podNamePrefix("web"); got != "web-" {
		t.Errorf("prefix %q", got)
	}
	long := strings.Repeat("a", 253)
	if got := podNamePrefix(long); got != long {
		t.Errorf("prefix of a 253-character name %q", got)
	}
}

func TestRunStopsWithContext(t *testing.T) {
	rs := synced(newRS("web", 1, map[string]string{"app": "web"}))
	f := newFixture(t, rs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // also when the wait below fails the test
	f.factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		f.c.Run(ctx, 2)
		close(done)
	}()
	poll.Until(t, "Run to create the pod", poll.True(func() bool {
		for _, a := range f.client.Actions() {
			if a.GetVerb() == "create" && a.GetResource().Resource == "pods" {
				return true
			}
		}
		return false
	}))
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the context was cancelled")
	}
	f.factory.Shutdown()
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func equalRefs(a, b []metav1.OwnerReference) bool {
	return fmt.Sprintf("%+v", derefRefs(a)) == fmt.Sprintf("%+v", derefRefs(b))
}

func derefRefs(refs []metav1.OwnerReference) []string {
	var out []string
	for _, r := range refs {
		out = append(out, fmt.Sprintf("%s %s %s %s %v %v", r.APIVersion, r.Kind, r.Name, r.UID, ptr.Deref(r.Controller, false), ptr.Deref(r.BlockOwnerDeletion, false)))
	}
	return out
}

func equalStatus(a, b appsv1.ReplicaSetStatus) bool {
	return a.Replicas == b.Replicas && a.FullyLabeledReplicas == b.FullyLabeledReplicas &&
		a.ReadyReplicas == b.ReadyReplicas && a.AvailableReplicas == b.AvailableReplicas &&
		a.ObservedGeneration == b.ObservedGeneration && len(a.Conditions) == len(b.Conditions)
}
