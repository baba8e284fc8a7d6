package namespace

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubette/kubette/internal/controller/worker"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// gracefulLabel marks fake metadata objects that the fake deletecollection only marks
// for deletion, as the API server does with pods bound to a node.
const gracefulLabel = "test.kubette.io/graceful"

// fakeListGVK is the list kind the fake metadata client's tracker registers.
var fakeListGVK = schema.GroupVersionKind{Group: "fake-metadata-client-group", Version: "v1"}

// testResources is a discovery document with core and apps resources, a subresource,
// a resource without deletecollection, one that cannot be deleted and a cluster-scoped one.
func testResources() []*metav1.APIResourceList {
	all := []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	return []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "pods", Namespaced: true, Kind: "Pod", Verbs: all},
			{Name: "pods/status", Namespaced: true, Kind: "Pod", Verbs: []string{"get", "patch", "update"}},
			{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: all},
			{Name: "secrets", Namespaced: true, Kind: "Secret", Verbs: all},
			{Name: "events", Namespaced: true, Kind: "Event", Verbs: []string{"create", "delete", "get", "list"}},
			{Name: "bindings", Namespaced: true, Kind: "Binding", Verbs: []string{"create"}},
			{Name: "nodes", Namespaced: false, Kind: "Node", Verbs: all},
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "deployments", Namespaced: true, Kind: "Deployment", Verbs: all},
		}},
	}
}

// testStart is the fake clock's time when a fixture is built.
var testStart = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

type fixture struct {
	t     *testing.T
	kube  *kubefake.Clientset
	disc  *fakediscovery.FakeDiscovery
	meta  *metadatafake.FakeMetadataClient
	clock *clocktesting.FakeClock
	ctrl  *Controller
	// factory holds the controller's informer caches (never started: tests fill them).
	factory informers.SharedInformerFactory
}

// newFixture builds a controller over fake clients: ns is in the namespace cache and
// the clientset, kubeObjs in the clientset, metaObjs (PartialObjectMetadata) in the
// metadata client, whose deletecollection deletes (or, with gracefulLabel or
// finalizers, marks) what it matches.
func newFixture(t *testing.T, ns *corev1.Namespace, kubeObjs []runtime.Object, metaObjs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{t: t, clock: clocktesting.NewFakeClock(testStart)}
	if ns != nil {
		kubeObjs = append(kubeObjs, ns)
	}
	f.kube = kubefake.NewSimpleClientset(kubeObjs...)
	f.disc = kubefake.NewSimpleClientset().Discovery().(*fakediscovery.FakeDiscovery)
	f.disc.Resources = testResources()
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	f.meta = metadatafake.NewSimpleMetadataClient(scheme, metaObjs...)
	f.meta.PrependReactor("delete-collection", "*", f.deleteCollection)

	factory := informers.NewSharedInformerFactory(f.kube, 0)
	c, err := New(controller.Deps{Client: f.kube, Informers: factory, Metadata: f.meta, Discovery: f.disc})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.queue.ShutDown)
	c.clock = f.clock
	if ns != nil {
		if err := factory.Core().V1().Namespaces().Informer().GetIndexer().Add(ns); err != nil {
			t.Fatal(err)
		}
	}
	f.ctrl, f.factory = c, factory
	return f
}

// deleteCollection is the fake API server's deletecollection.
func (f *fixture) deleteCollection(action clienttesting.Action) (bool, runtime.Object, error) {
	gvr, ns := action.GetResource(), action.GetNamespace()
	tracker := f.meta.Tracker()
	obj, err := tracker.List(gvr, fakeListGVK, ns)
	if err != nil {
		return true, nil, err
	}
	for _, raw := range obj.(*metav1.List).Items {
		item := raw.Object.(*metav1.PartialObjectMetadata)
		if len(item.Finalizers) == 0 && item.Labels[gracefulLabel] == "" {
			if err := tracker.Delete(gvr, ns, item.Name); err != nil {
				return true, nil, err
			}
			continue
		}
		now := metav1.NewTime(f.clock.Now())
		item.DeletionTimestamp = &now
		if err := tracker.Update(gvr, item, ns); err != nil {
			return true, nil, err
		}
	}
	return true, nil, nil
}

// podIndexer is the controller's pod cache.
func (f *fixture) podIndexer() cache.Indexer {
	return f.factory.Core().V1().Pods().Informer().GetIndexer()
}

func (f *fixture) sync() error {
	f.t.Helper()
	return f.ctrl.Sync(context.Background(), "ns1")
}

// kubeActions renders the clientset's actions as verb/resource[/subresource].
func (f *fixture) kubeActions() []string {
	return render(f.kube.Actions())
}

// metaActions renders the metadata client's actions as verb/resource[/name].
func (f *fixture) metaActions() []string {
	var out []string
	for _, a := range f.meta.Actions() {
		s := a.GetVerb() + " " + a.GetResource().Resource
		if d, ok := a.(clienttesting.DeleteAction); ok {
			s += " " + d.GetName()
		}
		out = append(out, s)
	}
	return out
}

func render(actions []clienttesting.Action) []string {
	var out []string
	for _, a := range actions {
		s := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			s += "/" + a.GetSubresource()
		}
		out = append(out, s)
	}
	return out
}

func (f *fixture) namespace() *corev1.Namespace {
	f.t.Helper()
	ns, err := f.kube.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "", "ns1")
	if err != nil {
		f.t.Fatalf("get namespace: %v", err)
	}
	return ns.(*corev1.Namespace)
}

func (f *fixture) remainingMeta(gvr schema.GroupVersionResource) []string {
	f.t.Helper()
	obj, err := f.meta.Tracker().List(gvr, fakeListGVK, "ns1")
	if err != nil {
		f.t.Fatalf("list %v: %v", gvr, err)
	}
	var names []string
	for _, raw := range obj.(*metav1.List).Items {
		names = append(names, raw.Object.(*metav1.PartialObjectMetadata).Name)
	}
	return names
}

func assertActions(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s actions:\n got %q\nwant %q", what, got, want)
	}
}

func condition(ns *corev1.Namespace, t corev1.NamespaceConditionType) *corev1.NamespaceCondition {
	for i := range ns.Status.Conditions {
		if ns.Status.Conditions[i].Type == t {
			return &ns.Status.Conditions[i]
		}
	}
	return nil
}

func terminatingNamespace(deletedAt time.Time, finalizers ...corev1.FinalizerName) *corev1.Namespace {
	dt := metav1.NewTime(deletedAt)
	return &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "ns1", UID: "uid-1", ResourceVersion: "5", DeletionTimestamp: &dt},
		Spec:       corev1.NamespaceSpec{Finalizers: finalizers},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating},
	}
}

func partial(apiVersion, kind, name string, mutate ...func(*metav1.PartialObjectMetadata)) *metav1.PartialObjectMetadata {
	p := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: name},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func pod(name, node string, grace int64) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: name},
		Spec:       corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: &grace},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
}

var (
	podsGVR       = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	configmapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

func TestSyncIgnoresNamespaceNotInCache(t *testing.T) {
	f := newFixture(t, nil, nil)
	if err := f.sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	assertActions(t, "clientset", f.kubeActions(), nil)
}

func TestSyncIgnoresActiveNamespace(t *testing.T) {
	ns := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "ns1"},
		Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
	}
	f := newFixture(t, ns, nil, partial("v1", "ConfigMap", "cm"))
	if err := f.sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	assertActions(t, "clientset", f.kubeActions(), []string{"get namespaces"})
	assertActions(t, "metadata", f.metaActions(), nil)
}

func TestSyncDeletesAllContentThenFinalizes(t *testing.T) {
	ns := terminatingNamespace(testStart.Add(-time.Second), corev1.FinalizerKubernetes, "example.com/other")
	ns.Status.Phase = corev1.NamespaceActive // the deleter sets Terminating itself
	f := newFixture(t, ns, []runtime.Object{pod("unbound", "", 30)},
		partial("v1", "Pod", "unbound"),
		partial("v1", "ConfigMap", "cm-a"), partial("v1", "ConfigMap", "cm-b"),
		partial("v1", "Secret", "s"),
		partial("v1", "Event", "e1"), partial("v1", "Event", "e2"),
		partial("apps/v1", "Deployment", "web"),
	)
	if err := f.sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	assertActions(t, "clientset", f.kubeActions(), []string{
		"get namespaces", "update namespaces/status", // phase Terminating
		"list pods",                // estimate of graceful termination
		"update namespaces/status", // conditions
		"create namespaces/finalize",
	})
	assertActions(t, "metadata", f.metaActions(), []string{
		"delete-collection configmaps", "list configmaps",
		// events do not support deletecollection: list and delete each
		"list events", "delete events e1", "delete events e2", "list events",
		"delete-collection pods", "list pods",
		"delete-collection secrets", "list secrets",
		"delete-collection deployments", "list deployments",
	})
	for _, gvr := range []schema.GroupVersionResource{podsGVR, configmapsGVR, {Version: "v1", Resource: "events"}, {Group: "apps", Version: "v1", Resource: "deployments"}} {
		if left := f.remainingMeta(gvr); len(left) > 0 {
			t.Errorf("%v left: %v", gvr, left)
		}
	}
	got := f.namespace()
	if !slices.Equal(got.Spec.Finalizers, []corev1.FinalizerName{"example.com/other"}) {
		t.Errorf("finalizers after finalize = %v, want only example.com/other", got.Spec.Finalizers)
	}
	if got.Status.Phase != corev1.NamespaceTerminating {
		t.Errorf("phase = %q, want Terminating", got.Status.Phase)
	}
	for _, ct := range conditionTypes() {
		c := condition(got, ct)
		if c == nil || c.Status != corev1.ConditionFalse {
			t.Errorf("condition %s = %+v, want False", ct, c)
		}
	}
	if c := condition(got, corev1.NamespaceContentRemaining); c != nil && c.Reason != "ContentRemoved" {
		t.Errorf("ContentRemaining reason = %q", c.Reason)
	}
}

func TestSyncDoesNothingOnceFinalized(t *testing.T) {
	f := newFixture(t, terminatingNamespace(testStart, "example.com/other"), nil, partial("v1", "ConfigMap", "cm"))
	if err := f.sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	assertActions(t, "clientset", f.kubeActions(), []string{"get namespaces"})
	assertActions(t, "metadata", f.metaActions(), nil)
}

func TestSyncWaitsForTerminatingPods(t *testing.T) {
	deletedAt := testStart.Add(-time.Second)
	f := newFixture(t, terminatingNamespace(deletedAt, corev1.FinalizerKubernetes),
		[]runtime.Object{pod("bound", "node-a", 30)},
		partial("v1", "Pod", "bound", func(p *metav1.PartialObjectMetadata) { p.Labels = map[string]string{gracefulLabel: "true"} }),
		partial("v1", "ConfigMap", "cm"),
	)

	// 1. Within the grace period: wait about half of it.
	err := f.sync()
	var remaining *ResourcesRemainingError
	if !errors.As(err, &remaining) || remaining.Estimate != 30 {
		t.Fatalf("Sync = %v, want ResourcesRemainingError with estimate 30", err)
	}
	if got := remaining.requeueAfter(); got != 16*time.Second {
		t.Errorf("requeue after %v, want 16s", got)
	}
	if slices.Contains(f.kubeActions(), "create namespaces/finalize") {
		t.Fatal("finalized while a pod remains")
	}
	if left := f.remainingMeta(configmapsGVR); len(left) > 0 {
		t.Errorf("configmaps left: %v", left)
	}
	ns := f.namespace()
	if c := condition(ns, corev1.NamespaceContentRemaining); c == nil || c.Status != corev1.ConditionTrue ||
		c.Message != "Some resources are remaining: pods. has 1 resource instances" {
		t.Errorf("ContentRemaining = %+v", c)
	}

	// 2. Past the grace period, the kubelet has not confirmed yet: keep waiting, no error.
	f.clock.Step(time.Minute)
	err = f.sync()
	if !errors.As(err, &remaining) || remaining.Estimate != overdueEstimateSeconds {
		t.Fatalf("Sync after the grace period = %v, want ResourcesRemainingError with estimate %d", err, overdueEstimateSeconds)
	}

	// 3. The pod is gone: finalize.
	if err := f.meta.Tracker().Delete(podsGVR, "ns1", "bound"); err != nil {
		t.Fatal(err)
	}
	if err := f.kube.Tracker().Delete(podsGVR, "ns1", "bound"); err != nil {
		t.Fatal(err)
	}
	f.kube.ClearActions()
	if err := f.sync(); err != nil {
		t.Fatalf("Sync after the pod went: %v", err)
	}
	assertActions(t, "clientset", f.kubeActions(), []string{
		"get namespaces", "list pods", "update namespaces/status", "create namespaces/finalize",
	})
	ns = f.namespace()
	if len(ns.Spec.Finalizers) != 0 {
		t.Errorf("finalizers = %v, want none", ns.Spec.Finalizers)
	}
	if c := condition(ns, corev1.NamespaceContentRemaining); c == nil || c.Status != corev1.ConditionFalse {
		t.Errorf("ContentRemaining after removal = %+v, want False", c)
	}
}

func TestSyncWaitsForFinalizers(t *testing.T) {
	f := newFixture(t, terminatingNamespace(testStart, corev1.FinalizerKubernetes), nil,
		partial("v1", "ConfigMap", "held", func(p *metav1.PartialObjectMetadata) { p.Finalizers = []string{"example.com/hold"} }))
	err := f.sync()
	var remaining *ResourcesRemainingError
	if !errors.As(err, &remaining) || remaining.Estimate != finalizerEstimateSeconds {
		t.Fatalf("Sync = %v, want ResourcesRemainingError with estimate %d", err, finalizerEstimateSeconds)
	}
	ns := f.namespace()
	if c := condition(ns, corev1.NamespaceFinalizersRemaining); c == nil || c.Status != corev1.ConditionTrue ||
		c.Message != "Some finalizers are remaining: example.com/hold in 1 resource instances" {
		t.Errorf("FinalizersRemaining = %+v", c)
	}
	if c := condition(ns, corev1.NamespaceContentRemaining); c == nil ||
		c.Message != "Some resources are remaining: configmaps. has 1 resource instances" {
		t.Errorf("ContentRemaining = %+v", c)
	}
}

func TestSyncFallsBackToDeletingEachItem(t *testing.T) {
	f := newFixture(t, terminatingNamespace(testStart, corev1.FinalizerKubernetes), nil,
		partial("v1", "ConfigMap", "cm-a"), partial("v1", "ConfigMap", "cm-b"))
	f.meta.PrependReactor("delete-collection", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewMethodNotSupported(configmapsGVR.GroupResource(), "deletecollection")
	})
	if err := f.sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	got := f.metaActions()
	want := []string{"delete-collection configmaps", "list configmaps", "delete configmaps cm-a", "delete configmaps cm-b", "list configmaps"}
	assertActions(t, "metadata (configmaps)", got[:min(len(got), len(want))], want)
	if !slices.Contains(f.kubeActions(), "create namespaces/finalize") {
		t.Error("not finalized")
	}
}

func TestSyncReportsContentThatDoesNotGo(t *testing.T) {
	f := newFixture(t, terminatingNamespace(testStart, corev1.FinalizerKubernetes), nil, partial("v1", "ConfigMap", "stuck"))
	f.meta.PrependReactor("delete-collection", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, nil // accepted, but nothing happens
	})
	err := f.sync()
	var remaining *ResourcesRemainingError
	if err == nil || errors.As(err, &remaining) || !strings.Contains(err.Error(), "unexpected items still remain in namespace: ns1") {
		t.Fatalf("Sync = %v, want the unexpected-items error", err)
	}
	if slices.Contains(f.kubeActions(), "create namespaces/finalize") {
		t.Error("finalized with content left")
	}
	if c := condition(f.namespace(), corev1.NamespaceDeletionContentFailure); c == nil || c.Status != corev1.ConditionTrue || c.Reason != "ContentDeletionFailed" {
		t.Errorf("ContentFailure = %+v", c)
	}
}

func TestSyncDoesNotFinalizeWhenDiscoveryFails(t *testing.T) {
	f := newFixture(t, terminatingNamespace(testStart, corev1.FinalizerKubernetes), nil, partial("v1", "ConfigMap", "cm"))
	f.disc.PrependReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("discovery is down")
	})
	if err := f.sync(); err == nil || !strings.Contains(err.Error(), "discovery is down") {
		t.Fatalf("Sync = %v, want the discovery error", err)
	}
	if slices.Contains(f.kubeActions(), "create namespaces/finalize") {
		t.Error("finalized without knowing the resources")
	}
	if c := condition(f.namespace(), corev1.NamespaceDeletionDiscoveryFailure); c == nil || c.Status != corev1.ConditionTrue || c.Reason != "DiscoveryFailed" {
		t.Errorf("DiscoveryFailure = %+v", c)
	}
}

func TestSyncRetriesFinalizeOnConflict(t *testing.T) {
	f := newFixture(t, terminatingNamespace(testStart, corev1.FinalizerKubernetes), nil)
	conflicts := 0
	f.kube.PrependReactor("create", "namespaces", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "finalize" && conflicts == 0 {
			conflicts++
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "namespaces"}, "ns1", errors.New("stale"))
		}
		return false, nil, nil
	})
	if err := f.sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	want := []string{"get namespaces", "list pods", "update namespaces/status", "create namespaces/finalize", "get namespaces", "create namespaces/finalize"}
	assertActions(t, "clientset", f.kubeActions(), want)
	if got := f.namespace().Spec.Finalizers; len(got) != 0 {
		t.Errorf("finalizers = %v", got)
	}
}

func TestSyncSucceedsWhenNamespaceVanishes(t *testing.T) {
	f := newFixture(t, terminatingNamespace(testStart, corev1.FinalizerKubernetes), nil)
	f.kube.PrependReactor("get", "namespaces", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "ns1")
	})
	if err := f.sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

func TestEstimateIgnoresFinishedPods(t *testing.T) {
	done := pod("done", "node-a", 600)
	done.Status.Phase = corev1.PodSucceeded
	ns := terminatingNamespace(testStart.Add(-10*time.Second), corev1.FinalizerKubernetes)
	f := newFixture(t, ns, []runtime.Object{done, pod("a", "node-a", 5), pod("b", "node-a", 45)})
	got, err := f.ctrl.estimateGracefulTermination(context.Background(), podsGVR, ns)
	if err != nil || got != 45 {
		t.Errorf("estimate = %d, %v; want 45 (done pods ignored)", got, err)
	}
	f.clock.Step(time.Minute)
	if got, _ := f.ctrl.estimateGracefulTermination(context.Background(), podsGVR, ns); got != 0 {
		t.Errorf("estimate after the grace periods = %d, want 0", got)
	}
	if got, _ := f.ctrl.estimateGracefulTermination(context.Background(), configmapsGVR, ns); got != 0 {
		t.Errorf("estimate for configmaps = %d, want 0", got)
	}
}

// fakeQueue replaces the controller's queue with one driven by the fixture's clock.
func (f *fixture) fakeQueue() *recordingQueue {
	f.ctrl.queue.ShutDown()
	q := &recordingQueue{TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig(rateLimiter(),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "test", Clock: f.clock})}
	f.ctrl.queue = q
	f.t.Cleanup(f.ctrl.queue.ShutDown)
	return q
}

// recordingQueue records the delays the controller asks AddAfter for, so that a test
// can check the delay itself rather than the delaying queue's timer goroutine.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	mu    sync.Mutex
	after []time.Duration
}

func (q *recordingQueue) AddAfter(item string, d time.Duration) {
	q.mu.Lock()
	q.after = append(q.after, d)
	q.mu.Unlock()
	q.TypedRateLimitingInterface.AddAfter(item, d)
}

func (q *recordingQueue) delays() []time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.after)
}

// waitForLen polls the queue length (the delaying queue moves items
// asynchronously). Its loop may set a timer only after the clock stepped past
// the item's time when it runs slowly under load; Step(0) fires timers already
// due without moving time.
func (f *fixture) waitForLen(want int) {
	f.t.Helper()
	poll.Until(f.t, fmt.Sprintf("queue length %d", want), func() error {
		if n := f.ctrl.queue.Len(); n != want {
			f.clock.Step(0)
			return fmt.Errorf("queue length = %d", n)
		}
		return nil
	})
}

func TestWorkerRequeuesAfterTheEstimate(t *testing.T) {
	f := newFixture(t, terminatingNamespace(testStart, corev1.FinalizerKubernetes), []runtime.Object{pod("bound", "node-a", 30)},
		partial("v1", "Pod", "bound", func(p *metav1.PartialObjectMetadata) { p.Labels = map[string]string{gracefulLabel: "true"} }))
	q := f.fakeQueue()
	f.ctrl.queue.Add("ns1")
	if !worker.ProcessNext(context.Background(), f.ctrl.queue, f.ctrl.workerOptions(1)) {
		t.Fatal("queue shut down")
	}
	if n := f.ctrl.queue.Len(); n != 0 {
		t.Fatalf("requeued at once (len %d), want after the estimate", n)
	}
	if n := f.ctrl.queue.NumRequeues("ns1"); n != 0 {
		t.Errorf("remaining content counted as %d failures", n)
	}
	// The estimate: the pod's 30 s grace period ends 16 s from now. (When the item then
	// comes back is the delaying queue's business, not this controller's.)
	if got := q.delays(); !slices.Equal(got, []time.Duration{16 * time.Second}) {
		t.Fatalf("AddAfter delays %v, want [16s]", got)
	}
}

func TestWorkerRetriesErrorsWithBackoff(t *testing.T) {
	f := newFixture(t, terminatingNamespace(testStart, corev1.FinalizerKubernetes), nil)
	f.kube.PrependReactor("get", "namespaces", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd is away")
	})
	f.fakeQueue()
	f.ctrl.queue.Add("ns1")
	worker.ProcessNext(context.Background(), f.ctrl.queue, f.ctrl.workerOptions(1))
	if n := f.ctrl.queue.NumRequeues("ns1"); n != 1 {
		t.Errorf("NumRequeues = %d, want 1", n)
	}
	f.clock.Step(time.Second)
	f.waitForLen(1)
}

func TestEventsQueueOnlyNamespacesBeingDeleted(t *testing.T) {
	f := newFixture(t, nil, nil)
	f.fakeQueue()
	f.ctrl.namespaceChanged(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "active"}})
	f.ctrl.namespaceChanged(terminatingNamespace(testStart, corev1.FinalizerKubernetes))
	f.clock.Step(deletionDelay - time.Millisecond)
	if n := f.ctrl.queue.Len(); n != 0 {
		t.Fatalf("queued before the deletion delay (len %d)", n)
	}
	f.clock.Step(time.Millisecond)
	f.waitForLen(1)
	if key, _ := f.ctrl.queue.Get(); key != "ns1" {
		t.Errorf("queued %q, want ns1", key)
	}
}

func TestResyncQueuesNamespacesBeingDeleted(t *testing.T) {
	f := newFixture(t, terminatingNamespace(testStart, corev1.FinalizerKubernetes), nil)
	active := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "active"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	if err := f.factory.Core().V1().Namespaces().Informer().GetIndexer().Add(active); err != nil {
		t.Fatal(err)
	}
	f.ctrl.requeueTerminating()
	if n := f.ctrl.queue.Len(); n != 1 {
		t.Fatalf("queue length = %d, want 1", n)
	}
	if key, _ := f.ctrl.queue.Get(); key != "ns1" {
		t.Errorf("queued %q, want ns1", key)
	}
}

func TestLastPodDeletedQueuesTerminatingNamespace(t *testing.T) {
	f := newFixture(t, terminatingNamespace(testStart, corev1.FinalizerKubernetes), nil)
	f.fakeQueue()
	other := pod("other", "node-a", 30)
	gone := pod("gone", "node-a", 30)

	podIndexer := f.podIndexer()
	if err := podIndexer.Add(other); err != nil {
		t.Fatal(err)
	}
	f.ctrl.podDeleted(gone)
	if n := f.ctrl.queue.Len(); n != 0 {
		t.Fatalf("queued while another pod remains (len %d)", n)
	}
	if err := podIndexer.Delete(other); err != nil {
		t.Fatal(err)
	}
	f.ctrl.podDeleted(other)
	f.waitForLen(1)

	// A pod of an active namespace never queues it.
	f.ctrl.podDeleted(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: "p"}})
	if n := f.ctrl.queue.Len(); n != 1 {
		t.Errorf("queue length = %d, want 1", n)
	}
}

func TestConditionsChangeOnlyWhenTheyDiffer(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	var status corev1.NamespaceStatus
	u := &conditionUpdater{now: t0}
	u.contentRemaining(remainingTotals{byResource: map[schema.GroupVersionResource]int{podsGVR: 2}})
	if !u.apply(&status) {
		t.Fatal("first apply reported no change")
	}
	if len(status.Conditions) != len(conditionTypes()) {
		t.Fatalf("conditions = %+v", status.Conditions)
	}
	if (&conditionUpdater{now: t1, failures: u.failures}).apply(&status) {
		t.Error("same conditions reported as a change")
	}
	ok := &conditionUpdater{now: t1}
	if !ok.apply(&status) {
		t.Fatal("content removed reported no change")
	}
	for _, c := range status.Conditions {
		wantTime := t0
		if c.Type == corev1.NamespaceContentRemaining {
			wantTime = t1
		}
		if c.Status != corev1.ConditionFalse || !c.LastTransitionTime.Equal(&wantTime) {
			t.Errorf("%s = %s at %v, want False at %v", c.Type, c.Status, c.LastTransitionTime, wantTime)
		}
	}
}

func TestConditionsJoinContentErrors(t *testing.T) {
	u := &conditionUpdater{now: metav1.Now()}
	u.contentFailed(fmt.Errorf("b failed"))
	u.contentFailed(fmt.Errorf("a failed"))
	var status corev1.NamespaceStatus
	u.apply(&status)
	c := condition(&corev1.Namespace{Status: status}, corev1.NamespaceDeletionContentFailure)
	if c == nil || c.Message != "Failed to delete all resource types, 2 remaining: a failed, b failed" {
		t.Errorf("ContentFailure = %+v", c)
	}
}

func TestNewRequiresClients(t *testing.T) {
	if _, err := New(controller.Deps{}); err == nil {
		t.Error("New with no clients succeeded")
	}
}
