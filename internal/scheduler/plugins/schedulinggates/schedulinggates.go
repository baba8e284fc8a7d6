// Package schedulinggates is the SchedulingGates plugin: a pod whose
// spec.schedulingGates is not empty is not ready for scheduling, so it never enters
// the active queue until every gate is removed, as upstream.
package schedulinggates

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

// Name is the plugin's registered name.
const Name = "SchedulingGates"

// SchedulingGates holds back pods with scheduling gates.
type SchedulingGates struct{}

var _ framework.PreEnqueuePlugin = (*SchedulingGates)(nil)

// New returns the plugin; it takes no arguments (args is ignored).
func New(_ context.Context, _ any, _ framework.Handle) (framework.Plugin, error) {
	return &SchedulingGates{}, nil
}

// Name returns Name.
func (pl *SchedulingGates) Name() string { return Name }

// PreEnqueue rejects a pod that still has gates, naming them as upstream does.
func (pl *SchedulingGates) PreEnqueue(_ context.Context, pod *corev1.Pod) *framework.Status {
	gates := pod.Spec.SchedulingGates
	if len(gates) == 0 {
		return nil
	}
	names := make([]string, len(gates))
	for i, g := range gates {
		names[i] = g.Name
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf("waiting for scheduling gates: %v", names))
}
