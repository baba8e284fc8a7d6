package scheduler

import (
	"context"
	"sync/atomic"
	"testing"
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
