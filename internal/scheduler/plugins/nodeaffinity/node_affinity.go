// Package nodeaffinity is the NodeAffinity plugin: a pod runs only on nodes
// that match its spec.nodeSelector and required node affinity (Filter), and
// prefers nodes that match its weighted preferred terms (Score).
package nodeaffinity

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/podfit"
	"github.com/kubette/kubette/internal/scheduler/framework"
	"github.com/kubette/kubette/internal/scheduler/plugins/affinitymatch"
)

const (
	// Name is the plugin's name in the registry and in statuses.
	Name = podfit.NodeAffinity

	preFilterStateKey framework.StateKey = "PreFilter" + Name
	preScoreStateKey  framework.StateKey = "PreScore" + Name

	// ErrReasonPod is the reason for a node that does not match the pod's node selector or required affinity.
	ErrReasonPod = podfit.ErrReasonNodeAffinity
	// ErrReasonEnforced is the reason for a node that does not match Args.AddedAffinity.
	ErrReasonEnforced = "node(s) didn't match scheduler-enforced node affinity"
	// ErrReasonConflict is the reason for a pod whose terms all require contradictory node names.
	ErrReasonConflict = "pod affinity terms conflict"
)

// Args configures the plugin. The zero value (or nil args) is the default.
type Args struct {
	// AddedAffinity is applied to every pod on top of its own node affinity
	// (upstream's NodeAffinityArgs.addedAffinity).
	AddedAffinity *corev1.NodeAffinity
}

// NodeAffinity is the plugin.
type NodeAffinity struct {
	addedNodeSelector   *affinitymatch.NodeSelector
	addedPrefSchedTerms *affinitymatch.PreferredSchedulingTerms
}

var (
	_ framework.PreFilterPlugin = (*NodeAffinity)(nil)
	_ framework.FilterPlugin    = (*NodeAffinity)(nil)
	_ framework.PreScorePlugin  = (*NodeAffinity)(nil)
	_ framework.ScorePlugin     = (*NodeAffinity)(nil)
	_ framework.ScoreExtensions = (*NodeAffinity)(nil)
)

// New builds the plugin. args may be nil, Args or *Args.
func New(_ context.Context, args any, _ framework.Handle) (framework.Plugin, error) {
	var a Args
	switch v := args.(type) {
	case nil:
	case Args:
		a = v
	case *Args:
		if v != nil {
			a = *v
		}
	default:
		return nil, fmt.Errorf("%s: args must be nodeaffinity.Args, got %T", Name, args)
	}
	pl := &NodeAffinity{}
	if a.AddedAffinity != nil {
		if ns := a.AddedAffinity.RequiredDuringSchedulingIgnoredDuringExecution; ns != nil {
			sel, err := affinitymatch.NewNodeSelector(ns)
			if err != nil {
				return nil, fmt.Errorf("parsing addedAffinity.requiredDuringSchedulingIgnoredDuringExecution: %w", err)
			}
			pl.addedNodeSelector = sel
		}
		if terms := a.AddedAffinity.PreferredDuringSchedulingIgnoredDuringExecution; len(terms) != 0 {
			p, err := affinitymatch.NewPreferredSchedulingTerms(terms)
			if err != nil {
				return nil, fmt.Errorf("parsing addedAffinity.preferredDuringSchedulingIgnoredDuringExecution: %w", err)
			}
			pl.addedPrefSchedTerms = p
		}
	}
	return pl, nil
}

// Name returns the plugin's name.
func (pl *NodeAffinity) Name() string { return Name }

// preFilterState is the pod's parsed node selector and required affinity.
type preFilterState struct {
	required affinitymatch.RequiredNodeAffinity
}

// Clone returns the state itself: it never changes.
func (s *preFilterState) Clone() framework.StateData { return s }

// PreFilter parses the pod's node selector and required node affinity once
// per cycle. It returns Skip when the pod has neither (and no affinity is
// added by configuration), and rejects the pod when every required term asks
// for contradictory node names (metadata.name In ...).
func (pl *NodeAffinity) PreFilter(_ context.Context, cycleState *framework.CycleState, pod *corev1.Pod) *framework.Status {
	affinity := pod.Spec.Affinity
	noNodeAffinity := affinity == nil || affinity.NodeAffinity == nil ||
		affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil
	if noNodeAffinity && pl.addedNodeSelector == nil && pod.Spec.NodeSelector == nil {
		return framework.NewStatus(framework.Skip)
	}
	cycleState.Write(preFilterStateKey, &preFilterState{required: affinitymatch.GetRequiredNodeAffinity(pod)})
	if noNodeAffinity {
		return nil
	}
	if conflictingNodeNames(affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonConflict)
	}
	return nil
}

// conflictingNodeNames reports whether every term restricts metadata.name
// with In requirements whose intersection is empty, so no node can match.
// (Upstream also turns the names into a PreFilterResult that narrows the
// nodes to filter; kubette's PreFilter has no such result.)
func conflictingNodeNames(terms []corev1.NodeSelectorTerm) bool {
	if len(terms) == 0 {
		return false
	}
	for _, t := range terms {
		var names map[string]bool
		for _, r := range t.MatchFields {
			if r.Key != metav1.ObjectNameField || r.Operator != corev1.NodeSelectorOpIn {
				continue
			}
			if names == nil {
				names = make(map[string]bool, len(r.Values))
				for _, v := range r.Values {
					names[v] = true
				}
				continue
			}
			next := make(map[string]bool, len(names))
			for _, v := range r.Values {
				if names[v] {
					next[v] = true
				}
			}
			names = next
		}
		if names == nil || len(names) > 0 {
			// A term without name requirements, or with a possible name, can match.
			return false
		}
	}
	return true
}

// Filter checks the node against the configured added affinity and the pod's
// node selector and required node affinity.
func (pl *NodeAffinity) Filter(_ context.Context, cycleState *framework.CycleState, pod *corev1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	node := nodeInfo.Node()
	if node == nil {
		return framework.NewStatus(framework.Error, "node not found")
	}
	if pl.addedNodeSelector != nil && !pl.addedNodeSelector.Match(node) {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonEnforced)
	}
	s, err := getPreFilterState(cycleState)
	if err != nil {
		// PreFilter did not run (or said Skip): parse here, as upstream does.
		s = &preFilterState{required: affinitymatch.GetRequiredNodeAffinity(pod)}
	}
	if !s.required.Match(node) {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonPod)
	}
	return nil
}

func getPreFilterState(cycleState *framework.CycleState) (*preFilterState, error) {
	c, err := cycleState.Read(preFilterStateKey)
	if err != nil {
		return nil, fmt.Errorf("reading %q from cycleState: %w", preFilterStateKey, err)
	}
	s, ok := c.(*preFilterState)
	if !ok {
		return nil, fmt.Errorf("invalid PreFilter state, got type %T", c)
	}
	return s, nil
}

// preScoreState is the pod's parsed preferred node affinity (nil when none).
type preScoreState struct {
	preferred *affinitymatch.PreferredSchedulingTerms
}

// Clone returns the state itself: it never changes.
func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore parses the pod's preferred node affinity; Skip when there is none.
func (pl *NodeAffinity) PreScore(_ context.Context, cycleState *framework.CycleState, pod *corev1.Pod, _ []*framework.NodeInfo) *framework.Status {
	preferred, err := podPreferredNodeAffinity(pod)
	if err != nil {
		return framework.AsStatus(err)
	}
	if preferred == nil && pl.addedPrefSchedTerms == nil {
		return framework.NewStatus(framework.Skip)
	}
	cycleState.Write(preScoreStateKey, &preScoreState{preferred: preferred})
	return nil
}

// Score is the sum of the weights of the preferred terms (the pod's and the
// added ones) that the node matches; NormalizeScore scales it to 0..100.
func (pl *NodeAffinity) Score(_ context.Context, cycleState *framework.CycleState, pod *corev1.Pod, nodeInfo *framework.NodeInfo) (int64, *framework.Status) {
	node := nodeInfo.Node()
	if node == nil {
		return 0, framework.NewStatus(framework.Error, "node not found")
	}
	var count int64
	if pl.addedPrefSchedTerms != nil {
		count += pl.addedPrefSchedTerms.Score(node)
	}
	s, err := getPreScoreState(cycleState)
	if err != nil {
		preferred, perr := podPreferredNodeAffinity(pod)
		if perr != nil {
			return 0, framework.AsStatus(perr)
		}
		s = &preScoreState{preferred: preferred}
	}
	if s.preferred != nil {
		count += s.preferred.Score(node)
	}
	return count, nil
}

// ScoreExtensions returns the plugin itself: it normalises its scores.
func (pl *NodeAffinity) ScoreExtensions() framework.ScoreExtensions { return pl }

// NormalizeScore scales the scores to 0..MaxNodeScore by the highest one
// (upstream's DefaultNormalizeScore, not reversed).
func (pl *NodeAffinity) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *corev1.Pod, scores []framework.NodeScore) *framework.Status {
	framework.DefaultNormalizeScore(framework.MaxNodeScore, false, scores)
	return nil
}

func podPreferredNodeAffinity(pod *corev1.Pod) (*affinitymatch.PreferredSchedulingTerms, error) {
	a := pod.Spec.Affinity
	if a != nil && a.NodeAffinity != nil && a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution != nil {
		return affinitymatch.NewPreferredSchedulingTerms(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	return nil, nil
}

func getPreScoreState(cycleState *framework.CycleState) (*preScoreState, error) {
	c, err := cycleState.Read(preScoreStateKey)
	if err != nil {
		return nil, fmt.Errorf("reading %q from cycleState: %w", preScoreStateKey, err)
	}
	s, ok := c.(*preScoreState)
	if !ok {
		return nil, errors.New("invalid PreScore state")
	}
	return s, nil
}
