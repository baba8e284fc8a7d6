// Package podfit holds the checks of whether a pod fits a node that both the scheduler's
// filters (internal/scheduler/plugins) and the kubelet's admission (internal/kubelet) run, as
// upstream's kubelet runs the scheduler's own NodeResourcesFit, NodeName and NodePorts checks:
// what a pod requests and what a node's pods use (Resource, PodRequests), the host ports a
// pod asks for and their conflicts (HostPorts, HostPortInfo), and upstream's reasons. It
// depends on k8s.io/api only, so that neither component imports the other.
package podfit
