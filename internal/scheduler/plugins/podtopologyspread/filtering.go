package podtopologyspread

import (
	"context"
	"fmt"
	"maps"
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubette/kubette/internal/scheduler/framework"
	"github.com/kubette/kubette/internal/scheduler/plugins/affinitymatch"
)

const preFilterStateKey framework.StateKey = "PreFilter" + Name

// preFilterState is computed in PreFilter and read by Filter: for every
// DoNotSchedule constraint, the number of matching pods per topology value
// over the eligible nodes, and the two smallest counts.
type preFilterState struct {
	Constraints []constraint
	// SelfMatch[i] reports whether the incoming pod matches constraint i's selector.
	SelfMatch []bool
	// CriticalPaths[i] holds the topology values with the fewest matching pods
	// for constraint i: [0] the minimum, [1] at least as many.
	CriticalPaths []criticalPaths
	// TpValueToMatchNum[i] maps each eligible topology value of constraint i
	// to its number of matching pods; its size is the number of domains.
	TpValueToMatchNum []map[string]int
}

// Clone copies the counts; the constraints are shared (they never change).
func (s *preFilterState) Clone() framework.StateData {
	if s == nil {
		return nil
	}
	out := &preFilterState{
		Constraints:       s.Constraints,
		SelfMatch:         s.SelfMatch,
		CriticalPaths:     append([]criticalPaths(nil), s.CriticalPaths...),
		TpValueToMatchNum: make([]map[string]int, len(s.TpValueToMatchNum)),
	}
	for i, m := range s.TpValueToMatchNum {
		out.TpValueToMatchNum[i] = maps.Clone(m)
	}
	return out
}

// minMatchNum is the global minimum used in the skew: 0 while there are
// fewer eligible domains than minDomains.
func (s *preFilterState) minMatchNum(i int, minDomains int32) int {
	if len(s.TpValueToMatchNum[i]) < int(minDomains) {
		return 0
	}
	return s.CriticalPaths[i][0].MatchNum
}

// criticalPaths records two topology values with few matching pods;
// [0].MatchNum is always the minimum.
type criticalPaths [2]struct {
	TopologyValue string
	MatchNum      int
}

func newCriticalPaths() criticalPaths {
	return criticalPaths{{MatchNum: math.MaxInt32}, {MatchNum: math.MaxInt32}}
}

// update records that tpVal now has num matching pods.
func (p *criticalPaths) update(tpVal string, num int) {
	i := -1
	if tpVal == p[0].TopologyValue {
		i = 0
	} else if tpVal == p[1].TopologyValue {
		i = 1
	}
	if i >= 0 {
		p[i].MatchNum = num
		if p[0].MatchNum > p[1].MatchNum {
			p[0], p[1] = p[1], p[0]
		}
		return
	}
	if num < p[0].MatchNum {
		p[1] = p[0]
		p[0].TopologyValue, p[0].MatchNum = tpVal, num
	} else if num < p[1].MatchNum {
		p[1].TopologyValue, p[1].MatchNum = tpVal, num
	}
}

// topologyCount is one node's contribution to one constraint.
type topologyCount struct {
	topologyValue string
	constraintID  int
	count         int
}

// PreFilter counts, for each DoNotSchedule constraint, the pods matching its
// selector in the pod's namespace on every eligible node (one with all the
// topology keys that passes the node inclusion policies). It returns Skip
// for a pod without DoNotSchedule constraints.
func (pl *PodTopologySpread) PreFilter(ctx context.Context, cycleState *framework.CycleState, pod *corev1.Pod) *framework.Status {
	constraints, err := parseConstraints(pod, corev1.DoNotSchedule)
	if err != nil {
		return framework.AsStatus(fmt.Errorf("get constraints from pod: %w", err))
	}
	if len(constraints) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	allNodes, err := pl.sharedLister.NodeInfos().List()
	if err != nil {
		return framework.AsStatus(fmt.Errorf("listing NodeInfos: %w", err))
	}
	s := calPreFilterState(ctx, pod, constraints, allNodes)
	cycleState.Write(preFilterStateKey, s)
	return nil
}

func calPreFilterState(ctx context.Context, pod *corev1.Pod, constraints []constraint, allNodes []*framework.NodeInfo) *preFilterState {
	s := &preFilterState{
		Constraints:       constraints,
		SelfMatch:         make([]bool, len(constraints)),
		CriticalPaths:     make([]criticalPaths, len(constraints)),
		TpValueToMatchNum: make([]map[string]int, len(constraints)),
	}
	podLabels := labels.Set(pod.Labels)
	for i := range constraints {
		s.SelfMatch[i] = constraints[i].Selector.Matches(podLabels)
		s.TpValueToMatchNum[i] = make(map[string]int, sizeHeuristic(len(allNodes), constraints[i]))
	}

	required := affinitymatch.GetRequiredNodeAffinity(pod)
	// Each node appends at most one count per constraint into its own
	// window of one shared backing array.
	k := len(constraints)
	backing := make([]topologyCount, len(allNodes)*k)
	tpCountsByNode := make([][]topologyCount, len(allNodes))
	parallelize(ctx, len(allNodes), func(n int) {
		node := allNodes[n].Node()
		if node == nil || !nodeLabelsMatchSpreadConstraints(node.Labels, constraints) {
			return
		}
		tpCounts := backing[n*k : n*k : (n+1)*k]
		for i := range constraints {
			c := &constraints[i]
			if !c.matchNodeInclusionPolicies(pod, node, required) {
				continue
			}
			tpCounts = append(tpCounts, topologyCount{
				topologyValue: node.Labels[c.TopologyKey],
				constraintID:  i,
				count:         countPodsMatchSelector(allNodes[n].Pods, c.Selector, pod.Namespace),
			})
		}
		tpCountsByNode[n] = tpCounts
	})
	for _, tpCounts := range tpCountsByNode {
		for _, tc := range tpCounts {
			s.TpValueToMatchNum[tc.constraintID][tc.topologyValue] += tc.count
		}
	}
	for i := range constraints {
		s.CriticalPaths[i] = newCriticalPaths()
		for value, num := range s.TpValueToMatchNum[i] {
			s.CriticalPaths[i].update(value, num)
		}
	}
	return s
}

// sizeHeuristic presizes the per-value map: one value per node for the hostname key.
func sizeHeuristic(nodes int, c constraint) int {
	if c.TopologyKey == corev1.LabelHostname {
		return nodes
	}
	return 0
}

func getPreFilterState(cycleState *framework.CycleState) (*preFilterState, error) {
	c, err := cycleState.Read(preFilterStateKey)
	if err != nil {
		return nil, fmt.Errorf("reading %q from cycleState: %w", preFilterStateKey, err)
	}
	s, ok := c.(*preFilterState)
	if !ok {
		return nil, fmt.Errorf("%+v convert to podtopologyspread.preFilterState error", c)
	}
	return s, nil
}

// Filter rejects a node without a constraint's topology key
// (UnschedulableAndUnresolvable) or whose domain would then hold more than
// maxSkew matching pods above the global minimum (Unschedulable):
// matching pods in the domain + 1 if the pod matches itself - minimum > maxSkew.
func (pl *PodTopologySpread) Filter(_ context.Context, cycleState *framework.CycleState, _ *corev1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	node := nodeInfo.Node()
	if node == nil {
		return framework.NewStatus(framework.Error, "node not found")
	}
	s, err := getPreFilterState(cycleState)
	if err != nil {
		return framework.AsStatus(err)
	}
	for i := range s.Constraints {
		c := &s.Constraints[i]
		tpVal, ok := node.Labels[c.TopologyKey]
		if !ok {
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonNodeLabelNotMatch)
		}
		selfMatchNum := 0
		if s.SelfMatch[i] {
			selfMatchNum = 1
		}
		skew := s.TpValueToMatchNum[i][tpVal] + selfMatchNum - s.minMatchNum(i, c.MinDomains)
		if skew > int(c.MaxSkew) {
			return framework.NewStatus(framework.Unschedulable, ErrReasonConstraintsNotMatch)
		}
	}
	return nil
}

var _ framework.PreFilterExtensions = (*PodTopologySpread)(nil)

// AddPod counts podToAdd, now on nodeInfo, in the cycle state (preemption's
// dry run and the nominated pods of filtering), as upstream.
func (pl *PodTopologySpread) AddPod(_ context.Context, cycleState *framework.CycleState, podToSchedule, podToAdd *corev1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	s, err := getPreFilterState(cycleState)
	if err != nil {
		return framework.AsStatus(err)
	}
	updateWithPod(s, podToAdd, podToSchedule, nodeInfo.Node(), 1)
	return nil
}

// RemovePod uncounts podToRemove, gone from nodeInfo, in the cycle state.
func (pl *PodTopologySpread) RemovePod(_ context.Context, cycleState *framework.CycleState, podToSchedule, podToRemove *corev1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	s, err := getPreFilterState(cycleState)
	if err != nil {
		return framework.AsStatus(err)
	}
	updateWithPod(s, podToRemove, podToSchedule, nodeInfo.Node(), -1)
	return nil
}

// updateWithPod adds delta to the domains of node for every constraint whose
// selector matches the pod, when the node counts for the constraint (as PreFilter
// decided: all topology keys, node inclusion policies) and the pod is in the
// incoming pod's namespace.
func updateWithPod(s *preFilterState, pod, preemptor *corev1.Pod, node *corev1.Node, delta int) {
	if s == nil || node == nil || pod.Namespace != preemptor.Namespace || pod.DeletionTimestamp != nil {
		return
	}
	if !nodeLabelsMatchSpreadConstraints(node.Labels, s.Constraints) {
		return
	}
	required := affinitymatch.GetRequiredNodeAffinity(preemptor)
	podLabels := labels.Set(pod.Labels)
	for i := range s.Constraints {
		c := &s.Constraints[i]
		if c.Selector.Empty() || !c.Selector.Matches(podLabels) || !c.matchNodeInclusionPolicies(preemptor, node, required) {
			continue
		}
		v := node.Labels[c.TopologyKey]
		s.TpValueToMatchNum[i][v] += delta
		s.CriticalPaths[i].update(v, s.TpValueToMatchNum[i][v])
	}
}
