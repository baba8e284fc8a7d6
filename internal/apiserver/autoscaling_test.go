package apiserver_test

import (
	"context"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/testenv"
)

// TestHorizontalPodAutoscalerVersions drives autoscalers through both served versions:
// objects written in one are read in the other, autoscaling/v1 keeps the v2 fields it
// lacks in upstream's annotations, and both versions get upstream's defaults and
// validation.
func TestHorizontalPodAutoscalerVersions(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	v1c := env.Client.AutoscalingV1().HorizontalPodAutoscalers("default")
	v2c := env.Client.AutoscalingV2().HorizontalPodAutoscalers("default")
	target := autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}

	// A v1 autoscaler with no CPU target reads as v2 with the default 80% CPU metric.
	plain, err := v1c.Create(ctx, &autoscalingv1.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "plain"},
		Spec:       autoscalingv1.HorizontalPodAutoscalerSpec{ScaleTargetRef: target, MaxReplicas: 5},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Spec.MinReplicas == nil || *plain.Spec.MinReplicas != 1 {
		t.Errorf("v1 minReplicas default: %v", plain.Spec.MinReplicas)
	}
	p2, err := v2c.Get(ctx, "plain", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p2.Spec.Metrics) != 1 || p2.Spec.Metrics[0].Resource == nil || p2.Spec.Metrics[0].Resource.Name != corev1.ResourceCPU ||
		ptr.Deref(p2.Spec.Metrics[0].Resource.Target.AverageUtilization, 0) != 80 {
		t.Errorf("v2 view of a v1 autoscaler without a target: %+v", p2.Spec.Metrics)
	}

	// A v2 autoscaler with a memory metric, a CPU utilization target and a behavior.
	mem := resource.MustParse("100Mi")
	rich, err := v2c.Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "rich"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference(target), MinReplicas: ptr.To[int32](2), MaxReplicas: 10,
			Metrics: []autoscalingv2.MetricSpec{
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceMemory,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &mem}}},
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](60)}}},
			},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](30)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b := rich.Spec.Behavior; b == nil || b.ScaleUp == nil || len(b.ScaleUp.Policies) != 2 || len(b.ScaleDown.Policies) != 1 ||
		ptr.Deref(b.ScaleDown.StabilizationWindowSeconds, 0) != 30 {
		t.Errorf("v2 behavior defaults: %+v", rich.Spec.Behavior)
	}
	r1, err := v1c.Get(ctx, "rich", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(r1.Spec.TargetCPUUtilizationPercentage, 0) != 60 {
		t.Errorf("v1 CPU target: %v", r1.Spec.TargetCPUUtilizationPercentage)
	}
	if a := r1.Annotations["autoscaling.alpha.kubernetes.io/metrics"]; !strings.Contains(a, `"memory"`) {
		t.Errorf("v1 metrics annotation: %q", a)
	}
	if a := r1.Annotations["autoscaling.alpha.kubernetes.io/behavior"]; !strings.Contains(a, `"StabilizationWindowSeconds":30`) {
		t.Errorf("v1 behavior annotation: %q", a)
	}
	// An update through v1 keeps what only v2 holds, and no annotation is stored.
	r1.Spec.MaxReplicas = 12
	if _, err := v1c.Update(ctx, r1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r2, err := v2c.Get(ctx, "rich", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Spec.MaxReplicas != 12 || len(r2.Spec.Metrics) != 2 || r2.Spec.Behavior == nil || len(r2.Annotations) != 0 {
		t.Errorf("v2 after a v1 update: max %d metrics %d behavior %v annotations %v", r2.Spec.MaxReplicas, len(r2.Spec.Metrics), r2.Spec.Behavior, r2.Annotations)
	}

	// Watches and lists of either version see the objects of both.
	l1, err := v1c.List(ctx, metav1.ListOptions{})
	if err != nil || len(l1.Items) != 2 {
		t.Fatalf("v1 list: %v %v", l1, err)
	}
	w, err := v1c.Watch(ctx, metav1.ListOptions{ResourceVersion: l1.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	r2.Status.CurrentReplicas, r2.Status.DesiredReplicas = 3, 4
	if _, err := v2c.UpdateStatus(ctx, r2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := <-w.ResultChan()
	if got, ok := ev.Object.(*autoscalingv1.HorizontalPodAutoscaler); ev.Type != watch.Modified || !ok || got.Status.CurrentReplicas != 3 {
		t.Errorf("v1 watch event: %s %#v", ev.Type, ev.Object)
	}

	// Validation, in both versions, with upstream's messages.
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"v1 min above max", func() error {
			_, err := v1c.Create(ctx, &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "bad1"},
				Spec: autoscalingv1.HorizontalPodAutoscalerSpec{ScaleTargetRef: target, MinReplicas: ptr.To[int32](3), MaxReplicas: 2}}, metav1.CreateOptions{})
			return err
		}(), "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`"},
		{"v1 zero utilization", func() error {
			_, err := v1c.Create(ctx, &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "bad2"},
				Spec: autoscalingv1.HorizontalPodAutoscalerSpec{ScaleTargetRef: target, MaxReplicas: 2, TargetCPUUtilizationPercentage: ptr.To[int32](0)}}, metav1.CreateOptions{})
			return err
		}(), "spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0"},
		{"v2 no target name", func() error {
			_, err := v2c.Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "bad3"},
				Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: "Deployment"}, MaxReplicas: 2}}, metav1.CreateOptions{})
			return err
		}(), "spec.scaleTargetRef.name: Required value"},
		{"v2 pods metric without average", func() error {
			_, err := v2c.Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "bad4"},
				Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv2.CrossVersionObjectReference(target), MaxReplicas: 2,
					Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
						Metric: autoscalingv2.MetricIdentifier{Name: "qps"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType}}}}}}, metav1.CreateOptions{})
			return err
		}(), "spec.metrics[0].pods.target.averageValue: Required value: must specify a positive target averageValue"},
	} {
		if !apierrors.IsInvalid(tc.err) || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: got %v, want 422 with %q", tc.name, tc.err, tc.want)
		}
	}
}
