package interpodaffinity

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubette/kubette/internal/scheduler/framework"
	"github.com/kubette/kubette/internal/scheduler/plugins/affinitymatch"
)

const preScoreStateKey framework.StateKey = "PreScore" + Name

// scoreMap holds scores per topology key and value.
type scoreMap map[string]map[string]int64

// processTerm adds weight*multiplier to the node's domain when pod matches term.
func (m scoreMap) processTerm(term *affinitymatch.Term, weight int32, pod *corev1.Pod, nsLabels labels.Set, node *corev1.Node, multiplier int32) {
	if !term.Matches(pod, nsLabels) {
		return
	}
	v, ok := node.Labels[term.TopologyKey]
	if !ok {
		return
	}
	if m[term.TopologyKey] == nil {
		m[term.TopologyKey] = make(map[string]int64)
	}
	m[term.TopologyKey][v] += int64(weight * multiplier)
}

func (m scoreMap) processTerms(terms []affinitymatch.WeightedTerm, pod *corev1.Pod, nsLabels labels.Set, node *corev1.Node, multiplier int32) {
	for i := range terms {
		m.processTerm(&terms[i].Term, terms[i].Weight, pod, nsLabels, node, multiplier)
	}
}

func (m scoreMap) append(other scoreMap) {
	for key, oScores := range other {
		scores := m[key]
		if scores == nil {
			m[key] = oScores
			continue
		}
		for v, s := range oScores {
			scores[v] += s
		}
	}
}

// preScoreState is computed in PreScore and read by Score and NormalizeScore.
type preScoreState struct {
	topologyScore scoreMap
}

// Clone returns the state itself: it is not changed after PreScore.
func (s *preScoreState) Clone() framework.StateData { return s }

// processExistingPod adds to topoScore what one running pod contributes: the
// incoming pod's preferred terms that select it (+ for affinity, - for
// anti-affinity), and its own terms that select the incoming pod (required
// affinity with the hard weight, preferred affinity +, preferred anti-affinity -).
func (pl *InterPodAffinity) processExistingPod(incoming *affinitymatch.PodTerms, nsLabels labels.Set, existing *corev1.Pod, node *corev1.Node, pod *corev1.Pod, topoScore scoreMap) {
	if len(node.Labels) == 0 {
		return
	}
	// The incoming pod's namespace selectors are resolved, so the running
	// pod's namespace labels are not needed.
	topoScore.processTerms(incoming.PreferredAffinity, existing, nil, node, 1)
	topoScore.processTerms(incoming.PreferredAntiAffinity, existing, nil, node, -1)

	if a := existing.Spec.Affinity; a == nil || (a.PodAffinity == nil && a.PodAntiAffinity == nil) {
		return
	}
	existingTerms := pl.terms.Get(existing)
	if pl.hardPodAffinityWeight > 0 {
		for i := range existingTerms.RequiredAffinity {
			topoScore.processTerm(&existingTerms.RequiredAffinity[i], pl.hardPodAffinityWeight, pod, nsLabels, node, 1)
		}
	}
	topoScore.processTerms(existingTerms.PreferredAffinity, pod, nsLabels, node, 1)
	topoScore.processTerms(existingTerms.PreferredAntiAffinity, pod, nsLabels, node, -1)
}

// PreScore sums, per topology domain, the weights of the matching preferred
// terms (and running pods' required affinity terms) over the snapshot. It
// visits every pod when the incoming pod has preferred terms and only pods
// with affinity otherwise; Skip when nothing scores.
func (pl *InterPodAffinity) PreScore(ctx context.Context, cycleState *framework.CycleState, pod *corev1.Pod, _ []*framework.NodeInfo) *framework.Status {
	a := pod.Spec.Affinity
	hasConstraints := a != nil &&
		((a.PodAffinity != nil && len(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0) ||
			(a.PodAntiAffinity != nil && len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0))
	if pl.ignorePreferredTermsOfExistingPods && !hasConstraints {
		return framework.NewStatus(framework.Skip)
	}
	var allNodes []*framework.NodeInfo
	var err error
	if hasConstraints {
		if allNodes, err = pl.sharedLister.NodeInfos().List(); err != nil {
			return framework.AsStatus(fmt.Errorf("failed to get all nodes from shared lister: %w", err))
		}
	} else if allNodes, err = pl.sharedLister.NodeInfos().HavePodsWithAffinityList(); err != nil {
		return framework.AsStatus(fmt.Errorf("failed to get pods with affinity list: %w", err))
	}

	terms, err := affinitymatch.ParsePodTerms(pod)
	if err != nil {
		return framework.AsStatus(fmt.Errorf("failed to parse pod: %w", err))
	}
	for i := range terms.PreferredAffinity {
		if err := pl.mergeNamespaceSelector(&terms.PreferredAffinity[i].Term); err != nil {
			return framework.AsStatus(fmt.Errorf("updating PreferredAffinityTerms: %w", err))
		}
	}
	for i := range terms.PreferredAntiAffinity {
		if err := pl.mergeNamespaceSelector(&terms.PreferredAntiAffinity[i].Term); err != nil {
			return framework.AsStatus(fmt.Errorf("updating PreferredAntiAffinityTerms: %w", err))
		}
	}
	nsLabels := pl.namespaceLabels(pod.Namespace)

	topoScores := make([]scoreMap, len(allNodes))
	var used atomic.Int32
	parallelize(ctx, len(allNodes), func(i int) {
		node := allNodes[i].Node()
		if node == nil {
			return
		}
		podsToProcess := allNodes[i].PodsWithAffinity
		if hasConstraints {
			podsToProcess = allNodes[i].Pods
		}
		topoScore := make(scoreMap)
		for _, existing := range podsToProcess {
			pl.processExistingPod(terms, nsLabels, existing.Pod, node, pod, topoScore)
		}
		if len(topoScore) > 0 {
			topoScores[used.Add(1)-1] = topoScore
		}
	})
	n := int(used.Load())
	if n == 0 {
		return framework.NewStatus(framework.Skip)
	}
	state := &preScoreState{topologyScore: make(scoreMap)}
	for _, ts := range topoScores[:n] {
		state.topologyScore.append(ts)
	}
	cycleState.Write(preScoreStateKey, state)
	return nil
}

func getPreScoreState(cycleState *framework.CycleState) (*preScoreState, error) {
	c, err := cycleState.Read(preScoreStateKey)
	if err != nil {
		return nil, fmt.Errorf("failed to read %q from cycleState: %w", preScoreStateKey, err)
	}
	s, ok := c.(*preScoreState)
	if !ok {
		return nil, fmt.Errorf("%+v  convert to interpodaffinity.preScoreState error", c)
	}
	return s, nil
}

// Score sums the scores of the node's domains: positive for affinity,
// negative for anti-affinity; NormalizeScore scales them to 0..100.
func (pl *InterPodAffinity) Score(_ context.Context, cycleState *framework.CycleState, _ *corev1.Pod, nodeInfo *framework.NodeInfo) (int64, *framework.Status) {
	node := nodeInfo.Node()
	if node == nil {
		return 0, framework.NewStatus(framework.Error, "node not found")
	}
	s, err := getPreScoreState(cycleState)
	if err != nil {
		return 0, framework.AsStatus(err)
	}
	var score int64
	for key, values := range s.topologyScore {
		if v, ok := node.Labels[key]; ok {
			score += values[v]
		}
	}
	return score, nil
}

// ScoreExtensions returns the plugin itself: it normalises its scores.
func (pl *InterPodAffinity) ScoreExtensions() framework.ScoreExtensions { return pl }

// NormalizeScore maps the scores linearly from [min, max] to [0, MaxNodeScore]
// (all 0 when they are equal).
func (pl *InterPodAffinity) NormalizeScore(_ context.Context, cycleState *framework.CycleState, _ *corev1.Pod, scores []framework.NodeScore) *framework.Status {
	s, err := getPreScoreState(cycleState)
	if err != nil {
		return framework.AsStatus(err)
	}
	if len(s.topologyScore) == 0 {
		return nil
	}
	var minCount int64 = math.MaxInt64
	var maxCount int64 = math.MinInt64
	for i := range scores {
		minCount = min(minCount, scores[i].Score)
		maxCount = max(maxCount, scores[i].Score)
	}
	diff := maxCount - minCount
	for i := range scores {
		var f float64
		if diff > 0 {
			f = float64(framework.MaxNodeScore) * (float64(scores[i].Score-minCount) / float64(diff))
		}
		scores[i].Score = int64(f)
	}
	return nil
}
