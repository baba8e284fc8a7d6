package noderesources

import (
	"math/rand/v2"
	"testing"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

// TestScoreCPUMemoryMatchesGeneral checks the cpu-and-memory path of score
// against the general per-resource path on random nodes and pods: the same
// score for LeastAllocated, MostAllocated and Balanced, weights included,
// over-committed and zero allocatable resources included.
func TestScoreCPUMemoryMatchesGeneral(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(max int64) int64 {
		switch rng.IntN(8) {
		case 0:
			return 0
		case 1:
			return max
		default:
			return rng.Int64N(max + 1)
		}
	}
	type variant struct {
		name         string
		typ          ScoringStrategyType
		weights      [2]int64
		useRequested bool
		balanced     bool
	}
	variants := []variant{
		{"least", LeastAllocated, [2]int64{1, 1}, false, false},
		{"least-weighted", LeastAllocated, [2]int64{3, 1}, false, false},
		{"most", MostAllocated, [2]int64{1, 5}, false, false},
		{"balanced", "", [2]int64{1, 1}, true, true},
	}
	for _, v := range variants {
		r := newResourceAllocationScorer(v.typ, []ResourceSpec{{Name: "cpu", Weight: v.weights[0]}, {Name: "memory", Weight: v.weights[1]}}, nil, v.useRequested)
		if v.balanced {
			r.strategy = strategyBalanced
		}
		if !r.cpuMemory {
			t.Fatalf("%s: cpu and memory not recognised", v.name)
		}
		general := r
		general.cpuMemory = false
		for i := range 20000 {
			ni := &framework.NodeInfo{}
			ni.Allocatable.MilliCPU, ni.Allocatable.Memory = pick(64000), pick(256<<30)
			ni.Requested.MilliCPU, ni.Requested.Memory = pick(70000), pick(300<<30)
			ni.NonZeroRequested.MilliCPU, ni.NonZeroRequested.Memory = ni.Requested.MilliCPU+pick(1000), ni.Requested.Memory+pick(1<<30)
			req := []int64{pick(8000), pick(32 << 30)}
			got, st := r.score(ni, req)
			want, wst := general.score(ni, req)
			if !st.IsSuccess() || !wst.IsSuccess() {
				t.Fatalf("%s: status %v / %v", v.name, st, wst)
			}
			if got != want {
				t.Fatalf("%s case %d: node alloc %d/%d requested %d/%d nonzero %d/%d, pod %v: score %d, general path %d",
					v.name, i, ni.Allocatable.MilliCPU, ni.Allocatable.Memory, ni.Requested.MilliCPU, ni.Requested.Memory,
					ni.NonZeroRequested.MilliCPU, ni.NonZeroRequested.Memory, req, got, want)
			}
		}
	}
}
