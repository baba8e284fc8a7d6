package podautoscaler

import (
	"context"
	"testing"

	"github.com/kubette/kubette/internal/testenv/poll"
)

// A new autoscaler, or one whose spec changed, is synced at once; a status update
// (the controller's own) waits for the sync period; every sync queues the autoscaler
// again a period later.
func TestQueueing(t *testing.T) {
	h := hpaFor("web", 1, 10)
	f := newFixture(t, h)
	f.target(1)
	f.pods(pod("web-0", 1000))
	f.usage(map[string]int64{"web-0": 500})

	f.c.enqueue(h, true)
	if n := f.c.queue.Len(); n != 1 {
		t.Fatalf("a new autoscaler: queue holds %d", n)
	}
	key, _ := f.c.queue.Get()
	if err := f.c.Sync(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	f.c.queue.Done(key)
	if n := f.c.queue.Len(); n != 0 {
		t.Fatalf("right after a sync the queue holds %d", n)
	}

	statusOnly := h.DeepCopy()
	statusOnly.Status.CurrentReplicas = 1
	f.c.updated(h, statusOnly)
	if n := f.c.queue.Len(); n != 0 {
		t.Fatalf("after a status update the queue holds %d", n)
	}
	f.clock.Step(DefaultSyncPeriod)
	poll.Until(t, "the resync", poll.True(func() bool { return f.c.queue.Len() == 1 }))
	key, _ = f.c.queue.Get()
	f.c.queue.Done(key)

	changed := h.DeepCopy()
	changed.Generation++
	f.c.updated(h, changed)
	if n := f.c.queue.Len(); n != 1 {
		t.Fatalf("after a spec change the queue holds %d", n)
	}

	// A deleted autoscaler drops out of the selector index.
	f.c.deleted(h)
	if _, ok := f.c.selectors.m[ns+"/web"]; ok {
		t.Fatal("selector kept")
	}
}
