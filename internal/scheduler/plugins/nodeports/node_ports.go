// Package nodeports is the NodePorts filter: a pod asking for host ports fits a
// node only if none of them is already in use there, as upstream (a port on
// 0.0.0.0 collides with the same port/protocol on every address).
package nodeports

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/podfit"
	"github.com/kubette/kubette/internal/scheduler/framework"
)

// Name is the plugin's registered name.
const Name = podfit.NodePorts

// ErrReason is the Filter reason, exactly as upstream.
const ErrReason = podfit.ErrReasonNodePorts

// preFilterStateKey is where PreFilter leaves the pod's host ports.
const preFilterStateKey framework.StateKey = "PreFilter" + Name

// preFilterState holds the pod's host ports; it never changes after PreFilter.
type preFilterState []corev1.ContainerPort

// Clone returns the state itself: it is read-only.
func (s preFilterState) Clone() framework.StateData { return s }

// NodePorts checks host-port conflicts.
type NodePorts struct{}

var (
	_ framework.PreFilterPlugin = (*NodePorts)(nil)
	_ framework.FilterPlugin    = (*NodePorts)(nil)
)

// New returns the plugin; it takes no arguments (args is ignored).
func New(_ context.Context, _ any, _ framework.Handle) (framework.Plugin, error) {
	return &NodePorts{}, nil
}

// Name returns Name.
func (pl *NodePorts) Name() string { return Name }

// PreFilter records the pod's host ports, or returns Skip when it has none so
// Filter is not called for this pod.
func (pl *NodePorts) PreFilter(_ context.Context, state *framework.CycleState, pod *corev1.Pod) *framework.Status {
	ports := HostPorts(pod)
	if len(ports) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(preFilterStateKey, preFilterState(ports))
	return nil
}

// Filter rejects a node where one of the pod's host ports is taken.
func (pl *NodePorts) Filter(_ context.Context, state *framework.CycleState, _ *corev1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	c, err := state.Read(preFilterStateKey)
	if err != nil {
		return framework.AsStatus(fmt.Errorf("reading %q from cycleState: %w", preFilterStateKey, err))
	}
	ports, ok := c.(preFilterState)
	if !ok {
		return framework.AsStatus(fmt.Errorf("invalid PreFilter state, got type %T", c))
	}
	if !fitsPorts(ports, nodeInfo) {
		return framework.NewStatus(framework.Unschedulable, ErrReason)
	}
	return nil
}

// Fits reports whether the pod's host ports are all free on the node.
func Fits(pod *corev1.Pod, nodeInfo *framework.NodeInfo) bool {
	return fitsPorts(HostPorts(pod), nodeInfo)
}

func fitsPorts(want []corev1.ContainerPort, nodeInfo *framework.NodeInfo) bool {
	return podfit.PortsFit(want, nodeInfo.UsedPorts)
}

// HostPorts returns the ports with a hostPort of the pod's containers and of its
// restartable (sidecar) init containers, which run for the pod's whole life; as
// upstream's GetHostPorts.
func HostPorts(pod *corev1.Pod) []corev1.ContainerPort { return podfit.HostPorts(pod) }
