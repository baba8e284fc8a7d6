package framework

import (
	"errors"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func container(cpu, mem string) corev1.Container {
	c := corev1.Container{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}
	if cpu != "" {
		c.Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	return c
}

func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	sidecar := container("200m", "")
	sidecar.RestartPolicy = &always
	cases := []struct {
		name            string
		spec            corev1.PodSpec
		cpu, nonZeroCPU int64
		mem             int64
	}{
		{"sum of containers", corev1.PodSpec{Containers: []corev1.Container{container("100m", "1Gi"), container("300m", "")}}, 400, 400, 1 << 30},
		{"init larger than app", corev1.PodSpec{InitContainers: []corev1.Container{container("2", "")}, Containers: []corev1.Container{container("500m", "")}}, 2000, 2000, 0},
		{"sidecar adds to app and to later inits", corev1.PodSpec{InitContainers: []corev1.Container{sidecar, container("1", "")}, Containers: []corev1.Container{container("100m", "")}}, 1200, 1200, 0},
		{"overhead", corev1.PodSpec{Containers: []corev1.Container{container("100m", "")}, Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}}, 150, 150, 0},
		{"nothing requested", corev1.PodSpec{Containers: []corev1.Container{{}}}, 0, DefaultMilliCPURequest, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: tc.spec}
			r := PodRequests(pod)
			if r.MilliCPU != tc.cpu || r.Memory != tc.mem {
				t.Fatalf("requests cpu %d mem %d, want %d %d", r.MilliCPU, r.Memory, tc.cpu, tc.mem)
			}
			if nz := PodNonZeroRequests(pod); nz.MilliCPU != tc.nonZeroCPU {
				t.Fatalf("non-zero cpu %d, want %d", nz.MilliCPU, tc.nonZeroCPU)
			}
		})
	}
}

func TestHostPortConflicts(t *testing.T) {
	h := HostPortInfo{}
	h.Add("", "TCP", 80)
	h.Add("10.0.0.1", "UDP", 53)
	cases := []struct {
		ip, proto string
		port      int32
		want      bool
	}{
		{"127.0.0.1", "TCP", 80, true}, // 0.0.0.0 holds every address
		{"", "UDP", 80, false},
		{"", "UDP", 53, true}, // 0.0.0.0 collides with any address
		{"10.0.0.2", "UDP", 53, false},
		{"", "TCP", 0, false},
	}
	for _, tc := range cases {
		if got := h.CheckConflict(tc.ip, tc.proto, tc.port); got != tc.want {
			t.Errorf("CheckConflict(%q,%q,%d) = %v, want %v", tc.ip, tc.proto, tc.port, got, tc.want)
		}
	}
	h.Remove("", "TCP", 80)
	if h.CheckConflict("", "TCP", 80) {
		t.Fatal("port still used after Remove")
	}
}

func TestNodeInfoAddRemoveClone(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	side := container("100m", "")
	side.RestartPolicy = &always
	side.Ports = []corev1.ContainerPort{{HostPort: 9000}}
	app := container("1", "1Gi")
	app.Ports = []corev1.ContainerPort{{HostPort: 8080, Protocol: corev1.ProtocolTCP}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: types.UID("u1")}, Spec: corev1.PodSpec{InitContainers: []corev1.Container{side}, Containers: []corev1.Container{app}}}
	ni := NewNodeInfo()
	ni.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")}}})
	ni.AddPod(pod)
	if ni.Requested.MilliCPU != 1100 || ni.Allocatable.MilliCPU != 4000 || ni.Allocatable.AllowedPodNumber != 110 {
		t.Fatalf("requested %+v allocatable %+v", ni.Requested, ni.Allocatable)
	}
	if !ni.UsedPorts.CheckConflict("", "TCP", 8080) || !ni.UsedPorts.CheckConflict("", "TCP", 9000) {
		t.Fatal("app and sidecar host ports must be recorded")
	}
	clone := ni.Clone()
	if err := ni.RemovePod(pod); err != nil {
		t.Fatal(err)
	}
	if ni.Requested.MilliCPU != 0 || len(ni.Pods) != 0 || ni.UsedPorts.CheckConflict("", "TCP", 8080) {
		t.Fatalf("after remove: %+v", ni)
	}
	if clone.Requested.MilliCPU != 1100 || len(clone.Pods) != 1 || !clone.UsedPorts.CheckConflict("", "TCP", 8080) {
		t.Fatal("the clone changed with the original")
	}
	if err := ni.RemovePod(pod); err == nil {
		t.Fatal("removing an absent pod must fail")
	}
}

func TestStatus(t *testing.T) {
	var s *Status
	if !s.IsSuccess() || s.AsError() != nil || s.Code() != Success {
		t.Fatal("nil status must be success")
	}
	r := NewStatus(Unschedulable, "Insufficient cpu", "Too many pods").WithPlugin("NodeResourcesFit")
	if !r.IsRejected() || r.Message() != "Insufficient cpu, Too many pods" || r.Plugin() != "NodeResourcesFit" {
		t.Fatalf("status %+v", r)
	}
	e := AsStatus(errors.New("boom"))
	if e.Code() != Error || e.AsError().Error() != "boom" {
		t.Fatalf("error status %+v", e)
	}
}

// TestCopyIntoMatchesClone: CopyInto into a NodeInfo that held another node's
// pods, ports and images leaves it equal to a Clone, and later changes of the
// original do not reach the copy.
func TestCopyIntoMatchesClone(t *testing.T) {
	withPort := func(name string, port int32, affinity bool) *corev1.Pod {
		c := container("100m", "10Mi")
		c.Ports = []corev1.ContainerPort{{HostPort: port, Protocol: corev1.ProtocolTCP}}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)}, Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
		if affinity {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "zone"}}}}
		}
		return p
	}
	node := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), "example.com/gpu": resource.MustParse("2")}}}
	}
	src := NewNodeInfo(withPort("a", 80, false), withPort("b", 81, true))
	src.SetNode(node("n1"))
	src.ImageStates = map[string]*ImageStateSummary{"img:1": {Size: 10, NumNodes: 1}}

	dst := NewNodeInfo(withPort("x", 90, true), withPort("y", 91, true), withPort("z", 92, false))
	dst.SetNode(node("n2"))
	dst.ImageStates = map[string]*ImageStateSummary{"other:1": {Size: 5}}
	src.CopyInto(dst)
	if want := src.Clone(); !reflect.DeepEqual(dst, want) {
		t.Fatalf("copy %+v\nclone %+v", dst, want)
	}
	empty := NewNodeInfo()
	empty.SetNode(node("n3"))
	empty.CopyInto(dst)
	if len(dst.Pods) != 0 || cap(dst.Pods) < 2 {
		t.Fatalf("pods %v (cap %d): the array is kept for the next copy", dst.Pods, cap(dst.Pods))
	}
	dst.Pods = nil // Clone leaves an empty list nil
	if want := empty.Clone(); !reflect.DeepEqual(dst, want) {
		t.Fatalf("copy of an empty node %+v\nclone %+v", dst, want)
	}

	src.CopyInto(dst)
	if err := src.RemovePod(src.Pods[0].Pod); err != nil {
		t.Fatal(err)
	}
	src.Requested.ScalarResources = map[corev1.ResourceName]int64{"example.com/gpu": 1}
	if len(dst.Pods) != 2 || !dst.UsedPorts.CheckConflict("", "TCP", 80) || dst.Requested.ScalarResources != nil {
		t.Fatalf("the copy changed with the original: %+v", dst)
	}
}
