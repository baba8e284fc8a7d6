package printers

import (
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestHPARows(t *testing.T) {
	created := metav1.NewTime(now.Add(-2 * time.Hour))
	ref := autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", Name: "web", APIVersion: "apps/v1"}
	cpu := func(pct int32) autoscalingv2.MetricSpec {
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
			Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr(pct)}}}
	}
	avg := resource.MustParse("100Mi")
	mem := autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceMemory, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &avg}}}
	qps := resource.MustParse("10")
	pods := autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "qps"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &qps}}}
	three := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: created},
		Spec:       autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: ref, MinReplicas: ptr[int32](2), MaxReplicas: 10, Metrics: []autoscalingv2.MetricSpec{cpu(50), mem, pods}},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 3, CurrentMetrics: []autoscalingv2.MetricStatus{{
			Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU,
				Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr[int32](23)}}}}},
	}
	none := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "bare", CreationTimestamp: created},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: ref, MaxReplicas: 1}}
	v1 := &autoscalingv1.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "old", CreationTimestamp: created},
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv1.CrossVersionObjectReference(ref), MinReplicas: ptr[int32](1),
			MaxReplicas: 4, TargetCPUUtilizationPercentage: ptr[int32](70)},
	}
	gr := schema.GroupResource{Group: "autoscaling", Resource: "horizontalpodautoscalers"}
	for _, tc := range []struct {
		obj  runtime.Object
		want []interface{}
	}{
		{three, []interface{}{"web", "Deployment/web", "cpu: 23%/50%, memory: <unknown>/100Mi + 1 more...", "2", int64(10), int64(3), "120m"}},
		{none, []interface{}{"bare", "Deployment/web", "<none>", "<unset>", int64(1), int64(0), "120m"}},
		{v1, []interface{}{"old", "Deployment/web", "cpu: <unknown>/70%", "1", int64(4), int64(0), "120m"}},
	} {
		got := cells(t, mustFor(t, gr), tc.obj)
		if len(got) != len(tc.want) {
			t.Fatalf("cells %v, want %v", got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%T %s: cell %d = %#v, want %#v", tc.obj, tc.want[0], i, got[i], tc.want[i])
			}
		}
	}
}
