// Package tainttoleration is the TaintToleration plugin, as upstream: Filter
// rejects nodes with a NoSchedule or NoExecute taint the pod does not tolerate,
// and Score prefers nodes with fewer untolerated PreferNoSchedule taints.
package tainttoleration

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/kubette/kubette/internal/podfit"
	"github.com/kubette/kubette/internal/scheduler/framework"
)

// Name is the plugin's registered name.
const Name = podfit.TaintToleration

// preScoreStateKey is where PreScore leaves the pod's PreferNoSchedule tolerations.
const preScoreStateKey framework.StateKey = "PreScore" + Name

// Args configures the plugin. The zero value is the default.
type Args struct {
	// EnableComparisonOperators lets tolerations use the Lt and Gt operators on
	// integer taint values (upstream's TaintTolerationComparisonOperators gate).
	// When false such tolerations match nothing.
	EnableComparisonOperators bool
}

// TaintToleration matches taints against tolerations.
type TaintToleration struct {
	logger       klog.Logger
	comparisonOp bool
}

var (
	_ framework.FilterPlugin    = (*TaintToleration)(nil)
	_ framework.PreScorePlugin  = (*TaintToleration)(nil)
	_ framework.ScorePlugin     = (*TaintToleration)(nil)
	_ framework.ScoreExtensions = (*TaintToleration)(nil)
)

// New returns the plugin. args is nil, Args or *Args.
func New(ctx context.Context, args any, _ framework.Handle) (framework.Plugin, error) {
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
		return nil, fmt.Errorf("%s: want args of type Args, got %T", Name, args)
	}
	return &TaintToleration{logger: klog.FromContext(ctx), comparisonOp: a.EnableComparisonOperators}, nil
}

// Name returns Name.
func (pl *TaintToleration) Name() string { return Name }

// Filter rejects the node if it has a NoSchedule or NoExecute taint that none of
// the pod's tolerations tolerates; the reason names the first such taint in the
// node's order, as upstream: "node(s) had untolerated taint {key: value}".
func (pl *TaintToleration) Filter(_ context.Context, _ *framework.CycleState, pod *corev1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	node := nodeInfo.Node()
	if node == nil {
		return framework.AsStatus(fmt.Errorf("%s: invalid nodeInfo: no node", Name))
	}
	taints := nodeInfo.Taints() // the node's spec.taints, kept in the NodeInfo
	for i := range taints {
		taint := &taints[i]
		if taint.Effect != corev1.TaintEffectNoSchedule && taint.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !pl.tolerated(pod.Spec.Tolerations, taint) {
			return framework.NewStatus(framework.UnschedulableAndUnresolvable,
				"node(s) had untolerated taint {"+taint.Key+": "+taint.Value+"}")
		}
	}
	return nil
}

// tolerated reports whether any of the tolerations tolerates the taint.
func (pl *TaintToleration) tolerated(tolerations []corev1.Toleration, taint *corev1.Taint) bool {
	for i := range tolerations {
		if ToleratesTaint(pl.logger, &tolerations[i], taint, pl.comparisonOp) {
			return true
		}
	}
	return false
}

// ToleratesTaint reports whether t tolerates taint, as upstream's
// (*v1.Toleration).ToleratesTaint: an empty effect matches every effect, an
// empty key (with Exists) every key, Exists any value, Equal (or no operator)
// only the same value; Lt and Gt compare integer values when enabled.
func ToleratesTaint(logger klog.Logger, t *corev1.Toleration, taint *corev1.Taint, enableComparisonOperators bool) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case "", corev1.TolerationOpEqual:
		return t.Value == taint.Value
	case corev1.TolerationOpExists:
		return true
	default:
		// Lt, Gt and anything unknown: the API type's own rules.
		return t.ToleratesTaint(logger, taint, enableComparisonOperators)
	}
}

// preScoreState holds the tolerations that can tolerate PreferNoSchedule taints.
type preScoreState struct {
	tolerations []corev1.Toleration
}

// Clone returns the state itself: it is read-only.
func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore keeps the pod's tolerations with effect PreferNoSchedule or no effect.
func (pl *TaintToleration) PreScore(_ context.Context, state *framework.CycleState, pod *corev1.Pod, _ []*framework.NodeInfo) *framework.Status {
	state.Write(preScoreStateKey, &preScoreState{tolerations: preferNoScheduleTolerations(pod.Spec.Tolerations)})
	return nil
}

func preferNoScheduleTolerations(tolerations []corev1.Toleration) []corev1.Toleration {
	var out []corev1.Toleration
	for _, t := range tolerations {
		if t.Effect == "" || t.Effect == corev1.TaintEffectPreferNoSchedule {
			out = append(out, t)
		}
	}
	return out
}

// Score is the number of the node's PreferNoSchedule taints the pod does not
// tolerate; NormalizeScore turns it around so fewer is better.
func (pl *TaintToleration) Score(_ context.Context, state *framework.CycleState, pod *corev1.Pod, nodeInfo *framework.NodeInfo) (int64, *framework.Status) {
	node := nodeInfo.Node()
	if node == nil {
		return 0, framework.AsStatus(fmt.Errorf("%s: invalid nodeInfo: no node", Name))
	}
	var tolerations []corev1.Toleration
	if c, err := state.Read(preScoreStateKey); err == nil {
		s, ok := c.(*preScoreState)
		if !ok {
			return 0, framework.AsStatus(fmt.Errorf("invalid PreScore state, got type %T", c))
		}
		tolerations = s.tolerations
	} else {
		tolerations = preferNoScheduleTolerations(pod.Spec.Tolerations)
	}
	var count int64
	taints := nodeInfo.Taints() // the node's spec.taints, kept in the NodeInfo
	for i := range taints {
		if taints[i].Effect == corev1.TaintEffectPreferNoSchedule && !pl.tolerated(tolerations, &taints[i]) {
			count++
		}
	}
	return count, nil
}

// ScoreExtensions returns the plugin itself: it normalises its scores.
func (pl *TaintToleration) ScoreExtensions() framework.ScoreExtensions { return pl }

// NormalizeScore scales the counts to [0, MaxNodeScore] and reverses them, so the
// node with the most untolerated PreferNoSchedule taints scores 0 (upstream's
// DefaultNormalizeScore with reverse).
func (pl *TaintToleration) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *corev1.Pod, scores []framework.NodeScore) *framework.Status {
	framework.DefaultNormalizeScore(framework.MaxNodeScore, true, scores)
	return nil
}
