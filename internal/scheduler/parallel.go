package scheduler

import (
	"context"
	"sync"
)

// chunks hands out the pieces 0..n-1 in chunks to the goroutines of one
// parallel section (runChunks). It is one allocation per section, where
// workqueue.ParallelizeUntil fills a channel with every piece index and each
// goroutine's closure captured the section's variables one by one.
//
// The caller waits only for the chunks that were taken, not for every goroutine
// it started: on a busy process (2 cores shared with the API server and etcd in
// `kubette up`) a helper goroutine may get a core only after the caller has done
// every chunk itself, and waiting for it to start, find nothing and end was most
// of a scheduling cycle's wall time. A helper that comes late finds the section
// closed and ends without calling work.
type chunks struct {
	ctx   context.Context
	n     int
	chunk int
	work  func(lo, hi int) bool

	mu       sync.Mutex
	idle     sync.Cond // signalled when inflight drops to 0
	pos      int       // the next piece to hand out
	inflight int       // chunks taken and not finished
	stopped  bool      // a work returned false: hand out nothing more
	closed   bool      // the caller is done: hand out nothing more
}

// runChunks calls work(lo, hi) for consecutive ranges of at most chunk pieces
// covering 0..n-1, on up to workers goroutines including the caller's, and
// returns when every range it handed out is done. A work that returns false
// stops the handing out of further chunks, as does ctx being done; chunks
// already started finish. It returns how many pieces were handed out (those
// from 0 up to it, at most n, were all examined unless work stopped early).
func runChunks(ctx context.Context, workers, n, chunk int, work func(lo, hi int) bool) int {
	if n <= 0 {
		return 0
	}
	chunk = max(chunk, 1)
	workers = max(1, min(workers, (n+chunk-1)/chunk))
	c := &chunks{ctx: ctx, n: n, chunk: chunk, work: work}
	c.idle.L = &c.mu
	for range workers - 1 {
		go c.loop()
	}
	c.loop()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for c.inflight > 0 {
		c.idle.Wait()
	}
	return c.pos
}

// loop takes and works chunks until none is left to hand out.
func (c *chunks) loop() {
	for {
		lo, hi, ok := c.take()
		if !ok {
			return
		}
		c.done(c.work(lo, hi))
	}
}

// take hands out the next chunk, if the section still hands out any.
func (c *chunks) take() (lo, hi int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.stopped || c.pos >= c.n || c.ctx.Err() != nil {
		return 0, 0, false
	}
	lo, hi = c.pos, min(c.pos+c.chunk, c.n)
	c.pos = hi
	c.inflight++
	return lo, hi, true
}

// done records a finished chunk; more says whether work wants the section to go on.
func (c *chunks) done(more bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !more {
		c.stopped = true
	}
	if c.inflight--; c.inflight == 0 {
		c.idle.Broadcast()
	}
}
