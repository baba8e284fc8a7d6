package podtopologyspread

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/scheduler/framework"
	"github.com/kubette/kubette/internal/scheduler/plugins/affinitymatch"
)

const (
	preScoreStateKey framework.StateKey = "PreScore" + Name
	invalidScore                        = -1
)

// preScoreState is computed in PreScore and read by Score and NormalizeScore.
type preScoreState struct {
	Constraints []constraint
	// IgnoredNodes are the feasible nodes missing a constraint's topology key;
	// they score 0.
	IgnoredNodes map[string]struct{}
	// TopologyValueToPodCounts[i] maps the topology values of constraint i
	// present among the feasible nodes to their matching pods over all
	// eligible nodes. Hostname constraints are counted per node in Score.
	TopologyValueToPodCounts []map[string]*int64
	// TopologyNormalizingWeight[i] is log(domains+2), so that counts in
	// small topologies are not watered down by big ones.
	TopologyNormalizingWeight []float64
}

// Clone returns the state itself: it is not changed after PreScore.
func (s *preScoreState) Clone() framework.StateData { return s }

// initPreScoreState parses the ScheduleAnyway constraints and records which
// topology values the feasible nodes cover.
func initPreScoreState(s *preScoreState, pod *corev1.Pod, filteredNodes []*framework.NodeInfo) error {
	var err error
	if s.Constraints, err = parseConstraints(pod, corev1.ScheduleAnyway); err != nil {
		return fmt.Errorf("obtaining pod's soft topology spread constraints: %w", err)
	}
	if len(s.Constraints) == 0 {
		return nil
	}
	s.TopologyValueToPodCounts = make([]map[string]*int64, len(s.Constraints))
	for i := range s.Constraints {
		s.TopologyValueToPodCounts[i] = make(map[string]*int64)
	}
	topoSize := make([]int, len(s.Constraints))
	for _, ni := range filteredNodes {
		node := ni.Node()
		if node == nil {
			continue
		}
		if !nodeLabelsMatchSpreadConstraints(node.Labels, s.Constraints) {
			s.IgnoredNodes[node.Name] = struct{}{}
			continue
		}
		for i, c := range s.Constraints {
			if c.TopologyKey == corev1.LabelHostname {
				continue
			}
			value := node.Labels[c.TopologyKey]
			if s.TopologyValueToPodCounts[i][value] == nil {
				s.TopologyValueToPodCounts[i][value] = new(int64)
				topoSize[i]++
			}
		}
	}
	s.TopologyNormalizingWeight = make([]float64, len(s.Constraints))
	for i, c := range s.Constraints {
		sz := topoSize[i]
		if c.TopologyKey == corev1.LabelHostname {
			sz = len(filteredNodes) - len(s.IgnoredNodes)
		}
		s.TopologyNormalizingWeight[i] = topologyNormalizingWeight(sz)
	}
	return nil
}

// PreScore counts, for each ScheduleAnyway constraint, the matching pods per
// topology value over all eligible nodes of the cluster. It returns Skip for
// a pod without ScheduleAnyway constraints.
func (pl *PodTopologySpread) PreScore(ctx context.Context, cycleState *framework.CycleState, pod *corev1.Pod, filteredNodes []*framework.NodeInfo) *framework.Status {
	allNodes, err := pl.sharedLister.NodeInfos().List()
	if err != nil {
		return framework.AsStatus(fmt.Errorf("getting all nodes: %w", err))
	}
	if len(allNodes) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	state := &preScoreState{IgnoredNodes: map[string]struct{}{}}
	if err := initPreScoreState(state, pod, filteredNodes); err != nil {
		return framework.AsStatus(fmt.Errorf("calculating preScoreState: %w", err))
	}
	if len(state.Constraints) == 0 {
		return framework.NewStatus(framework.Skip)
	}

	required := affinitymatch.GetRequiredNodeAffinity(pod)
	parallelize(ctx, len(allNodes), func(n int) {
		node := allNodes[n].Node()
		if node == nil || !nodeLabelsMatchSpreadConstraints(node.Labels, state.Constraints) {
			return
		}
		for i := range state.Constraints {
			c := &state.Constraints[i]
			if !c.matchNodeInclusionPolicies(pod, node, required) {
				continue
			}
			// Only values covered by a feasible node are counted; hostname
			// constraints are counted per node in Score.
			tpCount := state.TopologyValueToPodCounts[i][node.Labels[c.TopologyKey]]
			if tpCount == nil {
				continue
			}
			atomic.AddInt64(tpCount, int64(countPodsMatchSelector(allNodes[n].Pods, c.Selector, pod.Namespace)))
		}
	})
	cycleState.Write(preScoreStateKey, state)
	return nil
}

// Score sums, over the constraints, the matching pods of the node's domain
// weighted by the topology's normalizing weight, plus maxSkew-1. Fewer pods
// is better; NormalizeScore inverts the scale.
func (pl *PodTopologySpread) Score(_ context.Context, cycleState *framework.CycleState, pod *corev1.Pod, nodeInfo *framework.NodeInfo) (int64, *framework.Status) {
	node := nodeInfo.Node()
	if node == nil {
		return 0, framework.NewStatus(framework.Error, "node not found")
	}
	s, err := getPreScoreState(cycleState)
	if err != nil {
		return 0, framework.AsStatus(err)
	}
	if _, ignored := s.IgnoredNodes[node.Name]; ignored {
		return 0, nil
	}
	var score float64
	for i := range s.Constraints {
		c := &s.Constraints[i]
		tpVal, ok := node.Labels[c.TopologyKey]
		if !ok {
			continue
		}
		var cnt int64
		if c.TopologyKey == corev1.LabelHostname {
			cnt = int64(countPodsMatchSelector(nodeInfo.Pods, c.Selector, pod.Namespace))
		} else if p := s.TopologyValueToPodCounts[i][tpVal]; p != nil {
			cnt = atomic.LoadInt64(p)
		}
		score += scoreForCount(cnt, c.MaxSkew, s.TopologyNormalizingWeight[i])
	}
	return int64(math.Round(score)), nil
}

// ScoreExtensions returns the plugin itself: it normalises its scores.
func (pl *PodTopologySpread) ScoreExtensions() framework.ScoreExtensions { return pl }

// NormalizeScore maps the raw scores to MaxNodeScore*(max+min-score)/max, so
// the node with the fewest matching pods gets the most; ignored nodes get 0.
func (pl *PodTopologySpread) NormalizeScore(_ context.Context, cycleState *framework.CycleState, _ *corev1.Pod, scores []framework.NodeScore) *framework.Status {
	s, err := getPreScoreState(cycleState)
	if err != nil {
		return framework.AsStatus(err)
	}
	var minScore int64 = math.MaxInt64
	var maxScore int64
	for i, score := range scores {
		if _, ignored := s.IgnoredNodes[score.Name]; ignored {
			scores[i].Score = invalidScore
			continue
		}
		minScore = min(minScore, score.Score)
		maxScore = max(maxScore, score.Score)
	}
	for i := range scores {
		if scores[i].Score == invalidScore {
			scores[i].Score = 0
			continue
		}
		if maxScore == 0 {
			scores[i].Score = framework.MaxNodeScore
			continue
		}
		scores[i].Score = framework.MaxNodeScore * (maxScore + minScore - scores[i].Score) / maxScore
	}
	return nil
}

func getPreScoreState(cycleState *framework.CycleState) (*preScoreState, error) {
	c, err := cycleState.Read(preScoreStateKey)
	if err != nil {
		return nil, fmt.Errorf("error reading %q from cycleState: %w", preScoreStateKey, err)
	}
	s, ok := c.(*preScoreState)
	if !ok {
		return nil, fmt.Errorf("%+v  convert to podtopologyspread.preScoreState error", c)
	}
	return s, nil
}

// topologyNormalizingWeight is log(size+2): between 1.09 and 8.52 for 1 to
// 5000 domains.
func topologyNormalizingWeight(size int) float64 {
	return math.Log(float64(size + 2))
}

// scoreForCount weighs cnt by the topology weight and adds maxSkew-1, so that
// a larger maxSkew tolerates more skew.
func scoreForCount(cnt int64, maxSkew int32, tpWeight float64) float64 {
	return float64(cnt)*tpWeight + float64(maxSkew-1)
}
