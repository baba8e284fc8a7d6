package garbagecollector

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	fakediscovery "k8s.io/client-go/discovery/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/restmapper"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/testenv/poll"
)

var (
	cmGVR   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	nodeGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
)

// fakeGC is a Controller over a fake metadata client and fake discovery serving
// ConfigMaps (namespaced) and Nodes (cluster-scoped).
type fakeGC struct {
	*Controller
	client *metadatafake.FakeMetadataClient
	// disc is the fake behind the Controller's cached discovery client.
	disc *fakediscovery.FakeDiscovery
}

func newFakeGC(t *testing.T, objs ...*metav1.PartialObjectMetadata) *fakeGC {
	t.Helper()
	scheme := runtime.NewScheme()
	metav1.AddMetaToScheme(scheme)
	var ros []runtime.Object
	for _, o := range objs {
		ros = append(ros, o)
	}
	client := metadatafake.NewSimpleMetadataClient(scheme, ros...)
	disc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{{
		GroupVersion: "v1",
		APIResources: []metav1.APIResource{
			{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: []string{"get", "list", "watch", "delete", "patch"}},
			{Name: "nodes", Kind: "Node", Verbs: []string{"get", "list", "watch", "delete", "patch"}},
		},
	}}}}
	cached := memory.NewMemCacheClient(disc)
	c, err := New(controller.Deps{
		Metadata:          client,
		MetadataInformers: metadatainformer.NewSharedInformerFactory(client, 0),
		Discovery:         cached,
		RESTMapper:        restmapper.NewDeferredDiscoveryRESTMapper(cached),
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.changes.ShutDown()
		c.toDelete.ShutDown()
		c.toOrphan.ShutDown()
	})
	// The graph as the monitors would have built it.
	for _, o := range objs {
		c.builder.process(&event{typ: addEvent, gvk: o.GroupVersionKind(), obj: o})
	}
	drain(c.toDelete)
	drain(c.toOrphan)
	client.ClearActions()
	return &fakeGC{Controller: c, client: client, disc: disc}
}

// metaCM returns the metadata of a ConfigMap in namespace ns, as the fake tracker stores it.
func metaCM(name string, opts ...objOpt) *metav1.PartialObjectMetadata {
	o := cm(name, opts...)
	o.APIVersion, o.Kind, o.ResourceVersion = "v1", "ConfigMap", "5"
	return o
}

// action is a compact form of a recorded client action.
type action struct {
	verb, resource, ns, name string
}

func (f *fakeGC) actions() []action {
	var out []action
	for _, a := range f.client.Actions() {
		x := action{verb: a.GetVerb(), resource: a.GetResource().Resource, ns: a.GetNamespace()}
		if n, ok := a.(interface{ GetName() string }); ok {
			x.name = n.GetName()
		}
		out = append(out, x)
	}
	return out
}

func (f *fakeGC) run(t *testing.T, uid types.UID) error {
	t.Helper()
	n, ok := f.graph.view(uid)
	if !ok {
		t.Fatalf("%s not in graph", uid)
	}
	return f.attemptToDelete(context.Background(), n)
}

func deleteOptions(t *testing.T, a clienttesting.Action) metav1.DeleteOptions {
	t.Helper()
	d, ok := a.(clienttesting.DeleteActionImpl)
	if !ok {
		t.Fatalf("action %v is not a delete", a)
	}
	return d.DeleteOptions
}

func TestAttemptToDeleteAllOwnersGone(t *testing.T) {
	dep := metaCM("dep", owned(ref("gone", "u-gone", false)))
	f := newFakeGC(t, dep)
	if err := f.run(t, dep.UID); err != nil {
		t.Fatal(err)
	}
	want := []action{
		{"get", "configmaps", "ns", "dep"},
		{"get", "configmaps", "ns", "gone"},
		{"delete", "configmaps", "ns", "dep"},
	}
	if got := f.actions(); !slices.Equal(got, want) {
		t.Fatalf("actions = %v, want %v", got, want)
	}
	opts := deleteOptions(t, f.client.Actions()[2])
	if opts.Preconditions == nil || *opts.Preconditions.UID != dep.UID || *opts.Preconditions.ResourceVersion != "5" {
		t.Errorf("preconditions = %+v, want uid and resourceVersion", opts.Preconditions)
	}
	if *opts.PropagationPolicy != metav1.DeletePropagationBackground {
		t.Errorf("propagation = %s", *opts.PropagationPolicy)
	}

	// The absent owner is remembered: a second dependent needs no owner lookup.
	dep2 := metaCM("dep2", owned(ref("gone", "u-gone", false)))
	if err := f.client.Tracker().Add(dep2); err != nil {
		t.Fatal(err)
	}
	f.builder.process(&event{typ: addEvent, gvk: cmGVK, obj: dep2})
	f.client.ClearActions()
	if err := f.run(t, dep2.UID); err != nil {
		t.Fatal(err)
	}
	if got := f.actions(); !slices.Equal(got, []action{{"get", "configmaps", "ns", "dep2"}, {"delete", "configmaps", "ns", "dep2"}}) {
		t.Errorf("actions = %v", got)
	}
}

func TestAttemptToDeleteOwnerWithOtherUID(t *testing.T) {
	reused := metaCM("owner") // uid u-owner
	dep := metaCM("dep", owned(ref("owner", "u-old-owner", false)))
	f := newFakeGC(t, reused, dep)
	if err := f.run(t, dep.UID); err != nil {
		t.Fatal(err)
	}
	got := f.actions()
	if len(got) != 3 || got[2] != (action{"delete", "configmaps", "ns", "dep"}) {
		t.Errorf("actions = %v, want the dependent deleted", got)
	}
}

func TestAttemptToDeleteRemovesDanglingReference(t *testing.T) {
	owner := metaCM("owner")
	dep := metaCM("dep", owned(ref("owner", owner.UID, false), ref("gone", "u-gone", true)))
	f := newFakeGC(t, owner, dep)
	if err := f.run(t, dep.UID); err != nil {
		t.Fatal(err)
	}
	want := []action{
		{"get", "configmaps", "ns", "dep"},
		{"get", "configmaps", "ns", "owner"},
		{"get", "configmaps", "ns", "gone"},
		{"patch", "configmaps", "ns", "dep"},
	}
	if got := f.actions(); !slices.Equal(got, want) {
		t.Fatalf("actions = %v, want %v", got, want)
	}
	p := f.client.Actions()[3].(clienttesting.PatchActionImpl)
	if p.GetPatchType() != types.StrategicMergePatchType ||
		string(p.GetPatch()) != `{"metadata":{"ownerReferences":[{"$patch":"delete","uid":"u-gone"}],"uid":"u-dep"}}` {
		t.Errorf("patch %s %s", p.GetPatchType(), p.GetPatch())
	}
}

func TestAttemptToDeleteSolidOwnerIsNoOp(t *testing.T) {
	owner := metaCM("owner")
	dep := metaCM("dep", owned(ref("owner", owner.UID, true)))
	f := newFakeGC(t, owner, dep)
	if err := f.run(t, dep.UID); err != nil {
		t.Fatal(err)
	}
	for _, a := range f.actions() {
		if a.verb != "get" {
			t.Errorf("unexpected write %v", a)
		}
	}
}

func TestAttemptToDeleteUnderForegroundOwner(t *testing.T) {
	owner := metaCM("owner", deleting(metav1.FinalizerDeleteDependents))
	mid := metaCM("mid", owned(ref("owner", owner.UID, true)))
	leaf := metaCM("leaf", owned(ref("mid", mid.UID, true)))
	f := newFakeGC(t, owner, mid, leaf)
	// mid has a dependent: it is deleted in the foreground so the wait propagates.
	if err := f.run(t, mid.UID); err != nil {
		t.Fatal(err)
	}
	a := f.client.Actions()
	last := a[len(a)-1]
	if last.GetVerb() != "delete" || *deleteOptions(t, last).PropagationPolicy != metav1.DeletePropagationForeground {
		t.Errorf("mid: last action %v, want a foreground delete", last)
	}
}

func TestForegroundOwnerFinalizer(t *testing.T) {
	owner := metaCM("owner", deleting(metav1.FinalizerDeleteDependents, "other"))
	blocking := metaCM("blocking", owned(ref("owner", owner.UID, true)))
	f := newFakeGC(t, owner, blocking)

	// A blocking dependent remains: it is queued, the finalizer stays.
	if err := f.run(t, owner.UID); err != nil {
		t.Fatal(err)
	}
	if got := drain(f.toDelete); !slices.Equal(got, []string{"u-blocking"}) {
		t.Errorf("toDelete = %v", got)
	}
	if got := f.actions(); !slices.Equal(got, []action{{"get", "configmaps", "ns", "owner"}}) {
		t.Errorf("actions = %v", got)
	}

	// Once it is gone the finalizer is removed with a resourceVersion-guarded merge patch.
	f.builder.process(&event{typ: deleteEvent, gvk: cmGVK, obj: blocking})
	f.client.ClearActions()
	if err := f.run(t, owner.UID); err != nil {
		t.Fatal(err)
	}
	want := []action{{"get", "configmaps", "ns", "owner"}, {"get", "configmaps", "ns", "owner"}, {"patch", "configmaps", "ns", "owner"}}
	if got := f.actions(); !slices.Equal(got, want) {
		t.Fatalf("actions = %v, want %v", got, want)
	}
	p := f.client.Actions()[2].(clienttesting.PatchActionImpl)
	if p.GetPatchType() != types.MergePatchType || string(p.GetPatch()) != `{"metadata":{"finalizers":["other"],"resourceVersion":"5"}}` {
		t.Errorf("patch %s %s", p.GetPatchType(), p.GetPatch())
	}
}

func TestOrphan(t *testing.T) {
	owner := metaCM("owner", deleting(metav1.FinalizerOrphanDependents))
	other := metaCM("other")
	d1 := metaCM("d1", owned(ref("owner", owner.UID, true)))
	d2 := metaCM("d2", owned(ref("owner", owner.UID, false), ref("other", other.UID, false)))
	f := newFakeGC(t, owner, other, d1, d2)
	if err := f.orphan(context.Background(), owner.UID); err != nil {
		t.Fatal(err)
	}
	var patched []string
	for _, a := range f.client.Actions() {
		if p, ok := a.(clienttesting.PatchActionImpl); ok && p.GetName() != "owner" {
			patched = append(patched, p.GetName())
		}
	}
	slices.Sort(patched)
	if !slices.Equal(patched, []string{"d1", "d2"}) {
		t.Errorf("patched dependents %v", patched)
	}
	got, err := f.client.Resource(cmGVR).Namespace("ns").Get(context.Background(), "d2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != other.UID {
		t.Errorf("d2 references %v, want only the other owner", got.OwnerReferences)
	}
	o, err := f.client.Resource(cmGVR).Namespace("ns").Get(context.Background(), "owner", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Finalizers) != 0 {
		t.Errorf("orphan finalizer not removed: %v", o.Finalizers)
	}
}

func TestAttemptToDeleteItemGone(t *testing.T) {
	dep := metaCM("dep", owned(ref("gone", "u-gone", false)))
	f := newFakeGC(t, dep)
	if err := f.client.Tracker().Delete(cmGVR, "ns", "dep"); err != nil {
		t.Fatal(err)
	}
	if err := f.run(t, dep.UID); err != errVirtualDelete {
		t.Fatalf("err = %v, want errVirtualDelete", err)
	}
	if f.changes.Len() != 1 {
		t.Fatalf("no virtual delete queued")
	}
	ev, _ := f.changes.Get()
	f.builder.process(ev)
	f.changes.Done(ev)
	if f.graph.has(dep.UID) {
		t.Errorf("node of a vanished object kept")
	}
}

func TestClusterScopedOwnerLookup(t *testing.T) {
	dep := metaCM("dep", owned(metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "u-n1"}))
	f := newFakeGC(t, dep)
	if err := f.run(t, dep.UID); err != nil {
		t.Fatal(err)
	}
	got := f.actions()
	if len(got) != 3 || got[1] != (action{"get", "nodes", "", "n1"}) || got[2].verb != "delete" {
		t.Errorf("actions = %v, want a cluster-wide node lookup then the delete", got)
	}
}

func TestClusterScopedDependentOfNamespacedOwner(t *testing.T) {
	node := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u-n1", ResourceVersion: "5", OwnerReferences: []metav1.OwnerReference{ref("cm", "u-cm", false)}},
	}
	f := newFakeGC(t, node)
	err := f.run(t, node.UID)
	if err != errNamespacedOwnerOfClusterScoped {
		t.Fatalf("err = %v, want errNamespacedOwnerOfClusterScoped", err)
	}
	if requeue := f.syncDelete(context.Background(), node.UID); requeue {
		t.Errorf("an invalid reference is not retried")
	}
	for _, a := range f.actions() {
		if a.verb == "delete" {
			t.Errorf("deleted %v", a)
		}
	}
}

func TestResyncFollowsDiscovery(t *testing.T) {
	f := newFakeGC(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	last := f.resync(ctx, nil)
	if want := map[schema.GroupVersionResource]struct{}{cmGVR: {}, nodeGVR: {}}; !maps.Equal(last, want) {
		t.Fatalf("resources = %v, want %v", last, want)
	}
	poll.Until(t, "the monitors to sync", poll.True(f.monitorsSynced))

	// A new resource appears, another goes; events and subresources are never watched.
	f.disc.Resources = []*metav1.APIResourceList{{
		GroupVersion: "v1",
		APIResources: []metav1.APIResource{
			{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: []string{"list", "watch", "delete"}},
			{Name: "secrets", Kind: "Secret", Namespaced: true, Verbs: []string{"list", "watch", "delete"}},
			{Name: "events", Kind: "Event", Namespaced: true, Verbs: []string{"list", "watch", "delete"}},
			{Name: "pods/status", Kind: "Pod", Namespaced: true, Verbs: []string{"get", "list", "watch", "delete"}},
			{Name: "bindings", Kind: "Binding", Namespaced: true, Verbs: []string{"create"}},
		},
	}}
	last = f.resync(ctx, last)
	want := map[schema.GroupVersionResource]struct{}{cmGVR: {}, {Version: "v1", Resource: "secrets"}: {}}
	if !maps.Equal(last, want) {
		t.Fatalf("resources = %v, want %v", last, want)
	}
	f.monitorsMu.Lock()
	monitored := slices.Collect(maps.Keys(f.monitors))
	f.monitorsMu.Unlock()
	if len(monitored) != 2 {
		t.Errorf("monitors = %v", monitored)
	}
}
