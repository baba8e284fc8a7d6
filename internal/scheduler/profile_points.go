package scheduler

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

func podPriority(p *corev1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// runFilterWithNominatedPods filters as upstream's RunFilterPluginsWithNominatedPods:
// when the node has nominated pods of at least the pod's priority, the filters
// run first with those pods added to a copy of the node and of the state (so a
// lower-priority pod cannot take the room preemption made), and, if that passes,
// again without them (so that the pod's anti-affinity and spread constraints do
// not count pods that may never come).
func (p *profile) runFilterWithNominatedPods(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	return p.filterWithNominatedPods(ctx, state, pod, ni, p.activeFilters(state))
}

// filterWithNominatedPods is runFilterWithNominatedPods with the cycle's Filter
// plugins worked out once (activeFilters) by a caller that filters many nodes.
func (p *profile) filterWithNominatedPods(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo, filters []framework.FilterPlugin) *framework.Status {
	added, stateWith, niWith, err := p.addNominatedPods(ctx, state, pod, ni)
	if err != nil {
		return framework.AsStatus(err)
	}
	st := p.runFilterPlugins(ctx, stateWith, pod, niWith, filters)
	if !added || !st.IsSuccess() {
		return st
	}
	return p.runFilterPlugins(ctx, state, pod, ni, filters)
}

// addNominatedPods returns copies of state and ni with the node's nominated pods
// of higher or equal priority than pod added, or the originals when there are none.
// With no nominated pod anywhere (the common case) it does not look at the node.
func (p *profile) addNominatedPods(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) (bool, *framework.CycleState, *framework.NodeInfo, error) {
	if p.nominator == nil || !p.nominator.HasNominatedPods() || ni.Node() == nil {
		return false, state, ni, nil
	}
	nominated := p.nominator.NominatedPodsForNode(ni.Node().Name)
	if len(nominated) == 0 {
		return false, state, ni, nil
	}
	var niOut *framework.NodeInfo
	var stateOut *framework.CycleState
	prio := podPriority(pod)
	for _, np := range nominated {
		if np.UID == pod.UID || podPriority(np) < prio {
			continue
		}
		if niOut == nil {
			niOut, stateOut = ni.Clone(), state.Clone()
		}
		niOut.AddPod(np)
		if st := p.runPreFilterExtensionAddPod(ctx, stateOut, pod, np, niOut); !st.IsSuccess() {
			return false, state, ni, fmt.Errorf("add nominated pod %s/%s: %w", np.Namespace, np.Name, st.AsError())
		}
	}
	if niOut == nil {
		return false, state, ni, nil
	}
	return true, stateOut, niOut, nil
}

// runPreFilterExtension calls fn for each PreFilter plugin with extensions that runs for this pod.
func (p *profile) runPreFilterExtension(state *framework.CycleState, fn func(name string, ext framework.PreFilterExtensions) *framework.Status) *framework.Status {
	for _, pl := range p.preFilter {
		ext, ok := pl.(framework.PreFilterExtensions)
		if !ok || state.SkipFilterPlugins[pl.Name()] {
			continue
		}
		if st := fn(pl.Name(), ext); !st.IsSuccess() {
			return framework.AsStatus(fmt.Errorf("running PreFilter extension of plugin %q: %w", pl.Name(), st.AsError())).WithPlugin(pl.Name())
		}
	}
	return nil
}

// runPreFilterExtensionAddPod tells the PreFilter extensions that podToAdd was added to ni.
func (p *profile) runPreFilterExtensionAddPod(ctx context.Context, state *framework.CycleState, podToSchedule, podToAdd *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	return p.runPreFilterExtension(state, func(_ string, ext framework.PreFilterExtensions) *framework.Status {
		return ext.AddPod(ctx, state, podToSchedule, podToAdd, ni)
	})
}

// runPreFilterExtensionRemovePod tells the PreFilter extensions that podToRemove left ni.
func (p *profile) runPreFilterExtensionRemovePod(ctx context.Context, state *framework.CycleState, podToSchedule, podToRemove *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	return p.runPreFilterExtension(state, func(_ string, ext framework.PreFilterExtensions) *framework.Status {
		return ext.RemovePod(ctx, state, podToSchedule, podToRemove, ni)
	})
}

// runReserve runs the Reserve plugins in order and stops at the first failure;
// the caller then runs runUnreserve.
func (p *profile) runReserve(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, nodeName string) *framework.Status {
	for _, pl := range p.reserve {
		s := pl.Reserve(ctx, state, pod, nodeName)
		if s.IsSuccess() {
			continue
		}
		if s.IsRejected() {
			return framework.NewStatus(s.Code(), s.Reasons()...).WithPlugin(pl.Name())
		}
		return framework.AsStatus(fmt.Errorf("running Reserve plugin %q: %w", pl.Name(), s.AsError())).WithPlugin(pl.Name())
	}
	return nil
}

// runUnreserve runs every Reserve plugin's Unreserve, in reverse order.
func (p *profile) runUnreserve(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, nodeName string) {
	for i := len(p.reserve) - 1; i >= 0; i-- {
		p.reserve[i].Unreserve(ctx, state, pod, nodeName)
	}
}

// runPermit runs the Permit plugins. A rejection or error stops at once. When
// some plugins ask to wait and none rejects, the pod joins the waiting pods with
// each plugin's timeout (at most framework.MaxPermitTimeout) and Wait is returned.
func (p *profile) runPermit(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, nodeName string) *framework.Status {
	var waits map[string]time.Duration
	for _, pl := range p.permit {
		s, timeout := pl.Permit(ctx, state, pod, nodeName)
		switch {
		case s.IsSuccess():
		case s.IsRejected():
			return framework.NewStatus(s.Code(), s.Reasons()...).WithPlugin(pl.Name())
		case s.IsWait():
			if waits == nil {
				waits = map[string]time.Duration{}
			}
			waits[pl.Name()] = min(timeout, framework.MaxPermitTimeout)
		default:
			return framework.AsStatus(fmt.Errorf("running Permit plugin %q: %w", pl.Name(), s.AsError())).WithPlugin(pl.Name())
		}
	}
	if waits == nil {
		return nil
	}
	p.waitingPods.Add(pod, waits)
	return framework.NewStatus(framework.Wait, fmt.Sprintf("one or more plugins asked to wait and no plugin rejected pod %q", pod.Name))
}

// waitOnPermit blocks the binding goroutine until the waiting pod is allowed or
// rejected (nil at once for a pod that is not waiting).
func (p *profile) waitOnPermit(ctx context.Context, pod *corev1.Pod) *framework.Status {
	s := p.waitingPods.Wait(pod.UID, ctx.Done())
	if s.IsSuccess() || s.IsRejected() {
		return s
	}
	return framework.AsStatus(fmt.Errorf("waiting on permit for pod: %w", s.AsError())).WithPlugin(s.Plugin())
}

// runPreBind runs the PreBind plugins until one fails.
func (p *profile) runPreBind(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, nodeName string) *framework.Status {
	for _, pl := range p.preBind {
		s := pl.PreBind(ctx, state, pod, nodeName)
		if s.IsSuccess() {
			continue
		}
		if s.IsRejected() {
			return framework.NewStatus(s.Code(), s.Reasons()...).WithPlugin(pl.Name())
		}
		return framework.AsStatus(fmt.Errorf("running PreBind plugin %q: %w", pl.Name(), s.AsError())).WithPlugin(pl.Name())
	}
	return nil
}

// runPostBind tells the PostBind plugins the pod was bound.
func (p *profile) runPostBind(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, nodeName string) {
	for _, pl := range p.postBind {
		pl.PostBind(ctx, state, pod, nodeName)
	}
}
