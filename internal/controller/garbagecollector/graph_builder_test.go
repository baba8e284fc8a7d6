package garbagecollector

import (
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
)

var cmGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

// testBuilder is a graph builder whose queues the test drains by hand.
type testBuilder struct {
	*builder
	events *record.FakeRecorder
}

func newTestBuilder(t *testing.T) *testBuilder {
	t.Helper()
	rec := record.NewFakeRecorder(10)
	b := &builder{
		graph:    newGraph(),
		absent:   newAbsentCache(100),
		changes:  workqueue.NewTyped[*event](),
		toDelete: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[types.UID]()),
		toOrphan: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[types.UID]()),
		recorder: rec,
		log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	t.Cleanup(func() {
		b.changes.ShutDown()
		b.toDelete.ShutDown()
		b.toOrphan.ShutDown()
	})
	return &testBuilder{builder: b, events: rec}
}

// drain returns the UIDs queued on q (sorted) and empties it.
func drain(q workqueue.TypedRateLimitingInterface[types.UID]) []string {
	var out []string
	for q.Len() > 0 {
		u, _ := q.Get()
		q.Done(u)
		q.Forget(u)
		out = append(out, string(u))
	}
	slices.Sort(out)
	return out
}

// processChanges applies the queued virtual events.
func (b *testBuilder) processChanges() {
	for b.changes.Len() > 0 {
		ev, _ := b.changes.Get()
		b.process(ev)
		b.changes.Done(ev)
	}
}

type objOpt func(*metav1.PartialObjectMetadata)

func owned(refs ...metav1.OwnerReference) objOpt {
	return func(o *metav1.PartialObjectMetadata) { o.OwnerReferences = refs }
}

func deleting(finalizers ...string) objOpt {
	return func(o *metav1.PartialObjectMetadata) {
		o.DeletionTimestamp = new(metav1.Now())
		o.Finalizers = finalizers
	}
}

func inNamespace(ns string) objOpt {
	return func(o *metav1.PartialObjectMetadata) { o.Namespace = ns }
}

func cm(name string, opts ...objOpt) *metav1.PartialObjectMetadata {
	o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("u-" + name)}}
	for _, f := range opts {
		f(o)
	}
	return o
}

func (b *testBuilder) add(o metav1.Object) {
	b.process(&event{typ: addEvent, gvk: cmGVK, obj: o})
}

func (b *testBuilder) update(old, cur metav1.Object) {
	b.process(&event{typ: updateEvent, gvk: cmGVK, obj: cur, old: old})
}

func (b *testBuilder) remove(o metav1.Object) {
	b.process(&event{typ: deleteEvent, gvk: cmGVK, obj: o})
}

func (b *testBuilder) dependentsOf(uid types.UID) []string {
	var out []string
	for _, d := range b.graph.dependents(uid) {
		out = append(out, d.identity.Name)
	}
	slices.Sort(out)
	return out
}

func cmRefTo(o *metav1.PartialObjectMetadata, block bool) metav1.OwnerReference {
	return ref(o.Name, o.UID, block)
}

func TestGraphVirtualOwnerBecomesObserved(t *testing.T) {
	b := newTestBuilder(t)
	owner := cm("owner")
	b.add(cm("dep", owned(cmRefTo(owner, false))))

	v, ok := b.graph.view(owner.UID)
	if !ok || !v.virtual {
		t.Fatalf("expected a virtual owner node, got %+v (found %v)", v, ok)
	}
	if v.identity != (objectReference{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: owner.UID, Namespace: "ns"}) {
		t.Errorf("virtual identity = %v", v.identity)
	}
	if got := drain(b.toDelete); !slices.Equal(got, []string{"u-owner"}) {
		t.Errorf("toDelete = %v, want the virtual owner to be verified", got)
	}

	b.add(owner)
	if v, _ := b.graph.view(owner.UID); v.virtual {
		t.Errorf("owner still virtual after it was observed")
	}
	if got := b.dependentsOf(owner.UID); !slices.Equal(got, []string{"dep"}) {
		t.Errorf("dependents = %v", got)
	}
	if got := drain(b.toDelete); len(got) != 0 {
		t.Errorf("nothing to verify once observed with matching coordinates, got %v", got)
	}
}

func TestGraphOwnerDeletionQueuesDependents(t *testing.T) {
	b := newTestBuilder(t)
	owner, other := cm("owner"), cm("other")
	b.add(owner)
	b.add(other)
	b.add(cm("d1", owned(cmRefTo(owner, false))))
	b.add(cm("d2", owned(cmRefTo(owner, false), cmRefTo(other, false))))
	drain(b.toDelete)

	b.remove(owner)
	if b.graph.has(owner.UID) {
		t.Errorf("owner still in the graph")
	}
	if got := drain(b.toDelete); !slices.Equal(got, []string{"u-d1", "u-d2"}) {
		t.Errorf("toDelete = %v", got)
	}
	if !b.absent.has(objectReference{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: owner.UID, Namespace: "ns"}) {
		t.Errorf("deleted owner not remembered as absent")
	}
	if got := b.dependentsOf(other.UID); !slices.Equal(got, []string{"d2"}) {
		t.Errorf("other owner's dependents = %v", got)
	}
}

func TestGraphForegroundTransition(t *testing.T) {
	b := newTestBuilder(t)
	owner := cm("owner")
	b.add(owner)
	b.add(cm("d1", owned(cmRefTo(owner, true))))
	b.add(cm("d2", owned(cmRefTo(owner, false))))
	drain(b.toDelete)

	marked := cm("owner", deleting(metav1.FinalizerDeleteDependents))
	b.update(owner, marked)
	v, _ := b.graph.view(owner.UID)
	if !v.deletingDependents || !v.beingDeleted {
		t.Errorf("owner not marked as deleting dependents: %+v", v)
	}
	if got := drain(b.toDelete); !slices.Equal(got, []string{"u-d1", "u-d2", "u-owner"}) {
		t.Errorf("toDelete = %v, want every dependent and the owner", got)
	}

	// The same state again is not a new transition.
	b.update(marked, marked)
	if got := drain(b.toDelete); len(got) != 0 {
		t.Errorf("repeated state queued %v", got)
	}

	// A blocking dependent that goes away makes the owner look again.
	b.remove(cm("d1", owned(cmRefTo(owner, true))))
	if got := drain(b.toDelete); !slices.Equal(got, []string{"u-owner"}) {
		t.Errorf("after a dependent's deletion toDelete = %v", got)
	}
}

// An informer may list an owner already deleting in the foreground before its dependents:
// dependents seen later must be queued as well, not only the blocking ones.
func TestGraphDependentSeenAfterForegroundStarted(t *testing.T) {
	b := newTestBuilder(t)
	owner := cm("owner", deleting(metav1.FinalizerDeleteDependents))
	b.add(owner)
	if got := drain(b.toDelete); !slices.Equal(got, []string{"u-owner"}) {
		t.Fatalf("toDelete = %v, want the owner", got)
	}
	b.add(cm("d1", owned(cmRefTo(owner, false))))
	b.add(cm("d2", owned(cmRefTo(owner, true))))
	if got := drain(b.toDelete); !slices.Equal(got, []string{"u-d1", "u-d2"}) {
		t.Errorf("toDelete = %v, want both late dependents", got)
	}
}

func TestGraphOrphanTransition(t *testing.T) {
	b := newTestBuilder(t)
	owner := cm("owner")
	b.add(owner)
	b.update(owner, cm("owner", deleting(metav1.FinalizerOrphanDependents)))
	if got := drain(b.toOrphan); !slices.Equal(got, []string{"u-owner"}) {
		t.Errorf("toOrphan = %v", got)
	}
	// An object first seen while already orphaning (a restart) is queued too.
	b.add(cm("late", deleting(metav1.FinalizerOrphanDependents)))
	if got := drain(b.toOrphan); !slices.Equal(got, []string{"u-late"}) {
		t.Errorf("toOrphan = %v", got)
	}
}

func TestGraphUnblockingReferenceChangeQueuesOwner(t *testing.T) {
	b := newTestBuilder(t)
	owner, other := cm("owner"), cm("other")
	b.add(owner)
	b.add(other)
	dep := cm("dep", owned(cmRefTo(owner, true)))
	b.add(dep)
	drain(b.toDelete)

	unblocked := cm("dep", owned(cmRefTo(owner, false)))
	b.update(dep, unblocked)
	if got := drain(b.toDelete); !slices.Equal(got, []string{"u-owner"}) {
		t.Errorf("after unblocking toDelete = %v", got)
	}
	moved := cm("dep", owned(cmRefTo(other, false)))
	b.update(unblocked, moved)
	if got := b.dependentsOf(owner.UID); len(got) != 0 {
		t.Errorf("old owner keeps dependents %v", got)
	}
	if got := b.dependentsOf(other.UID); !slices.Equal(got, []string{"dep"}) {
		t.Errorf("new owner's dependents = %v", got)
	}
}

func TestGraphVirtualDelete(t *testing.T) {
	b := newTestBuilder(t)
	ghost := objectReference{APIVersion: "v1", Kind: "ConfigMap", Name: "ghost", UID: "u-ghost", Namespace: "ns"}
	b.add(cm("d1", owned(ref("ghost", "u-ghost", false))))
	b.add(cm("d2", owned(ref("ghost", "u-ghost", false))))
	drain(b.toDelete)

	b.enqueueVirtualDelete(ghost)
	b.processChanges()
	if b.graph.has("u-ghost") {
		t.Errorf("virtual node not removed after verified absence")
	}
	if got := drain(b.toDelete); !slices.Equal(got, []string{"u-d1", "u-d2"}) {
		t.Errorf("toDelete = %v", got)
	}
	if !b.absent.has(ghost) {
		t.Errorf("absent owner not cached")
	}
}

func TestGraphVirtualDeleteWithDisagreeingDependents(t *testing.T) {
	b := newTestBuilder(t)
	asCM := objectReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "u-x", Namespace: "ns"}
	b.add(cm("d1", owned(ref("x", "u-x", false))))
	b.add(cm("d2", owned(metav1.OwnerReference{APIVersion: "v1", Kind: "Secret", Name: "x", UID: "u-x"})))
	drain(b.toDelete)

	b.enqueueVirtualDelete(asCM)
	b.processChanges()
	v, ok := b.graph.view("u-x")
	if !ok {
		t.Fatalf("virtual node removed although a dependent names it differently")
	}
	if v.identity.Kind != "Secret" {
		t.Errorf("virtual node not switched to the alternate identity: %v", v.identity)
	}
	if got := drain(b.toDelete); !slices.Equal(got, []string{"u-d1"}) {
		t.Errorf("toDelete = %v, want only the dependent naming the absent identity", got)
	}
}

func TestGraphObservedOwnerWithOtherCoordinates(t *testing.T) {
	b := newTestBuilder(t)
	// A dependent names the owner as a Secret; the owner is observed as a ConfigMap.
	b.add(cm("dep", owned(metav1.OwnerReference{APIVersion: "v1", Kind: "Secret", Name: "owner", UID: "u-owner"})))
	drain(b.toDelete)
	b.add(cm("owner"))
	if got := drain(b.toDelete); !slices.Equal(got, []string{"u-dep"}) {
		t.Errorf("toDelete = %v, want the dependent with mismatching coordinates verified", got)
	}
	// The reverse order: a dependent added later with a mismatching reference is verified too.
	b.add(cm("dep2", owned(metav1.OwnerReference{APIVersion: "v1", Kind: "Secret", Name: "owner", UID: "u-owner"})))
	if got := drain(b.toDelete); !slices.Equal(got, []string{"u-dep2"}) {
		t.Errorf("toDelete = %v", got)
	}
}

func TestGraphOwnerInAnotherNamespace(t *testing.T) {
	b := newTestBuilder(t)
	owner := cm("owner")
	b.add(owner)
	b.add(cm("dep", inNamespace("elsewhere"), owned(cmRefTo(owner, false))))
	if got := drain(b.toDelete); !slices.Equal(got, []string{"u-dep"}) {
		t.Errorf("toDelete = %v", got)
	}
	select {
	case e := <-b.events.Events:
		if !strings.Contains(e, "OwnerRefInvalidNamespace") {
			t.Errorf("event = %q", e)
		}
	default:
		t.Errorf("no OwnerRefInvalidNamespace event")
	}
}

func TestHandlersSkipIrrelevantUpdates(t *testing.T) {
	b := newTestBuilder(t)
	h := b.handlers(cmGVK)
	old := cm("a")
	labelled := old.DeepCopy()
	labelled.Labels = map[string]string{"k": "v"}
	h.OnUpdate(old, labelled)
	if b.changes.Len() != 0 {
		t.Errorf("a label change was queued")
	}
	h.OnUpdate(old, cm("a", deleting("x")))
	h.OnAdd(old, false)
	h.OnDelete(old)
	if b.changes.Len() != 3 {
		t.Errorf("queued %d changes, want 3", b.changes.Len())
	}
}
