package why

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// JSON renders the report as indented JSON with a trailing newline.
func JSON(r *Report) (string, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode report: %w", err)
	}
	return string(b) + "\n", nil
}

// Text renders the report as plain text: the summary first, then the details.
// The output depends only on the report (stable order, no times).
func Text(r *Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s/%s: %s\n", strings.ToLower(r.Kind), r.Namespace, r.Name, r.Summary)
	if r.Service != nil {
		writeService(&b, r.Service)
	}
	for i := range r.Pods {
		p := &r.Pods[i]
		indent := "  "
		if r.Kind != string(KindPod) {
			fmt.Fprintf(&b, "\npod %s: %s\n", p.Name, p.Summary)
			indent = "    "
		}
		writePod(&b, p, indent)
	}
	return b.String()
}

func writePod(b *strings.Builder, p *PodReport, in string) {
	if s := p.Scheduling; s != nil {
		fmt.Fprintf(b, "%sscheduler: %s\n", in, s.SchedulerName)
		if s.PreFilter != nil {
			fmt.Fprintf(b, "%severy node: %s\n", in, rejectionText(*s.PreFilter))
		}
		for _, n := range s.Nodes {
			if len(n.Rejections) == 0 {
				fmt.Fprintf(b, "%s%s: fits\n", in, n.Node)
				continue
			}
			if s.PreFilter != nil {
				continue
			}
			for _, r := range n.Rejections {
				fmt.Fprintf(b, "%s%s: %s\n", in, n.Node, rejectionText(r))
			}
		}
		if s.Condition != "" {
			fmt.Fprintf(b, "%sPodScheduled condition: %s\n", in, s.Condition)
		}
		if s.LastEvent != "" {
			fmt.Fprintf(b, "%slast FailedScheduling event: %s\n", in, s.LastEvent)
		}
		if s.NominatedNode != "" {
			fmt.Fprintf(b, "%snominated node: %s\n", in, s.NominatedNode)
		}
		if s.Preemption != "" {
			fmt.Fprintf(b, "%spreemption: %s\n", in, s.Preemption)
		}
	}
	if p.NodeProblem != "" {
		fmt.Fprintf(b, "%s%s\n", in, p.NodeProblem)
	}
	for _, c := range p.Containers {
		kind := "container"
		if c.Init {
			kind = "init container"
		}
		line := fmt.Sprintf("%s%s %s: %s", in, kind, c.Name, c.State)
		if c.Reason != "" {
			line += " " + c.Reason
		}
		if c.Message != "" {
			line += ": " + c.Message
		}
		if c.Restarts > 0 {
			line += fmt.Sprintf(" (restarts %d)", c.Restarts)
		}
		b.WriteString(line + "\n")
		if c.LastTermination != "" {
			fmt.Fprintf(b, "%s  last run: %s\n", in, c.LastTermination)
		}
		if len(c.Logs) > 0 {
			fmt.Fprintf(b, "%s  last log lines:\n", in)
			for _, l := range c.Logs {
				fmt.Fprintf(b, "%s    | %s\n", in, l)
			}
		}
	}
	for _, pr := range p.Probes {
		line := fmt.Sprintf("%s%s probe: %s", in, strings.ToLower(pr.Probe), pr.Message)
		if pr.Count > 1 {
			line += fmt.Sprintf(" (×%d)", pr.Count)
		}
		b.WriteString(line + "\n")
	}
	for _, g := range p.ReadinessGates {
		fmt.Fprintf(b, "%sreadiness gate %s\n", in, g)
	}
	for _, c := range p.Conditions {
		fmt.Fprintf(b, "%scondition %s\n", in, c)
	}
}

func rejectionText(r Rejection) string {
	s := r.Plugin + ": " + r.Reason
	if r.Error {
		s = r.Plugin + ": error: " + r.Reason
	}
	if r.Detail != "" {
		s += " (" + r.Detail + ")"
	}
	return s
}

func writeService(b *strings.Builder, s *ServiceReport) {
	fmt.Fprintf(b, "  type: %s, ports: %s\n", s.Type, strings.Join(s.Ports, ", "))
	if len(s.Selector) > 0 {
		fmt.Fprintf(b, "  selector: %s\n", selectorText(s.Selector))
		fmt.Fprintf(b, "  matching pods: %d (%d ready), pods missed: %d\n", s.Matched, s.Ready, s.MissedTotal)
	}
	for _, m := range s.Missed {
		fmt.Fprintf(b, "  missed %s: %s\n", m.Name, strings.Join(m.Differences, "; "))
	}
	if n := s.MissedTotal - len(s.Missed); n > 0 {
		fmt.Fprintf(b, "  ... and %d more missed pod(s)\n", n)
	}
	for _, p := range s.NotReady {
		fmt.Fprintf(b, "  not ready %s: %s\n", p.Name, p.Reason)
	}
	for _, p := range s.PortProblems {
		fmt.Fprintf(b, "  %s\n", p)
	}
	fmt.Fprintf(b, "  endpoint slices: %d, ready endpoints: %d\n", s.EndpointSlices, s.ReadyEndpoints)
}

func selectorText(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}
