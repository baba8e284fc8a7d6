package noderesources

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

// The helpers mirror the ones of upstream's tests so their tables can be copied.

var (
	extendedResourceA     = corev1.ResourceName("example.com/aaa")
	extendedResourceB     = corev1.ResourceName("example.com/bbb")
	kubernetesIOResourceA = corev1.ResourceName("kubernetes.io/something")
	kubernetesIOResourceB = corev1.ResourceName("subdomain.kubernetes.io/something")
	hugePageResourceA     = corev1.ResourceName(corev1.ResourceHugePagesPrefix + "2Mi")
)

func makeAllocatableResources(milliCPU, memory, pods, extendedA, storage, hugePageA int64) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewMilliQuantity(milliCPU, resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(memory, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(pods, resource.DecimalSI),
		extendedResourceA:               *resource.NewQuantity(extendedA, resource.DecimalSI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(storage, resource.BinarySI),
		hugePageResourceA:               *resource.NewQuantity(hugePageA, resource.BinarySI),
	}
}

// newResourcePod returns a pod with one container per usage.
func newResourcePod(usage ...framework.Resource) *corev1.Pod {
	var containers []corev1.Container
	for _, req := range usage {
		rl := corev1.ResourceList{
			corev1.ResourceCPU:              *resource.NewMilliQuantity(req.MilliCPU, resource.DecimalSI),
			corev1.ResourceMemory:           *resource.NewQuantity(req.Memory, resource.BinarySI),
			corev1.ResourcePods:             *resource.NewQuantity(int64(req.AllowedPodNumber), resource.BinarySI),
			corev1.ResourceEphemeralStorage: *resource.NewQuantity(req.EphemeralStorage, resource.BinarySI),
		}
		for name, q := range req.ScalarResources {
			rl[name] = *resource.NewQuantity(q, resource.DecimalSI)
		}
		containers = append(containers, corev1.Container{Resources: corev1.ResourceRequirements{Requests: rl}})
	}
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: containers}}
}

func newResourceInitPod(pod *corev1.Pod, usage ...framework.Resource) *corev1.Pod {
	pod.Spec.InitContainers = newResourcePod(usage...).Spec.Containers
	return pod
}

func newResourceOverheadPod(pod *corev1.Pod, overhead corev1.ResourceList) *corev1.Pod {
	pod.Spec.Overhead = overhead
	return pod
}

func quantities(m map[corev1.ResourceName]string) corev1.ResourceList {
	rl := corev1.ResourceList{}
	for name, v := range m {
		rl[name] = resource.MustParse(v)
	}
	return rl
}

// makeCapacityNode is upstream's st.MakeNode().Name(name).Capacity(m): capacity and
// allocatable both m.
func makeCapacityNode(name string, m map[corev1.ResourceName]string) *corev1.Node {
	rl := quantities(m)
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Capacity: rl, Allocatable: rl}}
}

// makeNode is upstream's balanced-allocation makeNode.
func makeNode(name string, milliCPU, memory int64, extended map[string]int64) *corev1.Node {
	rl := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(milliCPU, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(memory, resource.BinarySI),
	}
	for n, q := range extended {
		rl[corev1.ResourceName(n)] = *resource.NewQuantity(q, resource.DecimalSI)
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Capacity: rl, Allocatable: rl}}
}

func gpu(n int64) map[string]int64 { return map[string]int64{"nvidia.com/gpu": n} }

// makePod is upstream's st.MakePod().Node(node).Req(r1).Req(r2)...: one container per request map.
func makePod(node string, reqs ...map[corev1.ResourceName]string) *corev1.Pod {
	pod := &corev1.Pod{Spec: corev1.PodSpec{NodeName: node}}
	for _, r := range reqs {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Resources: corev1.ResourceRequirements{Requests: quantities(r)}})
	}
	return pod
}

func cpuOnly(cpu string) map[corev1.ResourceName]string {
	return map[corev1.ResourceName]string{corev1.ResourceCPU: cpu}
}

func cpuAndMemory(cpu, mem string) map[corev1.ResourceName]string {
	return map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem}
}

func cpuAndMemoryAndGPU(cpu, mem, gpus string) map[corev1.ResourceName]string {
	return map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem, "nvidia.com/gpu": gpus}
}

// snapshot builds a NodeInfo per node, holding the pods bound to it.
func snapshot(pods []*corev1.Pod, nodes []*corev1.Node) []*framework.NodeInfo {
	out := make([]*framework.NodeInfo, 0, len(nodes))
	for _, n := range nodes {
		ni := framework.NewNodeInfo()
		ni.SetNode(n)
		for _, p := range pods {
			if p.Spec.NodeName == n.Name {
				ni.AddPod(p)
			}
		}
		out = append(out, ni)
	}
	return out
}
