// Package worker runs the workers of a queue-driven controller: it waits for
// the controller's informers to sync, then runs goroutines that take keys from
// a rate-limited work queue and reconcile them, forgetting a key that synced and
// retrying one that failed with the queue's back-off. Every controller of the
// controller manager that works from one queue of string keys runs through it,
// so the loop, its shutdown and its error handling are written once.
package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Options describe one controller's workers.
type Options struct {
	// Name names the controller in the cache-sync log lines.
	Name string
	// Workers is the number of concurrent workers (at least one runs).
	Workers int
	// Synced are the informers that must have synced before the first sync.
	Synced []cache.InformerSynced
	// Sync reconciles one key.
	Sync func(ctx context.Context, key string) error
	// SyncTimeout bounds one call of Sync; zero means no bound.
	SyncTimeout time.Duration
	// OnError, when set, sees every failed sync first; it returns true when it
	// took care of the key itself (requeued it, forgot it, or logged the
	// failure as routine). Otherwise the failure is logged, unless the
	// controller is stopping, and the key is retried with back-off.
	OnError func(key string, err error) (handled bool)
	// AfterSync, when set, runs once after the informers synced and before
	// the workers start (e.g. to queue leftovers of a previous run).
	AfterSync func()
	// Log receives the start, stop and failure lines (none when nil).
	Log *slog.Logger
}

// Run runs o.Workers workers over q until ctx is done, then shuts q down and
// waits for the workers to finish their current key.
func Run(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], o Options) {
	defer q.ShutDown()
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	o.Log.Info("starting controller")
	defer o.Log.Info("shutting down controller")
	if !cache.WaitForNamedCacheSync(o.Name, ctx.Done(), o.Synced...) {
		return
	}
	if o.AfterSync != nil {
		o.AfterSync()
	}
	var wg sync.WaitGroup
	for range max(o.Workers, 1) {
		wg.Go(func() {
			for ProcessNext(ctx, q, o) {
			}
		})
	}
	<-ctx.Done()
	q.ShutDown()
	wg.Wait()
}

// ProcessNext takes one key from q and syncs it as Run's workers do; it
// returns false when the queue shut down. Tests call it to run one step.
func ProcessNext(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], o Options) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	err := syncOne(ctx, &o, key)
	switch {
	case err == nil:
		q.Forget(key)
	case o.OnError != nil && o.OnError(key, err):
	default:
		if ctx.Err() == nil && o.Log != nil {
			o.Log.Error("sync failed", "key", key, "err", err)
		}
		q.AddRateLimited(key)
	}
	return true
}

// syncOne calls o.Sync for key, bounded by o.SyncTimeout when it is set.
func syncOne(ctx context.Context, o *Options, key string) error {
	if o.SyncTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.SyncTimeout)
		defer cancel()
	}
	return o.Sync(ctx, key)
}
