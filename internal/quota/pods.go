package quota

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Pods charges pods and the compute resources they request and limit.
type Pods struct{}

var _ Evaluator = Pods{}

// podNames are the names a pod is charged for, beyond hugepages and extended resources.
var podNames = []corev1.ResourceName{
	"count/pods", corev1.ResourcePods,
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceRequestsEphemeralStorage,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage,
}

// isPodComputeName reports whether a quota name limits pods' compute resources.
func isPodComputeName(n corev1.ResourceName) bool {
	for _, k := range podNames[2:] {
		if n == k {
			return true
		}
	}
	s := string(n)
	return strings.HasPrefix(s, corev1.ResourceHugePagesPrefix) || strings.HasPrefix(s, corev1.ResourceRequestsHugePagesPrefix) ||
		(strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix) && strings.Contains(s, "/") && !strings.Contains(s, "kubernetes.io/"))
}

// GroupResource implements Evaluator.
func (Pods) GroupResource() schema.GroupResource { return schema.GroupResource{Resource: "pods"} }

// MatchingResources implements Evaluator.
func (Pods) MatchingResources(names []corev1.ResourceName) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, n := range names {
		if n == "count/pods" || n == corev1.ResourcePods || isPodComputeName(n) {
			out = append(out, n)
		}
	}
	return out
}

// MatchesScope implements Evaluator.
func (Pods) MatchesScope(sel corev1.ScopedResourceSelectorRequirement, obj runtime.Object) (bool, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return false, fmt.Errorf("expected a Pod, got %T", obj)
	}
	switch sel.ScopeName {
	case corev1.ResourceQuotaScopeTerminating:
		return terminating(pod), nil
	case corev1.ResourceQuotaScopeNotTerminating:
		return !terminating(pod), nil
	case corev1.ResourceQuotaScopeBestEffort:
		return BestEffort(pod), nil
	case corev1.ResourceQuotaScopeNotBestEffort:
		return !BestEffort(pod), nil
	case corev1.ResourceQuotaScopePriorityClass:
		if sel.Operator == corev1.ScopeSelectorOpExists {
			return pod.Spec.PriorityClassName != "", nil
		}
		return selectorMatches(sel, pod.Spec.PriorityClassName, pod.Spec.PriorityClassName != "")
	case corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return crossNamespaceAffinity(pod), nil
	}
	return false, nil
}

// terminating reports whether a pod has an active deadline (the Terminating scope).
func terminating(pod *corev1.Pod) bool {
	return pod.Spec.ActiveDeadlineSeconds != nil && *pod.Spec.ActiveDeadlineSeconds >= 0
}

// BestEffort reports whether a pod is of the BestEffort QoS class: no container or init
// container requests or limits any cpu or memory.
func BestEffort(pod *corev1.Pod) bool {
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range cs {
			for _, l := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
				for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
					if q, ok := l[n]; ok && !q.IsZero() {
						return false
					}
				}
			}
		}
	}
	return true
}

func crossNamespaceAffinity(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil {
		return false
	}
	cross := func(t *corev1.PodAffinityTerm) bool { return len(t.Namespaces) != 0 || t.NamespaceSelector != nil }
	check := func(req []corev1.PodAffinityTerm, pref []corev1.WeightedPodAffinityTerm) bool {
		for i := range req {
			if cross(&req[i]) {
				return true
			}
		}
		for i := range pref {
			if cross(&pref[i].PodAffinityTerm) {
				return true
			}
		}
		return false
	}
	if p := a.PodAffinity; p != nil && check(p.RequiredDuringSchedulingIgnoredDuringExecution, p.PreferredDuringSchedulingIgnoredDuringExecution) {
		return true
	}
	if p := a.PodAntiAffinity; p != nil && check(p.RequiredDuringSchedulingIgnoredDuringExecution, p.PreferredDuringSchedulingIgnoredDuringExecution) {
		return true
	}
	return false
}

// Constraints implements Evaluator: a quota on cpu or memory requires every container
// to request (or limit) it, as upstream keeps for backward compatibility.
func (Pods) Constraints(required []corev1.ResourceName, obj runtime.Object) error {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return fmt.Errorf("expected a Pod, got %T", obj)
	}
	var checked []corev1.ResourceName
	for _, n := range required {
		switch n {
		case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory,
			corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory:
			checked = append(checked, n)
		}
	}
	missing := map[corev1.ResourceName][]string{}
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range cs {
			has := computeUsage(c.Resources.Requests, c.Resources.Limits)
			for _, n := range checked {
				if _, ok := has[n]; !ok && !contains(missing[n], c.Name) {
					missing[n] = append(missing[n], c.Name)
				}
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	names := make([]string, 0, len(missing))
	for n := range missing {
		names = append(names, string(n))
	}
	sort.Strings(names)
	msgs := make([]string, 0, len(names))
	for _, n := range names {
		cs := missing[corev1.ResourceName(n)]
		sort.Strings(cs)
		msgs = append(msgs, fmt.Sprintf("%s for: %s", n, strings.Join(cs, ",")))
	}
	return fmt.Errorf("must specify %s", strings.Join(msgs, "; "))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Usage implements Evaluator: every pod counts in count/pods; a pod that has not
// finished (and is not past its deletion's grace period) counts in pods and in the
// compute resources it requests and limits.
func (Pods) Usage(obj runtime.Object, now time.Time) (corev1.ResourceList, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("expected a Pod, got %T", obj)
	}
	out := corev1.ResourceList{"count/pods": one()}
	if !Charged(pod, now) {
		return out, nil
	}
	requests, limits := PodRequests(pod), PodLimits(pod)
	for k, v := range pod.Spec.Overhead {
		if r, ok := requests[k]; ok {
			r.Add(v)
			requests[k] = r
		}
		if l, ok := limits[k]; ok {
			l.Add(v)
			limits[k] = l
		}
	}
	return Add(out, computeUsage(requests, limits)), nil
}

// Charged reports whether a pod uses its compute resources: not when it has finished,
// nor when its deletion's grace period is over (a lost node's pod).
func Charged(pod *corev1.Pod, now time.Time) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil {
		end := pod.DeletionTimestamp.Add(time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second)
		if now.After(end) {
			return false
		}
	}
	return true
}

// computeUsage names what requests and limits use: pods=1, cpu and requests.cpu for a
// cpu request, limits.cpu for a cpu limit (memory and ephemeral-storage alike), and
// hugepages and extended resources by their requests.
func computeUsage(requests, limits corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{corev1.ResourcePods: one()}
	for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		if r, ok := requests[n]; ok {
			out[n] = r.DeepCopy()
			out[corev1.DefaultResourceRequestsPrefix+n] = r.DeepCopy()
		}
		if l, ok := limits[n]; ok {
			out["limits."+n] = l.DeepCopy()
		}
	}
	for n, r := range requests {
		s := string(n)
		switch {
		case strings.HasPrefix(s, corev1.ResourceHugePagesPrefix):
			out[n] = r.DeepCopy()
			out[corev1.DefaultResourceRequestsPrefix+n] = r.DeepCopy()
		case strings.Contains(s, "/") && !strings.Contains(s, "kubernetes.io/") && !strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix):
			out[corev1.DefaultResourceRequestsPrefix+n] = r.DeepCopy()
		}
	}
	return out
}

// PodRequests returns what a pod requests in all: the sum over its containers and
// restartable (sidecar) init containers, or the largest need of an init container
// running with the sidecars started before it, whichever is more.
func PodRequests(pod *corev1.Pod) corev1.ResourceList {
	return podTotal(pod, func(c *corev1.Container) corev1.ResourceList { return c.Resources.Requests })
}

// PodLimits returns a pod's limits in all, as PodRequests its requests.
func PodLimits(pod *corev1.Pod) corev1.ResourceList {
	return podTotal(pod, func(c *corev1.Container) corev1.ResourceList { return c.Resources.Limits })
}

func podTotal(pod *corev1.Pod, of func(*corev1.Container) corev1.ResourceList) corev1.ResourceList {
	total := corev1.ResourceList{}
	for i := range pod.Spec.Containers {
		addInto(total, of(&pod.Spec.Containers[i]))
	}
	sidecars, initMax := corev1.ResourceList{}, corev1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		need := corev1.ResourceList{}
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			addInto(total, of(c))
			addInto(sidecars, of(c))
			addInto(need, sidecars)
		} else {
			addInto(need, of(c))
			addInto(need, sidecars)
		}
		for k, v := range need {
			if cur, ok := initMax[k]; !ok || v.Cmp(cur) > 0 {
				initMax[k] = v.DeepCopy()
			}
		}
	}
	for k, v := range initMax {
		if cur, ok := total[k]; !ok || v.Cmp(cur) > 0 {
			total[k] = v.DeepCopy()
		}
	}
	return total
}

func addInto(dst, src corev1.ResourceList) {
	for k, v := range src {
		if cur, ok := dst[k]; ok {
			cur.Add(v)
			dst[k] = cur
		} else {
			dst[k] = v.DeepCopy()
		}
	}
}
