package scheduler

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// TestBindersReuseGoroutines runs many binds through startBind with two slots: every
// bind runs once, never more than two at a time, with at most two binder goroutines,
// which leave when the context ends.
func TestBindersReuseGoroutines(t *testing.T) {
	const slots, jobs = 2, 200
	s := &Scheduler{bindSlots: make(chan struct{}, slots), bindJobs: make(chan func()), binderLeft: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		ran, running, most atomic.Int64
		mu                 sync.Mutex
		seen               = map[int]int{}
	)
	for i := range jobs {
		s.bindSlots <- struct{}{}
		s.startBind(ctx, func() {
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			mu.Lock()
			seen[i]++
			mu.Unlock()
			ran.Add(1)
			running.Add(-1)
		})
		if b := s.binders.Load(); b > slots {
			t.Fatalf("%d binder goroutines for %d slots", b, slots)
		}
	}
	s.binds.Wait()
	if ran.Load() != jobs || len(seen) != jobs || most.Load() > slots {
		t.Fatalf("ran %d binds (%d distinct), at most %d at once; want %d, at most %d", ran.Load(), len(seen), most.Load(), jobs, slots)
	}
	for i, n := range seen {
		if n != 1 {
			t.Fatalf("bind %d ran %d times", i, n)
		}
	}
	cancel()
	s.binderGroup.Wait()
	if b := s.binders.Load(); b != 0 {
		t.Fatalf("%d binders left after the context ended", b)
	}
	// After the end, a bind still runs (on a binder that leaves at once).
	done := make(chan struct{})
	s.bindSlots <- struct{}{}
	s.startBind(ctx, func() { close(done) })
	<-done
	s.binds.Wait()
	if len(s.bindSlots) != 0 {
		t.Fatalf("%d slots still held", len(s.bindSlots))
	}
}

// TestBindAfterBindersLeft binds with one slot under a context that then ends, and at
// once under another: the second bind runs whether the first binder has left yet or
// not (startBind counts the binders again when one leaves).
func TestBindAfterBindersLeft(t *testing.T) {
	s := &Scheduler{bindSlots: make(chan struct{}, 1), bindJobs: make(chan func()), binderLeft: make(chan struct{}, 1)}
	for range 200 {
		ctx1, cancel1 := context.WithCancel(context.Background())
		ctx2, cancel2 := context.WithCancel(context.Background())
		s.bindSlots <- struct{}{}
		s.startBind(ctx1, func() {})
		s.binds.Wait()
		cancel1()
		ran := make(chan struct{})
		s.bindSlots <- struct{}{}
		s.startBind(ctx2, func() { close(ran) })
		<-ran
		s.binds.Wait()
		cancel2()
		s.binderGroup.Wait()
	}
}
