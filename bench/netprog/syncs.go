package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// The proxy's debug messages after a sync that wrote rules (internal/proxy,
// Proxy.sync), with the attributes "full" (bool) and "took" (the sync's
// duration from its start). The proxy has no other hook for "sync done";
// the bench fails when it sees none (the first full sync is awaited through
// them), so a renamed message cannot go unseen.
const (
	msgSyncedIptables = "synced rules"
	msgSyncedNftables = "synced nftables rules"
)

// syncRecord is one sync of the proxy that wrote rules.
type syncRecord struct {
	end   time.Time // when the proxy logged it, right after the apply
	took  time.Duration
	full  bool
	bytes int64 // what the sync wrote (restore or nft text, netlink)
}

func (s syncRecord) start() time.Time { return s.end.Add(-s.took) }

// syncLog is the proxy's slog.Handler: it records the syncs and passes
// warnings and errors on to next.
type syncLog struct {
	rec  *timeline[syncRecord]
	next slog.Handler
}

func (h syncLog) Enabled(context.Context, slog.Level) bool { return true }

func (h syncLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == msgSyncedIptables || r.Message == msgSyncedNftables {
		s := syncRecord{end: r.Time}
		r.Attrs(func(a slog.Attr) bool {
			switch {
			case a.Key == "full" && a.Value.Kind() == slog.KindBool:
				s.full = a.Value.Bool()
			case a.Key == "took" && a.Value.Kind() == slog.KindDuration:
				s.took = a.Value.Duration()
			case a.Key == "bytes" && a.Value.Kind() == slog.KindInt64:
				s.bytes = a.Value.Int64()
			}
			return true
		})
		h.rec.add(s)
	}
	if r.Level >= slog.LevelWarn {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h syncLog) WithAttrs(as []slog.Attr) slog.Handler {
	return syncLog{rec: h.rec, next: h.next.WithAttrs(as)}
}

func (h syncLog) WithGroup(name string) slog.Handler {
	return syncLog{rec: h.rec, next: h.next.WithGroup(name)}
}

// timeline keeps what happened in order and wakes those waiting for an
// entry: the proxy's syncs, the target's EndpointSlice as the bench's watch
// saw it.
type timeline[T any] struct {
	what    string
	mu      sync.Mutex
	entries []T
	changed chan struct{} // closed and replaced on every add
}

func newTimeline[T any](what string) *timeline[T] {
	return &timeline[T]{what: what, changed: make(chan struct{})}
}

func (r *timeline[T]) add(e T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries = append(r.entries, e)
	close(r.changed)
	r.changed = make(chan struct{})
}

// wait returns the first entry that satisfies ok, waiting for it until
// timeout.
func (r *timeline[T]) wait(ctx context.Context, timeout time.Duration, ok func(T) bool) (T, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		for _, e := range r.entries {
			if ok(e) {
				r.mu.Unlock()
				return e, nil
			}
		}
		changed := r.changed
		n := len(r.entries)
		r.mu.Unlock()
		var zero T
		select {
		case <-changed:
		case <-ctx.Done():
			return zero, ctx.Err()
		case <-deadline.C:
			return zero, fmt.Errorf("no such %s after %v (%d recorded)", r.what, timeout, n)
		}
	}
}
