package conversion

import (
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestHPARoundTrip converts autoscaling/v2 objects to v1 and back: nothing is lost, the
// v1 form carries the rest in the annotations, and those never reach the v2 form.
func TestHPARoundTrip(t *testing.T) {
	avg := resource.MustParse("200Mi")
	qps := resource.MustParse("5")
	select_ := autoscalingv2.MaxChangePolicySelect
	full := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Annotations: map[string]string{"owner": "me"}},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](2), MaxReplicas: 9,
			Metrics: []autoscalingv2.MetricSpec{
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceMemory,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &avg}}},
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](75)}}},
				{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "qps"},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &qps}}},
			},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{
				StabilizationWindowSeconds: ptr.To[int32](0), SelectPolicy: &select_,
				Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15}},
			}},
		},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{
			CurrentReplicas: 3, DesiredReplicas: 4,
			CurrentMetrics: []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
				Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To[int32](40), AverageValue: resource.NewMilliQuantity(40, resource.DecimalSI)}}}},
			Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, Reason: "ReadyForNewScale"}},
		},
	}
	v1, err := HPAToV1(full)
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(v1.Spec.TargetCPUUtilizationPercentage, 0) != 75 || ptr.Deref(v1.Status.CurrentCPUUtilizationPercentage, 0) != 40 {
		t.Errorf("v1 CPU fields: target %v current %v", v1.Spec.TargetCPUUtilizationPercentage, v1.Status.CurrentCPUUtilizationPercentage)
	}
	for _, k := range []string{MetricsAnnotation, ConditionsAnnotation, BehaviorAnnotation, "owner"} {
		if v1.Annotations[k] == "" {
			t.Errorf("v1 lacks annotation %s: %v", k, v1.Annotations)
		}
	}
	if strings.Contains(v1.Annotations[MetricsAnnotation], `"cpu"`) {
		t.Errorf("the CPU target is a field in v1, not in the metrics annotation: %s", v1.Annotations[MetricsAnnotation])
	}
	if !strings.Contains(v1.Annotations[BehaviorAnnotation], `"ScaleUp":{"StabilizationWindowSeconds":0,"SelectPolicy":"Max"`) {
		t.Errorf("behavior annotation shape: %s", v1.Annotations[BehaviorAnnotation])
	}
	back, err := HPAFromV1(v1)
	if err != nil {
		t.Fatal(err)
	}
	// The CPU metric comes back last: v1 has one place for it, after the others.
	want := full.DeepCopy()
	want.APIVersion, want.Kind = "autoscaling/v2", "HorizontalPodAutoscaler"
	if !equality.Semantic.DeepEqual(back.Spec.Behavior, want.Spec.Behavior) || back.Annotations["owner"] != "me" || len(back.Annotations) != 1 ||
		len(back.Spec.Metrics) != 3 || !equality.Semantic.DeepEqual(back.Status.Conditions, want.Status.Conditions) ||
		back.Spec.MaxReplicas != 9 || ptr.Deref(back.Spec.MinReplicas, 0) != 2 || back.Status.DesiredReplicas != 4 {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, want)
	}
	found := map[corev1.ResourceName]bool{}
	for _, m := range back.Spec.Metrics {
		if m.Resource != nil {
			found[m.Resource.Name] = true
		}
	}
	if !found[corev1.ResourceCPU] || !found[corev1.ResourceMemory] {
		t.Errorf("metrics after the round trip: %+v", back.Spec.Metrics)
	}

	// A malformed annotation is an error, not a silently dropped field.
	bad := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{MetricsAnnotation: "{"}}}
	if _, err := HPAFromV1(bad); err == nil {
		t.Error("a malformed metrics annotation converted without error")
	}
}
