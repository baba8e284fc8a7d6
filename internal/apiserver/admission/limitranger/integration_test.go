package limitranger_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// TestLimitRangeThroughTheAPI creates a LimitRange and pods with client-go: the range
// gets upstream's defaults, pods get its defaults, and a pod over its max is refused.
func TestLimitRangeThroughTheAPI(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	lr, err := env.Client.CoreV1().LimitRanges("default").Create(ctx, &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: "limits"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type: corev1.LimitTypeContainer,
			Max:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			Min:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")},
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Upstream's defaults: default from max, defaultRequest from default.
	if lr.Spec.Limits[0].Default.Cpu().String() != "1" || lr.Spec.Limits[0].DefaultRequest.Memory().String() != "1Gi" {
		t.Fatalf("defaults of the range: %+v", lr.Spec.Limits[0])
	}
	if _, err := env.Client.CoreV1().LimitRanges("default").Create(ctx, &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			Min: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}, Max: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}},
	}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("min over max: %v, want 422", err)
	}
	pods := env.Client.CoreV1().Pods("default")
	// The plugin reads the watch cache, which may lag the create by a moment.
	poll.Until(t, "a new pod to get the range's defaults", func() error {
		p, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "p-"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r := p.Spec.Containers[0].Resources
		if r.Limits.Cpu().String() != "1" || r.Requests.Memory().String() != "1Gi" {
			return fmt.Errorf("resources %+v", r)
		}
		if !strings.HasPrefix(p.Annotations["kubernetes.io/limit-ranger"], "LimitRanger plugin set: ") {
			return fmt.Errorf("annotations %v", p.Annotations)
		}
		return nil
	})
	_, err = pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "big"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}}}, metav1.CreateOptions{})
	want := `pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 2`
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("pod over max: %v, want %q", err, want)
	}
}
