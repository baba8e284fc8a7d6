package printers

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// nodeUnreachablePodReason is the pod status reason set when the node of a
// pod is lost (k8s.io/kubernetes/pkg/util/node.NodeUnreachablePodReason).
const nodeUnreachablePodReason = "NodeLost"

// podPrinter prints pods: NAME READY STATUS RESTARTS AGE | IP NODE
// NOMINATED NODE READINESS GATES.
func podPrinter() Printer {
	statusDoc := corev1.PodStatus{}.SwaggerDoc()
	specDoc := corev1.PodSpec{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Ready", "string", 0, "The aggregate readiness state of this pod for accepting traffic."),
			column("Status", "string", 0, "The aggregate status of the containers in this pod."),
			column("Restarts", "string", 0, "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
			ageColumn(),
			column("IP", "string", 1, statusDoc["podIP"]),
			column("Node", "string", 1, specDoc["nodeName"]),
			column("Nominated Node", "string", 1, statusDoc["nominatedNodeName"]),
			column("Readiness Gates", "string", 1, specDoc["readinessGates"]),
		},
		Row:        rowFor(podCells),
		Conditions: podRowConditions,
	}
}

// podCells returns the cells of one pod.
func podCells(pod *corev1.Pod, now time.Time) []interface{} {
	s := summarizePod(pod)

	restarts := strconv.Itoa(s.restarts)
	if s.restarts != 0 && !s.lastRestart.IsZero() {
		restarts = fmt.Sprintf("%d (%s ago)", s.restarts, translateTimestampSince(s.lastRestart, now))
	}

	ip := pod.Status.PodIP
	if len(pod.Status.PodIPs) > 0 {
		ip = pod.Status.PodIPs[0].IP
	}

	return []interface{}{
		pod.Name,
		fmt.Sprintf("%d/%d", s.ready, s.total),
		s.status,
		restarts,
		translateTimestampSince(pod.CreationTimestamp, now),
		orNone(ip),
		orNone(pod.Spec.NodeName),
		orNone(pod.Status.NominatedNodeName),
		readinessGates(pod),
	}
}

// podRowConditions marks succeeded and failed pods as completed rows.
func podRowConditions(obj runtime.Object) []metav1.TableRowCondition {
	pod, err := asType[corev1.Pod](obj)
	if err != nil {
		return nil
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		return []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodSucceeded), Message: "The pod has completed successfully."}}
	case corev1.PodFailed:
		return []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodFailed), Message: "The pod failed."}}
	}
	return nil
}

// podSummary is what the READY, STATUS and RESTARTS columns show of a pod.
type podSummary struct {
	ready, total int
	status       string
	restarts     int
	lastRestart  metav1.Time
}

// summarizePod derives the aggregate readiness, status and restart count of a
// pod with the same precedence rules as kube-apiserver:
//
//   - the phase, overridden by status.reason, overridden by SchedulingGated;
//   - the first init container that has not completed ("Init:x/y",
//     "Init:<waiting reason>", "Init:<terminated reason>", "Init:ExitCode:N");
//   - otherwise the last container with a waiting or terminated reason;
//   - "Completed" turned back into "Running"/"NotReady" while containers run;
//   - "Terminating" (or "Unknown" for lost nodes) once deletion started.
//
// Restartable init containers (sidecars) count as containers, and while the
// pod is initializing only init container restarts are counted.
func summarizePod(pod *corev1.Pod) podSummary {
	s := podSummary{total: len(pod.Spec.Containers)}

	phase := pod.Status.Phase
	s.status = string(phase)
	if pod.Status.Reason != "" {
		s.status = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			s.status = corev1.PodReasonSchedulingGated
		}
	}

	sidecars := make(map[string]bool)
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars[c.Name] = true
			s.total++
		}
	}

	var sidecarRestarts int
	var sidecarLastRestart metav1.Time
	initializing := false
	for i := range pod.Status.InitContainerStatuses {
		cs := &pod.Status.InitContainerStatuses[i]
		s.restarts += int(cs.RestartCount)
		s.lastRestart = laterTermination(s.lastRestart, cs)
		if sidecars[cs.Name] {
			sidecarRestarts += int(cs.RestartCount)
			sidecarLastRestart = laterTermination(sidecarLastRestart, cs)
		}

		term := cs.State.Terminated
		if term != nil && term.ExitCode == 0 {
			continue // finished successfully
		}
		if sidecars[cs.Name] && cs.Started != nil && *cs.Started {
			if cs.Ready {
				s.ready++
			}
			continue // a started sidecar does not block initialization
		}

		initializing = true
		switch {
		case term != nil:
			s.status = "Init:" + terminationReason(term)
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "" && cs.State.Waiting.Reason != "PodInitializing":
			s.status = "Init:" + cs.State.Waiting.Reason
		default:
			s.status = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		break
	}

	if !initializing || podConditionTrue(pod, corev1.PodInitialized) {
		s.restarts = sidecarRestarts
		s.lastRestart = sidecarLastRestart
		hasRunning := false
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			cs := &pod.Status.ContainerStatuses[i]
			s.restarts += int(cs.RestartCount)
			s.lastRestart = laterTermination(s.lastRestart, cs)
			switch {
			case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
				s.status = cs.State.Waiting.Reason
			case cs.State.Terminated != nil:
				s.status = terminationReason(cs.State.Terminated)
			case cs.Ready && cs.State.Running != nil:
				hasRunning = true
				s.ready++
			}
		}
		// Some containers completed while others still run.
		if s.status == "Completed" && hasRunning {
			if podHasReadyCondition(pod) {
				s.status = "Running"
			} else {
				s.status = "NotReady"
			}
		}
	}

	if pod.DeletionTimestamp != nil {
		if pod.Status.Reason == nodeUnreachablePodReason {
			s.status = "Unknown"
		} else if phase != corev1.PodSucceeded && phase != corev1.PodFailed {
			s.status = "Terminating"
		}
	}
	return s
}

// terminationReason describes a terminated container state: its reason, or
// "Signal:N" / "ExitCode:N" when no reason was given.
func terminationReason(t *corev1.ContainerStateTerminated) string {
	switch {
	case t.Reason != "":
		return t.Reason
	case t.Signal != 0:
		return fmt.Sprintf("Signal:%d", t.Signal)
	default:
		return fmt.Sprintf("ExitCode:%d", t.ExitCode)
	}
}

// laterTermination returns the later of last and the finish time of the
// previous termination of cs.
func laterTermination(last metav1.Time, cs *corev1.ContainerStatus) metav1.Time {
	if t := cs.LastTerminationState.Terminated; t != nil && last.Before(&t.FinishedAt) {
		return t.FinishedAt
	}
	return last
}

// podConditionTrue reports whether the first condition of type t is True.
func podConditionTrue(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podHasReadyCondition reports whether any Ready condition of the pod is True.
func podHasReadyCondition(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// readinessGates renders "<true gates>/<gates>", or "<none>" without gates.
func readinessGates(pod *corev1.Pod) string {
	if len(pod.Spec.ReadinessGates) == 0 {
		return "<none>"
	}
	passed := 0
	for _, gate := range pod.Spec.ReadinessGates {
		if podConditionTrue(pod, gate.ConditionType) {
			passed++
		}
	}
	return fmt.Sprintf("%d/%d", passed, len(pod.Spec.ReadinessGates))
}

// orNone returns s, or "<none>" when s is empty.
func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
