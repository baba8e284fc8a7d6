package nodeports

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

// newPod returns a pod with one container using the given "PROTO/IP/PORT" host ports.
func newPod(hostPortInfos ...string) *corev1.Pod {
	var ports []corev1.ContainerPort
	for _, info := range hostPortInfos {
		parts := strings.Split(info, "/")
		port, _ := strconv.Atoi(parts[2])
		ports = append(ports, corev1.ContainerPort{HostIP: parts[1], HostPort: int32(port), Protocol: corev1.Protocol(parts[0])})
	}
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Ports: ports}}}}
}

// The cases are upstream's node_ports_test.go TestNodePorts table.
func TestNodePorts(t *testing.T) {
	tests := []struct {
		name          string
		pod           *corev1.Pod
		nodeInfo      *framework.NodeInfo
		wantSkip      bool
		wantRejection bool
	}{
		{name: "skip filter", pod: &corev1.Pod{}, nodeInfo: framework.NewNodeInfo(), wantSkip: true},
		{name: "other port", pod: newPod("UDP/127.0.0.1/8080"), nodeInfo: framework.NewNodeInfo(newPod("UDP/127.0.0.1/9090"))},
		{name: "same udp port", pod: newPod("UDP/127.0.0.1/8080"), nodeInfo: framework.NewNodeInfo(newPod("UDP/127.0.0.1/8080")), wantRejection: true},
		{name: "same tcp port", pod: newPod("TCP/127.0.0.1/8080"), nodeInfo: framework.NewNodeInfo(newPod("TCP/127.0.0.1/8080")), wantRejection: true},
		{name: "different host ip", pod: newPod("TCP/127.0.0.1/8080"), nodeInfo: framework.NewNodeInfo(newPod("TCP/127.0.0.2/8080"))},
		{name: "different protocol", pod: newPod("UDP/127.0.0.1/8080"), nodeInfo: framework.NewNodeInfo(newPod("TCP/127.0.0.1/8080"))},
		{name: "second udp port conflict", pod: newPod("UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"), nodeInfo: framework.NewNodeInfo(newPod("UDP/127.0.0.1/8080")), wantRejection: true},
		{name: "first tcp port conflict", pod: newPod("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"), nodeInfo: framework.NewNodeInfo(newPod("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081")), wantRejection: true},
		{name: "first tcp port conflict due to 0.0.0.0 hostIP", pod: newPod("TCP/0.0.0.0/8001"), nodeInfo: framework.NewNodeInfo(newPod("TCP/127.0.0.1/8001")), wantRejection: true},
		{name: "TCP hostPort conflict due to 0.0.0.0 hostIP", pod: newPod("TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"), nodeInfo: framework.NewNodeInfo(newPod("TCP/127.0.0.1/8001")), wantRejection: true},
		{name: "second tcp port conflict to 0.0.0.0 hostIP", pod: newPod("TCP/127.0.0.1/8001"), nodeInfo: framework.NewNodeInfo(newPod("TCP/0.0.0.0/8001")), wantRejection: true},
		{name: "second different protocol", pod: newPod("UDP/127.0.0.1/8001"), nodeInfo: framework.NewNodeInfo(newPod("TCP/0.0.0.0/8001"))},
		{name: "UDP hostPort conflict due to 0.0.0.0 hostIP", pod: newPod("UDP/127.0.0.1/8001"), nodeInfo: framework.NewNodeInfo(newPod("TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001")), wantRejection: true},
		// Beyond upstream's table: empty hostIP and protocol mean 0.0.0.0 and TCP.
		{name: "defaults collide with an explicit TCP port", pod: newPod("//8001"), nodeInfo: framework.NewNodeInfo(newPod("TCP/127.0.0.1/8001")), wantRejection: true},
	}
	ctx := context.Background()
	p, err := New(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			state := framework.NewCycleState()
			pre := p.(framework.PreFilterPlugin).PreFilter(ctx, state, tc.pod)
			if tc.wantSkip {
				if !pre.IsSkip() {
					t.Fatalf("PreFilter = %v, want Skip", pre.Code())
				}
				return
			}
			if !pre.IsSuccess() {
				t.Fatalf("PreFilter: %v", pre.Message())
			}
			st := p.(framework.FilterPlugin).Filter(ctx, state, tc.pod, tc.nodeInfo)
			if !tc.wantRejection {
				if !st.IsSuccess() {
					t.Fatalf("Filter = %v %q, want success", st.Code(), st.Message())
				}
				return
			}
			if st.Code() != framework.Unschedulable {
				t.Fatalf("code = %v, want Unschedulable", st.Code())
			}
			if got := st.Reasons(); !reflect.DeepEqual(got, []string{"node(s) didn't have free ports for the requested pod ports"}) {
				t.Fatalf("reasons = %q", got)
			}
		})
	}
}

func TestFilterWithoutPreFilter(t *testing.T) {
	p, _ := New(context.Background(), nil, nil)
	st := p.(framework.FilterPlugin).Filter(context.Background(), framework.NewCycleState(), newPod("TCP//80"), framework.NewNodeInfo())
	if st.Code() != framework.Error || !errors.Is(st.AsError(), framework.ErrNotFound) {
		t.Fatalf("status = %v %q, want Error wrapping ErrNotFound", st.Code(), st.Message())
	}
}

func TestHostPorts(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{
			{Ports: []corev1.ContainerPort{{ContainerPort: 1, HostPort: 8001}}},                         // regular init: not counted
			{RestartPolicy: &always, Ports: []corev1.ContainerPort{{ContainerPort: 2, HostPort: 8002}}}, // sidecar: counted
		},
		Containers: []corev1.Container{
			{Ports: []corev1.ContainerPort{{ContainerPort: 3, HostPort: 8003}, {ContainerPort: 4}}},
		},
	}}
	want := []corev1.ContainerPort{{ContainerPort: 2, HostPort: 8002}, {ContainerPort: 3, HostPort: 8003}}
	if got := HostPorts(pod); !reflect.DeepEqual(got, want) {
		t.Fatalf("HostPorts = %v, want %v", got, want)
	}
}
