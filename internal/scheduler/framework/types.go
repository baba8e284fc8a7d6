package framework

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/podfit"
)

// Default requests the scorers assume for containers that request nothing, as upstream.
const (
	DefaultMilliCPURequest = podfit.DefaultMilliCPURequest
	DefaultMemoryRequest   = podfit.DefaultMemoryRequest
)

// Resource is an amount of the schedulable resources (shared with the kubelet's admission).
type Resource = podfit.Resource

// NewResource converts a ResourceList.
func NewResource(rl corev1.ResourceList) Resource { return podfit.NewResource(rl) }

// PodRequests computes what a pod requests as upstream does (podfit.PodRequests).
func PodRequests(pod *corev1.Pod) Resource { return podfit.PodRequests(pod) }

// PodNonZeroRequests is PodRequests with DefaultMilliCPURequest and DefaultMemoryRequest
// in place of unset cpu and memory requests of each container (used by the scorers).
func PodNonZeroRequests(pod *corev1.Pod) Resource { return podfit.PodNonZeroRequests(pod) }

// ProtocolPort is a host port with its protocol.
type ProtocolPort = podfit.ProtocolPort

// HostPortInfo records the host ports in use on a node by IP.
type HostPortInfo = podfit.HostPortInfo

// ImageStateSummary is what the snapshot knows about an image on a node.
type ImageStateSummary struct {
	// Size is the image size in bytes.
	Size int64
	// NumNodes is how many nodes have the image.
	NumNodes int
}

// PodInfo is a pod in the snapshot.
type PodInfo struct {
	Pod *corev1.Pod
}

func hasAffinity(p *corev1.Pod) bool {
	a := p.Spec.Affinity
	return a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil)
}

func hasRequiredAntiAffinity(p *corev1.Pod) bool {
	a := p.Spec.Affinity
	return a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0
}

// NodeInfo is one node and the pods on it (bound or assumed), with aggregates.
// The fields that filtering and scoring read for every node of a cycle (the
// node pointer, name, unschedulable flag, taints, pod count, allocatable and
// requested resources, images) come first, so that they share as few cache
// lines as possible: a cycle at 5000 nodes reads 500 NodeInfos that are rarely
// in the CPU's caches, and each line is a miss.
type NodeInfo struct {
	node *corev1.Node
	// name, unschedulable and taints copy the node's fields that filtering and
	// scoring read for every node, so that they read the NodeInfo alone: the
	// Node object lies elsewhere in memory, and touching it was a cache miss per
	// node — the largest cost of filtering 5000 nodes.
	name          string
	unschedulable bool
	taints        []corev1.Taint
	// Pods are the pods on the node.
	Pods []*PodInfo
	// Allocatable is the node's allocatable resources.
	Allocatable Resource
	// Requested is the sum of the pods' requests; NonZeroRequested uses the scorer defaults.
	Requested        Resource
	NonZeroRequested Resource
	// ImageStates summarises the images present on the node (filled by the snapshot);
	// nil when there are none, so that scoring a node without images reads no map.
	ImageStates map[string]*ImageStateSummary

	// PodsWithAffinity and PodsWithRequiredAntiAffinity are subsets of Pods.
	PodsWithAffinity             []*PodInfo
	PodsWithRequiredAntiAffinity []*PodInfo
	// UsedPorts are the host ports the pods use.
	UsedPorts HostPortInfo
	// Generation increases on every change (the snapshot copies only changed nodes).
	Generation int64
}

// NewNodeInfo returns an info holding the given pods (no node yet).
func NewNodeInfo(pods ...*corev1.Pod) *NodeInfo {
	ni := &NodeInfo{UsedPorts: HostPortInfo{}}
	for _, p := range pods {
		ni.AddPod(p)
	}
	return ni
}

// Node returns the node (nil when only pods are known).
func (n *NodeInfo) Node() *corev1.Node {
	if n == nil {
		return nil
	}
	return n.node
}

// NodeName returns the node's name ("" when there is no node yet).
func (n *NodeInfo) NodeName() string { return n.name }

// Unschedulable returns the node's spec.unschedulable.
func (n *NodeInfo) Unschedulable() bool { return n.unschedulable }

// Taints returns the node's spec.taints (shared with the node: not to be modified).
func (n *NodeInfo) Taints() []corev1.Taint { return n.taints }

// SetNode sets the node and its allocatable resources.
func (n *NodeInfo) SetNode(node *corev1.Node) {
	n.node = node
	n.name, n.unschedulable, n.taints = node.Name, node.Spec.Unschedulable, node.Spec.Taints
	n.Allocatable = NewResource(node.Status.Allocatable)
	n.Generation++
}

// AddPod accounts for a pod on the node.
func (n *NodeInfo) AddPod(pod *corev1.Pod) {
	pi := &PodInfo{Pod: pod}
	n.Pods = append(n.Pods, pi)
	if hasAffinity(pod) {
		n.PodsWithAffinity = append(n.PodsWithAffinity, pi)
	}
	if hasRequiredAntiAffinity(pod) {
		n.PodsWithRequiredAntiAffinity = append(n.PodsWithRequiredAntiAffinity, pi)
	}
	n.update(pod, 1)
}

// RemovePod forgets a pod (matched by UID); it returns an error if the pod is not there.
func (n *NodeInfo) RemovePod(pod *corev1.Pod) error {
	idx := -1
	for i, pi := range n.Pods {
		if pi.Pod.UID == pod.UID {
			idx = i
			break
		}
	}
	if idx < 0 {
		return fmt.Errorf("pod %s/%s not found on node %s", pod.Namespace, pod.Name, n.nodeName())
	}
	removed := n.Pods[idx].Pod
	n.Pods = append(n.Pods[:idx], n.Pods[idx+1:]...)
	n.PodsWithAffinity = removeByUID(n.PodsWithAffinity, pod)
	n.PodsWithRequiredAntiAffinity = removeByUID(n.PodsWithRequiredAntiAffinity, pod)
	n.update(removed, -1)
	return nil
}

func removeByUID(list []*PodInfo, pod *corev1.Pod) []*PodInfo {
	for i, pi := range list {
		if pi.Pod.UID == pod.UID {
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}

func (n *NodeInfo) nodeName() string {
	if n.node == nil {
		return "<unknown>"
	}
	return n.node.Name
}

func (n *NodeInfo) update(pod *corev1.Pod, sign int64) {
	req, nz := PodRequests(pod), PodNonZeroRequests(pod)
	if sign > 0 {
		n.Requested.AddResource(req)
		n.NonZeroRequested.AddResource(nz)
	} else {
		n.Requested.SubResource(req)
		n.NonZeroRequested.SubResource(nz)
	}
	containers := pod.Spec.Containers
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			containers = append(containers[:len(containers):len(containers)], c) // sidecars keep their ports
		}
	}
	for _, c := range containers {
		for _, p := range c.Ports {
			if sign > 0 {
				n.UsedPorts.Add(p.HostIP, string(p.Protocol), p.HostPort)
			} else {
				n.UsedPorts.Remove(p.HostIP, string(p.Protocol), p.HostPort)
			}
		}
	}
	n.Generation++
}

// CopyInto makes dst a copy of n as Clone does, reusing dst's pod lists and
// maps (the snapshot refreshes the NodeInfo of the node a pod was just assumed
// on every cycle; a fresh Clone was a fifth of the cycle's allocations). Slices
// taken from dst's pod lists before the call see the new content.
func (n *NodeInfo) CopyInto(dst *NodeInfo) {
	pods, withAffinity, withAnti, ports, images := dst.Pods, dst.PodsWithAffinity, dst.PodsWithRequiredAntiAffinity, dst.UsedPorts, dst.ImageStates
	*dst = NodeInfo{
		node:             n.node,
		name:             n.name,
		unschedulable:    n.unschedulable,
		taints:           n.taints,
		Pods:             append(pods[:0], n.Pods...),
		Requested:        n.Requested.Clone(),
		NonZeroRequested: n.NonZeroRequested.Clone(),
		Allocatable:      n.Allocatable.Clone(),
		Generation:       n.Generation,
	}
	if len(n.PodsWithAffinity) > 0 {
		dst.PodsWithAffinity = append(withAffinity[:0], n.PodsWithAffinity...)
	}
	if len(n.PodsWithRequiredAntiAffinity) > 0 {
		dst.PodsWithRequiredAntiAffinity = append(withAnti[:0], n.PodsWithRequiredAntiAffinity...)
	}
	if ports == nil {
		ports = HostPortInfo{}
	}
	clear(ports)
	for ip, pp := range n.UsedPorts {
		m := make(map[ProtocolPort]struct{}, len(pp))
		for p := range pp {
			m[p] = struct{}{}
		}
		ports[ip] = m
	}
	dst.UsedPorts = ports
	if len(n.ImageStates) > 0 {
		if images == nil {
			images = make(map[string]*ImageStateSummary, len(n.ImageStates))
		}
		clear(images)
		for k, v := range n.ImageStates {
			images[k] = v
		}
		dst.ImageStates = images
	}
}

// Clone copies the info; pods are shared (they are never modified).
func (n *NodeInfo) Clone() *NodeInfo {
	out := &NodeInfo{
		node:             n.node,
		name:             n.name,
		unschedulable:    n.unschedulable,
		taints:           n.taints,
		Pods:             append([]*PodInfo(nil), n.Pods...),
		Requested:        n.Requested.Clone(),
		NonZeroRequested: n.NonZeroRequested.Clone(),
		Allocatable:      n.Allocatable.Clone(),
		UsedPorts:        HostPortInfo{},
		Generation:       n.Generation,
	}
	if len(n.ImageStates) > 0 {
		out.ImageStates = make(map[string]*ImageStateSummary, len(n.ImageStates))
	}
	if len(n.PodsWithAffinity) > 0 {
		out.PodsWithAffinity = append([]*PodInfo(nil), n.PodsWithAffinity...)
	}
	if len(n.PodsWithRequiredAntiAffinity) > 0 {
		out.PodsWithRequiredAntiAffinity = append([]*PodInfo(nil), n.PodsWithRequiredAntiAffinity...)
	}
	for ip, ports := range n.UsedPorts {
		m := make(map[ProtocolPort]struct{}, len(ports))
		for p := range ports {
			m[p] = struct{}{}
		}
		out.UsedPorts[ip] = m
	}
	for k, v := range n.ImageStates {
		out.ImageStates[k] = v
	}
	return out
}
