package flowcontrol

import (
	"context"
	"errors"
	"sync"
)

// errRejected means a request found no seat and no room in its queues (or its level
// rejects instead of queuing); errTimedOut means it waited in its queue too long.
var (
	errRejected = errors.New("rejected: queues full")
	errTimedOut = errors.New("rejected: time out waiting in queue")
)

// shape is what a level's queues are made of; a level whose shape changes gets new
// queues (the old ones drain), a change of its seats alone applies in place.
type shape struct {
	exempt           bool
	reject           bool // Limited with limitResponse Reject
	queues, handSize int
	queueLengthLimit int
}

// level is the run-time state of one priority level: its seats, the requests executing
// and the queues of those waiting. One mutex guards it; the fast path (a free seat, no
// one waiting) takes it once to count the request in and once to count it out.
type level struct {
	shape shape

	mu        sync.Mutex
	seats     int // the level's concurrency limit
	executing int
	waiting   int
	queues    []queue
	next      int // where the round-robin dispatch looks first
}

// queue is one FIFO of waiting requests and how many of its requests execute.
type queue struct {
	waiters   []*waiter
	executing int
}

// waiter is one queued request; ready is closed when it is given a seat.
type waiter struct {
	ready   chan struct{}
	granted bool
	queue   int
}

func newLevel(sh shape, seats int) *level {
	l := &level{shape: sh, seats: seats}
	if !sh.exempt && !sh.reject {
		l.queues = make([]queue, sh.queues)
	}
	return l
}

// setSeats changes the concurrency limit and lets waiters in if it grew.
func (l *level) setSeats(n int) {
	l.mu.Lock()
	l.seats = n
	l.dispatchLocked()
	l.mu.Unlock()
}

// acquire waits for a seat for a request of the flow with the given hash, at most until
// ctx ends; the returned func gives the seat back. An exempt level never waits.
func (l *level) acquire(ctx context.Context, hash uint64) (func(), error) {
	l.mu.Lock()
	if l.shape.exempt || (l.executing < l.seats && l.waiting == 0) {
		l.executing++
		l.mu.Unlock()
		return func() { l.release(-1) }, nil
	}
	if l.shape.reject || len(l.queues) == 0 {
		l.mu.Unlock()
		return nil, errRejected
	}
	// Shuffle sharding: of the flow's hand of queues, the one with the least work.
	best, bestLoad := -1, 0
	deal(hash, len(l.queues), l.shape.handSize, func(q int) {
		load := len(l.queues[q].waiters) + l.queues[q].executing
		if best < 0 || load < bestLoad {
			best, bestLoad = q, load
		}
	})
	q := &l.queues[best]
	if len(q.waiters) >= l.shape.queueLengthLimit {
		l.mu.Unlock()
		return nil, errRejected
	}
	w := &waiter{ready: make(chan struct{}), queue: best}
	q.waiters = append(q.waiters, w)
	l.waiting++
	// A seat may be free while others wait in other queues: let the fairest in.
	l.dispatchLocked()
	l.mu.Unlock()

	select {
	case <-w.ready:
		return func() { l.release(w.queue) }, nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.granted {
		// Given a seat just as the wait ended: take it.
		return func() { l.release(w.queue) }, nil
	}
	ws := l.queues[w.queue].waiters
	for i, x := range ws {
		if x == w {
			l.queues[w.queue].waiters = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	l.waiting--
	return nil, errTimedOut
}

// release gives back the seat of a request that came through queue q (-1: none).
func (l *level) release(q int) {
	l.mu.Lock()
	l.executing--
	if q >= 0 && q < len(l.queues) {
		l.queues[q].executing--
	}
	l.dispatchLocked()
	l.mu.Unlock()
}

// dispatchLocked hands free seats to waiters, taking the queues in turn (one request
// from each non-empty queue per round), so that every flow with requests waiting gets
// an equal share of the level's seats, however many requests each has queued.
func (l *level) dispatchLocked() {
	for l.waiting > 0 && l.executing < l.seats {
		for i := 0; i < len(l.queues); i++ {
			qi := (l.next + i) % len(l.queues)
			q := &l.queues[qi]
			if len(q.waiters) == 0 {
				continue
			}
			w := q.waiters[0]
			q.waiters[0] = nil
			q.waiters = q.waiters[1:]
			q.executing++
			l.executing++
			l.waiting--
			w.granted = true
			close(w.ready)
			l.next = qi + 1
			break
		}
	}
}

// stats returns the level's seats, executing and waiting requests.
func (l *level) stats() (seats, executing, waiting int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seats, l.executing, l.waiting
}
