package why

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// event is a core/v1 or events.k8s.io/v1 Event about an object, reduced to what
// the explanations read.
type event struct {
	UID     string
	Kind    string
	Name    string
	Type    string
	Reason  string
	Message string
	Count   int32
	Time    time.Time
}

// eventsFor returns the events about the object (by UID when the event has one,
// else by kind and name), oldest first.
func eventsFor(evs []event, kind, name, uid string) []event {
	var out []event
	for _, e := range evs {
		if e.Kind != kind || e.Name != name {
			continue
		}
		if e.UID != "" && uid != "" && e.UID != uid {
			continue
		}
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out
}

// logFetcher returns a container's last log lines (nil when the kubelet does not answer).
type logFetcher func(ctx context.Context, pod *corev1.Pod, container string, previous bool) []string

// apiLogs reads pods/log through the API server with tailLines=5; errors mean no lines.
func apiLogs(client kubernetes.Interface) logFetcher {
	return func(ctx context.Context, pod *corev1.Pod, container string, previous bool) []string {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		tail := int64(5)
		raw, err := client.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{
			Container: container, TailLines: &tail, Previous: previous,
		}).DoRaw(ctx)
		if err != nil {
			return nil
		}
		text := strings.TrimRight(string(raw), "\n")
		if text == "" {
			return nil
		}
		return strings.Split(text, "\n")
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func condition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// podInputs is what explaining one pod reads besides the pod.
type podInputs struct {
	client  kubernetes.Interface
	cluster Cluster
	events  []event
	logs    logFetcher
}

// explainPod explains a pod that is pending or not ready (or says it is ready).
func explainPod(ctx context.Context, in podInputs, pod *corev1.Pod) (PodReport, error) {
	r := PodReport{Name: pod.Name, Phase: string(pod.Status.Phase), Node: pod.Spec.NodeName, Ready: podReady(pod)}
	evs := eventsFor(in.events, "Pod", pod.Name, string(pod.UID))
	if pod.DeletionTimestamp != nil {
		r.Summary = "the pod is being deleted"
		return r, nil
	}
	if terminal(pod) {
		r.Summary = fmt.Sprintf("the pod has finished (%s)", pod.Status.Phase)
		if pod.Status.Reason != "" || pod.Status.Message != "" {
			r.Summary += ": " + strings.TrimPrefix(pod.Status.Reason+" "+pod.Status.Message, " ")
		}
		r.Containers = containerReports(ctx, in, pod, true)
		return r, nil
	}
	if pod.Spec.NodeName == "" {
		s, err := explainScheduling(ctx, in.client, pod, in.cluster)
		if err != nil {
			return r, fmt.Errorf("explain scheduling of %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		if c := condition(pod, corev1.PodScheduled); c != nil && c.Status != corev1.ConditionTrue {
			s.Condition = strings.TrimPrefix(c.Reason+": "+c.Message, ": ")
		}
		for _, e := range evs {
			switch {
			case e.Reason == "FailedScheduling":
				s.LastEvent = e.Message
			case strings.Contains(strings.ToLower(e.Reason), "preempt"):
				s.Preemption = e.Reason + ": " + e.Message
			}
		}
		r.Scheduling = s
		r.Summary = schedulingSummary(s)
		return r, nil
	}
	if r.Ready {
		r.Summary = "the pod is ready"
		return r, nil
	}
	r.NodeProblem = fmt.Sprintf("node %s does not exist", pod.Spec.NodeName)
	for _, n := range in.cluster.Nodes {
		if n.Name == pod.Spec.NodeName {
			r.NodeProblem = nodeProblem(n)
		}
	}
	r.Containers = containerReports(ctx, in, pod, false)
	r.Probes = probeFailures(evs)
	for _, g := range pod.Spec.ReadinessGates {
		c := condition(pod, g.ConditionType)
		switch {
		case c == nil:
			r.ReadinessGates = append(r.ReadinessGates, fmt.Sprintf("%s: condition not set", g.ConditionType))
		case c.Status != corev1.ConditionTrue:
			r.ReadinessGates = append(r.ReadinessGates, strings.TrimSuffix(fmt.Sprintf("%s: %s %s", g.ConditionType, c.Status, strings.TrimSpace(c.Reason+" "+c.Message)), " "))
		}
	}
	for _, t := range []corev1.PodConditionType{corev1.ContainersReady, corev1.PodReady} {
		if c := condition(pod, t); c != nil && c.Status != corev1.ConditionTrue && (c.Reason != "" || c.Message != "") {
			r.Conditions = append(r.Conditions, fmt.Sprintf("%s: %s", t, strings.TrimSpace(c.Reason+" "+c.Message)))
		}
	}
	r.Summary = notReadySummary(r)
	return r, nil
}

// nodeProblem says why a node is not Ready ("" when it is).
func nodeProblem(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return ""
			}
			return strings.TrimSpace(fmt.Sprintf("node %s is NotReady (Ready=%s) %s %s", n.Name, c.Status, c.Reason, c.Message))
		}
	}
	return fmt.Sprintf("node %s has not reported a Ready condition", n.Name)
}

// containerReports lists the containers that are not ready.
func containerReports(ctx context.Context, in podInputs, pod *corev1.Pod, all bool) []ContainerReport {
	var out []ContainerReport
	add := func(statuses []corev1.ContainerStatus, specs []corev1.Container, init bool) {
		known := map[string]bool{}
		for _, cs := range statuses {
			known[cs.Name] = true
			if cs.Ready && !all {
				continue
			}
			if init && cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0 {
				continue // an init container that finished
			}
			if init && cs.Started != nil && *cs.Started && cs.State.Running != nil && cs.Ready {
				continue
			}
			out = append(out, containerReport(ctx, in, pod, cs, init))
		}
		for _, c := range specs {
			if !known[c.Name] {
				out = append(out, ContainerReport{Name: c.Name, Init: init, State: "unknown", Message: "no status reported yet"})
			}
		}
	}
	add(pod.Status.InitContainerStatuses, pod.Spec.InitContainers, true)
	add(pod.Status.ContainerStatuses, pod.Spec.Containers, false)
	return out
}

func containerReport(ctx context.Context, in podInputs, pod *corev1.Pod, cs corev1.ContainerStatus, init bool) ContainerReport {
	c := ContainerReport{Name: cs.Name, Init: init, Restarts: cs.RestartCount}
	switch s := cs.State; {
	case s.Waiting != nil:
		c.State, c.Reason, c.Message = "waiting", s.Waiting.Reason, s.Waiting.Message
	case s.Running != nil:
		c.State, c.Reason = "running", "not ready"
	case s.Terminated != nil:
		c.State, c.Reason, c.Message = "terminated", s.Terminated.Reason, s.Terminated.Message
		c.LastTermination = termination(s.Terminated)
	default:
		c.State = "unknown"
	}
	if t := cs.LastTerminationState.Terminated; t != nil {
		c.LastTermination = termination(t)
	}
	crashed := c.Reason == "CrashLoopBackOff" || c.Reason == "Error" || (c.State == "terminated" && cs.State.Terminated.ExitCode != 0)
	if crashed && in.logs != nil {
		previous := c.State == "waiting" && cs.LastTerminationState.Terminated != nil
		c.Logs = in.logs(ctx, pod, cs.Name, previous)
		if c.Logs == nil && previous {
			c.Logs = in.logs(ctx, pod, cs.Name, false)
		}
	}
	return c
}

func termination(t *corev1.ContainerStateTerminated) string {
	s := fmt.Sprintf("exit code %d", t.ExitCode)
	if t.Signal != 0 {
		s += fmt.Sprintf(", signal %d", t.Signal)
	}
	if t.Reason != "" {
		s += ", " + t.Reason
	}
	if t.Message != "" {
		s += ": " + t.Message
	}
	return s
}

// probeFailures gives the latest Unhealthy message of each probe kind.
func probeFailures(evs []event) []ProbeFailure {
	latest := map[string]ProbeFailure{}
	for _, e := range evs {
		if e.Reason != "Unhealthy" {
			continue
		}
		kind := "Probe"
		for _, k := range []string{"Readiness", "Liveness", "Startup"} {
			if strings.HasPrefix(e.Message, k) {
				kind = k
			}
		}
		latest[kind] = ProbeFailure{Probe: kind, Message: e.Message, Count: e.Count}
	}
	var out []ProbeFailure
	for _, k := range []string{"Startup", "Liveness", "Readiness", "Probe"} {
		if p, ok := latest[k]; ok {
			out = append(out, p)
		}
	}
	return out
}

func schedulingSummary(s *Scheduling) string {
	switch {
	case len(s.Nodes) == 0:
		return "pending: there are no nodes"
	case len(s.Fits) > 0:
		return fmt.Sprintf("pending: %d/%d nodes fit (%s) but no scheduler has bound it yet: is the scheduler running, and does it serve schedulerName %q?",
			len(s.Fits), len(s.Nodes), strings.Join(s.Fits, ", "), s.SchedulerName)
	}
	counts := map[string]int{}
	for _, n := range s.Nodes {
		seen := map[string]bool{}
		for _, r := range n.Rejections {
			for _, reason := range strings.Split(r.Reason, ", ") {
				if !seen[reason] {
					seen[reason] = true
					counts[reason]++
				}
			}
		}
	}
	var parts []string
	for reason, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, reason))
	}
	sort.Strings(parts)
	msg := fmt.Sprintf("pending: 0/%d nodes fit: %s", len(s.Nodes), strings.Join(parts, ", "))
	if s.NominatedNode != "" {
		msg += fmt.Sprintf("; nominated for %s (waiting for preempted pods to leave)", s.NominatedNode)
	}
	return msg
}

func notReadySummary(r PodReport) string {
	var parts []string
	if r.NodeProblem != "" {
		parts = append(parts, r.NodeProblem)
	}
	for _, c := range r.Containers {
		s := fmt.Sprintf("container %s %s", c.Name, c.State)
		if c.Reason != "" {
			s += " (" + c.Reason + ")"
		}
		parts = append(parts, s)
	}
	for _, p := range r.Probes {
		if p.Probe == "Readiness" || p.Probe == "Startup" {
			parts = append(parts, strings.ToLower(p.Probe)+" probe failing")
		}
	}
	if len(r.ReadinessGates) > 0 {
		parts = append(parts, fmt.Sprintf("%d readiness gate(s) not True", len(r.ReadinessGates)))
	}
	if len(parts) == 0 {
		return "not ready: " + strings.Join(append([]string{"no container reports a problem"}, r.Conditions...), "; ")
	}
	return "not ready: " + strings.Join(parts, "; ")
}
