package apiserver

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/kubette/kubette/internal/storage/etcd"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// TestEventsServedWithoutCache checks what clients see of Events now that the server
// keeps no watch cache for them (as upstream): GET and LIST with resourceVersion=0 read etcd (a field selector as kubectl describe sends it);
// an informer of each Event API (list at 0, then watch) sees a create, an update and a
// delete; a watch with a field selector sees an Event enter and leave it; and a watch
// from a compacted resourceVersion ends with 410 Expired, as from the cache.
func TestEventsServedWithoutCache(t *testing.T) {
	ctx := t.Context()
	s := startServer(ctx, t, Config{}, etcd.EmbeddedConfig{UnsafeNoFsync: true})
	core := s.client.CoreV1().Events("default")

	created, err := core.Create(ctx, ttlEvent("first", "Created"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create event: %v", err)
	}
	got, err := core.Get(ctx, "first", metav1.GetOptions{ResourceVersion: "0"})
	if err != nil || got.ResourceVersion != created.ResourceVersion {
		t.Fatalf("GET rv=0 = %v, %v; want resourceVersion %s", got, err, created.ResourceVersion)
	}
	sel := fields.OneTermEqualSelector("involvedObject.name", "p").String()
	list, err := core.List(ctx, metav1.ListOptions{ResourceVersion: "0", FieldSelector: sel})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != "first" {
		t.Fatalf("LIST rv=0 with %s = %v, %v; want the one Event", sel, list, err)
	}
	if none, err := core.List(ctx, metav1.ListOptions{ResourceVersion: "0",
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", "other").String()}); err != nil || len(none.Items) != 0 {
		t.Fatalf("LIST rv=0 of another object's Events = %v, %v; want none", none, err)
	}

	// Informers of both APIs: list (resourceVersion 0) then watch.
	factory := informers.NewSharedInformerFactoryWithOptions(s.client, 0, informers.WithNamespace("default"))
	coreInf := factory.Core().V1().Events().Informer()
	v1Inf := factory.Events().V1().Events().Informer()
	factory.Start(ctx.Done())
	t.Cleanup(factory.Shutdown)
	if !cache.WaitForCacheSync(ctx.Done(), coreInf.HasSynced, v1Inf.HasSynced) {
		t.Fatal("informers did not sync")
	}
	// A watch of the Events of pod q, from now.
	w, err := core.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion,
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", "q").String()})
	if err != nil {
		t.Fatalf("watch events of q: %v", err)
	}
	t.Cleanup(w.Stop)

	second, err := core.Create(ctx, ttlEvent("second", "Created"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create event: %v", err)
	}
	second.Count, second.Reason, second.InvolvedObject.Name = 2, "Updated", "q"
	if second, err = core.Update(ctx, second, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update event: %v", err)
	}
	if err := core.Delete(ctx, "first", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete event: %v", err)
	}
	moved := second.DeepCopy()
	moved.InvolvedObject.Name = "r"
	if _, err := core.Update(ctx, moved, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update event: %v", err)
	}

	// The informers end with the one Event, moved to r.
	for name, inf := range map[string]cache.SharedIndexInformer{"core/v1": coreInf, "events.k8s.io/v1": v1Inf} {
		poll.Until(t, name+" informer holds only the moved Event", poll.True(func() bool {
			items := inf.GetStore().List()
			if len(items) != 1 {
				return false
			}
			m, ok := items[0].(metav1.Object)
			return ok && m.GetName() == "second" && m.GetResourceVersion() != second.ResourceVersion
		}))
	}

	// The watch of q's Events: second enters by its update and leaves by the next one
	// (Deleted, with the last state that matched).
	wantTypes := []watch.EventType{watch.Added, watch.Deleted}
	for i, want := range wantTypes {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed before event %d", i)
			}
			ev, isEvent := e.Object.(*corev1.Event)
			if e.Type != want || !isEvent || ev.Name != "second" || ev.InvolvedObject.Name != "q" {
				t.Fatalf("event %d: %s %#v, want %s of second about q", i, e.Type, e.Object, want)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("no event %d within 60 s", i)
		}
	}

	// Compact past the first create: a watch from before it is too old.
	cli, err := s.etcd.Client()
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	cur, err := s.store.CurrentRevision(ctx)
	if err != nil {
		t.Fatalf("current revision: %v", err)
	}
	if _, err := cli.Compact(ctx, cur, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("compact: %v", err)
	}
	old, err := core.Watch(ctx, metav1.ListOptions{ResourceVersion: created.ResourceVersion})
	if err != nil {
		t.Fatalf("watch from a compacted revision: %v", err)
	}
	t.Cleanup(old.Stop)
	select {
	case e, ok := <-old.ResultChan():
		if !ok || e.Type != watch.Error {
			t.Fatalf("watch from a compacted revision: %v %v, want an ERROR event", e.Type, ok)
		}
		if err := apierrors.FromObject(e.Object); !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			t.Fatalf("watch from a compacted revision: %v, want 410 Expired", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no event from the watch of a compacted revision within 60 s")
	}
}
