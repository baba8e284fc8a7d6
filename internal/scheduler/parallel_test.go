package scheduler

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunChunksCoversEveryPieceOnce(t *testing.T) {
	for _, tc := range []struct{ workers, n, chunk int }{
		{1, 1, 1}, {16, 5000, 70}, {16, 7, 3}, {4, 100, 1000}, {3, 10, 0},
	} {
		seen := make([]atomic.Int32, tc.n)
		got := runChunks(context.Background(), tc.workers, tc.n, tc.chunk, func(lo, hi int) bool {
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
			return true
		})
		if got != tc.n {
			t.Errorf("%+v: handed out %d, want %d", tc, got, tc.n)
		}
		for i := range seen {
			if c := seen[i].Load(); c != 1 {
				t.Fatalf("%+v: piece %d examined %d times", tc, i, c)
			}
		}
	}
	if got := runChunks(context.Background(), 4, 0, 1, func(lo, hi int) bool { t.Error("work called for n 0"); return true }); got != 0 {
		t.Errorf("n 0: handed out %d", got)
	}
}

func TestRunChunksStops(t *testing.T) {
	var calls atomic.Int32
	got := runChunks(context.Background(), 1, 100, 10, func(lo, hi int) bool {
		calls.Add(1)
		return lo < 20 // the third chunk stops the section
	})
	if got != 30 || calls.Load() != 3 {
		t.Errorf("handed out %d in %d calls, want 30 in 3", got, calls.Load())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := runChunks(ctx, 4, 100, 10, func(lo, hi int) bool { return true }); got != 0 {
		t.Errorf("done context: handed out %d", got)
	}
}

// TestRunChunksLateHelpers: a helper goroutine that starts after runChunks
// returned (the caller did every chunk first) never calls work.
func TestRunChunksLateHelpers(t *testing.T) {
	var calls atomic.Int32
	var after atomic.Bool
	got := runChunks(context.Background(), 4, 40, 10, func(lo, hi int) bool {
		if after.Load() {
			t.Errorf("work(%d, %d) called after runChunks returned", lo, hi)
		}
		calls.Add(1)
		return true
	})
	after.Store(true)
	time.Sleep(20 * time.Millisecond) // let late helpers run: none may call work
	if got != 40 || calls.Load() != 4 {
		t.Errorf("handed out %d in %d calls, want 40 in 4", got, calls.Load())
	}
}

// TestRunChunksWaitsForTakenChunks: a chunk a helper took is finished before
// runChunks returns, however long it takes.
func TestRunChunksWaitsForTakenChunks(t *testing.T) {
	var finished atomic.Int32
	for range 200 {
		finished.Store(0)
		got := runChunks(context.Background(), 8, 64, 1, func(lo, hi int) bool {
			for i := 0; i < 1000*(lo%3); i++ {
				_ = i
			}
			finished.Add(1)
			return true
		})
		if got != 64 || finished.Load() != 64 {
			t.Fatalf("returned with %d of %d chunks finished (handed out %d)", finished.Load(), 64, got)
		}
	}
}
