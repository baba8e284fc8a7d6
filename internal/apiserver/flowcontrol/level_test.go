package flowcontrol

import (
	"math"
	"testing"
	"time"
)

// fakeClock drives a level's clock and its timers from the test (one goroutine).
type fakeClock struct {
	t      time.Duration
	timers []fakeTimer
}

type fakeTimer struct {
	at time.Duration
	f  func()
}

func (c *fakeClock) install(l *level) {
	l.now = func() time.Duration { return c.t }
	l.afterFunc = func(d time.Duration, f func()) { c.timers = append(c.timers, fakeTimer{c.t + d, f}) }
}

// advance moves the clock by d, firing the timers due.
func (c *fakeClock) advance(d time.Duration) {
	c.t += d
	kept := c.timers[:0]
	var due []func()
	for _, t := range c.timers {
		if t.at <= c.t {
			due = append(due, t.f)
		} else {
			kept = append(kept, t)
		}
	}
	c.timers = kept
	for _, f := range due {
		f()
	}
}

// distinctHashes returns flow hashes whose hand of one queue (of deck) differ.
func distinctHashes(deck, n int) []uint64 {
	var out []uint64
	used := map[int]bool{}
	for i := 0; len(out) < n; i++ {
		h := flowHash("fs", string(rune('a'+i)))
		var q int
		deal(h, deck, 1, func(c int) { q = c })
		if !used[q] {
			used[q] = true
			out = append(out, h)
		}
	}
	return out
}

func mustStart(t *testing.T, l *level, hash uint64, est estimate) (ticket, *waiter) {
	t.Helper()
	tk, w, err := l.start(hash, est)
	if err != nil {
		t.Fatal(err)
	}
	return tk, w
}

func TestLevelWideRequestWaitsForItsSeats(t *testing.T) {
	var clock fakeClock
	l := newLevel(shape{queues: 8, handSize: 1, queueLengthLimit: 100}, 4)
	clock.install(l)
	h := distinctHashes(8, 2)
	narrow, wide := h[0], h[1]

	// Three narrow requests take three of the four seats.
	var running []ticket
	for i := 0; i < 3; i++ {
		tk, w := mustStart(t, l, narrow, oneSeat)
		if w != nil {
			t.Fatalf("narrow request %d queued with seats free", i)
		}
		running = append(running, tk)
	}
	// A request four seats wide waits: one seat is free.
	_, ww := mustStart(t, l, wide, estimate{seats: 4})
	if ww == nil || ww.granted {
		t.Fatal("a request of 4 seats ran with 1 free")
	}
	// The narrow flow keeps sending while its requests finish one by one, each after
	// 10 ms. Fair queuing lets at most a few of its new requests in before it picks
	// the wide one; from then on the narrow ones wait behind it although seats are
	// free (no skipping), and it runs, alone on the four seats, once they all are.
	var queued []*waiter
	heldBack := false
	for i := 0; !ww.granted; i++ {
		if i == 6 {
			t.Fatalf("the wide request still waits after %d narrow requests finished", i)
		}
		_, w := mustStart(t, l, narrow, oneSeat)
		queued = append(queued, w)
		clock.advance(10 * time.Millisecond)
		l.finish(running[0])
		running = running[1:]
		kept := queued[:0]
		for _, w := range queued {
			if w.granted {
				running = append(running, w.t)
			} else {
				kept = append(kept, w)
			}
		}
		queued = kept
		if !ww.granted && len(queued) > 0 && l.seatsInUse() < 4 {
			heldBack = true
		}
	}
	if in := l.seatsInUse(); in != 4 || ww.t.seats != 4 || len(running) != 0 {
		t.Fatalf("the wide request runs on %d seats beside %d narrow ones, %d in use; want 4 seats alone", ww.t.seats, len(running), in)
	}
	if !heldBack {
		t.Error("no narrow request ever waited for the wide one with a seat free")
	}
	clock.advance(10 * time.Millisecond)
	l.finish(ww.t)
	// Then the narrow ones get the seats.
	for j, w := range queued {
		if !w.granted {
			t.Fatalf("narrow request %d still waits after the wide one finished", j)
		}
		l.finish(w.t)
	}
	if seats, ex, wt := l.stats(); ex != 0 || wt != 0 || seats != 4 || l.seatsInUse() != 0 {
		t.Errorf("after all: seats %d executing %d waiting %d in use %d", seats, ex, wt, l.seatsInUse())
	}
}

func TestLevelCapsWidthAtItsSeats(t *testing.T) {
	var clock fakeClock
	l := newLevel(shape{queues: 4, handSize: 1, queueLengthLimit: 10}, 3)
	clock.install(l)
	h := distinctHashes(4, 2)
	small, _ := mustStart(t, l, h[0], oneSeat)
	_, w := mustStart(t, l, h[1], estimate{seats: 10})
	if w == nil || w.granted {
		t.Fatal("a request wider than the level ran beside another")
	}
	l.finish(small)
	if !w.granted || w.t.seats != 3 {
		t.Fatalf("the wide request after the level emptied: granted %v on %d seats, want 3", w.granted, w.t.seats)
	}
	l.finish(w.t)

	// A Reject level admits a request as wide as it once it is empty, and no more.
	rej := newLevel(shape{reject: true}, 2)
	clock.install(rej)
	tk, _, err := rej.start(1, estimate{seats: 5})
	if err != nil || tk.seats != 2 {
		t.Fatalf("Reject level, empty: %v, %d seats", err, tk.seats)
	}
	if _, _, err := rej.start(2, oneSeat); err != errRejected {
		t.Fatalf("Reject level, full: %v", err)
	}
	rej.finish(tk)
}

func TestLevelAdditionalLatencyHoldsSeats(t *testing.T) {
	var clock fakeClock
	l := newLevel(shape{queues: 4, handSize: 1, queueLengthLimit: 10}, 3)
	clock.install(l)
	h := distinctHashes(4, 2)
	// A write whose event fans out to 30 watchers: 1 seat, then 3 for 5 ms.
	write, w := mustStart(t, l, h[0], estimate{seats: 1, finalSeats: 3, additional: 5 * time.Millisecond})
	if w != nil || write.seats != 3 {
		t.Fatalf("write: queued %v, %d seats", w != nil, write.seats)
	}
	_, next := mustStart(t, l, h[1], oneSeat)
	if next == nil {
		t.Fatal("a request ran with the write's 3 seats held")
	}
	clock.advance(time.Millisecond)
	l.finish(write)
	if next.granted || l.seatsInUse() != 3 {
		t.Fatalf("the seats were given back when the write finished: in use %d", l.seatsInUse())
	}
	clock.advance(4 * time.Millisecond)
	if next.granted {
		t.Fatal("the seats were given back before the additional latency passed")
	}
	clock.advance(time.Millisecond)
	if !next.granted || l.seatsInUse() != 1 {
		t.Fatalf("after the additional latency: granted %v, in use %d", next.granted, l.seatsInUse())
	}
	l.finish(next.t)
}

// TestLevelFairShares runs two backlogged flows through a level of 8 seats, one of
// requests 4 seats wide and one of 1-seat requests, every request taking 10 ms: fair
// queuing gives each flow half of the seat-time used (round-robin by request would
// give the wide flow four fifths).
func TestLevelFairShares(t *testing.T) {
	const (
		seats   = 8
		backlog = 5
		service = 10 * time.Millisecond
	)
	var clock fakeClock
	l := newLevel(shape{queues: 16, handSize: 1, queueLengthLimit: 100}, seats)
	clock.install(l)
	hashes := distinctHashes(16, 2)
	widths := []int{4, 1}

	type run struct {
		t    ticket
		flow int
		end  time.Duration
	}
	var running []run
	queued := make([][]*waiter, 2)
	seatTime := make([]float64, 2)
	// collect moves the granted waiters to running.
	collect := func() {
		for f := range queued {
			kept := queued[f][:0]
			for _, w := range queued[f] {
				if w.granted {
					running = append(running, run{w.t, f, clock.t + service})
				} else {
					kept = append(kept, w)
				}
			}
			queued[f] = kept
		}
	}
	topUp := func() {
		for f := range queued {
			for len(queued[f]) < backlog {
				tk, w := mustStart(t, l, hashes[f], estimate{seats: widths[f]})
				if w == nil {
					running = append(running, run{tk, f, clock.t + service})
					continue
				}
				queued[f] = append(queued[f], w)
				collect()
			}
		}
	}
	for i := 0; i < 4000; i++ {
		topUp()
		if in := l.seatsInUse(); in > seats {
			t.Fatalf("%d seats in use of %d", in, seats)
		}
		first := 0
		for j, r := range running {
			if r.end < running[first].end {
				first = j
			}
		}
		r := running[first]
		running = append(running[:first], running[first+1:]...)
		clock.advance(r.end - clock.t)
		if i >= 400 { // past the start
			seatTime[r.flow] += float64(r.t.seats) * service.Seconds()
		}
		l.finish(r.t)
		collect()
	}
	share := seatTime[0] / (seatTime[0] + seatTime[1])
	if math.Abs(share-0.5) > 0.05 {
		t.Errorf("the wide flow got %.2f of the seat-time (wide %.2fs, narrow %.2fs), want 0.50", share, seatTime[0], seatTime[1])
	}
}
