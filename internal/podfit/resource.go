package podfit

import (
	corev1 "k8s.io/api/core/v1"
)

// Default requests the scheduler's scorers assume for containers that request nothing, as
// upstream.
const (
	DefaultMilliCPURequest int64 = 100               // 0.1 core
	DefaultMemoryRequest   int64 = 200 * 1024 * 1024 // 200 MiB
)

// Resource is an amount of the schedulable resources.
type Resource struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	// AllowedPodNumber is the node's pod capacity (only meaningful for allocatable).
	AllowedPodNumber int
	// ScalarResources holds extended resources (e.g. example.com/gpu) and hugepages.
	ScalarResources map[corev1.ResourceName]int64
}

// NewResource converts a ResourceList.
func NewResource(rl corev1.ResourceList) Resource {
	var r Resource
	r.Add(rl)
	return r
}

// Add adds a ResourceList.
func (r *Resource) Add(rl corev1.ResourceList) {
	for name, q := range rl {
		switch name {
		case corev1.ResourceCPU:
			r.MilliCPU += q.MilliValue()
		case corev1.ResourceMemory:
			r.Memory += q.Value()
		case corev1.ResourceEphemeralStorage:
			r.EphemeralStorage += q.Value()
		case corev1.ResourcePods:
			r.AllowedPodNumber += int(q.Value())
		default:
			if r.ScalarResources == nil {
				r.ScalarResources = map[corev1.ResourceName]int64{}
			}
			r.ScalarResources[name] += q.Value()
		}
	}
}

// AddResource adds another Resource.
func (r *Resource) AddResource(o Resource) {
	r.MilliCPU += o.MilliCPU
	r.Memory += o.Memory
	r.EphemeralStorage += o.EphemeralStorage
	r.AllowedPodNumber += o.AllowedPodNumber
	for k, v := range o.ScalarResources {
		if r.ScalarResources == nil {
			r.ScalarResources = map[corev1.ResourceName]int64{}
		}
		r.ScalarResources[k] += v
	}
}

// SubResource subtracts another Resource.
func (r *Resource) SubResource(o Resource) {
	r.MilliCPU -= o.MilliCPU
	r.Memory -= o.Memory
	r.EphemeralStorage -= o.EphemeralStorage
	r.AllowedPodNumber -= o.AllowedPodNumber
	for k, v := range o.ScalarResources {
		if r.ScalarResources == nil {
			r.ScalarResources = map[corev1.ResourceName]int64{}
		}
		r.ScalarResources[k] -= v
	}
}

// max sets each field of r to the larger of r and o.
func (r *Resource) max(o Resource) {
	r.MilliCPU = max(r.MilliCPU, o.MilliCPU)
	r.Memory = max(r.Memory, o.Memory)
	r.EphemeralStorage = max(r.EphemeralStorage, o.EphemeralStorage)
	for k, v := range o.ScalarResources {
		if r.ScalarResources == nil {
			r.ScalarResources = map[corev1.ResourceName]int64{}
		}
		r.ScalarResources[k] = max(r.ScalarResources[k], v)
	}
}

// Clone copies the resource.
func (r Resource) Clone() Resource {
	out := r
	if r.ScalarResources != nil {
		out.ScalarResources = make(map[corev1.ResourceName]int64, len(r.ScalarResources))
		for k, v := range r.ScalarResources {
			out.ScalarResources[k] = v
		}
	}
	return out
}

// PodRequests computes what a pod requests as upstream does: the sum of its app
// containers and restartable (sidecar) init containers, at least the largest need of any
// regular init container (plus the sidecars started before it), plus the pod overhead.
func PodRequests(pod *corev1.Pod) Resource {
	return podRequests(pod, false)
}

// PodNonZeroRequests is PodRequests with DefaultMilliCPURequest and DefaultMemoryRequest
// in place of unset cpu and memory requests of each container (used by the scorers).
func PodNonZeroRequests(pod *corev1.Pod) Resource {
	return podRequests(pod, true)
}

func containerRequests(c *corev1.Container, nonZero bool) Resource {
	r := NewResource(c.Resources.Requests)
	if nonZero {
		if _, ok := c.Resources.Requests[corev1.ResourceCPU]; !ok {
			r.MilliCPU = DefaultMilliCPURequest
		}
		if _, ok := c.Resources.Requests[corev1.ResourceMemory]; !ok {
			r.Memory = DefaultMemoryRequest
		}
	}
	return r
}

func podRequests(pod *corev1.Pod, nonZero bool) Resource {
	var sum Resource
	for i := range pod.Spec.Containers {
		sum.AddResource(containerRequests(&pod.Spec.Containers[i], nonZero))
	}
	var sidecars, initMax Resource
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		r := containerRequests(c, nonZero)
		if isSidecar(c) {
			sum.AddResource(r)
			sidecars.AddResource(r)
			initMax.max(sidecars)
			continue
		}
		r.AddResource(sidecars)
		initMax.max(r)
	}
	sum.max(initMax)
	if pod.Spec.Overhead != nil {
		sum.Add(pod.Spec.Overhead)
	}
	return sum
}

// isSidecar tells whether an init container is a restartable one, which runs for the pod's
// whole life.
func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}
