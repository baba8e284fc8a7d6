package apiserver

import (
	"context"
	"errors"
	"time"

	"github.com/kubette/kubette/internal/storage"
)

// defaultCompactionInterval is upstream's --etcd-compaction-interval.
const defaultCompactionInterval = 5 * time.Minute

// runCompaction compacts the store every interval to the revision it had at the previous
// tick, as upstream's compactor, until ctx is done: a revision outlives its write by one
// to two intervals. It does nothing for a store that is no storage.Compactor, or when
// interval is negative.
func (s *Server) runCompaction(ctx context.Context, interval time.Duration) {
	c, ok := s.cfg.Store.(storage.Compactor)
	if !ok || interval < 0 {
		return
	}
	if interval == 0 {
		interval = defaultCompactionInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var prev int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		prev = s.compactOnce(ctx, c, prev)
	}
}

// compactOnce compacts to prev (when set) and returns the revision to compact to next
// time: the current one.
func (s *Server) compactOnce(ctx context.Context, c storage.Compactor, prev int64) int64 {
	cur, err := s.cfg.Store.CurrentRevision(ctx)
	if err != nil {
		s.log.Warn("compaction: read the current revision", "err", err)
		return prev
	}
	if prev > 0 && prev < cur {
		if err := c.Compact(ctx, prev); err != nil && !errors.Is(err, storage.ErrCompacted) && ctx.Err() == nil {
			s.log.Warn("compaction failed", "revision", prev, "err", err)
		} else if err == nil {
			s.log.Debug("compacted the store", "revision", prev)
		}
	}
	return cur
}
