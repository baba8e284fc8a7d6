package noderesources

import (
	"context"
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

// BalancedAllocation is the NodeResourcesBalancedAllocation plugin: it favours
// nodes whose resource fractions (requested/allocatable of cpu and memory by
// default) are close to each other once the pod is placed, and more so when
// placing the pod makes them closer.
type BalancedAllocation struct {
	scorer resourceAllocationScorer
}

var (
	_ framework.PreScorePlugin = (*BalancedAllocation)(nil)
	_ framework.ScorePlugin    = (*BalancedAllocation)(nil)
)

// NewBalancedAllocation returns NodeResourcesBalancedAllocation. args is nil (cpu
// and memory), BalancedAllocationArgs or *BalancedAllocationArgs.
func NewBalancedAllocation(_ context.Context, args any, _ framework.Handle) (framework.Plugin, error) {
	a, err := balancedAllocationArgs(args)
	if err != nil {
		return nil, err
	}
	s := newResourceAllocationScorer("", a.Resources, nil, true)
	s.strategy = strategyBalanced
	return &BalancedAllocation{scorer: s}, nil
}

// Name returns NameBalancedAllocation.
func (ba *BalancedAllocation) Name() string { return NameBalancedAllocation }

// PreScore computes the pod's requests (as written, without defaults) once. A pod
// that requests none of the resources is best-effort: PreScore returns Skip so it
// is not scored at all, as upstream (otherwise such pods pile onto the most
// balanced node).
func (ba *BalancedAllocation) PreScore(_ context.Context, state *framework.CycleState, pod *corev1.Pod, _ []*framework.NodeInfo) *framework.Status {
	podRequests := ba.scorer.podRequests(pod)
	if isBestEffort(podRequests) {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(balancedAllocationPreScoreKey, &preScoreState{podRequests: podRequests})
	return nil
}

func isBestEffort(podRequests []int64) bool {
	for _, r := range podRequests {
		if r != 0 {
			return false
		}
	}
	return true
}

// Score is MaxNodeScore/2 + (MaxNodeScore/2 + with − without)/2, where with and
// without are the balance of the node with and without the pod:
// (1 − std) × MaxNodeScore, std being the standard deviation of the resource
// fractions (each capped at 1). A node the pod leaves as balanced as it was scores
// 75; one it balances perfectly from the worst state scores 100.
func (ba *BalancedAllocation) Score(_ context.Context, state *framework.CycleState, pod *corev1.Pod, nodeInfo *framework.NodeInfo) (int64, *framework.Status) {
	var podRequests []int64
	if c, err := state.Read(balancedAllocationPreScoreKey); err == nil {
		s, ok := c.(*preScoreState)
		if !ok {
			return 0, framework.AsStatus(fmt.Errorf("invalid PreScore state, got type %T", c))
		}
		podRequests = s.podRequests
	} else {
		podRequests = ba.scorer.podRequests(pod)
		if isBestEffort(podRequests) {
			return 0, nil
		}
	}
	return ba.scorer.score(nodeInfo, podRequests)
}

// ScoreExtensions returns nil: scores are already in [0, MaxNodeScore].
func (ba *BalancedAllocation) ScoreExtensions() framework.ScoreExtensions { return nil }

// balancedResourceScorer rates how much placing the pod improves the node's
// balance, mapped to [MaxNodeScore/2, MaxNodeScore].
func balancedResourceScorer(requested, withoutPod, allocatable []int64) int64 {
	with := balancedResourceScore(requested, allocatable)
	without := balancedResourceScore(withoutPod, allocatable)
	return framework.MaxNodeScore/2 + (framework.MaxNodeScore/2+with-without)/2
}

// balancedResourceScore is (1 − std) × MaxNodeScore over the fractions
// requested/allocatable (capped at 1) of the resources the node has. For two
// resources std is |f1 − f2|/2.
func balancedResourceScore(requested, allocatable []int64) int64 {
	var fractions [maxStackResources]float64
	var n int
	var total, std float64
	for i := range requested {
		if allocatable[i] == 0 {
			continue
		}
		f := min(float64(requested[i])/float64(allocatable[i]), 1)
		if n < len(fractions) {
			fractions[n] = f
		}
		total += f
		n++
	}
	switch {
	case n == 2:
		std = math.Abs((fractions[0] - fractions[1]) / 2)
	case n > 2:
		mean := total / float64(n)
		var sum float64
		for i := range requested {
			if allocatable[i] == 0 {
				continue
			}
			d := min(float64(requested[i])/float64(allocatable[i]), 1) - mean
			sum += d * d
		}
		std = math.Sqrt(sum / float64(n))
	}
	return int64((1 - std) * float64(framework.MaxNodeScore))
}
