package sim

import (
	"container/heap"
	"time"

	"golang.org/x/time/rate"
)

// beatKind says what a heartbeat refreshes.
type beatKind uint8

const (
	// beatLease renews the node's Lease in kube-node-lease.
	beatLease beatKind = iota
	// beatStatus refreshes the lastHeartbeatTime of the node's conditions.
	beatStatus
)

func (k beatKind) String() string {
	if k == beatLease {
		return "lease"
	}
	return "status"
}

// beat is one scheduled heartbeat of one node.
type beat struct {
	due  int64 // unix nanoseconds
	node int32 // index into the simulator's nodes
	kind beatKind
}

// beatHeap is a min-heap of beats by due time.
type beatHeap []beat

func (h beatHeap) Len() int { return len(h) }
func (h beatHeap) Less(i, j int) bool {
	if h[i].due != h[j].due {
		return h[i].due < h[j].due
	}
	return h[i].node < h[j].node
}
func (h beatHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *beatHeap) Push(x any)   { *h = append(*h, x.(beat)) }
func (h *beatHeap) Pop() any {
	old := *h
	b := old[len(old)-1]
	*h = old[:len(old)-1]
	return b
}

// beatPlan decides which heartbeat runs next: one heap of due times for every
// node (no goroutine or timer per node) and one token bucket over all of them,
// so that the API load stays under a ceiling however many nodes there are. A
// heartbeat is in the plan until it is handed out and comes back with done, so
// one node never has two of a kind in flight. Time is an argument: the plan is
// pure and not safe for concurrent use (the driver holds a lock).
type beatPlan struct {
	h       beatHeap
	limiter *rate.Limiter
}

// newBeatPlan returns an empty plan limited to qps heartbeats per second with
// the given burst; qps <= 0 means no limit.
func newBeatPlan(qps float64, burst int) *beatPlan {
	limit := rate.Inf
	if qps > 0 {
		limit = rate.Limit(qps)
	}
	if burst < 1 {
		burst = 1
	}
	return &beatPlan{limiter: rate.NewLimiter(limit, burst)}
}

// spread returns when the i-th of n heartbeats that repeat every interval first
// runs, so that they are evenly spaced instead of all at once.
func spread(start time.Time, interval time.Duration, i, n int) time.Time {
	if n <= 0 {
		return start
	}
	return start.Add(time.Duration(int64(interval) / int64(n) * int64(i)))
}

// add schedules a heartbeat of node at due.
func (p *beatPlan) add(node int, kind beatKind, due time.Time) {
	heap.Push(&p.h, beat{due: due.UnixNano(), node: int32(node), kind: kind})
}

// next hands out the heartbeat to run at now, if one is due and the token
// bucket has a token; otherwise it returns how long to wait (negative when the
// plan is empty).
func (p *beatPlan) next(now time.Time) (b beat, wait time.Duration, ok bool) {
	if len(p.h) == 0 {
		return beat{}, -1, false
	}
	if d := time.Duration(p.h[0].due - now.UnixNano()); d > 0 {
		return beat{}, d, false
	}
	if !p.limiter.AllowN(now, 1) {
		d := time.Duration((1 - p.limiter.TokensAt(now)) / float64(p.limiter.Limit()) * float64(time.Second))
		return beat{}, max(d, time.Millisecond), false
	}
	return heap.Pop(&p.h).(beat), 0, true
}

// len is the number of heartbeats waiting in the plan.
func (p *beatPlan) len() int { return len(p.h) }
