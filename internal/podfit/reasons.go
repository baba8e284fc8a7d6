package podfit

import (
	corev1 "k8s.io/api/core/v1"
)

// The scheduler plugins whose checks the kubelet's admission runs too, by their registered
// names (the kubelet reports a failed one as the rejection's reason), and their reasons,
// exactly as upstream.
const (
	NodeName              = "NodeName"
	ErrReasonNodeName     = "node(s) didn't match the requested node name"
	NodeAffinity          = "NodeAffinity"
	ErrReasonNodeAffinity = "node(s) didn't match Pod's node affinity/selector"
	NodePorts             = "NodePorts"
	ErrReasonNodePorts    = "node(s) didn't have free ports for the requested pod ports"
	TaintToleration       = "TaintToleration"
	// ErrReasonUntoleratedTaint is the reason of upstream's TaintToleration when it does not
	// name the taint, as the kubelet reports an untolerated NoExecute taint.
	ErrReasonUntoleratedTaint = "node(s) had taints that the pod didn't tolerate"
)

// NodeNameMatches reports whether the pod names no node in spec.nodeName or names this one.
func NodeNameMatches(pod *corev1.Pod, node *corev1.Node) bool {
	if pod.Spec.NodeName == "" {
		return true
	}
	return node != nil && node.Name == pod.Spec.NodeName
}
