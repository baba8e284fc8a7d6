package kubelet

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Reasons of the pod conditions the kubelet owns, as upstream's.
const (
	reasonUnknownContainerStatuses = "UnknownContainerStatuses"
	reasonPodCompleted             = "PodCompleted"
	reasonPodFailed                = "PodFailed"
	reasonContainersNotReady       = "ContainersNotReady"
	reasonContainersNotInitialized = "ContainersNotInitialized"
	reasonReadinessGatesNotReady   = "ReadinessGatesNotReady"
)

// statusOf finds the status of the container named name.
func statusOf(statuses []v1.ContainerStatus, name string) (v1.ContainerStatus, bool) {
	for _, s := range statuses {
		if s.Name == name {
			return s, true
		}
	}
	return v1.ContainerStatus{}, false
}

// nameList renders names as upstream's messages do ("[a b]").
func nameList(names []string) string { return "[" + strings.Join(names, " ") + "]" }

// unknownUnready joins the "unknown" and "unready"/"incomplete" parts of a condition message.
func unknownUnready(unknown, unready []string, unreadyWord string) string {
	var parts []string
	if len(unknown) > 0 {
		parts = append(parts, "containers with unknown status: "+nameList(unknown))
	}
	if len(unready) > 0 {
		parts = append(parts, "containers with "+unreadyWord+" status: "+nameList(unready))
	}
	return strings.Join(parts, ", ")
}

// initializedCondition is the pod's Initialized condition (upstream's
// GeneratePodInitializedCondition): true when every init container completed (a regular one
// is ready once it exited 0, a sidecar once it started), or once any app container started,
// or when the pod succeeded. all holds the init and the app containers' statuses.
func initializedCondition(spec *v1.PodSpec, all []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	c := v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue}
	if all == nil && len(spec.InitContainers) > 0 {
		c.Status, c.Reason = v1.ConditionFalse, reasonUnknownContainerStatuses
		return c
	}
	var unknown, incomplete []string
	for i := range spec.InitContainers {
		ic := &spec.InitContainers[i]
		s, ok := statusOf(all, ic.Name)
		switch {
		case !ok:
			unknown = append(unknown, ic.Name)
		case isSidecar(ic) && (s.Started == nil || !*s.Started):
			incomplete = append(incomplete, ic.Name)
		case !isSidecar(ic) && !s.Ready:
			incomplete = append(incomplete, ic.Name)
		}
	}
	if phase == v1.PodSucceeded && len(unknown) == 0 {
		c.Reason = reasonPodCompleted
		return c
	}
	if anyAppContainerStarted(spec, all) {
		return c // initialized before; sidecars restarting do not undo that
	}
	if msg := unknownUnready(unknown, incomplete, "incomplete"); msg != "" {
		c.Status, c.Reason, c.Message = v1.ConditionFalse, reasonContainersNotInitialized, msg
	}
	return c
}

// anyAppContainerStarted tells whether an app container runs or ran.
func anyAppContainerStarted(spec *v1.PodSpec, all []v1.ContainerStatus) bool {
	for _, c := range spec.Containers {
		if s, ok := statusOf(all, c.Name); ok && (s.State.Running != nil || s.State.Terminated != nil) {
			return true
		}
	}
	return false
}

// containersReadyCondition is the pod's ContainersReady condition (upstream's
// GenerateContainersReadyCondition): every app container and every sidecar is ready.
func containersReadyCondition(spec *v1.PodSpec, all []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	c := v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionTrue}
	if all == nil {
		c.Status, c.Reason = v1.ConditionFalse, reasonUnknownContainerStatuses
		return c
	}
	var unknown, unready []string
	check := func(name string) {
		if s, ok := statusOf(all, name); !ok {
			unknown = append(unknown, name)
		} else if !s.Ready {
			unready = append(unready, name)
		}
	}
	for i := range spec.InitContainers {
		if isSidecar(&spec.InitContainers[i]) {
			check(spec.InitContainers[i].Name)
		}
	}
	for _, ac := range spec.Containers {
		check(ac.Name)
	}
	if (phase == v1.PodSucceeded && len(unknown) == 0) || phase == v1.PodFailed {
		c.Status, c.Reason = v1.ConditionFalse, terminalReason(phase)
		return c
	}
	if msg := unknownUnready(unknown, unready, "unready"); msg != "" {
		c.Status, c.Reason, c.Message = v1.ConditionFalse, reasonContainersNotReady, msg
	}
	return c
}

func terminalReason(phase v1.PodPhase) string {
	if phase == v1.PodFailed {
		return reasonPodFailed
	}
	return reasonPodCompleted
}

// podReadyCondition is the pod's Ready condition (upstream's GeneratePodReadyCondition):
// ContainersReady, and every readiness gate's condition True in conditions.
func podReadyCondition(spec *v1.PodSpec, conditions []v1.PodCondition, all []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	cr := containersReadyCondition(spec, all, phase)
	if cr.Status != v1.ConditionTrue {
		return v1.PodCondition{Type: v1.PodReady, Status: cr.Status, Reason: cr.Reason, Message: cr.Message}
	}
	var msgs []string
	for _, g := range spec.ReadinessGates {
		var found *v1.PodCondition
		for i := range conditions {
			if conditions[i].Type == g.ConditionType {
				found = &conditions[i]
			}
		}
		switch {
		case found == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(g.ConditionType)))
		case found.Status != v1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(g.ConditionType), found.Status))
		}
	}
	if len(msgs) > 0 {
		return v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: reasonReadinessGatesNotReady, Message: strings.Join(msgs, ", ")}
	}
	return v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue}
}
