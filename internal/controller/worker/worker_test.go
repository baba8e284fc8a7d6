package worker

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
)

func newQueue() workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond))
}

// recorder counts the syncs per key and can fail a key a number of times.
type recorder struct {
	mu    sync.Mutex
	calls map[string]int
	fail  map[string]int
	done  chan string
}

func (r *recorder) sync(ctx context.Context, key string) error {
	r.mu.Lock()
	r.calls[key]++
	n := r.calls[key]
	failing := n <= r.fail[key]
	r.mu.Unlock()
	if failing {
		return errors.New("boom")
	}
	r.done <- key
	return nil
}

func TestRunRetriesUntilSyncSucceeds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	q := newQueue()
	r := &recorder{calls: map[string]int{}, fail: map[string]int{"a": 3}, done: make(chan string, 10)}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		Run(ctx, q, Options{Name: "test", Workers: 2, Sync: r.sync})
	}()
	q.Add("a")
	q.Add("b")
	got := map[string]bool{}
	for len(got) < 2 {
		select {
		case k := <-r.done:
			got[k] = true
		case <-time.After(30 * time.Second):
			t.Fatalf("keys synced: %v", got)
		}
	}
	cancel()
	<-finished
	if r.calls["a"] != 4 || r.calls["b"] != 1 {
		t.Errorf("calls = %v, want a:4 b:1", r.calls)
	}
	if q.NumRequeues("a") != 0 {
		t.Errorf("requeues of a after success = %d, want 0 (forgotten)", q.NumRequeues("a"))
	}
	if !q.ShuttingDown() {
		t.Error("queue not shut down after Run returned")
	}
}

func TestRunOnErrorTakesOver(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	q := newQueue()
	seen := make(chan error, 1)
	calls := 0
	var mu sync.Mutex
	afterSync := make(chan struct{})
	go Run(ctx, q, Options{
		Name:      "test",
		AfterSync: func() { close(afterSync) },
		Sync: func(context.Context, string) error {
			mu.Lock()
			defer mu.Unlock()
			calls++
			return errors.New("routine")
		},
		OnError: func(key string, err error) bool {
			seen <- err
			return true // handled: not retried
		},
	})
	<-afterSync
	q.Add("x")
	select {
	case err := <-seen:
		if err.Error() != "routine" {
			t.Errorf("OnError got %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("OnError never called")
	}
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Errorf("sync calls = %d, want 1: a handled error is not retried", calls)
	}
}

func TestSyncTimeoutBoundsOneSync(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	q := newQueue()
	deadline := make(chan bool, 1)
	go Run(ctx, q, Options{
		Name:        "test",
		SyncTimeout: time.Minute,
		Sync: func(ctx context.Context, _ string) error {
			_, ok := ctx.Deadline()
			deadline <- ok
			return nil
		},
	})
	q.Add("k")
	select {
	case ok := <-deadline:
		if !ok {
			t.Error("sync context has no deadline although SyncTimeout is set")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("never synced")
	}
}
