package scheduler

import (
	"context"
	"sync"
	"sync/atomic"
)

// chunks hands out the pieces 0..n-1 in chunks to the goroutines of one
// parallel section (runChunks). It is one allocation per section, where
// workqueue.ParallelizeUntil fills a channel with every piece index and each
// goroutine's closure captured the section's variables one by one.
type chunks struct {
	ctx   context.Context
	n     int
	chunk int
	work  func(lo, hi int) bool
	next  atomic.Int64
	stop  atomic.Bool
	wg    sync.WaitGroup
}

// runChunks calls work(lo, hi) for consecutive ranges of at most chunk pieces
// covering 0..n-1, on up to workers goroutines including the caller's, and
// returns when they are done. A work that returns false stops the handing out
// of further chunks, as does ctx being done; chunks already started finish.
// It returns how many pieces were handed out (those from 0 up to it, at most n,
// were all examined unless work stopped early).
func runChunks(ctx context.Context, workers, n, chunk int, work func(lo, hi int) bool) int {
	if n <= 0 {
		return 0
	}
	chunk = max(chunk, 1)
	workers = max(1, min(workers, (n+chunk-1)/chunk))
	c := &chunks{ctx: ctx, n: n, chunk: chunk, work: work}
	c.wg.Add(workers - 1)
	for range workers - 1 {
		go c.worker()
	}
	c.loop()
	c.wg.Wait()
	return min(int(c.next.Load()), n)
}

func (c *chunks) worker() {
	defer c.wg.Done()
	c.loop()
}

func (c *chunks) loop() {
	for !c.stop.Load() && c.ctx.Err() == nil {
		lo := int(c.next.Add(int64(c.chunk))) - c.chunk
		if lo >= c.n {
			return
		}
		if !c.work(lo, min(lo+c.chunk, c.n)) {
			c.stop.Store(true)
			return
		}
	}
}
