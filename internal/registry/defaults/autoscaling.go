package defaults

import (
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
)

// Upstream's default scaling rules (pkg/apis/autoscaling/v2 defaults): scale up at once
// by at most 4 pods or 100% per 15 s, whichever is more; scale down by at most 100% per
// 15 s. The scale-down stabilization window stays unset: the controller applies its own
// (--horizontal-pod-autoscaler-downscale-stabilization, 5 minutes) to an unset window.
const (
	scaleUpPods          int32 = 4
	scaleUpPercent       int32 = 100
	scaleDownPercent     int32 = 100
	scalingPeriodSeconds int32 = 15
	defaultCPUPercent    int32 = 80
)

// setHPAV1 applies autoscaling/v1's one default: at least one replica. The default CPU
// target of an autoscaler with no metric comes with the conversion to autoscaling/v2,
// which sees the metrics kept in annotations, as upstream.
func setHPAV1(h *autoscalingv1.HorizontalPodAutoscaler) {
	if h.Spec.MinReplicas == nil {
		h.Spec.MinReplicas = int32Ptr(1)
	}
}

// setHPAV2 applies autoscaling/v2's defaults: one replica at least, an 80% CPU
// utilization target when no metric is named, and for a behavior that is set, every
// unset field of its scale-up and scale-down rules.
func setHPAV2(h *autoscalingv2.HorizontalPodAutoscaler) {
	if h.Spec.MinReplicas == nil {
		h.Spec.MinReplicas = int32Ptr(1)
	}
	if len(h.Spec.Metrics) == 0 {
		h.Spec.Metrics = []autoscalingv2.MetricSpec{{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: int32Ptr(defaultCPUPercent)}},
		}}
	}
	if b := h.Spec.Behavior; b != nil {
		b.ScaleUp = ScaleUpRules(b.ScaleUp)
		b.ScaleDown = ScaleDownRules(b.ScaleDown)
	}
}

// ScaleUpRules returns r with upstream's defaults in every unset field (a new value; r
// itself is not changed): no stabilization, the larger of 4 pods and 100% per 15 s.
func ScaleUpRules(r *autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	maxPolicy := autoscalingv2.MaxChangePolicySelect
	return fillRules(r, autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: int32Ptr(0),
		SelectPolicy:               &maxPolicy,
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PodsScalingPolicy, Value: scaleUpPods, PeriodSeconds: scalingPeriodSeconds},
			{Type: autoscalingv2.PercentScalingPolicy, Value: scaleUpPercent, PeriodSeconds: scalingPeriodSeconds},
		},
	})
}

// ScaleDownRules returns r with upstream's defaults in every unset field but the
// stabilization window: 100% per 15 s.
func ScaleDownRules(r *autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	maxPolicy := autoscalingv2.MaxChangePolicySelect
	return fillRules(r, autoscalingv2.HPAScalingRules{
		SelectPolicy: &maxPolicy,
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PercentScalingPolicy, Value: scaleDownPercent, PeriodSeconds: scalingPeriodSeconds},
		},
	})
}

// fillRules returns def with every field r sets taken from r.
func fillRules(r *autoscalingv2.HPAScalingRules, def autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	if r == nil {
		return &def
	}
	out := r.DeepCopy()
	if out.StabilizationWindowSeconds == nil {
		out.StabilizationWindowSeconds = def.StabilizationWindowSeconds
	}
	if out.SelectPolicy == nil {
		out.SelectPolicy = def.SelectPolicy
	}
	if out.Policies == nil {
		out.Policies = def.Policies
	}
	return out
}
