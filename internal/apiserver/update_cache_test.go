package apiserver

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubette/kubette/internal/storage"
	"github.com/kubette/kubette/internal/storage/etcd"
)

// heldStore holds back the watch events of its store while held, so that the watch
// caches fall behind etcd on purpose.
type heldStore struct {
	storage.Store
	mu     sync.Mutex
	held   bool
	resume chan struct{}
}

func (h *heldStore) hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held, h.resume = true, make(chan struct{})
}

func (h *heldStore) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held {
		h.held = false
		close(h.resume)
	}
}

func (h *heldStore) gate() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.held {
		return nil
	}
	return h.resume
}

func (h *heldStore) Watch(ctx context.Context, prefix string, after int64) (<-chan storage.WatchResult, error) {
	in, err := h.Store.Watch(ctx, prefix, after)
	if err != nil {
		return nil, err
	}
	out := make(chan storage.WatchResult)
	go func() {
		defer close(out)
		for r := range in {
			if g := h.gate(); g != nil {
				select {
				case <-g:
				case <-ctx.Done():
					return
				}
			}
			select {
			case out <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// TestUpdateFromStaleCache checks that updates starting from the watch cache's copy
// answer exactly as if they had read etcd when the cache is behind.
func TestUpdateFromStaleCache(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	e, err := etcd.StartEmbedded(ctx, etcd.EmbeddedConfig{DataDir: t.TempDir()})
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(e.Close)
	st, err := e.InProcessStore()
	if err != nil {
		t.Fatalf("store: %v", err)
	}
	store := &heldStore{Store: st}
	srv, err := New(ctx, Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.EnsureNamespaces(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler(nil, nil))
	t.Cleanup(hs.Close)
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: hs.URL, QPS: -1})
	cms := cs.CoreV1().ConfigMaps("default")
	pods := cs.CoreV1().Pods("default")

	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"k": "1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitCached(t, ctx, srv, "configmaps", "/registry/configmaps/default/c", cm.ResourceVersion)
	waitCached(t, ctx, srv, "pods", "/registry/pods/default/p", pod.ResourceVersion)

	store.hold()
	defer store.release()
	// Changes the cache does not see.
	cm.Data["k"] = "2"
	cm2, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind: %v", err)
	}

	if r, _ := srv.table.Lookup(schemaCoreV1, "pods"); true {
		obj, _, _, _ := srv.cacheFor(r).Get(ctx, "/registry/pods/default/p")
		if accessorRV(obj) != pod.ResourceVersion {
			t.Fatalf("the watch cache moved on while held")
		}
	}
	// A client holding the etcd version: its update succeeds.
	cm2.Data["k"] = "3"
	cm3, err := cms.Update(ctx, cm2, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update with the current resourceVersion while the cache is behind: %v", err)
	}
	// A client holding the version the cache has: 409, as before.
	cm.Data["k"] = "4"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("update with an old resourceVersion: want 409, got %v", err)
	}
	// A no-op against the stale copy is not a no-op against etcd.
	cm3.ResourceVersion = ""
	cm3.Data["k"] = "1"
	cm4, err := cms.Update(ctx, cm3, metav1.UpdateOptions{})
	if err != nil || cm4.Data["k"] != "1" || cm4.ResourceVersion == cm3.ResourceVersion {
		t.Fatalf("update back to the cached content: %v, data %v", err, cm4.Data)
	}
	// An update equal to etcd's state is a no-op that returns etcd's state.
	cm4.ResourceVersion = ""
	same, err := cms.Update(ctx, cm4, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := cms.Get(ctx, "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if same.ResourceVersion != got.ResourceVersion {
		t.Fatalf("no-op update answered resourceVersion %s, etcd has %s", same.ResourceVersion, got.ResourceVersion)
	}
	// The pod is bound in etcd only: binding again is a conflict.
	err = pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Kind: "Node", Name: "n2"}}, metav1.CreateOptions{})
	if !apierrors.IsConflict(err) {
		t.Fatalf("second bind while the cache is behind: want 409, got %v", err)
	}
	bound, err := pods.Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if bound.Spec.NodeName != "n1" {
		t.Fatalf("nodeName %q, want n1", bound.Spec.NodeName)
	}
	if !apiequality.Semantic.DeepEqual(bound.ManagedFields, pod.ManagedFields) {
		t.Fatalf("binding changed managedFields to %+v; upstream's BindingREST leaves them as they are", bound.ManagedFields)
	}
	// Deleted behind the cache's back: 404, not a loop or a 500.
	if err := cms.Delete(ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got.Data["k"] = "5"
	got.ResourceVersion = ""
	if _, err := cms.Update(ctx, got, metav1.UpdateOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("update of a deleted object: want 404, got %v", err)
	}
	store.release()
}

// waitCached waits until the watch cache of resource holds key at resourceVersion rv.
func waitCached(t *testing.T, ctx context.Context, srv *Server, resource, key, rv string) {
	t.Helper()
	r, _ := srv.table.Lookup(schemaCoreV1, resource)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		obj, _, ok, err := srv.cacheFor(r).Get(ctx, key)
		if err == nil && ok && accessorRV(obj) == rv {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("watch cache never held %s at %s", key, rv)
}

func accessorRV(obj runtime.Object) string {
	if m, ok := obj.(metav1.Object); ok {
		return m.GetResourceVersion()
	}
	return ""
}
