package noderesources

import (
	"math"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/podfit"
	"github.com/kubette/kubette/internal/scheduler/framework"
)

// resourceKind classifies a scored resource once, so Score does not look at names.
type resourceKind uint8

const (
	kindCPU resourceKind = iota
	kindMemory
	kindEphemeralStorage
	kindScalar
	// kindOther is any other name (e.g. "pods"): it is never scored, as upstream.
	kindOther
)

func kindOf(name corev1.ResourceName) resourceKind {
	switch name {
	case corev1.ResourceCPU:
		return kindCPU
	case corev1.ResourceMemory:
		return kindMemory
	case corev1.ResourceEphemeralStorage:
		return kindEphemeralStorage
	}
	if podfit.IsScalarResourceName(name) {
		return kindScalar
	}
	return kindOther
}

// scoredResource is one configured resource with its precomputed class.
type scoredResource struct {
	name   corev1.ResourceName
	kind   resourceKind
	weight int64
}

// strategy selects the scoring function.
type strategy uint8

const (
	strategyLeastAllocated strategy = iota
	strategyMostAllocated
	strategyRequestedToCapacityRatio
	strategyBalanced
)

// shapePoint is a point of the RequestedToCapacityRatio function with its score
// already scaled to MaxNodeScore.
type shapePoint struct {
	utilization, score int64
}

// resourceAllocationScorer computes, per node, what each scored resource has
// allocatable and what would be requested with the pod there, and feeds the
// numbers to the strategy.
type resourceAllocationScorer struct {
	strategy  strategy
	resources []scoredResource
	shape     []shapePoint
	// useRequested counts requests as written (BalancedAllocation); otherwise
	// missing cpu/memory requests count as the scheduler's non-zero defaults.
	useRequested bool
	// cpuMemory is set when the scored resources are cpu then memory (both
	// plugins' default): score then reads the four numbers straight from the
	// NodeInfo instead of building per-resource lists.
	cpuMemory bool
}

// maxStackResources is how many scored resources Score handles without allocating.
const maxStackResources = 8

func newResourceAllocationScorer(t ScoringStrategyType, resources []ResourceSpec, shape []UtilizationShapePoint, useRequested bool) resourceAllocationScorer {
	r := resourceAllocationScorer{useRequested: useRequested}
	switch t {
	case MostAllocated:
		r.strategy = strategyMostAllocated
	case RequestedToCapacityRatio:
		r.strategy = strategyRequestedToCapacityRatio
	default:
		r.strategy = strategyLeastAllocated
	}
	for _, res := range resources {
		name := corev1.ResourceName(res.Name)
		r.resources = append(r.resources, scoredResource{name: name, kind: kindOf(name), weight: res.Weight})
	}
	r.cpuMemory = len(r.resources) == 2 && r.resources[0].kind == kindCPU && r.resources[1].kind == kindMemory
	for _, p := range shape {
		// The shape's scores are out of MaxCustomPriorityScore; scale them to MaxNodeScore.
		r.shape = append(r.shape, shapePoint{utilization: int64(p.Utilization), score: int64(p.Score) * (framework.MaxNodeScore / MaxCustomPriorityScore)})
	}
	return r
}

// podRequests returns the pod's request of every scored resource, in order.
func (r *resourceAllocationScorer) podRequests(pod *corev1.Pod) []int64 {
	var req framework.Resource
	if r.useRequested {
		req = framework.PodRequests(pod)
	} else {
		req = framework.PodNonZeroRequests(pod)
	}
	out := make([]int64, len(r.resources))
	for i, res := range r.resources {
		switch res.kind {
		case kindCPU:
			out[i] = req.MilliCPU
		case kindMemory:
			out[i] = req.Memory
		case kindEphemeralStorage:
			out[i] = req.EphemeralStorage
		default:
			if res.name == corev1.ResourcePods {
				out[i] = int64(req.AllowedPodNumber)
			} else {
				out[i] = req.ScalarResources[res.name]
			}
		}
	}
	return out
}

// allocatableRequest returns what the node has allocatable of the resource and
// what its pods plus this pod request; (0, 0) leaves the resource out of the
// score (a scalar resource the pod does not request, one the node lacks, or a
// name that is not scored).
func (r *resourceAllocationScorer) allocatableRequest(nodeInfo *framework.NodeInfo, res *scoredResource, podRequest int64) (int64, int64) {
	requested := &nodeInfo.NonZeroRequested
	if r.useRequested {
		requested = &nodeInfo.Requested
	}
	switch res.kind {
	case kindCPU:
		return nodeInfo.Allocatable.MilliCPU, requested.MilliCPU + podRequest
	case kindMemory:
		return nodeInfo.Allocatable.Memory, requested.Memory + podRequest
	case kindEphemeralStorage:
		return nodeInfo.Allocatable.EphemeralStorage, nodeInfo.Requested.EphemeralStorage + podRequest
	case kindScalar:
		if podRequest == 0 {
			return 0, 0
		}
		if alloc, ok := nodeInfo.Allocatable.ScalarResources[res.name]; ok {
			return alloc, nodeInfo.Requested.ScalarResources[res.name] + podRequest
		}
	}
	return 0, 0
}

// score scores the node for a pod with the given requests of the scored resources.
func (r *resourceAllocationScorer) score(nodeInfo *framework.NodeInfo, podRequests []int64) (int64, *framework.Status) {
	n := len(r.resources)
	if n == 0 {
		return 0, framework.NewStatus(framework.Error, errReasonResourcesNotConfigured)
	}
	if len(podRequests) != n {
		return 0, framework.NewStatus(framework.Error, "pod requests do not match the scored resources")
	}
	if r.cpuMemory && r.strategy != strategyRequestedToCapacityRatio {
		return r.scoreCPUMemory(nodeInfo, podRequests[0], podRequests[1]), nil
	}
	var reqBuf, allocBuf, podBuf [maxStackResources]int64
	requested, allocatable, withoutPod := reqBuf[:0], allocBuf[:0], podBuf[:0]
	if n > maxStackResources {
		requested, allocatable, withoutPod = make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n)
	}
	requested, allocatable, withoutPod = requested[:n], allocatable[:n], withoutPod[:n]
	for i := range r.resources {
		alloc, req := r.allocatableRequest(nodeInfo, &r.resources[i], podRequests[i])
		if alloc == 0 {
			requested[i], allocatable[i], withoutPod[i] = 0, 0, 0
			continue
		}
		requested[i], allocatable[i], withoutPod[i] = req, alloc, req-podRequests[i]
	}
	switch r.strategy {
	case strategyMostAllocated:
		return mostResourceScore(r.resources, requested, allocatable), nil
	case strategyRequestedToCapacityRatio:
		return requestedToCapacityRatioScore(r.resources, r.shape, requested, allocatable), nil
	case strategyBalanced:
		return balancedResourceScorer(requested, withoutPod, allocatable), nil
	default:
		return leastResourceScore(r.resources, requested, allocatable), nil
	}
}

// scoreCPUMemory is score for the resources cpu then memory and the strategies
// LeastAllocated, MostAllocated and Balanced, with the same arithmetic as the
// general functions below (the same integer and float operations in the same
// order, so the same scores) on four numbers read from the NodeInfo.
func (r *resourceAllocationScorer) scoreCPUMemory(nodeInfo *framework.NodeInfo, podCPU, podMemory int64) int64 {
	requested := &nodeInfo.NonZeroRequested
	if r.useRequested {
		requested = &nodeInfo.Requested
	}
	allocCPU, allocMem := nodeInfo.Allocatable.MilliCPU, nodeInfo.Allocatable.Memory
	reqCPU, reqMem := requested.MilliCPU+podCPU, requested.Memory+podMemory
	switch r.strategy {
	case strategyBalanced:
		with := balancedCPUMemory(reqCPU, reqMem, allocCPU, allocMem)
		without := balancedCPUMemory(reqCPU-podCPU, reqMem-podMemory, allocCPU, allocMem)
		return framework.MaxNodeScore/2 + (framework.MaxNodeScore/2+with-without)/2
	case strategyMostAllocated, strategyLeastAllocated:
		var nodeScore, weightSum int64
		for k, alloc := range [2]int64{allocCPU, allocMem} {
			if alloc == 0 {
				continue
			}
			req := reqCPU
			if k == 1 {
				req = reqMem
			}
			var s int64
			if r.strategy == strategyMostAllocated {
				s = min(req, alloc) * framework.MaxNodeScore / alloc
			} else if req <= alloc {
				s = (alloc - req) * framework.MaxNodeScore / alloc
			}
			w := r.resources[k].weight
			nodeScore += s * w
			weightSum += w
		}
		if weightSum == 0 {
			return 0
		}
		return nodeScore / weightSum
	}
	return 0
}

// balancedCPUMemory is balancedResourceScore for cpu and memory.
func balancedCPUMemory(reqCPU, reqMem, allocCPU, allocMem int64) int64 {
	if allocCPU == 0 || allocMem == 0 {
		// One fraction or none: the standard deviation is 0.
		return framework.MaxNodeScore
	}
	fCPU := min(float64(reqCPU)/float64(allocCPU), 1)
	fMem := min(float64(reqMem)/float64(allocMem), 1)
	std := math.Abs((fCPU - fMem) / 2)
	return int64((1 - std) * float64(framework.MaxNodeScore))
}

// leastResourceScore is the weighted mean of (allocatable-requested)/allocatable ×
// MaxNodeScore (0 for an over-committed resource), over resources the node has.
func leastResourceScore(resources []scoredResource, requested, allocatable []int64) int64 {
	var nodeScore, weightSum int64
	for i := range requested {
		if allocatable[i] == 0 {
			continue
		}
		var s int64
		if requested[i] <= allocatable[i] {
			s = (allocatable[i] - requested[i]) * framework.MaxNodeScore / allocatable[i]
		}
		nodeScore += s * resources[i].weight
		weightSum += resources[i].weight
	}
	if weightSum == 0 {
		return 0
	}
	return nodeScore / weightSum
}

// mostResourceScore is the weighted mean of requested/allocatable × MaxNodeScore
// (requested capped at allocatable), over resources the node has.
func mostResourceScore(resources []scoredResource, requested, allocatable []int64) int64 {
	var nodeScore, weightSum int64
	for i := range requested {
		if allocatable[i] == 0 {
			continue
		}
		s := min(requested[i], allocatable[i]) * framework.MaxNodeScore / allocatable[i]
		nodeScore += s * resources[i].weight
		weightSum += resources[i].weight
	}
	if weightSum == 0 {
		return 0
	}
	return nodeScore / weightSum
}

// requestedToCapacityRatioScore maps each resource's utilisation (percent, 100
// when over-committed) through the shape and returns the rounded weighted mean of
// the positive results, as upstream.
func requestedToCapacityRatioScore(resources []scoredResource, shape []shapePoint, requested, allocatable []int64) int64 {
	var nodeScore, weightSum int64
	for i := range requested {
		if allocatable[i] == 0 {
			continue
		}
		utilization := int64(MaxUtilization)
		if requested[i] <= allocatable[i] {
			utilization = requested[i] * MaxUtilization / allocatable[i]
		}
		if s := brokenLinear(shape, utilization); s > 0 {
			nodeScore += s * resources[i].weight
			weightSum += resources[i].weight
		}
	}
	if weightSum == 0 {
		return 0
	}
	return int64(math.Round(float64(nodeScore) / float64(weightSum)))
}

// brokenLinear evaluates the piecewise linear function through the shape's points
// at p: the first score left of the first point, the last score right of the last.
func brokenLinear(shape []shapePoint, p int64) int64 {
	for i := range shape {
		if p <= shape[i].utilization {
			if i == 0 {
				return shape[0].score
			}
			prev := shape[i-1]
			return prev.score + (shape[i].score-prev.score)*(p-prev.utilization)/(shape[i].utilization-prev.utilization)
		}
	}
	return shape[len(shape)-1].score
}
