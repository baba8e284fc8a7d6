// Package conversion converts built-in kinds between the API versions they are served
// in: HorizontalPodAutoscalers between autoscaling/v2 (the storage version) and
// autoscaling/v1, which keeps what it has no fields for in upstream's round-trip
// annotations.
package conversion

import (
	"encoding/json"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The annotations in which autoscaling/v1 keeps the autoscaling/v2 fields it lacks, as upstream.
const (
	// MetricsAnnotation holds the spec's metrics other than the CPU utilization target,
	// as a JSON list of autoscaling/v1 MetricSpecs.
	MetricsAnnotation = "autoscaling.alpha.kubernetes.io/metrics"
	// CurrentMetricsAnnotation holds the status's current metrics, as a JSON list of
	// autoscaling/v1 MetricStatuses.
	CurrentMetricsAnnotation = "autoscaling.alpha.kubernetes.io/current-metrics"
	// ConditionsAnnotation holds the status's conditions, as a JSON list of
	// autoscaling/v1 HorizontalPodAutoscalerConditions.
	ConditionsAnnotation = "autoscaling.alpha.kubernetes.io/conditions"
	// BehaviorAnnotation holds the spec's behavior. Upstream marshals its internal type,
	// whose fields have no JSON tags, so the keys are the Go field names (ScaleUp,
	// StabilizationWindowSeconds, ...); behaviorJSON reproduces that shape.
	BehaviorAnnotation = "autoscaling.alpha.kubernetes.io/behavior"
	// DefaultCPUUtilization is the CPU utilization target of an autoscaler that names
	// no metric.
	DefaultCPUUtilization int32 = 80
)

var roundTripAnnotations = []string{MetricsAnnotation, CurrentMetricsAnnotation, ConditionsAnnotation, BehaviorAnnotation}

// behaviorJSON, rulesJSON and policyJSON give the behavior annotation upstream's shape.
type behaviorJSON struct {
	ScaleUp   *rulesJSON
	ScaleDown *rulesJSON
}

type rulesJSON struct {
	StabilizationWindowSeconds *int32
	SelectPolicy               *autoscalingv2.ScalingPolicySelect
	Policies                   []policyJSON
}

type policyJSON struct {
	Type          autoscalingv2.HPAScalingPolicyType
	Value         int32
	PeriodSeconds int32
}

// dropRoundTrip returns annotations without the round-trip annotations (a copy when
// any was present; nil when nothing else is left of a map that had only them).
func dropRoundTrip(in map[string]string) map[string]string {
	found := false
	for _, k := range roundTripAnnotations {
		if _, ok := in[k]; ok {
			found = true
		}
	}
	if !found {
		return in
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	for _, k := range roundTripAnnotations {
		delete(out, k)
	}
	return out
}

func isCPUUtilization(m autoscalingv2.MetricSpec) bool {
	return m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil &&
		m.Resource.Name == corev1.ResourceCPU && m.Resource.Target.AverageUtilization != nil
}

// HPAToV1 converts a stored autoscaling/v2 HorizontalPodAutoscaler to autoscaling/v1.
func HPAToV1(in *autoscalingv2.HorizontalPodAutoscaler) (*autoscalingv1.HorizontalPodAutoscaler, error) {
	out := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.APIVersion, out.Kind = "autoscaling/v1", "HorizontalPodAutoscaler"
	out.Annotations = dropRoundTrip(out.Annotations)
	out.Spec.ScaleTargetRef = autoscalingv1.CrossVersionObjectReference(in.Spec.ScaleTargetRef)
	out.Spec.MinReplicas = copyInt32(in.Spec.MinReplicas)
	out.Spec.MaxReplicas = in.Spec.MaxReplicas
	var others []autoscalingv1.MetricSpec
	cpuSet := false
	for _, m := range in.Spec.Metrics {
		if isCPUUtilization(m) {
			if !cpuSet {
				out.Spec.TargetCPUUtilizationPercentage = copyInt32(m.Resource.Target.AverageUtilization)
				cpuSet = true
			}
			continue
		}
		others = append(others, metricSpecToV1(m))
	}
	st := in.Status
	out.Status = autoscalingv1.HorizontalPodAutoscalerStatus{
		ObservedGeneration: copyInt64(st.ObservedGeneration),
		CurrentReplicas:    st.CurrentReplicas,
		DesiredReplicas:    st.DesiredReplicas,
	}
	if st.LastScaleTime != nil {
		t := *st.LastScaleTime
		out.Status.LastScaleTime = &t
	}
	for _, m := range st.CurrentMetrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU &&
			m.Resource.Current.AverageUtilization != nil {
			out.Status.CurrentCPUUtilizationPercentage = copyInt32(m.Resource.Current.AverageUtilization)
		}
	}
	set := func(key string, v any) error {
		data, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode annotation %s: %w", key, err)
		}
		// out.Annotations is a copy (ObjectMeta was deep-copied), so it may be written.
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[key] = string(data)
		return nil
	}
	if len(others) > 0 {
		if err := set(MetricsAnnotation, others); err != nil {
			return nil, err
		}
	}
	if len(st.CurrentMetrics) > 0 {
		cur := make([]autoscalingv1.MetricStatus, len(st.CurrentMetrics))
		for i, m := range st.CurrentMetrics {
			cur[i] = metricStatusToV1(m)
		}
		if err := set(CurrentMetricsAnnotation, cur); err != nil {
			return nil, err
		}
	}
	if len(st.Conditions) > 0 {
		conds := make([]autoscalingv1.HorizontalPodAutoscalerCondition, len(st.Conditions))
		for i, c := range st.Conditions {
			conds[i] = autoscalingv1.HorizontalPodAutoscalerCondition{
				Type: autoscalingv1.HorizontalPodAutoscalerConditionType(c.Type), Status: c.Status,
				LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
			}
		}
		if err := set(ConditionsAnnotation, conds); err != nil {
			return nil, err
		}
	}
	if b := in.Spec.Behavior; b != nil {
		if err := set(BehaviorAnnotation, behaviorJSON{ScaleUp: rulesToJSON(b.ScaleUp), ScaleDown: rulesToJSON(b.ScaleDown)}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// HPAFromV1 converts an autoscaling/v1 HorizontalPodAutoscaler to autoscaling/v2,
// taking back what the round-trip annotations hold and dropping them. An autoscaler
// with no metric at all gets upstream's default target of 80% CPU utilization. Only
// an annotation that is not the JSON it should be makes it fail.
func HPAFromV1(in *autoscalingv1.HorizontalPodAutoscaler) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	out := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.APIVersion, out.Kind = "autoscaling/v2", "HorizontalPodAutoscaler"
	ann := in.Annotations
	out.Annotations = dropRoundTrip(out.Annotations)
	out.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference(in.Spec.ScaleTargetRef)
	out.Spec.MinReplicas = copyInt32(in.Spec.MinReplicas)
	out.Spec.MaxReplicas = in.Spec.MaxReplicas
	if in.Spec.TargetCPUUtilizationPercentage != nil {
		out.Spec.Metrics = []autoscalingv2.MetricSpec{cpuUtilization(*in.Spec.TargetCPUUtilizationPercentage)}
	}
	if s, ok := ann[MetricsAnnotation]; ok {
		var others []autoscalingv1.MetricSpec
		if err := json.Unmarshal([]byte(s), &others); err != nil {
			return nil, fmt.Errorf("decode annotation %s: %w", MetricsAnnotation, err)
		}
		for _, m := range others {
			out.Spec.Metrics = append(out.Spec.Metrics, metricSpecFromV1(m))
		}
	}
	if len(out.Spec.Metrics) == 0 {
		out.Spec.Metrics = []autoscalingv2.MetricSpec{cpuUtilization(DefaultCPUUtilization)}
	}
	if s, ok := ann[BehaviorAnnotation]; ok {
		var b behaviorJSON
		if err := json.Unmarshal([]byte(s), &b); err != nil {
			return nil, fmt.Errorf("decode annotation %s: %w", BehaviorAnnotation, err)
		}
		out.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: rulesFromJSON(b.ScaleUp), ScaleDown: rulesFromJSON(b.ScaleDown)}
	}
	st := in.Status
	out.Status = autoscalingv2.HorizontalPodAutoscalerStatus{
		ObservedGeneration: copyInt64(st.ObservedGeneration),
		CurrentReplicas:    st.CurrentReplicas,
		DesiredReplicas:    st.DesiredReplicas,
	}
	if st.LastScaleTime != nil {
		t := *st.LastScaleTime
		out.Status.LastScaleTime = &t
	}
	if s, ok := ann[CurrentMetricsAnnotation]; ok {
		var cur []autoscalingv1.MetricStatus
		if err := json.Unmarshal([]byte(s), &cur); err != nil {
			return nil, fmt.Errorf("decode annotation %s: %w", CurrentMetricsAnnotation, err)
		}
		for _, m := range cur {
			out.Status.CurrentMetrics = append(out.Status.CurrentMetrics, metricStatusFromV1(m))
		}
	} else if st.CurrentCPUUtilizationPercentage != nil {
		out.Status.CurrentMetrics = []autoscalingv2.MetricStatus{{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU,
				Current: autoscalingv2.MetricValueStatus{AverageUtilization: copyInt32(st.CurrentCPUUtilizationPercentage)}},
		}}
	}
	if s, ok := ann[ConditionsAnnotation]; ok {
		var conds []autoscalingv1.HorizontalPodAutoscalerCondition
		if err := json.Unmarshal([]byte(s), &conds); err != nil {
			return nil, fmt.Errorf("decode annotation %s: %w", ConditionsAnnotation, err)
		}
		for _, c := range conds {
			out.Status.Conditions = append(out.Status.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{
				Type: autoscalingv2.HorizontalPodAutoscalerConditionType(c.Type), Status: c.Status,
				LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
			})
		}
	}
	return out, nil
}

func cpuUtilization(pct int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{
		Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &pct}},
	}
}

func rulesToJSON(r *autoscalingv2.HPAScalingRules) *rulesJSON {
	if r == nil {
		return nil
	}
	out := &rulesJSON{StabilizationWindowSeconds: copyInt32(r.StabilizationWindowSeconds)}
	if r.SelectPolicy != nil {
		p := *r.SelectPolicy
		out.SelectPolicy = &p
	}
	if r.Policies != nil {
		out.Policies = make([]policyJSON, len(r.Policies))
		for i, p := range r.Policies {
			out.Policies[i] = policyJSON(p)
		}
	}
	return out
}

func rulesFromJSON(r *rulesJSON) *autoscalingv2.HPAScalingRules {
	if r == nil {
		return nil
	}
	out := &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: r.StabilizationWindowSeconds, SelectPolicy: r.SelectPolicy}
	if r.Policies != nil {
		out.Policies = make([]autoscalingv2.HPAScalingPolicy, len(r.Policies))
		for i, p := range r.Policies {
			out.Policies[i] = autoscalingv2.HPAScalingPolicy(p)
		}
	}
	return out
}

// metricSpecToV1 maps a v2 metric onto v1's older shape (a target value per kind of
// target), as upstream.
func metricSpecToV1(m autoscalingv2.MetricSpec) autoscalingv1.MetricSpec {
	out := autoscalingv1.MetricSpec{Type: autoscalingv1.MetricSourceType(m.Type)}
	if m.Object != nil {
		o := &autoscalingv1.ObjectMetricSource{
			Target:     autoscalingv1.CrossVersionObjectReference(m.Object.DescribedObject),
			MetricName: m.Object.Metric.Name, Selector: m.Object.Metric.Selector.DeepCopy(),
			AverageValue: copyQuantity(m.Object.Target.AverageValue),
		}
		if v := m.Object.Target.Value; v != nil {
			o.TargetValue = v.DeepCopy()
		}
		out.Object = o
	}
	if m.Pods != nil {
		p := &autoscalingv1.PodsMetricSource{MetricName: m.Pods.Metric.Name, Selector: m.Pods.Metric.Selector.DeepCopy()}
		if v := m.Pods.Target.AverageValue; v != nil {
			p.TargetAverageValue = v.DeepCopy()
		}
		out.Pods = p
	}
	if m.Resource != nil {
		out.Resource = &autoscalingv1.ResourceMetricSource{Name: m.Resource.Name,
			TargetAverageUtilization: copyInt32(m.Resource.Target.AverageUtilization), TargetAverageValue: copyQuantity(m.Resource.Target.AverageValue)}
	}
	if m.ContainerResource != nil {
		out.ContainerResource = &autoscalingv1.ContainerResourceMetricSource{Name: m.ContainerResource.Name, Container: m.ContainerResource.Container,
			TargetAverageUtilization: copyInt32(m.ContainerResource.Target.AverageUtilization), TargetAverageValue: copyQuantity(m.ContainerResource.Target.AverageValue)}
	}
	if m.External != nil {
		out.External = &autoscalingv1.ExternalMetricSource{MetricName: m.External.Metric.Name, MetricSelector: m.External.Metric.Selector.DeepCopy(),
			TargetValue: copyQuantity(m.External.Target.Value), TargetAverageValue: copyQuantity(m.External.Target.AverageValue)}
	}
	return out
}

// metricSpecFromV1 maps a v1 metric onto v2, choosing the target type as upstream.
func metricSpecFromV1(m autoscalingv1.MetricSpec) autoscalingv2.MetricSpec {
	out := autoscalingv2.MetricSpec{Type: autoscalingv2.MetricSourceType(m.Type)}
	if o := m.Object; o != nil {
		t := autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, AverageValue: copyQuantity(o.AverageValue)}
		if o.AverageValue != nil {
			t.Type = autoscalingv2.AverageValueMetricType
		}
		v := o.TargetValue.DeepCopy()
		t.Value = &v
		out.Object = &autoscalingv2.ObjectMetricSource{DescribedObject: autoscalingv2.CrossVersionObjectReference(o.Target),
			Metric: autoscalingv2.MetricIdentifier{Name: o.MetricName, Selector: o.Selector.DeepCopy()}, Target: t}
	}
	if p := m.Pods; p != nil {
		v := p.TargetAverageValue.DeepCopy()
		out.Pods = &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: p.MetricName, Selector: p.Selector.DeepCopy()},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &v}}
	}
	if r := m.Resource; r != nil {
		out.Resource = &autoscalingv2.ResourceMetricSource{Name: r.Name, Target: resourceTarget(r.TargetAverageUtilization, r.TargetAverageValue)}
	}
	if r := m.ContainerResource; r != nil {
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricSource{Name: r.Name, Container: r.Container,
			Target: resourceTarget(r.TargetAverageUtilization, r.TargetAverageValue)}
	}
	if e := m.External; e != nil {
		t := autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: copyQuantity(e.TargetValue), AverageValue: copyQuantity(e.TargetAverageValue)}
		if e.TargetAverageValue != nil {
			t.Type = autoscalingv2.AverageValueMetricType
		}
		out.External = &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: e.MetricName, Selector: e.MetricSelector.DeepCopy()}, Target: t}
	}
	return out
}

func resourceTarget(util *int32, avg *resource.Quantity) autoscalingv2.MetricTarget {
	t := autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageUtilization: copyInt32(util), AverageValue: copyQuantity(avg)}
	if util != nil {
		t.Type = autoscalingv2.UtilizationMetricType
	}
	return t
}

func metricStatusToV1(m autoscalingv2.MetricStatus) autoscalingv1.MetricStatus {
	out := autoscalingv1.MetricStatus{Type: autoscalingv1.MetricSourceType(m.Type)}
	valueOf := func(q *resource.Quantity) resource.Quantity {
		if q == nil {
			return resource.Quantity{}
		}
		return q.DeepCopy()
	}
	if o := m.Object; o != nil {
		out.Object = &autoscalingv1.ObjectMetricStatus{Target: autoscalingv1.CrossVersionObjectReference(o.DescribedObject),
			MetricName: o.Metric.Name, Selector: o.Metric.Selector.DeepCopy(),
			CurrentValue: valueOf(o.Current.Value), AverageValue: copyQuantity(o.Current.AverageValue)}
	}
	if p := m.Pods; p != nil {
		out.Pods = &autoscalingv1.PodsMetricStatus{MetricName: p.Metric.Name, Selector: p.Metric.Selector.DeepCopy(), CurrentAverageValue: valueOf(p.Current.AverageValue)}
	}
	if r := m.Resource; r != nil {
		out.Resource = &autoscalingv1.ResourceMetricStatus{Name: r.Name, CurrentAverageUtilization: copyInt32(r.Current.AverageUtilization),
			CurrentAverageValue: valueOf(r.Current.AverageValue)}
	}
	if r := m.ContainerResource; r != nil {
		out.ContainerResource = &autoscalingv1.ContainerResourceMetricStatus{Name: r.Name, Container: r.Container,
			CurrentAverageUtilization: copyInt32(r.Current.AverageUtilization), CurrentAverageValue: valueOf(r.Current.AverageValue)}
	}
	if e := m.External; e != nil {
		out.External = &autoscalingv1.ExternalMetricStatus{MetricName: e.Metric.Name, MetricSelector: e.Metric.Selector.DeepCopy(),
			CurrentValue: valueOf(e.Current.Value), CurrentAverageValue: copyQuantity(e.Current.AverageValue)}
	}
	return out
}

func metricStatusFromV1(m autoscalingv1.MetricStatus) autoscalingv2.MetricStatus {
	out := autoscalingv2.MetricStatus{Type: autoscalingv2.MetricSourceType(m.Type)}
	ptr := func(q resource.Quantity) *resource.Quantity { c := q.DeepCopy(); return &c }
	if o := m.Object; o != nil {
		out.Object = &autoscalingv2.ObjectMetricStatus{DescribedObject: autoscalingv2.CrossVersionObjectReference(o.Target),
			Metric:  autoscalingv2.MetricIdentifier{Name: o.MetricName, Selector: o.Selector.DeepCopy()},
			Current: autoscalingv2.MetricValueStatus{Value: ptr(o.CurrentValue), AverageValue: copyQuantity(o.AverageValue)}}
	}
	if p := m.Pods; p != nil {
		out.Pods = &autoscalingv2.PodsMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: p.MetricName, Selector: p.Selector.DeepCopy()},
			Current: autoscalingv2.MetricValueStatus{AverageValue: ptr(p.CurrentAverageValue)}}
	}
	if r := m.Resource; r != nil {
		out.Resource = &autoscalingv2.ResourceMetricStatus{Name: r.Name,
			Current: autoscalingv2.MetricValueStatus{AverageValue: ptr(r.CurrentAverageValue), AverageUtilization: copyInt32(r.CurrentAverageUtilization)}}
	}
	if r := m.ContainerResource; r != nil {
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricStatus{Name: r.Name, Container: r.Container,
			Current: autoscalingv2.MetricValueStatus{AverageValue: ptr(r.CurrentAverageValue), AverageUtilization: copyInt32(r.CurrentAverageUtilization)}}
	}
	if e := m.External; e != nil {
		out.External = &autoscalingv2.ExternalMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: e.MetricName, Selector: e.MetricSelector.DeepCopy()},
			Current: autoscalingv2.MetricValueStatus{Value: ptr(e.CurrentValue), AverageValue: copyQuantity(e.CurrentAverageValue)}}
	}
	return out
}

func copyInt32(p *int32) *int32 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func copyInt64(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func copyQuantity(q *resource.Quantity) *resource.Quantity {
	if q == nil {
		return nil
	}
	c := q.DeepCopy()
	return &c
}
