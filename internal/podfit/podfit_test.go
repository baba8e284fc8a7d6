package podfit

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// A port on 0.0.0.0 collides with the same port and protocol on every address; other
// protocols and other specific addresses do not collide.
func TestHostPortConflicts(t *testing.T) {
	used := HostPortInfo{}
	used.Add("", "", 80)             // 0.0.0.0/TCP
	used.Add("10.0.0.1", "UDP", 53)  // one address
	used.Add("10.0.0.1", "TCP", 443) // one address
	for _, tc := range []struct {
		ip, proto string
		port      int32
		want      bool
	}{
		{"", "TCP", 80, true}, {"10.0.0.9", "TCP", 80, true}, {"", "UDP", 80, false},
		{"", "UDP", 53, true}, {"10.0.0.1", "UDP", 53, true}, {"10.0.0.2", "UDP", 53, false},
		{"127.0.0.1", "", 443, false}, {"0.0.0.0", "TCP", 443, true}, {"", "TCP", 0, false},
	} {
		if got := used.CheckConflict(tc.ip, tc.proto, tc.port); got != tc.want {
			t.Errorf("%s:%d/%s conflict = %v, want %v", tc.ip, tc.port, tc.proto, got, tc.want)
		}
	}
	used.Remove("", "", 80)
	if used.CheckConflict("", "TCP", 80) {
		t.Error("removed port still in use")
	}
}

// HostPorts are the app containers' and the sidecars' ports with a hostPort, not those of
// regular init containers.
func TestHostPorts(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{
			{Name: "init", Ports: []corev1.ContainerPort{{HostPort: 1}}},
			{Name: "sidecar", RestartPolicy: &always, Ports: []corev1.ContainerPort{{HostPort: 2}, {ContainerPort: 9}}},
		},
		Containers: []corev1.Container{{Name: "app", Ports: []corev1.ContainerPort{{ContainerPort: 8}, {HostPort: 3, HostIP: "10.0.0.1"}}}},
	}}
	got := HostPorts(pod)
	want := []corev1.ContainerPort{{HostPort: 2}, {HostPort: 3, HostIP: "10.0.0.1"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("HostPorts = %v, want %v", got, want)
	}
	used := HostPortInfo{}
	used.AddPod(pod)
	if !PortsFit([]corev1.ContainerPort{{HostPort: 1}}, used) || PortsFit([]corev1.ContainerPort{{HostPort: 2}}, used) {
		t.Errorf("used ports %v", used)
	}
}

// The resource fit reports every short resource in upstream's order with the numbers of the
// kubelet's message; skipped scalars are not checked.
func TestInsufficient(t *testing.T) {
	q := resource.MustParse
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("1Gi"), "example.com/b": q("1"), "example.com/a": q("2"), "example.com/skip": q("1"),
		}}}},
		Overhead: corev1.ResourceList{corev1.ResourceCPU: q("100m")},
	}}
	req := NewRequest(pod, func(n corev1.ResourceName) bool { return n == "example.com/skip" })
	alloc := NewResource(corev1.ResourceList{corev1.ResourcePods: q("2"), corev1.ResourceCPU: q("2"), corev1.ResourceMemory: q("4Gi"), "example.com/a": q("1")})
	used := NewResource(corev1.ResourceList{corev1.ResourceCPU: q("1")})
	got := req.Insufficient(&alloc, &used, 2, nil)
	want := []InsufficientResource{
		{ResourceName: corev1.ResourcePods, Reason: ErrReasonTooManyPods, Requested: 1, Used: 2, Capacity: 2},
		{ResourceName: corev1.ResourceCPU, Reason: ErrReasonInsufficientCPU, Requested: 1100, Used: 1000, Capacity: 2000},
		{ResourceName: "example.com/a", Reason: "Insufficient example.com/a", Requested: 2, Used: 0, Capacity: 1, Unresolvable: true},
		{ResourceName: "example.com/b", Reason: "Insufficient example.com/b", Requested: 1, Used: 0, Capacity: 0, Unresolvable: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Insufficient =\n%+v\nwant\n%+v", got, want)
	}
	if empty := NewRequest(&corev1.Pod{}, nil); !empty.Empty || len(empty.Insufficient(&alloc, &used, 0, nil)) != 0 {
		t.Errorf("an empty request on a node with room: %+v", empty)
	}
}
