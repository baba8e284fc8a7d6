package apiserver

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/kubette/kubette/internal/storage"
)

// compactingStore counts revisions and records compactions.
type compactingStore struct {
	storage.Store
	rev       int64
	compacted []int64
}

func (c *compactingStore) CurrentRevision(context.Context) (int64, error) { return c.rev, nil }

func (c *compactingStore) Compact(_ context.Context, rev int64) error {
	if n := len(c.compacted); n > 0 && rev <= c.compacted[n-1] {
		return storage.ErrCompacted
	}
	c.compacted = append(c.compacted, rev)
	return nil
}

// TestCompactOnceCompactsToThePreviousTick checks upstream's schedule: nothing at the
// first tick, then each tick the revision of the tick before; no compaction when nothing
// was written in between.
func TestCompactOnceCompactsToThePreviousTick(t *testing.T) {
	st := &compactingStore{rev: 10}
	s := &Server{cfg: Config{Store: st}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx := t.Context()
	prev := s.compactOnce(ctx, st, 0)
	st.rev = 25
	prev = s.compactOnce(ctx, st, prev)
	prev = s.compactOnce(ctx, st, prev) // no write since: revision 25 stays
	st.rev = 40
	prev = s.compactOnce(ctx, st, prev)
	if prev != 40 || len(st.compacted) != 2 || st.compacted[0] != 10 || st.compacted[1] != 25 {
		t.Errorf("compacted %v (next %d), want [10 25] (next 40)", st.compacted, prev)
	}
}
