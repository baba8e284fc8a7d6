// Package nodename is the NodeName filter: a pod that names a node in
// spec.nodeName fits only that node, as upstream.
package nodename

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/podfit"
	"github.com/kubette/kubette/internal/scheduler/framework"
)

// Name is the plugin's registered name.
const Name = podfit.NodeName

// ErrReason is the Filter reason, exactly as upstream.
const ErrReason = podfit.ErrReasonNodeName

// NodeName checks spec.nodeName against the node.
type NodeName struct{}

var _ framework.FilterPlugin = (*NodeName)(nil)

// New returns the plugin; it takes no arguments (args is ignored).
func New(_ context.Context, _ any, _ framework.Handle) (framework.Plugin, error) {
	return &NodeName{}, nil
}

// Name returns Name.
func (pl *NodeName) Name() string { return Name }

// Filter rejects every node but the one the pod names.
func (pl *NodeName) Filter(_ context.Context, _ *framework.CycleState, pod *corev1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	if !Fits(pod, nodeInfo) {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReason)
	}
	return nil
}

// Fits reports whether the pod names no node or names this one.
func Fits(pod *corev1.Pod, nodeInfo *framework.NodeInfo) bool {
	return podfit.NodeNameMatches(pod, nodeInfo.Node())
}
