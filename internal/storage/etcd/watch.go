package etcd

import (
	"context"
	"fmt"

	"github.com/kubette/kubette/internal/storage"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// watchBuffer is how many results a watch queues for a slow consumer before
// it stops reading from etcd (etcd then buffers on its side).
const watchBuffer = 128

// Watch streams the changes under prefix with a revision greater than
// afterRevision (0: greater than the current revision) until ctx is done, the
// Store is closed or etcd ends the watch. The returned channel is closed then.
// A compacted start revision yields one WatchResult with storage.ErrCompacted;
// any other abnormal end yields one WatchResult with a non-nil Err.
func (s *Store) Watch(ctx context.Context, prefix string, afterRevision int64) (<-chan storage.WatchResult, error) {
	return s.watch(ctx, prefix, afterRevision, true)
}

// WatchWithoutPrev is Watch without the previous values (storage.PrevlessWatcher): etcd
// then reads no older revision of a key for each event it sends.
func (s *Store) WatchWithoutPrev(ctx context.Context, prefix string, afterRevision int64) (<-chan storage.WatchResult, error) {
	return s.watch(ctx, prefix, afterRevision, false)
}

func (s *Store) watch(ctx context.Context, prefix string, afterRevision int64, prevValues bool) (<-chan storage.WatchResult, error) {
	if err := s.usable(); err != nil {
		return nil, fmt.Errorf("etcd watch %q: %w", prefix, err)
	}
	if afterRevision <= 0 {
		// Pin the start revision now: etcd registers a watch asynchronously, so
		// "from now" must not depend on when the request reaches the server.
		rev, err := s.CurrentRevision(ctx)
		if err != nil {
			return nil, fmt.Errorf("etcd watch %q: %w", prefix, err)
		}
		afterRevision = rev
	}

	ctx, cancel := context.WithCancel(ctx)
	stopOnClose := context.AfterFunc(s.closed, cancel)
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(afterRevision + 1), clientv3.WithProgressNotify()}
	if prevValues {
		opts = append(opts, clientv3.WithPrevKV())
	}
	wch := s.client.Watch(clientv3.WithRequireLeader(ctx), prefix, opts...)
	out := make(chan storage.WatchResult, watchBuffer)
	go func() {
		defer close(out)
		defer stopOnClose()
		defer cancel()
		forward(ctx, prefix, wch, out)
	}()
	return out, nil
}

// forward translates etcd watch responses onto out until ctx is done or the
// etcd watch ends. It never blocks on out once ctx is done.
func forward(ctx context.Context, prefix string, wch clientv3.WatchChan, out chan<- storage.WatchResult) {
	send := func(r storage.WatchResult) bool {
		select {
		case out <- r:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		var (
			wr clientv3.WatchResponse
			ok bool
		)
		select {
		case <-ctx.Done():
			return
		case wr, ok = <-wch:
		}
		if !ok {
			if ctx.Err() == nil {
				send(storage.WatchResult{Err: fmt.Errorf("etcd watch %q: watch closed by etcd client", prefix)})
			}
			return
		}
		results, err := translateWatchResponse(wr)
		for _, r := range results {
			if !send(r) {
				return
			}
		}
		if err != nil {
			if ctx.Err() == nil {
				send(storage.WatchResult{Err: fmt.Errorf("etcd watch %q: %w", prefix, err)})
			}
			return
		}
	}
}

// translateWatchResponse maps one etcd watch response to storage results. A
// non-nil error means the etcd watch has ended.
func translateWatchResponse(wr clientv3.WatchResponse) ([]storage.WatchResult, error) {
	if err := wr.Err(); err != nil {
		return nil, translateError(err)
	}
	if wr.IsProgressNotify() {
		return []storage.WatchResult{{ProgressRevision: wr.Header.Revision}}, nil
	}
	results := make([]storage.WatchResult, 0, len(wr.Events))
	for i, ev := range wr.Events {
		e := storage.Event{
			Key:      string(ev.Kv.Key),
			Revision: ev.Kv.ModRevision,
			// etcd sends the events of one revision in one response (no fragmenting).
			More: i+1 < len(wr.Events) && wr.Events[i+1].Kv.ModRevision == ev.Kv.ModRevision,
		}
		if ev.PrevKv != nil {
			e.PrevValue = ev.PrevKv.Value
		}
		if ev.Type == clientv3.EventTypeDelete {
			e.Type = storage.EventDelete
		} else {
			e.Type = storage.EventPut
			e.Value = ev.Kv.Value
			e.Created = ev.Kv.CreateRevision == ev.Kv.ModRevision
		}
		results = append(results, storage.WatchResult{Event: e})
	}
	return results, nil
}

// RequestProgress asks etcd to send a progress notification on every watch of this
// store's client, carrying the current revision.
func (s *Store) RequestProgress(ctx context.Context) error {
	if err := s.client.RequestProgress(clientv3.WithRequireLeader(ctx)); err != nil {
		return fmt.Errorf("etcd request progress: %w", err)
	}
	return nil
}
