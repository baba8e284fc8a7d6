package nodeunschedulable

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

func TestFilter(t *testing.T) {
	tests := []struct {
		name       string
		pod        *corev1.Pod
		node       *corev1.Node
		wantCode   framework.Code
		wantReason string
	}{
		{
			name:       "unschedulable node rejects a pod without tolerations",
			pod:        &corev1.Pod{},
			node:       &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}},
			wantCode:   framework.UnschedulableAndUnresolvable,
			wantReason: "node(s) were unschedulable",
		},
		{
			name: "schedulable node takes any pod",
			pod:  &corev1.Pod{},
			node: &corev1.Node{},
		},
		{
			name: "pod tolerating the unschedulable taint lands on a cordoned node",
			pod: &corev1.Pod{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{
				{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule},
			}}},
			node: &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}},
		},
		{
			name: "Exists with empty key tolerates everything",
			pod: &corev1.Pod{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{
				{Operator: corev1.TolerationOpExists},
			}}},
			node: &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}},
		},
		{
			name: "toleration for another effect does not help",
			pod: &corev1.Pod{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{
				{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
			}}},
			node:       &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}},
			wantCode:   framework.UnschedulableAndUnresolvable,
			wantReason: "node(s) were unschedulable",
		},
		{
			name:       "missing node",
			pod:        &corev1.Pod{},
			wantCode:   framework.UnschedulableAndUnresolvable,
			wantReason: "node(s) had unknown conditions",
		},
	}
	ctx := context.Background()
	p, err := New(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ni := framework.NewNodeInfo()
			if tc.node != nil {
				ni.SetNode(tc.node)
			}
			st := p.(framework.FilterPlugin).Filter(ctx, framework.NewCycleState(), tc.pod, ni)
			if st.Code() != tc.wantCode {
				t.Fatalf("code = %v, want %v", st.Code(), tc.wantCode)
			}
			if got := st.Message(); got != tc.wantReason {
				t.Fatalf("reason = %q, want %q", got, tc.wantReason)
			}
		})
	}
}
