package podfit

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Reasons of the resource fit for the fixed resources, exactly as upstream's
// NodeResourcesFit; a scalar resource r is reported as "Insufficient r".
const (
	ErrReasonTooManyPods           = "Too many pods"
	ErrReasonInsufficientCPU       = "Insufficient cpu"
	ErrReasonInsufficientMemory    = "Insufficient memory"
	ErrReasonInsufficientEphemeral = "Insufficient ephemeral-storage"

	insufficientPrefix = "Insufficient "
)

// ScalarRequest is one scalar resource a pod requests that the fit checks.
type ScalarRequest struct {
	Name     corev1.ResourceName
	Quantity int64
	// Reason is "Insufficient <name>", built once per pod.
	Reason string
}

// Request is what a pod requests, as the resource fit checks it.
type Request struct {
	Resource
	// Scalars are the non-zero scalar requests the fit checks, sorted by name so that the
	// reasons come out in a stable order.
	Scalars []ScalarRequest
	// Empty is true when the pod requests nothing but a pod slot.
	Empty bool
}

// NewRequest computes the pod's request (PodRequests); scalar resources for which skip
// returns true are not checked (the scheduler's ignored resources, the kubelet's extended
// resources its node does not have). skip may be nil.
func NewRequest(pod *corev1.Pod, skip func(corev1.ResourceName) bool) *Request {
	r := &Request{Resource: PodRequests(pod)}
	for name, q := range r.ScalarResources {
		if q == 0 || !IsScalarResourceName(name) || (skip != nil && skip(name)) {
			continue
		}
		r.Scalars = append(r.Scalars, ScalarRequest{Name: name, Quantity: q, Reason: insufficientPrefix + string(name)})
	}
	slices.SortFunc(r.Scalars, func(a, b ScalarRequest) int { return strings.Compare(string(a.Name), string(b.Name)) })
	r.Empty = r.MilliCPU == 0 && r.Memory == 0 && r.EphemeralStorage == 0 && len(r.Scalars) == 0
	return r
}

// InsufficientResource is one resource a node is short of for a pod.
type InsufficientResource struct {
	ResourceName corev1.ResourceName
	// Reason is the scheduler's reason, e.g. "Insufficient cpu".
	Reason string
	// Requested is what the pod asks for, Used what the node's pods request and Capacity
	// the node's allocatable amount.
	Requested int64
	Used      int64
	Capacity  int64
	// Unresolvable is true when Requested exceeds Capacity on its own.
	Unresolvable bool
}

// Insufficient appends to out what a node with allocatable alloc, whose pods (podCount of
// them) request used, lacks for the request, in upstream's order: pods, cpu, memory,
// ephemeral-storage, then the scalars. It allocates only when something is missing.
func (s *Request) Insufficient(alloc, used *Resource, podCount int, out []InsufficientResource) []InsufficientResource {
	if podCount+1 > alloc.AllowedPodNumber {
		out = append(out, InsufficientResource{
			ResourceName: corev1.ResourcePods, Reason: ErrReasonTooManyPods,
			Requested: 1, Used: int64(podCount), Capacity: int64(alloc.AllowedPodNumber),
		})
	}
	if s.Empty {
		return out
	}
	if s.MilliCPU > 0 && s.MilliCPU > alloc.MilliCPU-used.MilliCPU {
		out = append(out, InsufficientResource{
			ResourceName: corev1.ResourceCPU, Reason: ErrReasonInsufficientCPU,
			Requested: s.MilliCPU, Used: used.MilliCPU, Capacity: alloc.MilliCPU,
			Unresolvable: s.MilliCPU > alloc.MilliCPU,
		})
	}
	if s.Memory > 0 && s.Memory > alloc.Memory-used.Memory {
		out = append(out, InsufficientResource{
			ResourceName: corev1.ResourceMemory, Reason: ErrReasonInsufficientMemory,
			Requested: s.Memory, Used: used.Memory, Capacity: alloc.Memory,
			Unresolvable: s.Memory > alloc.Memory,
		})
	}
	if s.EphemeralStorage > 0 && s.EphemeralStorage > alloc.EphemeralStorage-used.EphemeralStorage {
		out = append(out, InsufficientResource{
			ResourceName: corev1.ResourceEphemeralStorage, Reason: ErrReasonInsufficientEphemeral,
			Requested: s.EphemeralStorage, Used: used.EphemeralStorage, Capacity: alloc.EphemeralStorage,
			Unresolvable: s.EphemeralStorage > alloc.EphemeralStorage,
		})
	}
	for i := range s.Scalars {
		r := &s.Scalars[i]
		capacity, inUse := alloc.ScalarResources[r.Name], used.ScalarResources[r.Name]
		if r.Quantity > capacity-inUse {
			out = append(out, InsufficientResource{
				ResourceName: r.Name, Reason: r.Reason,
				Requested: r.Quantity, Used: inUse, Capacity: capacity,
				Unresolvable: r.Quantity > capacity,
			})
		}
	}
	return out
}
