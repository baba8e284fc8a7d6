// Package nodeunschedulable is the NodeUnschedulable filter: a node whose
// spec.unschedulable is set (kubectl cordon) only takes pods that tolerate the
// node.kubernetes.io/unschedulable:NoSchedule taint, as upstream.
package nodeunschedulable

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

// Name is the plugin's registered name.
const Name = "NodeUnschedulable"

// Reasons reported by Filter, exactly as upstream.
const (
	// ErrReasonUnschedulable is returned for a cordoned node the pod does not tolerate.
	ErrReasonUnschedulable = "node(s) were unschedulable"
	// ErrReasonUnknownCondition is returned when the NodeInfo carries no Node.
	ErrReasonUnknownCondition = "node(s) had unknown conditions"
)

// NodeUnschedulable filters out cordoned nodes.
type NodeUnschedulable struct {
	logger klog.Logger
	// taint is the taint node.spec.unschedulable stands for (never changed after New).
	taint corev1.Taint
}

var _ framework.FilterPlugin = (*NodeUnschedulable)(nil)

// New returns the plugin; it takes no arguments (args is ignored).
func New(ctx context.Context, _ any, _ framework.Handle) (framework.Plugin, error) {
	return &NodeUnschedulable{
		logger: klog.FromContext(ctx),
		taint:  corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule},
	}, nil
}

// Name returns Name.
func (pl *NodeUnschedulable) Name() string { return Name }

// Filter rejects a node with spec.unschedulable unless the pod tolerates the
// unschedulable NoSchedule taint.
func (pl *NodeUnschedulable) Filter(_ context.Context, _ *framework.CycleState, pod *corev1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	node := nodeInfo.Node()
	if node == nil {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonUnknownCondition)
	}
	if !nodeInfo.Unschedulable() { // the node's spec.unschedulable, kept in the NodeInfo
		return nil
	}
	for i := range pod.Spec.Tolerations {
		if pod.Spec.Tolerations[i].ToleratesTaint(pl.logger, &pl.taint, false) {
			return nil
		}
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonUnschedulable)
}
