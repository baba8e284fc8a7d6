package why

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// maxMissed is how many pods the selector misses are listed.
const maxMissed = 10

// explainService compares a Service with the pods of its namespace and its EndpointSlices.
func explainService(ctx context.Context, in podInputs, svc *corev1.Service, slices []*discoveryv1.EndpointSlice) (*ServiceReport, string, error) {
	r := &ServiceReport{Type: string(svc.Spec.Type), Selector: svc.Spec.Selector}
	if r.Type == "" {
		r.Type = string(corev1.ServiceTypeClusterIP)
	}
	for _, p := range svc.Spec.Ports {
		s := fmt.Sprintf("%d→%s/%s", p.Port, p.TargetPort.String(), p.Protocol)
		if p.Name != "" {
			s = p.Name + " " + s
		}
		if p.NodePort != 0 {
			s += fmt.Sprintf(" (node port %d)", p.NodePort)
		}
		r.Ports = append(r.Ports, s)
	}
	for _, sl := range slices {
		r.EndpointSlices++
		for _, e := range sl.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				r.ReadyEndpoints += len(e.Addresses)
			}
		}
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return r, fmt.Sprintf("ExternalName Service: DNS answers with a CNAME to %s; it has no endpoints", svc.Spec.ExternalName), nil
	}
	if len(svc.Spec.Selector) == 0 {
		return r, fmt.Sprintf("the Service has no selector: its endpoints are managed by hand (%d EndpointSlice(s), %d ready endpoint(s))", r.EndpointSlices, r.ReadyEndpoints), nil
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	var matched []*corev1.Pod
	for _, p := range in.cluster.Pods {
		if p.Namespace != svc.Namespace {
			continue
		}
		if sel.Matches(labels.Set(p.Labels)) {
			if !terminal(p) {
				matched = append(matched, p)
			}
			continue
		}
		r.MissedTotal++
		r.Missed = append(r.Missed, MissedPod{Name: p.Name, Differences: labelDifferences(svc.Spec.Selector, p.Labels)})
	}
	sort.SliceStable(r.Missed, func(i, j int) bool {
		if a, b := len(r.Missed[i].Differences), len(r.Missed[j].Differences); a != b {
			return a < b
		}
		return r.Missed[i].Name < r.Missed[j].Name
	})
	if len(r.Missed) > maxMissed {
		r.Missed = r.Missed[:maxMissed]
	}
	r.Matched = len(matched)
	sort.Slice(matched, func(i, j int) bool { return matched[i].Name < matched[j].Name })
	for _, p := range matched {
		if podReady(p) {
			r.Ready++
			continue
		}
		pr, err := explainPod(ctx, in, p)
		if err != nil {
			return nil, "", err
		}
		r.NotReady = append(r.NotReady, PodReason{Name: p.Name, Reason: strings.TrimPrefix(pr.Summary, "not ready: ")})
	}
	r.PortProblems = portProblems(svc, matched)

	var summary []string
	switch {
	case r.Matched == 0:
		summary = append(summary, fmt.Sprintf("the selector %s matches none of the %d pod(s) in %s", sel, r.MissedTotal, svc.Namespace))
	case r.Ready == 0:
		summary = append(summary, fmt.Sprintf("the selector matches %d pod(s) but none is ready", r.Matched))
	default:
		summary = append(summary, fmt.Sprintf("%d/%d matching pod(s) ready", r.Ready, r.Matched))
	}
	if len(r.PortProblems) > 0 {
		summary = append(summary, fmt.Sprintf("%d target port problem(s)", len(r.PortProblems)))
	}
	if r.EndpointSlices == 0 {
		summary = append(summary, "no EndpointSlice yet (is the EndpointSlice controller running?)")
	} else {
		summary = append(summary, fmt.Sprintf("%d ready endpoint(s) in %d EndpointSlice(s)", r.ReadyEndpoints, r.EndpointSlices))
	}
	return r, strings.Join(summary, "; "), nil
}

// labelDifferences names each selector label the pod lacks or has another value for.
func labelDifferences(selector, podLabels map[string]string) []string {
	keys := make([]string, 0, len(selector))
	for k := range selector {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		v, ok := podLabels[k]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: missing (want %q)", k, selector[k]))
		case v != selector[k]:
			out = append(out, fmt.Sprintf("%s: %q, want %q", k, v, selector[k]))
		}
	}
	return out
}

// portProblems names the named target ports that matched pods do not declare.
func portProblems(svc *corev1.Service, pods []*corev1.Pod) []string {
	var out []string
	for _, sp := range svc.Spec.Ports {
		if sp.TargetPort.Type != intstr.String {
			continue
		}
		name := sp.TargetPort.StrVal
		var missing []string
		for _, p := range pods {
			if !declaresPort(p, name, sp.Protocol) {
				missing = append(missing, p.Name)
			}
		}
		if len(missing) > 0 {
			out = append(out, fmt.Sprintf("port %d: target port %q (%s) is not a named container port of pod(s) %s", sp.Port, name, sp.Protocol, strings.Join(missing, ", ")))
		}
	}
	return out
}

func declaresPort(p *corev1.Pod, name string, proto corev1.Protocol) bool {
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	containers := p.Spec.Containers
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			containers = append(containers[:len(containers):len(containers)], c) // sidecars serve too
		}
	}
	for _, c := range containers {
		{
			for _, cp := range c.Ports {
				pp := cp.Protocol
				if pp == "" {
					pp = corev1.ProtocolTCP
				}
				if cp.Name == name && pp == proto {
					return true
				}
			}
		}
	}
	return false
}
