package defaulttolerationseconds

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/apiserver/admission"
)

func TestAdmit(t *testing.T) {
	secs := int64(10)
	cases := []struct {
		name  string
		given []corev1.Toleration
		want  int // tolerations after admission
	}{
		{name: "none", want: 2},
		{name: "own not-ready", given: []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs}}, want: 2},
		{name: "everything", given: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, want: 1},
		{name: "NoSchedule only", given: []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}, want: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{Tolerations: tc.given}}
			a := &admission.Attributes{Resource: corev1.SchemeGroupVersion.WithResource("pods"), Operation: admission.Create, Object: pod}
			if err := (Plugin{}).Admit(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			if len(pod.Spec.Tolerations) != tc.want {
				t.Fatalf("tolerations %+v, want %d", pod.Spec.Tolerations, tc.want)
			}
			for _, tol := range pod.Spec.Tolerations[len(tc.given):] {
				if tol.TolerationSeconds == nil || *tol.TolerationSeconds != Seconds || tol.Effect != corev1.TaintEffectNoExecute {
					t.Fatalf("added %+v", tol)
				}
			}
		})
	}
	// Subresources and other kinds are left alone.
	pod := &corev1.Pod{}
	a := &admission.Attributes{Resource: corev1.SchemeGroupVersion.WithResource("pods"), Subresource: "status", Operation: admission.Update, Object: pod}
	if err := (Plugin{}).Admit(context.Background(), a); err != nil || len(pod.Spec.Tolerations) != 0 {
		t.Fatalf("status update changed: %v %+v", err, pod.Spec.Tolerations)
	}
}
