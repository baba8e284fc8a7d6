package priority_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// TestPodPriorityThroughTheAPI checks the system classes, a pod's priority from its class
// or the global default, the 403 for a missing class and the default tolerations.
func TestPodPriorityThroughTheAPI(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	pcs := env.Client.SchedulingV1().PriorityClasses()
	for name, value := range map[string]int32{"system-node-critical": 2000001000, "system-cluster-critical": 2000000000} {
		pc, err := pcs.Get(ctx, name, metav1.GetOptions{})
		if err != nil || pc.Value != value || pc.PreemptionPolicy == nil || *pc.PreemptionPolicy != corev1.PreemptLowerPriority {
			t.Fatalf("%s: %+v, %v", name, pc, err)
		}
	}
	if _, err := pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-mine"}, Value: 5}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("system-mine: %v, want 422", err)
	}
	pods := env.Client.CoreV1().Pods("default")
	pod := func(name, class string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{PriorityClassName: class,
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	}
	p, err := pods.Create(ctx, pod("plain", ""), metav1.CreateOptions{})
	if err != nil || p.Spec.Priority == nil || *p.Spec.Priority != 0 || p.Spec.PriorityClassName != "" {
		t.Fatalf("plain pod: %+v, %v", p, err)
	}
	if len(p.Spec.Tolerations) != 2 || p.Spec.Tolerations[0].Key != corev1.TaintNodeNotReady || *p.Spec.Tolerations[1].TolerationSeconds != 300 {
		t.Fatalf("tolerations: %+v", p.Spec.Tolerations)
	}
	p, err = pods.Create(ctx, pod("critical", "system-node-critical"), metav1.CreateOptions{})
	if err != nil || *p.Spec.Priority != 2000001000 {
		t.Fatalf("critical pod: %+v, %v", p, err)
	}
	_, err = pods.Create(ctx, pod("lost", "nope"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `pods "lost" is forbidden: no PriorityClass with name nope was found`) {
		t.Fatalf("missing class: %v", err)
	}
	if _, err := pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "def"}, Value: 42, GlobalDefault: true}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The plugin reads the watch cache, which may lag the create by a moment.
	poll.Until(t, "a new pod to get the global default", func() error {
		d := pod("", "")
		d.GenerateName = "defaulted-"
		p, err := pods.Create(ctx, d, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if *p.Spec.Priority != 42 || p.Spec.PriorityClassName != "def" {
			return fmt.Errorf("priority %d class %q", *p.Spec.Priority, p.Spec.PriorityClassName)
		}
		return nil
	})
	_, err = pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "def2"}, Value: 43, GlobalDefault: true}, metav1.CreateOptions{})
	if want := `priorityclasses.scheduling.k8s.io "def2" is forbidden: PriorityClass def is already marked as default. Only one default can exist`; err == nil || err.Error() != want {
		t.Fatalf("second default: %v, want %q", err, want)
	}
}
