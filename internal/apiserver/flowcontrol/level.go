package flowcontrol

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// errRejected means a request found no seat and no room in its queues (or its level
// rejects instead of queuing); errTimedOut means it waited in its queue too long.
var (
	errRejected = errors.New("rejected: queues full")
	errTimedOut = errors.New("rejected: time out waiting in queue")
)

// estimatedServiceTime is what the fair queuing charges a queue, per seat, when it
// dispatches a request (upstream's guess G, 3 ms); the charge is corrected by the real
// service time when the request finishes.
const estimatedServiceTime = 3 * time.Millisecond

// shape is what a level's queues are made of; a level whose shape changes gets new
// queues (the old ones drain), a change of its seats alone applies in place.
type shape struct {
	exempt           bool
	reject           bool // Limited with limitResponse Reject
	queues, handSize int
	queueLengthLimit int
}

// level is the run-time state of one priority level: its seats, the requests holding
// them and the queues of those waiting, dispatched by fair queuing over virtual time as
// upstream's queueset (see dispatchLocked). One mutex guards it; the fast path (the
// seats free, no one waiting) takes it once to count the request in and once to count
// it out. An exempt level counts its requests in an atomic and never waits.
type level struct {
	shape shape
	// now reads a monotonic clock; afterFunc runs f after d. Tests replace both.
	now       func() time.Duration
	afterFunc func(d time.Duration, f func())

	exemptExecuting atomic.Int64

	mu           sync.Mutex
	seats        int // the level's concurrency limit
	inUse        int // seats held by executing requests and by writes' watch fan-out
	executing    int // requests executing
	waiting      int // requests in the queues
	waitingSeats int // the seats they ask for
	active       int // queues with requests waiting or executing
	queues       []queue
	robin        int // the queue dispatched last: the search for the fairest starts after it
	enqueues     int // rotates where shuffle sharding starts looking in a hand
	// vt is the virtual time R in seat-seconds: what each active queue has been owed
	// since the level was last idle; it advances at min(seats asked for, seats) /
	// active queues per second.
	vt       float64
	lastSync time.Duration
}

// queue is one FIFO of waiting requests and what its requests hold.
type queue struct {
	waiters     []*waiter
	executing   int
	seatsInUse  int
	waitingWork float64 // seat-seconds the waiters are estimated to take
	// nextR is the virtual time at which the queue's next request starts: it moves on
	// by a request's work when the request is dispatched.
	nextR float64
}

func (q *queue) idle() bool { return len(q.waiters) == 0 && q.executing == 0 }

// waiter is one queued request; ready is closed when it is given seats (t then holds
// them).
type waiter struct {
	ready    chan struct{}
	granted  bool
	queue    int
	est      estimate
	seats    int     // est.maxSeats(), as counted in waitingSeats
	arrivalR float64 // the virtual time it arrived at
	t        ticket
}

// ticket is a request's hold on its level's seats, given back with finish.
type ticket struct {
	exempt     bool
	queue      int32 // -1: not through a queue
	seats      int32 // held from dispatch until finish plus additional
	initial    int32
	additional time.Duration
	start      time.Duration
}

func newLevel(sh shape, seats int) *level {
	epoch := time.Now()
	l := &level{shape: sh, seats: seats,
		now:       func() time.Duration { return time.Since(epoch) },
		afterFunc: func(d time.Duration, f func()) { time.AfterFunc(d, f) },
	}
	if !sh.exempt && !sh.reject {
		l.queues = make([]queue, sh.queues)
	}
	return l
}

// setSeats changes the concurrency limit and lets waiters in if it grew.
func (l *level) setSeats(n int) {
	l.mu.Lock()
	now := l.syncLocked()
	l.seats = n
	l.dispatchLocked(now)
	l.mu.Unlock()
}

// syncLocked advances the virtual time to now and returns now.
func (l *level) syncLocked() time.Duration {
	now := l.now()
	if l.active > 0 {
		asked := min(l.inUse+l.waitingSeats, l.seats)
		l.vt += float64(asked) * (now - l.lastSync).Seconds() / float64(l.active)
	}
	l.lastSync = now
	return now
}

// fit caps a request's seats at the level's limit, as upstream lets a request wider
// than its level run once the level is otherwise empty; the final phase keeps its
// work (seats x time).
func (l *level) fit(e estimate) estimate {
	if l.seats <= 0 {
		return e
	}
	e.seats = min(e.seats, l.seats)
	if e.finalSeats > l.seats {
		e.additional = time.Duration(int64(e.additional) * int64(e.finalSeats) / int64(l.seats))
		e.finalSeats = l.seats
	}
	return e
}

// start counts a request of the flow with the given hash in: it returns the ticket of
// a request given its seats at once, or the waiter of one queued (its ready channel
// is closed when it gets them: see await), or errRejected.
func (l *level) start(hash uint64, est estimate) (ticket, *waiter, error) {
	if l.shape.exempt {
		l.exemptExecuting.Add(1)
		return ticket{exempt: true, queue: -1}, nil, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.syncLocked()
	est = l.fit(est)
	need := est.maxSeats()
	if l.shape.reject || len(l.queues) == 0 {
		if l.seats <= 0 || l.inUse+need > l.seats {
			return ticket{}, nil, errRejected
		}
		l.inUse += need
		l.executing++
		return ticket{queue: -1, seats: int32(need), initial: int32(est.seats), additional: est.additional, start: now}, nil, nil
	}
	qi := l.chooseQueueLocked(hash)
	q := &l.queues[qi]
	if l.waiting == 0 && l.seats > 0 && l.inUse+need <= l.seats {
		// No one waits and the seats are free: the dispatch would pick this request,
		// so it runs without being queued.
		if q.idle() {
			q.nextR = l.vt
			l.active++
		}
		return l.grantLocked(qi, est, now), nil, nil
	}
	if l.inUse >= l.seats && len(q.waiters) >= l.shape.queueLengthLimit {
		return ticket{}, nil, errRejected
	}
	if q.idle() {
		q.nextR = l.vt
		l.active++
	}
	w := &waiter{ready: make(chan struct{}), queue: qi, est: est, seats: need, arrivalR: l.vt}
	q.waiters = append(q.waiters, w)
	q.waitingWork += est.work()
	l.waiting++
	l.waitingSeats += need
	l.boundLocked(q)
	// Seats may be free while others wait: let the fairest in.
	l.dispatchLocked(now)
	return ticket{}, w, nil
}

// await waits for a queued request's seats, at most limit and until ctx ends.
func (l *level) await(ctx context.Context, w *waiter, limit time.Duration) (ticket, error) {
	if limit > 0 {
		timer := time.NewTimer(limit)
		defer timer.Stop()
		select {
		case <-w.ready:
			return w.t, nil
		case <-ctx.Done():
		case <-timer.C:
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.granted {
		// Given its seats just as the wait ended: take them.
		return w.t, nil
	}
	now := l.syncLocked()
	q := &l.queues[w.queue]
	for i, x := range q.waiters {
		if x == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			break
		}
	}
	q.waitingWork -= w.est.work()
	l.waiting--
	l.waitingSeats -= w.seats
	if q.idle() {
		l.active--
	}
	l.boundLocked(q)
	// A wide request that gave up may have held narrower ones back.
	l.dispatchLocked(now)
	l.resetIfIdleLocked()
	return ticket{}, errTimedOut
}

// chooseQueueLocked is shuffle sharding: of the flow's hand of queues, the one whose
// waiting requests are the least work (the first of equals from a rotating start).
func (l *level) chooseQueueLocked(hash uint64) int {
	var buf [16]int
	hand := dealHand(hash, len(l.queues), l.shape.handSize, &buf)
	off := l.enqueues % len(hand)
	l.enqueues++
	best := -1
	var bestWork float64
	for i := range hand {
		qi := hand[(off+i)%len(hand)]
		if w := l.queues[qi].waitingWork; best < 0 || w < bestWork {
			best, bestWork = qi, w
		}
	}
	return best
}

// grantLocked gives a request of queue qi its seats and charges the queue its
// estimated work.
func (l *level) grantLocked(qi int, est estimate, now time.Duration) ticket {
	q := &l.queues[qi]
	need := est.maxSeats()
	q.executing++
	q.seatsInUse += need
	q.nextR += est.work()
	l.executing++
	l.inUse += need
	return ticket{queue: int32(qi), seats: int32(need), initial: int32(est.seats), additional: est.additional, start: now}
}

// boundLocked keeps a queue's virtual start from falling behind the arrival of its
// oldest waiter (upstream's anti-windup: a queue that could not use its share does
// not bank it).
func (l *level) boundLocked(q *queue) {
	if len(q.waiters) > 0 && q.nextR < q.waiters[0].arrivalR {
		q.nextR = q.waiters[0].arrivalR
	}
}

// dispatchLocked hands free seats to waiters by fair queuing: of the queues with
// requests waiting, the one whose head would finish first in virtual time (the
// queue's virtual start plus the head's work) goes next, the round-robin order from
// the last queue served breaking ties. When that head needs more seats than are
// free, nothing is dispatched until enough are: a wide request is not overtaken by
// narrower ones of other queues.
func (l *level) dispatchLocked(now time.Duration) {
	for l.waiting > 0 && l.inUse < l.seats {
		best := -1
		var bestFinish float64
		n := len(l.queues)
		for i := 1; i <= n; i++ {
			qi := (l.robin + i) % n
			q := &l.queues[qi]
			if len(q.waiters) == 0 {
				continue
			}
			if f := q.nextR + q.waiters[0].est.work(); best < 0 || f < bestFinish {
				best, bestFinish = qi, f
			}
		}
		q := &l.queues[best]
		w := q.waiters[0]
		est := l.fit(w.est) // the level may have shrunk since it arrived
		if l.inUse+est.maxSeats() > l.seats {
			return
		}
		q.waiters[0] = nil
		q.waiters = q.waiters[1:]
		q.waitingWork -= w.est.work()
		l.waiting--
		l.waitingSeats -= w.seats
		w.t = l.grantLocked(best, est, now)
		w.granted = true
		close(w.ready)
		l.robin = best
		l.boundLocked(q)
	}
}

// finish gives back the seats of a request that has been served: at once, or after
// its additional latency (the watch fan-out of a write), as upstream.
func (l *level) finish(t ticket) {
	if t.exempt {
		l.exemptExecuting.Add(-1)
		return
	}
	l.mu.Lock()
	now := l.syncLocked()
	l.executing--
	if t.queue >= 0 {
		q := &l.queues[t.queue]
		q.executing--
		// The queue was charged the estimated service time; charge it the real one.
		q.nextR -= float64(t.initial) * (estimatedServiceTime - (now - t.start)).Seconds()
		l.boundLocked(q)
		if q.idle() {
			l.active--
		}
	}
	if t.additional > 0 {
		l.mu.Unlock()
		l.afterFunc(t.additional, func() { l.release(t) })
		return
	}
	l.releaseLocked(t)
	l.dispatchLocked(now)
	l.resetIfIdleLocked()
	l.mu.Unlock()
}

// release gives back the seats a finished request held for its additional latency.
func (l *level) release(t ticket) {
	l.mu.Lock()
	now := l.syncLocked()
	l.releaseLocked(t)
	l.dispatchLocked(now)
	l.resetIfIdleLocked()
	l.mu.Unlock()
}

func (l *level) releaseLocked(t ticket) {
	l.inUse -= int(t.seats)
	if t.queue >= 0 {
		l.queues[t.queue].seatsInUse -= int(t.seats)
	}
}

// resetIfIdleLocked starts the virtual time again from zero when nothing is queued,
// executing or held (every queue's start is set anew when a request next arrives),
// so that it stays small.
func (l *level) resetIfIdleLocked() {
	if l.inUse == 0 && l.executing == 0 && l.waiting == 0 {
		l.vt = 0
	}
}

// stats returns the level's seats, executing and waiting requests.
func (l *level) stats() (seats, executing, waiting int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shape.exempt {
		return l.seats, int(l.exemptExecuting.Load()), 0
	}
	return l.seats, l.executing, l.waiting
}

// seatsInUse returns the seats held.
func (l *level) seatsInUse() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inUse
}
