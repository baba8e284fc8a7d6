package kubelet

import (
	"fmt"
	"runtime"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/kubette/kubette/internal/podfit"
)

// The predicate admission, as upstream's kubelet runs it (its predicateAdmitHandler) on a
// pod it has not run yet: the pod's OS, then against the Node object and the pods already
// admitted on this kubelet the scheduler's general predicates — the resource fit (requests
// and overhead against allocatable: pods, cpu, memory, ephemeral-storage, scalar resources),
// required node affinity and nodeSelector, spec.nodeName, host ports — and the node's NoExecute
// taints the pod does not tolerate (the kubelet ignores NoSchedule: the scheduler's business).
// A pod that fails is rejected with the first failure's reason. The checks are the ones the
// scheduler's plugins run (internal/podfit, component-helpers); the kubelet does not import
// the scheduler.

// Reasons of the predicate admission, as upstream's.
const (
	reasonPodOSSelectorMismatch = "PodOSSelectorNodeLabelDoesNotMatch"
	reasonPodOSNotSupported     = "PodOSNotSupported"
	// reasonOutOfPrefix prefixes the resource a pod was rejected for: OutOfcpu, OutOfmemory,
	// OutOfephemeral-storage, OutOfpods, OutOfexample.com/gpu.
	reasonOutOfPrefix = "OutOf"
)

// systemCriticalPriority is the lowest priority of a critical pod (upstream's
// scheduling.SystemCriticalPriority).
const systemCriticalPriority = 2 * 1000000000

// mirrorPodAnnotation marks the API's copy of a static pod.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// predicateFailure is one failed predicate: a named check with its reason, or a resource the
// node lacks.
type predicateFailure struct {
	name, reason string
	resource     *podfit.InsufficientResource
}

// rejection is the reason and message a failure rejects the pod with (the pod's status
// message is "Pod was rejected: " and the message).
func (f predicateFailure) rejection() (reason, message string) {
	if r := f.resource; r != nil {
		return reasonOutOfPrefix + string(r.ResourceName), fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
			r.ResourceName, r.Requested, r.Used, r.Capacity)
	}
	return f.name, fmt.Sprintf("Predicate %s failed: %s", f.name, f.reason)
}

// admitPredicates is the predicate admission of pod on node, where admitted are the other
// pods admitted and not terminated on this kubelet: "" when the pod may run, else the
// rejection's reason and message.
func admitPredicates(pod *v1.Pod, node *v1.Node, admitted []*v1.Pod) (reason, message string) {
	// Failures that evicting other pods could not help come first, as upstream.
	if os, ok := pod.Labels[v1.LabelOSStable]; ok && os != runtime.GOOS {
		// Upstream compares with the node's label, which it takes to be runtime.GOOS.
		return reasonPodOSSelectorMismatch, "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"
	}
	if pod.Spec.OS != nil && string(pod.Spec.OS.Name) != runtime.GOOS {
		return reasonPodOSNotSupported, "Failed to admit pod as the OS field doesn't match node OS"
	}
	failures := generalPredicates(pod, node, admitted)
	if isCriticalPod(pod) {
		// A critical pod is not rejected for resources (upstream evicts pods to make room for
		// it; kubette does not preempt on the node, see docs/node.md).
		var other []predicateFailure
		for _, f := range failures {
			if f.resource == nil {
				other = append(other, f)
			}
		}
		failures = other
	}
	if len(failures) == 0 {
		return "", ""
	}
	return failures[0].rejection()
}

// generalPredicates runs upstream's general filter of the kubelet: every resource the node
// lacks, then node affinity, node name, host ports, and the NoExecute taints.
func generalPredicates(pod *v1.Pod, node *v1.Node, admitted []*v1.Pod) []predicateFailure {
	alloc := podfit.NewResource(node.Status.Allocatable)
	var used podfit.Resource
	ports := podfit.HostPortInfo{}
	for _, p := range admitted {
		used.AddResource(podfit.PodRequests(p))
		ports.AddPod(p)
	}
	// Extended resources the node does not have are cluster-level ones, not the node's to
	// check, as upstream.
	req := podfit.NewRequest(pod, func(name v1.ResourceName) bool {
		if !podfit.IsExtendedResourceName(name) {
			return false
		}
		_, found := alloc.ScalarResources[name]
		return !found
	})
	var failures []predicateFailure
	for _, r := range req.Insufficient(&alloc, &used, len(admitted), nil) {
		failures = append(failures, predicateFailure{resource: &r})
	}
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !ok {
		failures = append(failures, predicateFailure{name: podfit.NodeAffinity, reason: podfit.ErrReasonNodeAffinity})
	}
	if !podfit.NodeNameMatches(pod, node) {
		failures = append(failures, predicateFailure{name: podfit.NodeName, reason: podfit.ErrReasonNodeName})
	}
	if !podfit.PortsFit(podfit.HostPorts(pod), ports) {
		failures = append(failures, predicateFailure{name: podfit.NodePorts, reason: podfit.ErrReasonNodePorts})
	}
	// Upstream skips the taints for static pods; every pod of kubette's kubelet comes from the API.
	if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), node.Spec.Taints, pod.Spec.Tolerations,
		func(t *v1.Taint) bool { return t.Effect == v1.TaintEffectNoExecute }, false); untolerated {
		failures = append(failures, predicateFailure{name: podfit.TaintToleration, reason: podfit.ErrReasonUntoleratedTaint})
	}
	return failures
}

// isCriticalPod tells whether a pod is critical, as upstream: a mirror pod, or one of a
// system-critical priority.
func isCriticalPod(pod *v1.Pod) bool {
	if _, ok := pod.Annotations[mirrorPodAnnotation]; ok {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority
}
