package nodename

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
			name: "no host specified",
			pod:  &corev1.Pod{},
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "foo"}},
		},
		{
			name: "host matches",
			pod:  &corev1.Pod{Spec: corev1.PodSpec{NodeName: "foo"}},
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "foo"}},
		},
		{
			name:       "host doesn't match",
			pod:        &corev1.Pod{Spec: corev1.PodSpec{NodeName: "bar"}},
			node:       &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "foo"}},
			wantCode:   framework.UnschedulableAndUnresolvable,
			wantReason: "node(s) didn't match the requested node name",
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
			ni.SetNode(tc.node)
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
