package kubelet

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// predicateNode is a node with 4 cpu, 8Gi memory, 10Gi ephemeral storage, 2 GPUs and room
// for 3 pods.
func predicateNode() *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, Labels: map[string]string{"zone": "a"}}, Status: v1.NodeStatus{
		Allocatable: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"),
			v1.ResourceEphemeralStorage: resource.MustParse("10Gi"), v1.ResourcePods: resource.MustParse("3"),
			"example.com/gpu": resource.MustParse("2"),
		},
	}}
}

// podRequesting is a pod on testNode whose one container requests rl and has ports.
func podRequesting(name string, rl v1.ResourceList, ports ...v1.ContainerPort) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}, Spec: v1.PodSpec{
		NodeName:   testNode,
		Containers: []v1.Container{{Name: "c", Image: "img", Resources: v1.ResourceRequirements{Requests: rl}, Ports: ports}},
	}}
}

func hostPort(port int32, proto v1.Protocol, ip string) v1.ContainerPort {
	return v1.ContainerPort{ContainerPort: 80, HostPort: port, Protocol: proto, HostIP: ip}
}

// Each predicate rejects with upstream's reason and message; the first failure decides.
func TestAdmitPredicates(t *testing.T) {
	cpu := func(s string) v1.ResourceList { return v1.ResourceList{v1.ResourceCPU: resource.MustParse(s)} }
	const portsMsg = "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
	critical := int32(systemCriticalPriority)
	for _, tc := range []struct {
		name        string
		pod         *v1.Pod
		node        func(*v1.Node)
		admitted    []*v1.Pod
		reason, msg string
	}{
		{name: "fits", pod: podRequesting("p", cpu("1")), admitted: []*v1.Pod{podRequesting("a", cpu("3"))}},
		{
			name: "pods", pod: podRequesting("p", nil),
			admitted: []*v1.Pod{podRequesting("a", nil), podRequesting("b", nil), podRequesting("c", nil)},
			reason:   "OutOfpods", msg: "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3",
		},
		{
			name: "cpu", pod: podRequesting("p", cpu("1")), admitted: []*v1.Pod{podRequesting("a", cpu("3500m"))},
			reason: "OutOfcpu", msg: "Node didn't have enough resource: cpu, requested: 1000, used: 3500, capacity: 4000",
		},
		{
			name: "overhead counts", pod: func() *v1.Pod {
				p := podRequesting("p", cpu("500m"))
				p.Spec.Overhead = cpu("250m")
				return p
			}(), admitted: []*v1.Pod{podRequesting("a", cpu("3500m"))},
			reason: "OutOfcpu", msg: "Node didn't have enough resource: cpu, requested: 750, used: 3500, capacity: 4000",
		},
		{
			name: "memory", pod: podRequesting("p", v1.ResourceList{v1.ResourceMemory: resource.MustParse("9Gi")}),
			reason: "OutOfmemory", msg: "Node didn't have enough resource: memory, requested: 9663676416, used: 0, capacity: 8589934592",
		},
		{
			name: "ephemeral storage", pod: podRequesting("p", v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("6Gi")}),
			admitted: []*v1.Pod{podRequesting("a", v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("5Gi")})},
			reason:   "OutOfephemeral-storage", msg: "Node didn't have enough resource: ephemeral-storage, requested: 6442450944, used: 5368709120, capacity: 10737418240",
		},
		{
			name: "extended resource", pod: podRequesting("p", v1.ResourceList{"example.com/gpu": resource.MustParse("1")}),
			admitted: []*v1.Pod{podRequesting("a", v1.ResourceList{"example.com/gpu": resource.MustParse("2")})},
			reason:   "OutOfexample.com/gpu", msg: "Node didn't have enough resource: example.com/gpu, requested: 1, used: 2, capacity: 2",
		},
		{name: "extended resource the node does not have is not checked", pod: podRequesting("p", v1.ResourceList{"example.com/fpga": resource.MustParse("1")})},
		{
			name: "init container's larger request", pod: func() *v1.Pod {
				p := podRequesting("p", cpu("100m"))
				p.Spec.InitContainers = []v1.Container{{Name: "i", Image: "img", Resources: v1.ResourceRequirements{Requests: cpu("5")}}}
				return p
			}(),
			reason: "OutOfcpu", msg: "Node didn't have enough resource: cpu, requested: 5000, used: 0, capacity: 4000",
		},
		{
			name: "node selector", pod: func() *v1.Pod {
				p := podRequesting("p", nil)
				p.Spec.NodeSelector = map[string]string{"zone": "b"}
				return p
			}(),
			reason: "NodeAffinity", msg: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
		},
		{
			name: "required node affinity", pod: func() *v1.Pod {
				p := podRequesting("p", nil)
				p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
					NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"other"}}}}},
				}}}
				return p
			}(),
			reason: "NodeAffinity", msg: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
		},
		{
			name: "matching node selector", pod: func() *v1.Pod {
				p := podRequesting("p", nil)
				p.Spec.NodeSelector = map[string]string{"zone": "a"}
				return p
			}(),
		},
		{
			name: "node name", pod: func() *v1.Pod {
				p := podRequesting("p", nil)
				p.Spec.NodeName = "other"
				return p
			}(),
			reason: "NodeName", msg: "Predicate NodeName failed: node(s) didn't match the requested node name",
		},
		{
			name: "host port", pod: podRequesting("p", nil, hostPort(8080, v1.ProtocolTCP, "")),
			admitted: []*v1.Pod{podRequesting("a", nil, hostPort(8080, "", ""))},
			reason:   "NodePorts", msg: portsMsg,
		},
		{
			name: "host port on 0.0.0.0 against one address", pod: podRequesting("p", nil, hostPort(8080, v1.ProtocolTCP, "")),
			admitted: []*v1.Pod{podRequesting("a", nil, hostPort(8080, v1.ProtocolTCP, "10.0.0.1"))},
			reason:   "NodePorts", msg: portsMsg,
		},
		{
			name: "host port of a sidecar", pod: podRequesting("p", nil, hostPort(8080, v1.ProtocolTCP, "10.0.0.1")),
			admitted: []*v1.Pod{func() *v1.Pod {
				p := podRequesting("a", nil)
				always := v1.ContainerRestartPolicyAlways
				p.Spec.InitContainers = []v1.Container{{Name: "s", Image: "img", RestartPolicy: &always, Ports: []v1.ContainerPort{hostPort(8080, v1.ProtocolTCP, "")}}}
				return p
			}()},
			reason: "NodePorts", msg: portsMsg,
		},
		{
			name: "same host port, other protocol", pod: podRequesting("p", nil, hostPort(8080, v1.ProtocolUDP, "")),
			admitted: []*v1.Pod{podRequesting("a", nil, hostPort(8080, v1.ProtocolTCP, ""))},
		},
		{
			name: "same host port, other addresses", pod: podRequesting("p", nil, hostPort(8080, v1.ProtocolTCP, "10.0.0.2")),
			admitted: []*v1.Pod{podRequesting("a", nil, hostPort(8080, v1.ProtocolTCP, "10.0.0.1"))},
		},
		{
			name: "NoExecute taint", pod: podRequesting("p", nil),
			node:   func(n *v1.Node) { n.Spec.Taints = []v1.Taint{{Key: "k", Value: "v", Effect: v1.TaintEffectNoExecute}} },
			reason: "TaintToleration", msg: "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate",
		},
		{
			name: "tolerated NoExecute taint", pod: func() *v1.Pod {
				p := podRequesting("p", nil)
				p.Spec.Tolerations = []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists}}
				return p
			}(),
			node: func(n *v1.Node) { n.Spec.Taints = []v1.Taint{{Key: "k", Value: "v", Effect: v1.TaintEffectNoExecute}} },
		},
		{
			name: "NoSchedule taint is the scheduler's", pod: podRequesting("p", nil),
			node: func(n *v1.Node) { n.Spec.Taints = []v1.Taint{{Key: "k", Effect: v1.TaintEffectNoSchedule}} },
		},
		{
			name: "resources come first", pod: podRequesting("p", cpu("1"), hostPort(8080, v1.ProtocolTCP, "")),
			admitted: []*v1.Pod{podRequesting("a", cpu("4"), hostPort(8080, v1.ProtocolTCP, ""))},
			reason:   "OutOfcpu", msg: "Node didn't have enough resource: cpu, requested: 1000, used: 4000, capacity: 4000",
		},
		{
			name: "a critical pod is not rejected for resources", pod: func() *v1.Pod {
				p := podRequesting("p", cpu("1"))
				p.Spec.Priority = &critical
				return p
			}(),
			admitted: []*v1.Pod{podRequesting("a", cpu("4"))},
		},
		{
			name: "a critical pod is rejected for the rest", pod: func() *v1.Pod {
				p := podRequesting("p", cpu("1"), hostPort(8080, v1.ProtocolTCP, ""))
				p.Spec.Priority = &critical
				return p
			}(),
			admitted: []*v1.Pod{podRequesting("a", cpu("4"), hostPort(8080, v1.ProtocolTCP, ""))},
			reason:   "NodePorts", msg: portsMsg,
		},
		{
			name: "OS label", pod: func() *v1.Pod {
				p := podRequesting("p", nil)
				p.Labels = map[string]string{v1.LabelOSStable: "windows"}
				return p
			}(),
			reason: "PodOSSelectorNodeLabelDoesNotMatch", msg: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
		},
		{
			name: "OS field", pod: func() *v1.Pod {
				p := podRequesting("p", nil)
				p.Spec.OS = &v1.PodOS{Name: v1.Windows}
				return p
			}(),
			reason: "PodOSNotSupported", msg: "Failed to admit pod as the OS field doesn't match node OS",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := predicateNode()
			if tc.node != nil {
				tc.node(node)
			}
			reason, msg := admitPredicates(tc.pod, node, tc.admitted)
			if reason != tc.reason || msg != tc.msg {
				t.Errorf("got %q %q, want %q %q", reason, msg, tc.reason, tc.msg)
			}
		})
	}
}
