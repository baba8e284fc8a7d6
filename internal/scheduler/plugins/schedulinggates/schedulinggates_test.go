package schedulinggates

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

func TestPreEnqueue(t *testing.T) {
	for _, tc := range []struct {
		name  string
		gates []corev1.PodSchedulingGate
		code  framework.Code
		msg   string
	}{
		{name: "no gates", code: framework.Success},
		{name: "empty list", gates: []corev1.PodSchedulingGate{}, code: framework.Success},
		{name: "one gate", gates: []corev1.PodSchedulingGate{{Name: "example.com/foo"}},
			code: framework.UnschedulableAndUnresolvable, msg: "waiting for scheduling gates: [example.com/foo]"},
		{name: "two gates", gates: []corev1.PodSchedulingGate{{Name: "example.com/foo"}, {Name: "example.com/bar"}},
			code: framework.UnschedulableAndUnresolvable, msg: "waiting for scheduling gates: [example.com/foo example.com/bar]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{SchedulingGates: tc.gates}}
			st := (&SchedulingGates{}).PreEnqueue(context.Background(), pod)
			if st.Code() != tc.code || st.Message() != tc.msg {
				t.Fatalf("got %v %q, want %v %q", st.Code(), st.Message(), tc.code, tc.msg)
			}
		})
	}
}
