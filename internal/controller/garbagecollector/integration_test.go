package garbagecollector

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

const ns = "default"

// gcEnv is a control plane with a running garbage collector.
type gcEnv struct {
	client kubernetes.Interface
	gc     *Controller
}

// testLogger logs through t at debug level (shown with -v or on failure).
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// requireMetadataAPI fails fast when the API server does not serve object metadata as
// PartialObjectMetadata (the garbage collector reads everything through it), instead of
// letting every test time out.
func requireMetadataAPI(t *testing.T, d controller.Deps) {
	t.Helper()
	ctx := context.Background()
	nsGVR := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	got, err := d.Metadata.Resource(nsGVR).Get(ctx, ns, metav1.GetOptions{})
	if err != nil || got.Name != ns || got.UID == "" {
		t.Fatalf("API server bug: metadata GET of namespace %q (Accept: ...;as=PartialObjectMetadata;g=meta.k8s.io;v=v1) "+
			"returned %+v, %v; want the namespace's metadata", ns, got, err)
	}
	list, err := d.Metadata.Resource(nsGVR).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) == 0 || list.Items[0].Name == "" {
		t.Fatalf("API server bug: metadata LIST of namespaces returned items without metadata: %+v, %v", list, err)
	}
}

// startGC starts a control plane and the garbage collector; both stop when the test ends.
func startGC(t *testing.T) *gcEnv {
	t.Helper()
	env := testenv.Start(t, testenv.Options{})
	d, starter, err := controller.NewDeps(env.Config, "garbage-collector")
	if err != nil {
		t.Fatalf("deps: %v", err)
	}
	requireMetadataAPI(t, d)
	d.Logger = testLogger(t)
	gc, err := New(d)
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	starter.Start(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		gc.Run(ctx, 3)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("Run did not return after its context was cancelled")
		}
	})
	return &gcEnv{client: env.Client, gc: gc}
}

func ownerRef(apiVersion, kind, name string, uid types.UID, block bool) metav1.OwnerReference {
	r := metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid}
	if block {
		r.BlockOwnerDeletion = new(true)
	}
	return r
}

func cmRef(cm *corev1.ConfigMap, block bool) metav1.OwnerReference {
	return ownerRef("v1", "ConfigMap", cm.Name, cm.UID, block)
}

func (e *gcEnv) createCM(t *testing.T, name string, finalizers []string, refs ...metav1.OwnerReference) *corev1.ConfigMap {
	t.Helper()
	cm, err := e.client.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: refs, Finalizers: finalizers},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create configmap %s: %v", name, err)
	}
	return cm
}

func (e *gcEnv) deleteCM(t *testing.T, name string, policy metav1.DeletionPropagation) {
	t.Helper()
	if err := e.client.CoreV1().ConfigMaps(ns).Delete(context.Background(), name,
		metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
		t.Fatalf("delete configmap %s (%s): %v", name, policy, err)
	}
}

func (e *gcEnv) getCM(t *testing.T, name string) (*corev1.ConfigMap, bool) {
	t.Helper()
	cm, err := e.client.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("get configmap %s: %v", name, err)
	}
	return cm, true
}

func (e *gcEnv) waitCMGone(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		poll.Until(t, "configmap "+n+" to be deleted", poll.True(func() bool {
			_, ok := e.getCM(t, n)
			return !ok
		}))
	}
}

// consistently checks cond for a while (used to show that something does not happen).
func consistently(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !cond() {
			t.Fatalf("expected %s to hold", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestBackgroundDeletionRemovesDependents(t *testing.T) {
	e := startGC(t)
	owner := e.createCM(t, "bg-owner", nil)
	for i := range 3 {
		e.createCM(t, fmt.Sprintf("bg-dep-%d", i), nil, cmRef(owner, false))
	}
	keeper := e.createCM(t, "bg-unrelated", nil)
	e.deleteCM(t, owner.Name, metav1.DeletePropagationBackground)
	e.waitCMGone(t, "bg-owner", "bg-dep-0", "bg-dep-1", "bg-dep-2")
	if _, ok := e.getCM(t, keeper.Name); !ok {
		t.Fatalf("an object without owners was deleted")
	}
}

func TestForegroundDeletionWaitsForBlockingDependents(t *testing.T) {
	e := startGC(t)
	const hold = "test.kubette.io/hold"
	owner := e.createCM(t, "fg-owner", nil)
	e.createCM(t, "fg-dep-held", []string{hold}, cmRef(owner, true))
	e.createCM(t, "fg-dep", nil, cmRef(owner, true))
	e.createCM(t, "fg-dep-nonblocking", nil, cmRef(owner, false))
	e.deleteCM(t, owner.Name, metav1.DeletePropagationForeground)

	// The free dependents go; the held one is marked; the owner waits for it.
	e.waitCMGone(t, "fg-dep", "fg-dep-nonblocking")
	poll.Until(t, "the held dependent to be marked for deletion", poll.True(func() bool {
		cm, ok := e.getCM(t, "fg-dep-held")
		return ok && cm.DeletionTimestamp != nil
	}))
	consistently(t, "the owner to wait with a deletionTimestamp and the foregroundDeletion finalizer", 500*time.Millisecond, func() bool {
		cm, ok := e.getCM(t, owner.Name)
		return ok && cm.DeletionTimestamp != nil && slices.Contains(cm.Finalizers, metav1.FinalizerDeleteDependents)
	})

	// Releasing the held dependent lets the owner go.
	held, _ := e.getCM(t, "fg-dep-held")
	held.Finalizers = nil
	if _, err := e.client.CoreV1().ConfigMaps(ns).Update(context.Background(), held, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("release held dependent: %v", err)
	}
	e.waitCMGone(t, "fg-dep-held", owner.Name)
}

func TestOrphanDeletionKeepsDependents(t *testing.T) {
	e := startGC(t)
	owner := e.createCM(t, "orphan-owner", nil)
	other := e.createCM(t, "orphan-other-owner", nil)
	e.createCM(t, "orphan-dep-0", nil, cmRef(owner, true))
	e.createCM(t, "orphan-dep-1", nil, cmRef(owner, false), cmRef(other, false))
	e.deleteCM(t, owner.Name, metav1.DeletePropagationOrphan)
	e.waitCMGone(t, owner.Name)

	for name, want := range map[string][]types.UID{"orphan-dep-0": nil, "orphan-dep-1": {other.UID}} {
		cm, ok := e.getCM(t, name)
		if !ok {
			t.Fatalf("orphaned dependent %s was deleted", name)
		}
		var got []types.UID
		for _, r := range cm.OwnerReferences {
			got = append(got, r.UID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s owner references = %v, want %v", name, got, want)
		}
	}
	// The dependents stay: nothing collects them later.
	consistently(t, "orphaned dependents to stay", 500*time.Millisecond, func() bool {
		_, a := e.getCM(t, "orphan-dep-0")
		_, b := e.getCM(t, "orphan-dep-1")
		return a && b
	})
}

func TestDanglingReferences(t *testing.T) {
	e := startGC(t)
	live := e.createCM(t, "dangling-live-owner", nil)
	doomed := e.createCM(t, "dangling-doomed-owner", nil)

	// An owner that never existed, by a name that does not exist.
	e.createCM(t, "dangling-never", nil, ownerRef("v1", "ConfigMap", "no-such-owner", "7d5a1c7e-0000-4000-8000-000000000001", false))
	// An owner name that exists, but with another UID.
	e.createCM(t, "dangling-wrong-uid", nil, ownerRef("v1", "ConfigMap", live.Name, "7d5a1c7e-0000-4000-8000-000000000002", true))
	// Two owners, one of which never existed: only that reference goes.
	e.createCM(t, "dangling-half", nil, cmRef(live, false), ownerRef("v1", "ConfigMap", "ghost", "7d5a1c7e-0000-4000-8000-000000000003", false))
	// Two owners, one of which is deleted later.
	e.createCM(t, "dangling-two-owners", nil, cmRef(live, false), cmRef(doomed, true))

	e.waitCMGone(t, "dangling-never", "dangling-wrong-uid")
	e.deleteCM(t, doomed.Name, metav1.DeletePropagationBackground)

	for _, name := range []string{"dangling-half", "dangling-two-owners"} {
		poll.Until(t, name+" to keep only the live owner's reference", poll.True(func() bool {
			cm, ok := e.getCM(t, name)
			if !ok {
				t.Fatalf("%s was deleted although an owner is alive", name)
			}
			return len(cm.OwnerReferences) == 1 && cm.OwnerReferences[0].UID == live.UID
		}))
	}
	if _, ok := e.getCM(t, live.Name); !ok {
		t.Fatalf("the live owner was deleted")
	}
}

// chain creates a Deployment, a ReplicaSet it controls and a Pod the ReplicaSet controls,
// as the controllers would (none runs in this test).
func (e *gcEnv) chain(t *testing.T, name string) (*appsv1.Deployment, *appsv1.ReplicaSet, *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": name}
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/app:1"}}},
	}
	dep, err := e.client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	controllerRef := func(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
		r := ownerRef(apiVersion, kind, name, uid, true)
		r.Controller = new(true)
		return r
	}
	rs, err := e.client.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-rs", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{controllerRef("apps/v1", "Deployment", dep.Name, dep.UID)}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create replicaset: %v", err)
	}
	pod, err := e.client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-rs-pod", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{controllerRef("apps/v1", "ReplicaSet", rs.Name, rs.UID)}},
		Spec: tmpl.Spec,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}
	return dep, rs, pod
}

func (e *gcEnv) waitChainGone(t *testing.T, dep *appsv1.Deployment, rs *appsv1.ReplicaSet, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	poll.Until(t, "the pod to be deleted", poll.True(func() bool {
		_, err := e.client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}))
	poll.Until(t, "the replicaset to be deleted", poll.True(func() bool {
		_, err := e.client.AppsV1().ReplicaSets(ns).Get(ctx, rs.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}))
	poll.Until(t, "the deployment to be deleted", poll.True(func() bool {
		_, err := e.client.AppsV1().Deployments(ns).Get(ctx, dep.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}))
}

func TestCrossKindChainBackground(t *testing.T) {
	e := startGC(t)
	dep, rs, pod := e.chain(t, "web")
	policy := metav1.DeletePropagationBackground
	if err := e.client.AppsV1().Deployments(ns).Delete(context.Background(), dep.Name,
		metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
		t.Fatalf("delete deployment: %v", err)
	}
	e.waitChainGone(t, dep, rs, pod)
}

func TestCrossKindChainForeground(t *testing.T) {
	e := startGC(t)
	dep, rs, pod := e.chain(t, "api")
	policy := metav1.DeletePropagationForeground
	if err := e.client.AppsV1().Deployments(ns).Delete(context.Background(), dep.Name,
		metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
		t.Fatalf("delete deployment: %v", err)
	}
	// The pod goes first, then the ReplicaSet (deleted in the foreground itself), then the
	// Deployment; while the pod exists the Deployment must still be there.
	e.waitChainGone(t, dep, rs, pod)
}

func TestClusterScopedOwner(t *testing.T) {
	e := startGC(t)
	ctx := context.Background()
	node, err := e.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gc-node"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node: %v", err)
	}
	e.createCM(t, "node-dep", nil, ownerRef("v1", "Node", node.Name, node.UID, false))
	if err := e.client.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete node: %v", err)
	}
	e.waitCMGone(t, "node-dep")
}

func TestObjectsThatExistedBeforeTheCollectorStarted(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c := &gcEnv{client: env.Client}
	owner := c.createCM(t, "pre-owner", nil)
	c.createCM(t, "pre-dep", nil, cmRef(owner, false))
	c.createCM(t, "pre-dangling", nil, ownerRef("v1", "ConfigMap", "gone", "7d5a1c7e-0000-4000-8000-000000000004", false))
	c.deleteCM(t, owner.Name, metav1.DeletePropagationBackground)

	d, starter, err := controller.NewDeps(env.Config, "garbage-collector")
	if err != nil {
		t.Fatalf("deps: %v", err)
	}
	requireMetadataAPI(t, d)
	d.Logger = testLogger(t)
	gc, err := New(d)
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	starter.Start(ctx)
	go func() { defer close(done); gc.Run(ctx, 2) }()
	c.waitCMGone(t, "pre-dep", "pre-dangling")
}
