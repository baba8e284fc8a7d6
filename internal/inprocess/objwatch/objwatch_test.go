package objwatch_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/apiserver/filters"
	"github.com/kubette/kubette/internal/inprocess"
	"github.com/kubette/kubette/internal/inprocess/objwatch"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// env is a control plane with an admin client over HTTPS and in-process
// configurations for components.
type env struct {
	*testenv.Env
	admin kubernetes.Interface
}

func start(t *testing.T) *env {
	t.Helper()
	e := testenv.Start(t, testenv.Options{})
	return &env{Env: e, admin: e.Client}
}

// component returns an in-process configuration as user, its protobuf clientset
// (as the scheduler's) and its object-watch client.
func (e *env) component(t *testing.T, user string) (kubernetes.Interface, *objwatch.Client) {
	t.Helper()
	cfg, err := e.ComponentConfig("objwatch-test", user)
	if err != nil {
		t.Fatalf("component config: %v", err)
	}
	cfg = rest.AddUserAgent(cfg, "objwatch-test")
	ow, ok := objwatch.ForConfig(cfg)
	if !ok {
		t.Fatalf("ForConfig: the component configuration is not in-process")
	}
	pc := rest.CopyConfig(cfg)
	pc.ContentType, pc.AcceptContentTypes = "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(pc)
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	return cs, ow
}

// objectWatch starts an object watch of pods in ns with opts, as the typed client's Watch would.
func objectWatch(ctx context.Context, cs kubernetes.Interface, ow *objwatch.Client, ns string, opts metav1.ListOptions, copyObj objwatch.CopyFunc) (watch.Interface, error) {
	lw := ow.PodListWatch(cs, ns, nil, copyObj).(cache.ListerWatcherWithContext)
	return lw.WatchWithContext(ctx, opts)
}

// collect reads n events or fails after a generous deadline.
func collect(t *testing.T, what string, w watch.Interface, n int) []watch.Event {
	t.Helper()
	var got []watch.Event
	deadline := time.After(60 * time.Second)
	for len(got) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("%s: channel closed after %d of %d events", what, len(got), n)
			}
			got = append(got, ev)
		case <-deadline:
			t.Fatalf("%s: %d of %d events within 60 s: %v", what, len(got), n, describe(got))
		}
	}
	return got
}

func describe(evs []watch.Event) []string {
	var out []string
	for _, ev := range evs {
		m, _ := ev.Object.(metav1.Object)
		if m == nil {
			out = append(out, fmt.Sprintf("%s %T", ev.Type, ev.Object))
			continue
		}
		out = append(out, fmt.Sprintf("%s %s rv=%s", ev.Type, m.GetName(), m.GetResourceVersion()))
	}
	return out
}

// sameEvents fails unless two watches saw the same events with equal objects.
func sameEvents(t *testing.T, want, got []watch.Event) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("client-go saw %v, the object watch %v", describe(want), describe(got))
	}
	for i := range want {
		w, g := want[i].Object, got[i].Object
		if want[i].Type == watch.Bookmark && got[i].Type == watch.Bookmark {
			// A bookmark carries the store's revision when the watch reached it; the
			// two watches start one after the other, and a write to any other kind in
			// between (the cluster's own controllers) moves it on. It never goes back.
			var wrv, grv uint64
			w, wrv = withoutRV(t, w)
			g, grv = withoutRV(t, g)
			if grv < wrv {
				t.Fatalf("event %d: the object watch's bookmark is at %d, before client-go's at %d", i, grv, wrv)
			}
		}
		if want[i].Type != got[i].Type || !apiequality.Semantic.DeepEqual(w, g) {
			t.Fatalf("event %d: client-go %s %#v\nobject watch %s %#v", i, want[i].Type, want[i].Object, got[i].Type, got[i].Object)
		}
	}
}

// withoutRV returns a copy of a bookmark's pod without its resource version, and
// that version.
func withoutRV(t *testing.T, o runtime.Object) (runtime.Object, uint64) {
	t.Helper()
	p := o.(*corev1.Pod).DeepCopy()
	rv, err := strconv.ParseUint(p.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatalf("bookmark resource version %q: %v", p.ResourceVersion, err)
	}
	p.ResourceVersion = ""
	return p, rv
}

func pod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "objwatch"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.local/pause:1"}}}}
}

// TestObjectWatchAsClientGo: an object watch sees what client-go's protobuf watch of
// the same request sees — the same events, selector translation (a pod leaving
// the field selector is DELETED) and objects (no apiVersion and kind, as client-go's
// typed decoder leaves them) — and every watcher gets its own copy.
func TestObjectWatchAsClientGo(t *testing.T) {
	e := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, ow := e.component(t, "system:kube-scheduler")
	ns := "objwatch"
	if _, err := e.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := e.admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	opts := metav1.ListOptions{ResourceVersion: list.ResourceVersion, FieldSelector: "status.phase!=Succeeded", TimeoutSeconds: ptr.To[int64](300)}
	viaClientGo, err := cs.CoreV1().Pods(ns).Watch(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer viaClientGo.Stop()
	viaObjects, err := objectWatch(ctx, cs, ow, ns, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer viaObjects.Stop()
	second, err := objectWatch(ctx, cs, ow, ns, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Stop()

	pods := e.admin.CoreV1().Pods(ns)
	for _, name := range []string{"a", "b"} {
		if _, err := pods.Create(ctx, pod(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pods.Patch(ctx, "a", types.MergePatchType, []byte(`{"metadata":{"labels":{"step":"2"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := pods.Get(ctx, "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Status.Phase = corev1.PodSucceeded
	if _, err := pods.UpdateStatus(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "a", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}

	// ADDED a, ADDED b, MODIFIED a, DELETED b (left the selector), then a's deletion
	// (MODIFIED with a deletionTimestamp or DELETED, whatever client-go sees).
	want := collect(t, "client-go", viaClientGo, 5)
	got := collect(t, "object watch", viaObjects, 5)
	sameEvents(t, want, got)
	if got[3].Type != watch.Deleted || got[3].Object.(*corev1.Pod).Name != "b" {
		t.Fatalf("event 3: %s, want b DELETED as it left the field selector", describe(got[3:4]))
	}
	if gvk := got[0].Object.GetObjectKind().GroupVersionKind(); !gvk.Empty() {
		t.Fatalf("object watch's pod has kind %v, client-go's typed watch none", gvk)
	}
	other := collect(t, "second object watch", second, 5)
	sameEvents(t, want, other)
	p, q := got[0].Object.(*corev1.Pod), other[0].Object.(*corev1.Pod)
	if p == q {
		t.Fatal("two object watches got the same pod, not copies")
	}
	p.Labels["app"] = "changed"
	if q.Labels["app"] != "objwatch" {
		t.Fatal("a change to one watcher's pod shows in the other's: the labels map is shared")
	}
}

// TestObjectWatchCopyFunc: the client's copy function makes each event's object.
func TestObjectWatchCopyFunc(t *testing.T) {
	e := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, ow := e.component(t, "system:kube-scheduler")
	list, err := e.admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	copies := 0
	w, err := objectWatch(ctx, cs, ow, "default", metav1.ListOptions{ResourceVersion: list.ResourceVersion}, func(o runtime.Object) runtime.Object {
		copies++ // only the handler's goroutine calls it
		c := o.(*corev1.Pod).DeepCopy()
		c.ManagedFields = nil
		return c
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := e.admin.CoreV1().Pods("default").Create(ctx, pod("c"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := collect(t, "object watch", w, 1)[0]
	if p := ev.Object.(*corev1.Pod); ev.Type != watch.Added || p.Name != "c" || p.ManagedFields != nil {
		t.Fatalf("got %s %s with %d managedFields entries, want ADDED c without", ev.Type, p.Name, len(p.ManagedFields))
	}
	if copies != 1 {
		t.Fatalf("copy function called %d times, want 1", copies)
	}
}

// TestObjectWatchErrors: a watch the server refuses returns the same error as
// client-go's (authorization, a bad selector, a bad resource version).
func TestObjectWatchErrors(t *testing.T) {
	e := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name, user string
		opts       metav1.ListOptions
		check      func(error) bool
	}{
		{"forbidden", "system:anonymous", metav1.ListOptions{}, apierrors.IsForbidden},
		{"bad field selector", "system:kube-scheduler", metav1.ListOptions{FieldSelector: "spec.nope=1"}, apierrors.IsBadRequest},
		{"bad resource version", "system:kube-scheduler", metav1.ListOptions{ResourceVersion: "x"}, apierrors.IsBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, ow := e.component(t, tc.user)
			w, err := cs.CoreV1().Pods("default").Watch(ctx, tc.opts)
			if err == nil {
				w.Stop()
				t.Fatal("client-go's watch started")
			}
			ow2, err2 := objectWatch(ctx, cs, ow, "default", tc.opts, nil)
			if err2 == nil {
				ow2.Stop()
				t.Fatal("the object watch started")
			}
			if !tc.check(err2) || err.Error() != err2.Error() {
				t.Fatalf("client-go: %v (%T)\nobject watch: %v (%T)", err, err, err2, err2)
			}
			var se1, se2 *apierrors.StatusError
			if se1, _ = err.(*apierrors.StatusError); se1 == nil {
				t.Fatalf("client-go's error %T", err)
			}
			if se2, _ = err2.(*apierrors.StatusError); se2 == nil || !apiequality.Semantic.DeepEqual(se1.ErrStatus, se2.ErrStatus) {
				t.Fatalf("Status: client-go %+v, object watch %+v", se1.ErrStatus, err2)
			}
		})
	}
}

// TestObjectWatchListAndStop: a watch-list (initial events, then the bookmark that
// ends them) is served as client-go's is, and Stop ends the watch: the channel closes.
func TestObjectWatchListAndStop(t *testing.T) {
	e := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, ow := e.component(t, "system:kube-scheduler")
	for _, name := range []string{"d", "e"} {
		if _, err := e.admin.CoreV1().Pods("default").Create(ctx, pod(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	opts := metav1.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}
	viaClientGo, err := cs.CoreV1().Pods("default").Watch(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer viaClientGo.Stop()
	viaObjects, err := objectWatch(ctx, cs, ow, "default", opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := collect(t, "client-go", viaClientGo, 3)
	got := collect(t, "object watch", viaObjects, 3)
	sameEvents(t, want, got)
	if got[2].Type != watch.Bookmark || got[2].Object.(*corev1.Pod).Annotations[metav1.InitialEventsAnnotationKey] != "true" {
		t.Fatalf("third event %s, want the bookmark that ends the initial events", describe(got[2:]))
	}
	viaObjects.Stop()
	poll.Until(t, "the object watch's channel closes after Stop", poll.True(func() bool {
		select {
		case _, ok := <-viaObjects.ResultChan():
			return !ok
		default:
			return false
		}
	}))
}

// TestInformerOverObjectWatch: an informer over PodListWatch syncs and follows
// changes; ForConfig refuses a configuration that goes over the network.
func TestInformerOverObjectWatch(t *testing.T) {
	e := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, ow := e.component(t, "system:kube-scheduler")
	if _, err := e.admin.CoreV1().Pods("default").Create(ctx, pod("f"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	inf := cache.NewSharedIndexInformer(ow.PodListWatch(cs, "", nil, nil), &corev1.Pod{}, 0, cache.Indexers{})
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	if _, ok, _ := inf.GetStore().GetByKey("default/f"); !ok {
		t.Fatal("informer has no default/f after sync")
	}
	if _, err := e.admin.CoreV1().Pods("default").Create(ctx, pod("g"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the informer sees default/g", poll.True(func() bool {
		_, ok, _ := inf.GetStore().GetByKey("default/g")
		return ok
	}))
	if _, ok := objwatch.ForConfig(&rest.Config{Host: "https://127.0.0.1:1"}); ok {
		t.Fatal("ForConfig accepted a configuration without an in-process transport")
	}
}

// TestObjectWatchRequest: the watch request carries the configuration's user agent
// (the trace names watchers by it) and client-go's query; a handler that answers
// without an object watch (an old server, a 200 with a body) is an error, not a
// watch that never delivers.
func TestObjectWatchRequest(t *testing.T) {
	var ua, query string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ua, query = r.UserAgent(), r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	})
	cfg := &rest.Config{Host: "https://in-process.invalid", UserAgent: "objwatch-test/1",
		Transport: &inprocess.Transport{Handler: h, User: &filters.User{Name: "u"}}}
	ow, ok := objwatch.ForConfig(cfg)
	if !ok {
		t.Fatal("ForConfig refused an in-process configuration")
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := objectWatch(context.Background(), cs, ow, "ns", metav1.ListOptions{ResourceVersion: "5", FieldSelector: "spec.nodeName="}, nil)
	if err == nil {
		w.Stop()
		t.Fatal("a 200 answer without an object watch started a watch")
	}
	if ua != "objwatch-test/1" {
		t.Fatalf("user agent %q, want the configuration's", ua)
	}
	if query != "fieldSelector=spec.nodeName%3D&resourceVersion=5&watch=true" {
		t.Fatalf("query %q", query)
	}
}
