package fieldpath

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// defaultedLimits are the limits that default to the node's allocatable when a container
// sets none (or zero), as upstream's MergeContainerResourceLimits: hugepages are never
// overcommitted, so a container that uses them always has their limit.
var defaultedLimits = []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage}

// ContainerResource resolves a resourceFieldRef's resource ("limits.cpu", "requests.memory",
// "limits.hugepages-2Mi", ...) of container c: the value divided by divisor and rounded up
// (Scale). A cpu, memory or ephemeral-storage limit the container does not set is the node's
// allocatable of it, as upstream's kubelet defaults it for the downward API; an unset request
// is 0. Other resources are an error.
func ContainerResource(c *v1.Container, allocatable v1.ResourceList, res string, divisor resource.Quantity) (string, error) {
	kind, name, ok := strings.Cut(res, ".")
	rn := v1.ResourceName(name)
	if !ok || (kind != "limits" && kind != "requests") || !downwardResource(rn) {
		return "", fmt.Errorf("unsupported container resource : %v", res)
	}
	if kind == "requests" {
		return Scale(rn, c.Resources.Requests[rn], divisor), nil
	}
	q, set := c.Resources.Limits[rn]
	if a, ok := allocatable[rn]; ok && (!set || q.IsZero()) && slices.Contains(defaultedLimits, rn) {
		q = a
	}
	return Scale(rn, q, divisor), nil
}

// downwardResource tells whether the downward API exposes a resource of a container.
func downwardResource(rn v1.ResourceName) bool {
	switch rn {
	case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage:
		return true
	}
	return strings.HasPrefix(string(rn), v1.ResourceHugePagesPrefix) && len(rn) > len(v1.ResourceHugePagesPrefix)
}
