package interpodaffinity

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubette/kubette/internal/scheduler/framework"
	"github.com/kubette/kubette/internal/scheduler/plugins/affinitymatch"
)

const (
	preFilterStateKey framework.StateKey = "PreFilter" + Name

	// ErrReasonExistingAntiAffinityRulesNotMatch is the reason for a node where a running pod's required anti-affinity selects the pod.
	ErrReasonExistingAntiAffinityRulesNotMatch = "node(s) didn't satisfy existing pods anti-affinity rules"
	// ErrReasonAffinityRulesNotMatch is the reason for a node outside every domain holding pods the pod requires.
	ErrReasonAffinityRulesNotMatch = "node(s) didn't match pod affinity rules"
	// ErrReasonAntiAffinityRulesNotMatch is the reason for a node in a domain holding pods the pod's required anti-affinity selects.
	ErrReasonAntiAffinityRulesNotMatch = "node(s) didn't match pod anti-affinity rules"
)

// topologyPair is a topology domain: a node label key and value.
type topologyPair struct {
	key   string
	value string
}

// topologyToMatchedTermCount counts matches per topology domain.
type topologyToMatchedTermCount map[topologyPair]int64

func (m topologyToMatchedTermCount) clone() topologyToMatchedTermCount {
	out := make(topologyToMatchedTermCount, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// pairCount is one node's contribution to a topologyToMatchedTermCount.
type pairCount struct {
	pair  topologyPair
	count int64
}

// pairCounts collects one node's contributions (a slice is cheaper than a
// map per node; they are merged into one map afterwards).
type pairCounts []pairCount

func (m *pairCounts) add(node *corev1.Node, key string) {
	if v, ok := node.Labels[key]; ok {
		*m = append(*m, pairCount{pair: topologyPair{key: key, value: v}, count: 1})
	}
}

func (m topologyToMatchedTermCount) merge(list []pairCounts) {
	for _, l := range list {
		for _, pc := range l {
			m[pc.pair] += pc.count
		}
	}
}

// preFilterState is computed in PreFilter and read by Filter.
type preFilterState struct {
	// existingAntiAffinityCounts counts, per domain, the required
	// anti-affinity terms of running pods that select the incoming pod.
	existingAntiAffinityCounts topologyToMatchedTermCount
	// existingAntiAffinityKeys are the topology keys of existingAntiAffinityCounts,
	// so Filter looks up only those node labels.
	existingAntiAffinityKeys []string
	// affinityCounts counts, per domain, the running pods that match all the
	// incoming pod's required affinity terms (once per term).
	affinityCounts topologyToMatchedTermCount
	// antiAffinityCounts counts, per domain, the running pods matching each
	// required anti-affinity term of the incoming pod.
	antiAffinityCounts topologyToMatchedTermCount
	// pod and terms are the incoming pod and its parsed terms, with
	// namespace selectors resolved into namespace names.
	pod   *corev1.Pod
	terms *affinitymatch.PodTerms
	// namespaceLabels are the labels of the incoming pod's namespace.
	namespaceLabels labels.Set
}

// Clone copies the counts; the pod and its terms are shared (never changed).
func (s *preFilterState) Clone() framework.StateData {
	if s == nil {
		return nil
	}
	out := *s
	out.existingAntiAffinityCounts = s.existingAntiAffinityCounts.clone()
	out.affinityCounts = s.affinityCounts.clone()
	out.antiAffinityCounts = s.antiAffinityCounts.clone()
	return &out
}

// PreFilter counts, over the snapshot, the domains where running pods'
// required anti-affinity selects the pod and where running pods match the
// pod's required affinity and anti-affinity terms, so that Filter only looks
// up the node's domains. A pod whose terms do not parse is rejected
// (UnschedulableAndUnresolvable); Skip when nothing constrains the pod.
func (pl *InterPodAffinity) PreFilter(ctx context.Context, cycleState *framework.CycleState, pod *corev1.Pod) *framework.Status {
	nodeInfos := pl.sharedLister.NodeInfos()
	allNodes, err := nodeInfos.List()
	if err != nil {
		return framework.AsStatus(fmt.Errorf("failed to list NodeInfos: %w", err))
	}
	withAntiAffinity, err := nodeInfos.HavePodsWithRequiredAntiAffinityList()
	if err != nil {
		return framework.AsStatus(fmt.Errorf("failed to list NodeInfos with pods with affinity: %w", err))
	}
	terms, err := affinitymatch.ParsePodTerms(pod)
	if err != nil {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf("parsing pod: %+v", err))
	}
	for i := range terms.RequiredAffinity {
		if err := pl.mergeNamespaceSelector(&terms.RequiredAffinity[i]); err != nil {
			return framework.AsStatus(err)
		}
	}
	for i := range terms.RequiredAntiAffinity {
		if err := pl.mergeNamespaceSelector(&terms.RequiredAntiAffinity[i]); err != nil {
			return framework.AsStatus(err)
		}
	}
	s := &preFilterState{pod: pod, terms: terms, namespaceLabels: pl.namespaceLabels(pod.Namespace)}
	s.existingAntiAffinityCounts = pl.existingAntiAffinityCounts(ctx, pod, s.namespaceLabels, withAntiAffinity)
	s.existingAntiAffinityKeys = topologyKeys(s.existingAntiAffinityCounts)
	s.affinityCounts, s.antiAffinityCounts = incomingAffinityCounts(ctx, terms, allNodes)
	if len(s.existingAntiAffinityCounts) == 0 && !terms.HasRequired() {
		return framework.NewStatus(framework.Skip)
	}
	cycleState.Write(preFilterStateKey, s)
	return nil
}

// existingAntiAffinityCounts counts, per domain, the required anti-affinity
// terms of running pods that select pod.
func (pl *InterPodAffinity) existingAntiAffinityCounts(ctx context.Context, pod *corev1.Pod, nsLabels labels.Set, nodes []*framework.NodeInfo) topologyToMatchedTermCount {
	perNode := make([]pairCounts, len(nodes))
	var used atomic.Int32
	parallelize(ctx, len(nodes), func(i int) {
		node := nodes[i].Node()
		if node == nil {
			return
		}
		var counts pairCounts
		for _, existing := range nodes[i].PodsWithRequiredAntiAffinity {
			terms := pl.terms.Get(existing.Pod).RequiredAntiAffinity
			for j := range terms {
				if terms[j].Matches(pod, nsLabels) {
					counts.add(node, terms[j].TopologyKey)
				}
			}
		}
		if len(counts) > 0 {
			perNode[used.Add(1)-1] = counts
		}
	})
	out := make(topologyToMatchedTermCount)
	out.merge(perNode[:used.Load()])
	return out
}

// incomingAffinityCounts counts, per domain, the running pods matching all
// the pod's required affinity terms (once per term) and the running pods
// matching each of its required anti-affinity terms.
func incomingAffinityCounts(ctx context.Context, terms *affinitymatch.PodTerms, allNodes []*framework.NodeInfo) (topologyToMatchedTermCount, topologyToMatchedTermCount) {
	affinity := make(topologyToMatchedTermCount)
	antiAffinity := make(topologyToMatchedTermCount)
	if !terms.HasRequired() {
		return affinity, antiAffinity
	}
	affinityPerNode := make([]pairCounts, len(allNodes))
	antiPerNode := make([]pairCounts, len(allNodes))
	var used atomic.Int32
	parallelize(ctx, len(allNodes), func(i int) {
		node := allNodes[i].Node()
		if node == nil {
			return
		}
		var aff, anti pairCounts
		for _, existing := range allNodes[i].Pods {
			// The incoming pod's namespace selectors are resolved, so the
			// running pod's namespace labels are not needed.
			if affinitymatch.MatchesAll(terms.RequiredAffinity, existing.Pod) {
				for j := range terms.RequiredAffinity {
					aff.add(node, terms.RequiredAffinity[j].TopologyKey)
				}
			}
			for j := range terms.RequiredAntiAffinity {
				if terms.RequiredAntiAffinity[j].Matches(existing.Pod, nil) {
					anti.add(node, terms.RequiredAntiAffinity[j].TopologyKey)
				}
			}
		}
		if len(aff) > 0 || len(anti) > 0 {
			k := used.Add(1) - 1
			affinityPerNode[k], antiPerNode[k] = aff, anti
		}
	})
	n := used.Load()
	affinity.merge(affinityPerNode[:n])
	antiAffinity.merge(antiPerNode[:n])
	return affinity, antiAffinity
}

func getPreFilterState(cycleState *framework.CycleState) (*preFilterState, error) {
	c, err := cycleState.Read(preFilterStateKey)
	if err != nil {
		return nil, fmt.Errorf("error reading %q from cycleState: %w", preFilterStateKey, err)
	}
	s, ok := c.(*preFilterState)
	if !ok {
		return nil, fmt.Errorf("%+v  convert to interpodaffinity.state error", c)
	}
	return s, nil
}

// topologyKeys returns the distinct keys of m's domains with a positive count.
func topologyKeys(m topologyToMatchedTermCount) []string {
	var keys []string
	for p, n := range m {
		if n > 0 && !slices.Contains(keys, p.key) {
			keys = append(keys, p.key)
		}
	}
	return keys
}

// satisfyExistingPodsAntiAffinity reports whether no running pod's required
// anti-affinity term selecting the incoming pod covers the node's domains.
// (Upstream looks up every node label; only the keys with counts can match.)
func satisfyExistingPodsAntiAffinity(s *preFilterState, node *corev1.Node) bool {
	for _, k := range s.existingAntiAffinityKeys {
		if v, ok := node.Labels[k]; ok && s.existingAntiAffinityCounts[topologyPair{key: k, value: v}] > 0 {
			return false
		}
	}
	return true
}

// satisfyPodAntiAffinity reports whether none of the node's domains holds a
// pod selected by one of the incoming pod's required anti-affinity terms.
func satisfyPodAntiAffinity(s *preFilterState, node *corev1.Node) bool {
	if len(s.antiAffinityCounts) == 0 {
		return true
	}
	for _, t := range s.terms.RequiredAntiAffinity {
		if v, ok := node.Labels[t.TopologyKey]; ok && s.antiAffinityCounts[topologyPair{key: t.TopologyKey, value: v}] > 0 {
			return false
		}
	}
	return true
}

// satisfyPodAffinity reports whether the node has every affinity term's
// topology key and each of those domains holds a pod matching all the terms.
// The first pod of a group whose affinity selects itself passes on any node
// with the topology keys when no running pod matches the terms anywhere.
func satisfyPodAffinity(s *preFilterState, node *corev1.Node) bool {
	podsExist := true
	for _, t := range s.terms.RequiredAffinity {
		v, ok := node.Labels[t.TopologyKey]
		if !ok {
			return false
		}
		if s.affinityCounts[topologyPair{key: t.TopologyKey, value: v}] <= 0 {
			podsExist = false
		}
	}
	if podsExist {
		return true
	}
	return len(s.affinityCounts) == 0 && affinitymatch.MatchesAll(s.terms.RequiredAffinity, s.pod)
}

// Filter checks the node against the incoming pod's required affinity
// (UnschedulableAndUnresolvable, as upstream: preemption cannot add pods) and
// anti-affinity, then against running pods' required anti-affinity (both
// Unschedulable: preemption may remove the offending pods).
func (pl *InterPodAffinity) Filter(_ context.Context, cycleState *framework.CycleState, _ *corev1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	node := nodeInfo.Node()
	if node == nil {
		return framework.NewStatus(framework.Error, "node not found")
	}
	s, err := getPreFilterState(cycleState)
	if err != nil {
		return framework.AsStatus(err)
	}
	if !satisfyPodAffinity(s, node) {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonAffinityRulesNotMatch)
	}
	if !satisfyPodAntiAffinity(s, node) {
		return framework.NewStatus(framework.Unschedulable, ErrReasonAntiAffinityRulesNotMatch)
	}
	if !satisfyExistingPodsAntiAffinity(s, node) {
		return framework.NewStatus(framework.Unschedulable, ErrReasonExistingAntiAffinityRulesNotMatch)
	}
	return nil
}

var _ framework.PreFilterExtensions = (*InterPodAffinity)(nil)

// AddPod updates the counts of the cycle state for podToAdd now on nodeInfo
// (preemption's dry run and the nominated pods of filtering), as upstream.
func (pl *InterPodAffinity) AddPod(_ context.Context, cycleState *framework.CycleState, _, podToAdd *corev1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	s, err := getPreFilterState(cycleState)
	if err != nil {
		return framework.AsStatus(err)
	}
	pl.updateWithPod(s, podToAdd, nodeInfo.Node(), 1)
	return nil
}

// RemovePod updates the counts of the cycle state for podToRemove gone from nodeInfo.
func (pl *InterPodAffinity) RemovePod(_ context.Context, cycleState *framework.CycleState, _, podToRemove *corev1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	s, err := getPreFilterState(cycleState)
	if err != nil {
		return framework.AsStatus(err)
	}
	pl.updateWithPod(s, podToRemove, nodeInfo.Node(), -1)
	return nil
}

// updateWithPod adds delta for pod on node to the three counts: its required
// anti-affinity terms selecting the incoming pod, and its matching the
// incoming pod's required affinity (all terms) and anti-affinity terms.
// A domain whose count drops to 0 is removed, as upstream.
func (pl *InterPodAffinity) updateWithPod(s *preFilterState, pod *corev1.Pod, node *corev1.Node, delta int64) {
	if node == nil {
		return
	}
	update := func(m topologyToMatchedTermCount, key string) {
		v, ok := node.Labels[key]
		if !ok {
			return
		}
		p := topologyPair{key: key, value: v}
		m[p] += delta
		if m[p] == 0 {
			delete(m, p)
		}
	}
	terms := pl.terms.Get(pod).RequiredAntiAffinity
	for j := range terms {
		if terms[j].Matches(s.pod, s.namespaceLabels) {
			update(s.existingAntiAffinityCounts, terms[j].TopologyKey)
		}
	}
	s.existingAntiAffinityKeys = topologyKeys(s.existingAntiAffinityCounts)
	if len(s.terms.RequiredAffinity) > 0 && affinitymatch.MatchesAll(s.terms.RequiredAffinity, pod) {
		for j := range s.terms.RequiredAffinity {
			update(s.affinityCounts, s.terms.RequiredAffinity[j].TopologyKey)
		}
	}
	// The incoming pod's namespace selectors are resolved: no namespace labels needed.
	for j := range s.terms.RequiredAntiAffinity {
		if s.terms.RequiredAntiAffinity[j].Matches(pod, nil) {
			update(s.antiAffinityCounts, s.terms.RequiredAntiAffinity[j].TopologyKey)
		}
	}
}
