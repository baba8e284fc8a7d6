// Package noderesources holds the resource plugins, as upstream:
//
//   - NodeResourcesFit filters out nodes without room for the pod's requests
//     (pods, cpu, memory, ephemeral-storage and scalar resources such as
//     example.com/gpu or hugepages) and scores nodes by a strategy
//     (LeastAllocated by default, MostAllocated or RequestedToCapacityRatio);
//   - NodeResourcesBalancedAllocation scores nodes by how evenly their resources
//     would be used with the pod placed there.
//
// Requests are computed once per pod in PreFilter/PreScore; Filter and Score only
// compare numbers and allocate nothing unless they reject a node.
package noderesources

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/kubette/kubette/internal/podfit"
	"github.com/kubette/kubette/internal/scheduler/framework"
)

// Registered names of the plugins in this package.
const (
	// NameFit is the name of NodeResourcesFit.
	NameFit = "NodeResourcesFit"
	// NameBalancedAllocation is the name of NodeResourcesBalancedAllocation.
	NameBalancedAllocation = "NodeResourcesBalancedAllocation"
	// Name is NameFit, the package's main plugin.
	Name = NameFit
)

// Filter reasons for the fixed resources, exactly as upstream; a scalar resource
// r is reported as "Insufficient r".
const (
	ErrReasonTooManyPods           = podfit.ErrReasonTooManyPods
	ErrReasonInsufficientCPU       = podfit.ErrReasonInsufficientCPU
	ErrReasonInsufficientMemory    = podfit.ErrReasonInsufficientMemory
	ErrReasonInsufficientEphemeral = podfit.ErrReasonInsufficientEphemeral
)

const (
	preFilterStateKey             framework.StateKey = "PreFilter" + NameFit
	preScoreStateKey              framework.StateKey = "PreScore" + NameFit
	balancedAllocationPreScoreKey framework.StateKey = "PreScore" + NameBalancedAllocation

	errReasonResourcesNotConfigured = "resources not found"
)

// Fit is the NodeResourcesFit plugin.
type Fit struct {
	ignoredResources      sets.Set[string]
	ignoredResourceGroups sets.Set[string]
	scorer                resourceAllocationScorer
}

var (
	_ framework.PreFilterPlugin = (*Fit)(nil)
	_ framework.FilterPlugin    = (*Fit)(nil)
	_ framework.PreScorePlugin  = (*Fit)(nil)
	_ framework.ScorePlugin     = (*Fit)(nil)
)

// New is NewFit (every plugin package exports New).
func New(ctx context.Context, args any, h framework.Handle) (framework.Plugin, error) {
	return NewFit(ctx, args, h)
}

// NewFit returns NodeResourcesFit. args is nil (the defaults), FitArgs or *FitArgs.
func NewFit(_ context.Context, args any, _ framework.Handle) (framework.Plugin, error) {
	a, err := fitArgs(args)
	if err != nil {
		return nil, err
	}
	s := a.ScoringStrategy
	var shape []UtilizationShapePoint
	if s.RequestedToCapacityRatio != nil {
		shape = s.RequestedToCapacityRatio.Shape
	}
	return &Fit{
		ignoredResources:      sets.New(a.IgnoredResources...),
		ignoredResourceGroups: sets.New(a.IgnoredResourceGroups...),
		scorer:                newResourceAllocationScorer(s.Type, s.Resources, shape, false),
	}, nil
}

// Name returns NameFit.
func (f *Fit) Name() string { return NameFit }

// preFilterState is the pod's requests as PreFilter computed them.
type preFilterState struct {
	podfit.Request
}

// Clone returns the state itself: it is read-only.
func (s *preFilterState) Clone() framework.StateData { return s }

// PreFilter computes the pod's requests (app and sidecar containers summed, the
// largest init-container need, plus overhead) once for all nodes.
func (f *Fit) PreFilter(_ context.Context, state *framework.CycleState, pod *corev1.Pod) *framework.Status {
	state.Write(preFilterStateKey, f.computePodResourceRequest(pod))
	return nil
}

func (f *Fit) computePodResourceRequest(pod *corev1.Pod) *preFilterState {
	return &preFilterState{Request: *podfit.NewRequest(pod, f.ignored)}
}

// ignored reports whether Filter skips the extended resource name.
func (f *Fit) ignored(name corev1.ResourceName) bool {
	if !podfit.IsExtendedResourceName(name) {
		return false
	}
	if f.ignoredResources.Has(string(name)) {
		return true
	}
	if f.ignoredResourceGroups.Len() > 0 {
		group, _, _ := strings.Cut(string(name), "/")
		return f.ignoredResourceGroups.Has(group)
	}
	return false
}

// Filter rejects a node whose free allocatable resources (allocatable minus what
// its pods request) are less than the pod requests. Every short resource is a
// separate reason ("Too many pods", "Insufficient cpu", "Insufficient memory",
// "Insufficient ephemeral-storage", "Insufficient <scalar>"). The code is
// Unschedulable, or UnschedulableAndUnresolvable when the pod asks for more of a
// resource than the node has in total, so evicting pods could never help (as
// current upstream does).
func (f *Fit) Filter(_ context.Context, state *framework.CycleState, _ *corev1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	c, err := state.Read(preFilterStateKey)
	if err != nil {
		return framework.AsStatus(fmt.Errorf("reading %q from cycleState: %w", preFilterStateKey, err))
	}
	s, ok := c.(*preFilterState)
	if !ok {
		return framework.AsStatus(fmt.Errorf("invalid PreFilter state, got type %T", c))
	}
	insufficient := fitsRequest(s, nodeInfo, nil)
	if len(insufficient) == 0 {
		return nil
	}
	code := framework.Unschedulable
	reasons := make([]string, len(insufficient))
	for i := range insufficient {
		reasons[i] = insufficient[i].Reason
		if insufficient[i].Unresolvable {
			code = framework.UnschedulableAndUnresolvable
		}
	}
	return framework.NewStatus(code, reasons...)
}

// InsufficientResource is one resource a node is short of for a pod.
type InsufficientResource = podfit.InsufficientResource

// Fits returns what the node lacks to take the pod (nil if it fits), honouring
// no ignored resources. It is for callers outside a scheduling cycle, such as a
// simulator or preemption.
func Fits(pod *corev1.Pod, nodeInfo *framework.NodeInfo) []InsufficientResource {
	f := &Fit{}
	return fitsRequest(f.computePodResourceRequest(pod), nodeInfo, nil)
}

// fitsRequest appends to out what the node lacks for the request. It allocates
// only when something is missing.
func fitsRequest(s *preFilterState, nodeInfo *framework.NodeInfo, out []InsufficientResource) []InsufficientResource {
	return s.Insufficient(&nodeInfo.Allocatable, &nodeInfo.Requested, len(nodeInfo.Pods), out)
}

// preScoreState holds the pod's requests of the scored resources, in their order.
type preScoreState struct {
	podRequests []int64
}

// Clone returns the state itself: it is read-only.
func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore computes the pod's requests of the scored resources once. Containers
// without a cpu or memory request count as 100m and 200Mi, as upstream, so
// best-effort pods still spread.
func (f *Fit) PreScore(_ context.Context, state *framework.CycleState, pod *corev1.Pod, _ []*framework.NodeInfo) *framework.Status {
	state.Write(preScoreStateKey, &preScoreState{podRequests: f.scorer.podRequests(pod)})
	return nil
}

// Score scores the node by the configured strategy (LeastAllocated by default:
// the weighted mean over the scored resources of free/allocatable × 100, counting
// the pod and using the non-zero defaults for requests).
func (f *Fit) Score(_ context.Context, state *framework.CycleState, pod *corev1.Pod, nodeInfo *framework.NodeInfo) (int64, *framework.Status) {
	var podRequests []int64
	if c, err := state.Read(preScoreStateKey); err == nil {
		s, ok := c.(*preScoreState)
		if !ok {
			return 0, framework.AsStatus(fmt.Errorf("invalid PreScore state, got type %T", c))
		}
		podRequests = s.podRequests
	} else {
		podRequests = f.scorer.podRequests(pod)
	}
	return f.scorer.score(nodeInfo, podRequests)
}

// ScoreExtensions returns nil: scores are already in [0, MaxNodeScore].
func (f *Fit) ScoreExtensions() framework.ScoreExtensions { return nil }
