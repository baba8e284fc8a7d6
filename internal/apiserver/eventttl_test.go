package apiserver

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubette/kubette/internal/storage/etcd"
)

// expiryTimeout bounds the wait for Events written with a 1 s TTL to go: etcd looks for
// expired leases every 500 ms; the rest is room for a loaded machine.
const expiryTimeout = 30 * time.Second

func ttlEvent(name, reason string) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p", APIVersion: "v1"},
		Reason:         reason, Message: "m", Type: corev1.EventTypeNormal, Count: 1,
		Source: corev1.EventSource{Component: "test"},
	}
}

// TestEventsExpire writes Events through client-go with an event TTL of 1 s (core/v1
// created, core/v1 created then updated, events.k8s.io/v1 created then patched) next to
// a ConfigMap, and checks that the Events disappear from GET and LIST of both APIs, that
// a watch sees each deleted, and that the ConfigMap stays.
func TestEventsExpire(t *testing.T) {
	ctx := t.Context()
	s := startServer(ctx, t, Config{EventTTL: time.Second}, etcd.EmbeddedConfig{UnsafeNoFsync: true})
	core := s.client.CoreV1().Events("default")
	ev1 := s.client.EventsV1().Events("default")

	w := watchEventsFromNow(ctx, t, core)

	if _, err := s.client.CoreV1().ConfigMaps("default").Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "stays"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create configmap: %v", err)
	}
	if _, err := core.Create(ctx, ttlEvent("created", "Created"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create event: %v", err)
	}
	upd, err := core.Create(ctx, ttlEvent("updated", "Created"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create event: %v", err)
	}
	upd.Count, upd.Reason = 2, "Updated"
	if _, err := core.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update event: %v", err)
	}
	now := time.Now()
	if _, err := ev1.Create(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "v1-patched"},
		EventTime: metav1.NewMicroTime(now), Reason: "Scheduled", Note: "n", Action: "Binding",
		Regarding:           corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p", APIVersion: "v1"},
		ReportingController: "test", ReportingInstance: "test-1", Type: corev1.EventTypeNormal}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create events.k8s.io/v1 event: %v", err)
	}
	patch, _ := json.Marshal(map[string]any{"series": map[string]any{"count": 2, "lastObservedTime": metav1.NewMicroTime(now)}})
	if _, err := ev1.Patch(ctx, "v1-patched", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch events.k8s.io/v1 event: %v", err)
	}

	// The watch sees every write, then the three deletions, the last state each.
	lastReason := map[string]string{"created": "Created", "updated": "Updated", "v1-patched": "Scheduled"}
	deadline := time.After(expiryTimeout)
	for len(lastReason) > 0 {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch ended; still waiting for the deletion of %v", lastReason)
			}
			if e.Type == watch.Error {
				t.Fatalf("watch error: %v", apierrors.FromObject(e.Object))
			}
			ev, ok := e.Object.(*corev1.Event)
			if !ok {
				t.Fatalf("watch event %s of %T, want *corev1.Event", e.Type, e.Object)
			}
			if e.Type != watch.Deleted {
				continue
			}
			want, ok := lastReason[ev.Name]
			if !ok {
				t.Fatalf("unexpected deletion of %s", ev.Name)
			}
			if ev.Reason != want {
				t.Errorf("deleted %s has reason %q, want its last write's %q", ev.Name, ev.Reason, want)
			}
			if ev.Name == "v1-patched" && (ev.Series == nil || ev.Series.Count != 2) {
				t.Errorf("deleted %s has series %+v, want the patched one (count 2)", ev.Name, ev.Series)
			}
			delete(lastReason, ev.Name)
		case <-deadline:
			t.Fatalf("Events with a TTL of 1 s still not deleted after %v: %v", expiryTimeout, lastReason)
		}
	}

	for _, name := range []string{"created", "updated", "v1-patched"} {
		if _, err := core.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("GET event %s after its TTL: %v, want NotFound", name, err)
		}
		if _, err := ev1.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("GET events.k8s.io/v1 event %s after its TTL: %v, want NotFound", name, err)
		}
	}
	if l, err := core.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("LIST events after the TTL: %d items, %v; want none", lenOrZero(l), err)
	}
	if l, err := ev1.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("LIST events.k8s.io/v1 events after the TTL: %v; want none", err)
	}
	// etcd agrees with the watch cache.
	if n, err := s.store.Count(ctx, "/registry/events/"); err != nil || n != 0 {
		t.Errorf("etcd holds %d Events after the TTL (%v), want none", n, err)
	}
	cm, err := s.client.CoreV1().ConfigMaps("default").Get(ctx, "stays", metav1.GetOptions{})
	if err != nil || cm.Data["k"] != "v" {
		t.Fatalf("GET the ConfigMap written with the Events: %v, %v; want it kept", cm, err)
	}
}

func lenOrZero(l *corev1.EventList) int {
	if l == nil {
		return 0
	}
	return len(l.Items)
}

// TestEventTTLLeases checks the leases behind the TTL in etcd: every write of an Event
// (create, update, patch, marking for deletion) carries one lease of the TTL plus the
// 60 s reuse window, shared by all; other kinds carry none; and the end of the lease
// deletes the Events together.
func TestEventTTLLeases(t *testing.T) {
	ctx := t.Context()
	s := startServer(ctx, t, Config{EventTTL: time.Hour}, etcd.EmbeddedConfig{UnsafeNoFsync: true})
	core := s.client.CoreV1().Events("default")
	if _, err := s.client.CoreV1().ConfigMaps("default").Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create configmap: %v", err)
	}
	for _, name := range []string{"a", "b", "c"} {
		if _, err := core.Create(ctx, ttlEvent(name, "R"), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create event: %v", err)
		}
	}
	b, err := core.Get(ctx, "b", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	b.Count = 5
	if _, err := core.Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update event: %v", err)
	}
	if _, err := core.Patch(ctx, "c", types.MergePatchType, []byte(`{"count":7}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch event: %v", err)
	}
	// A finalizer turns the delete into an update that marks the Event.
	if _, err := core.Patch(ctx, "a", types.MergePatchType, []byte(`{"metadata":{"finalizers":["test/hold"]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch event: %v", err)
	}
	if err := core.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete event: %v", err)
	}
	if a, err := core.Get(ctx, "a", metav1.GetOptions{}); err != nil || a.DeletionTimestamp == nil {
		t.Fatalf("event a after delete: %v, %v; want it marked for deletion", a, err)
	}

	cl, err := s.etcd.Client()
	if err != nil {
		t.Fatal(err)
	}
	leases := map[string]clientv3.LeaseID{}
	for _, key := range []string{"/registry/events/default/a", "/registry/events/default/b", "/registry/events/default/c", "/registry/configmaps/default/cm"} {
		resp, err := cl.Get(ctx, key)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("etcd get %s: %v (%d keys)", key, err, len(resp.Kvs))
		}
		leases[key] = clientv3.LeaseID(resp.Kvs[0].Lease)
	}
	if id := leases["/registry/configmaps/default/cm"]; id != clientv3.NoLease {
		t.Errorf("the ConfigMap has lease %x, want none", id)
	}
	shared := leases["/registry/events/default/a"]
	for key, id := range leases {
		if key != "/registry/configmaps/default/cm" && (id == clientv3.NoLease || id != shared) {
			t.Errorf("%s has lease %x, want the shared %x", key, id, shared)
		}
	}
	ttl, err := cl.TimeToLive(ctx, shared)
	if err != nil {
		t.Fatalf("lease time to live: %v", err)
	}
	if ttl.GrantedTTL != 3660 {
		t.Errorf("lease granted for %d s, want 3660 (1 h plus the 60 s reuse window)", ttl.GrantedTTL)
	}
	// 3 creates, an update, 2 patches, the mark: 7 writes, one grant.
	if st := s.store.LeaseStats(); st.Grants != 1 || st.Reuses != 6 {
		t.Errorf("lease stats %+v, want 1 grant and 6 reuses", st)
	}

	// The lease's end (revoked here rather than waited for) deletes the three Events in
	// one etcd revision: a watch through client-go sees each, LIST none, the ConfigMap stays.
	w := watchEventsFromNow(ctx, t, core)
	if _, err := cl.Revoke(ctx, shared); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	gone := map[string]bool{"a": true, "b": true, "c": true}
	var revs []string
	deadline := time.After(expiryTimeout)
	for len(gone) > 0 {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch ended; still waiting for the deletion of %v", gone)
			}
			ev, isEvent := e.Object.(*corev1.Event)
			if e.Type != watch.Deleted || !isEvent || !gone[ev.Name] {
				t.Fatalf("watch event %s %#v, want the deletions of %v", e.Type, e.Object, gone)
			}
			delete(gone, ev.Name)
			revs = append(revs, ev.ResourceVersion)
		case <-deadline:
			t.Fatalf("no deletion of %v within %v of the revoke", gone, expiryTimeout)
		}
	}
	if revs[0] != revs[1] || revs[1] != revs[2] {
		t.Errorf("deletions at resource versions %v, want one (one etcd revision)", revs)
	}
	if l, err := core.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("LIST events after the lease ended: %d items, %v; want none", lenOrZero(l), err)
	}
	if _, err := s.client.CoreV1().ConfigMaps("default").Get(ctx, "cm", metav1.GetOptions{}); err != nil {
		t.Errorf("GET the ConfigMap after the lease ended: %v", err)
	}
}

// TestEventTTLZeroKeepsEvents checks that without an event TTL Events carry no lease.
func TestEventTTLZeroKeepsEvents(t *testing.T) {
	ctx := t.Context()
	s := startServer(ctx, t, Config{}, etcd.EmbeddedConfig{UnsafeNoFsync: true})
	if _, err := s.client.CoreV1().Events("default").Create(ctx, ttlEvent("e", "R"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create event: %v", err)
	}
	cl, err := s.etcd.Client()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cl.Get(ctx, "/registry/events/default/e")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("etcd get: %v", err)
	}
	if resp.Kvs[0].Lease != 0 {
		t.Errorf("Event has lease %x with EventTTL 0, want none", resp.Kvs[0].Lease)
	}
	if st := s.store.LeaseStats(); st.Grants != 0 {
		t.Errorf("lease stats %+v, want no grant", st)
	}
}

func TestNegativeEventTTL(t *testing.T) {
	if _, err := New(context.Background(), Config{Store: &etcd.Store{}, EventTTL: -time.Second}); err == nil {
		t.Fatal("New with a negative EventTTL succeeded")
	}
}

// watchEventsFromNow watches the namespace's Events from the resource version of a list
// made now; the watch stops when the test ends.
func watchEventsFromNow(ctx context.Context, t *testing.T, core typedcorev1.EventInterface) watch.Interface {
	t.Helper()
	list, err := core.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	w, err := core.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("watch events: %v", err)
	}
	t.Cleanup(w.Stop)
	return w
}
