package sim

import (
	"testing"
	"time"
)

// runPlan drives a plan the way the dispatcher does, with simulated time in
// steps of tick, every heartbeat succeeding at once and coming back interval
// later; it returns when each node's lease was renewed.
func runPlan(p *beatPlan, start time.Time, d, tick time.Duration, interval func(beatKind) time.Duration) map[int32][]time.Time {
	renewals := map[int32][]time.Time{}
	for now := start; now.Before(start.Add(d)); now = now.Add(tick) {
		for {
			b, _, ok := p.next(now)
			if !ok {
				break
			}
			if b.kind == beatLease {
				renewals[b.node] = append(renewals[b.node], now)
			}
			p.add(int(b.node), b.kind, now.Add(interval(b.kind)))
		}
	}
	return renewals
}

func TestBeatPlanSpreadsHeartbeats(t *testing.T) {
	const n = 1000
	start := time.Unix(1_700_000_000, 0)
	p := newBeatPlan(0, 1) // no limit
	for i := 0; i < n; i++ {
		p.add(i, beatLease, spread(start, 10*time.Second, i, n))
	}
	perSecond := map[int64]int{}
	renewals := runPlan(p, start, 60*time.Second, 10*time.Millisecond, func(beatKind) time.Duration { return 10 * time.Second })
	for node, times := range renewals {
		if len(times) != 6 {
			t.Fatalf("node %d renewed %d times in 60s, want 6", node, len(times))
		}
		for i := 1; i < len(times); i++ {
			if gap := times[i].Sub(times[i-1]); gap < 10*time.Second || gap > 10*time.Second+10*time.Millisecond {
				t.Fatalf("node %d: renewals %v apart, want 10s", node, gap)
			}
		}
		for _, at := range times {
			perSecond[at.Unix()]++
		}
	}
	// Evenly spread: n/10 per second, never a thundering herd.
	for sec, c := range perSecond {
		if c < n/10-2 || c > n/10+2 {
			t.Fatalf("%d renewals in second %d, want about %d", c, sec-start.Unix(), n/10)
		}
	}
}

func TestBeatPlanTokenBucketStretchesRenewals(t *testing.T) {
	// 5000 nodes want 500 renewals/s at 10s; the bucket allows 250/s, so each
	// lease is renewed every 20s, still twice per 40s lease.
	const n = 5000
	start := time.Unix(1_700_000_000, 0)
	p := newBeatPlan(250, 25)
	for i := 0; i < n; i++ {
		p.add(i, beatLease, spread(start, 20*time.Second, i, n))
	}
	perSecond := map[int64]int{}
	renewals := runPlan(p, start, 120*time.Second, 5*time.Millisecond, func(beatKind) time.Duration { return 10 * time.Second })
	var worstGap time.Duration
	for node, times := range renewals {
		if len(times) < 5 {
			t.Fatalf("node %d renewed %d times in 120s, want at least 5", node, len(times))
		}
		for i := 1; i < len(times); i++ {
			worstGap = max(worstGap, times[i].Sub(times[i-1]))
		}
		for _, at := range times {
			perSecond[at.Unix()]++
		}
	}
	for sec, c := range perSecond {
		if c > 250+25 {
			t.Fatalf("%d renewals in second %d: over the bucket's 250/s + burst 25", c, sec-start.Unix())
		}
	}
	if worstGap > 21*time.Second {
		t.Fatalf("a lease waited %v between renewals, want about 20s", worstGap)
	}
}

func TestBeatPlanNextWaits(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	p := newBeatPlan(10, 1)
	if _, wait, ok := p.next(start); ok || wait >= 0 {
		t.Fatalf("empty plan: ok %v wait %v, want false and negative", ok, wait)
	}
	p.add(1, beatLease, start.Add(time.Second))
	p.add(2, beatStatus, start.Add(time.Second))
	p.add(0, beatLease, start.Add(2*time.Second))
	if _, wait, ok := p.next(start); ok || wait != time.Second {
		t.Fatalf("before due: ok %v wait %v, want false and 1s", ok, wait)
	}
	b, _, ok := p.next(start.Add(time.Second))
	if !ok || b.node != 1 || b.kind != beatLease {
		t.Fatalf("at due: %+v %v, want node 1's lease", b, ok)
	}
	// The bucket (10/s, burst 1) is empty now: the next token in 100ms.
	if _, wait, ok := p.next(start.Add(time.Second)); ok || wait != 100*time.Millisecond {
		t.Fatalf("bucket empty: ok %v wait %v, want false and 100ms", ok, wait)
	}
	b, _, ok = p.next(start.Add(time.Second + 100*time.Millisecond))
	if !ok || b.node != 2 || b.kind != beatStatus {
		t.Fatalf("after a token: %+v %v, want node 2's status", b, ok)
	}
	if p.len() != 1 {
		t.Fatalf("len %d, want 1", p.len())
	}
}

func TestLeaseRenewPeriod(t *testing.T) {
	for _, tc := range []struct {
		nodes int
		qps   float64
		want  time.Duration
	}{
		{50, 0, 10 * time.Second},
		{5000, 0, 20 * time.Second},    // the default 250/s, minus ~17/s of status updates, raised to keep 2 renewals per lease
		{20000, 0, 20 * time.Second},   // the default is raised with the node count
		{5000, 1000, 10 * time.Second}, // enough for the nominal 10s
		{5000, 125, 46 * time.Second},  // too little: longer than the lease
		{1000, 3, 1<<63 - 1},           // not even the status updates fit
	} {
		c, err := Options{Nodes: tc.nodes, HeartbeatQPS: tc.qps, PodCIDRBase: "10.0.0.0/8"}.complete()
		if err != nil {
			t.Fatal(err)
		}
		got := c.leaseRenewPeriod()
		if d := got - tc.want; d < -time.Second || d > time.Second {
			t.Errorf("%d nodes at %v qps: lease renewed every %v, want about %v", tc.nodes, tc.qps, got, tc.want)
		}
	}
}
