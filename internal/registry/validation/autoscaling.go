package validation

import (
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The autoscaling rules of upstream's pkg/apis/autoscaling/validation, on the
// autoscaling/v2 form (the storage version, which an autoscaling/v1 object is converted
// to before it is checked, as upstream checks its internal form). The HPAScaleToZero
// feature is off, as upstream's default: at least one replica, unless an old object
// already had zero.

// Upper bounds of a scaling rule's periods, as upstream.
const (
	maxScalingPeriodSeconds       int32 = 1800
	maxStabilizationWindowSeconds int32 = 3600
)

var (
	selectPolicies     = []string{string(autoscalingv2.DisabledPolicySelect), string(autoscalingv2.MaxChangePolicySelect), string(autoscalingv2.MinChangePolicySelect)}
	scalingPolicyTypes = []string{string(autoscalingv2.PercentScalingPolicy), string(autoscalingv2.PodsScalingPolicy)}
	metricSourceTypes  = []string{string(autoscalingv2.ContainerResourceMetricSourceType), string(autoscalingv2.ExternalMetricSourceType),
		string(autoscalingv2.ObjectMetricSourceType), string(autoscalingv2.PodsMetricSourceType), string(autoscalingv2.ResourceMetricSourceType)}
)

// ValidateHorizontalPodAutoscaler returns the field errors of a new autoscaler.
func ValidateHorizontalPodAutoscaler(h *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList {
	errs := validateMeta(&h.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain)
	return append(errs, validateHPASpec(&h.Spec, 1, field.NewPath("spec"))...)
}

// ValidateHorizontalPodAutoscalerUpdate returns the field errors of an update: the
// whole spec may change; an autoscaler that already allowed zero replicas keeps that.
func ValidateHorizontalPodAutoscalerUpdate(h, old *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList {
	errs := validateMetaUpdate(&h.ObjectMeta, &old.ObjectMeta)
	lower := int32(1)
	if old.Spec.MinReplicas != nil && *old.Spec.MinReplicas == 0 {
		lower = 0
	}
	return append(errs, validateHPASpec(&h.Spec, lower, field.NewPath("spec"))...)
}

// ValidateHorizontalPodAutoscalerStatusUpdate returns the field errors of a status
// update: non-negative replica counts.
func ValidateHorizontalPodAutoscalerStatusUpdate(h, old *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList {
	errs := validateMetaUpdate(&h.ObjectMeta, &old.ObjectMeta)
	p := field.NewPath("status")
	errs = append(errs, validateNonnegative(int64(h.Status.CurrentReplicas), p.Child("currentReplicas"))...)
	return append(errs, validateNonnegative(int64(h.Status.DesiredReplicas), p.Child("desiredReplicas"))...)
}

func validateHPASpec(spec *autoscalingv2.HorizontalPodAutoscalerSpec, minLower int32, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.MinReplicas != nil && *spec.MinReplicas < minLower {
		errs = append(errs, field.Invalid(p.Child("minReplicas"), *spec.MinReplicas, fmt.Sprintf("must be greater than or equal to %d", minLower)))
	}
	if spec.MaxReplicas < 1 {
		errs = append(errs, field.Invalid(p.Child("maxReplicas"), spec.MaxReplicas, "must be greater than 0"))
	}
	if spec.MinReplicas != nil && spec.MaxReplicas < *spec.MinReplicas {
		errs = append(errs, field.Invalid(p.Child("maxReplicas"), spec.MaxReplicas, "must be greater than or equal to `minReplicas`"))
	}
	errs = append(errs, validateObjectReference(spec.ScaleTargetRef, p.Child("scaleTargetRef"))...)
	errs = append(errs, validateMetricSpecs(spec.Metrics, spec.MinReplicas, p.Child("metrics"))...)
	if b := spec.Behavior; b != nil {
		errs = append(errs, validateScalingRules(b.ScaleUp, p.Child("behavior", "scaleUp"))...)
		errs = append(errs, validateScalingRules(b.ScaleDown, p.Child("behavior", "scaleDown"))...)
	}
	return errs
}

// validateObjectReference checks a scale target or described object: a kind and a
// name, each a valid path segment.
func validateObjectReference(ref autoscalingv2.CrossVersionObjectReference, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct{ name, value string }{{"kind", ref.Kind}, {"name", ref.Name}} {
		if f.value == "" {
			errs = append(errs, field.Required(p.Child(f.name), ""))
			continue
		}
		for _, msg := range path.IsValidPathSegmentName(f.value) {
			errs = append(errs, field.Invalid(p.Child(f.name), f.value, msg))
		}
	}
	return errs
}

func validateMetricSpecs(metrics []autoscalingv2.MetricSpec, minReplicas *int32, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	scalesToZero := false
	for i := range metrics {
		errs = append(errs, validateMetricSpec(&metrics[i], p.Index(i))...)
		switch metrics[i].Type {
		case autoscalingv2.ObjectMetricSourceType, autoscalingv2.ExternalMetricSourceType:
			scalesToZero = true
		}
	}
	if minReplicas != nil && *minReplicas == 0 && !scalesToZero {
		errs = append(errs, field.Forbidden(p, "must specify at least one Object or External metric to support scaling to zero replicas"))
	}
	return errs
}

func validateScalingRules(r *autoscalingv2.HPAScalingRules, p *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	if w := r.StabilizationWindowSeconds; w != nil {
		if *w < 0 {
			errs = append(errs, field.Invalid(p.Child("stabilizationWindowSeconds"), w, "must be greater than or equal to zero"))
		}
		if *w > maxStabilizationWindowSeconds {
			errs = append(errs, field.Invalid(p.Child("stabilizationWindowSeconds"), w, fmt.Sprintf("must be less than or equal to %d", maxStabilizationWindowSeconds)))
		}
	}
	if r.SelectPolicy != nil && !oneOf(string(*r.SelectPolicy), selectPolicies) {
		errs = append(errs, field.NotSupported(p.Child("selectPolicy"), r.SelectPolicy, selectPolicies))
	}
	pp := p.Child("policies")
	if len(r.Policies) == 0 {
		errs = append(errs, field.Required(pp, "must specify at least one Policy"))
	}
	for i, pol := range r.Policies {
		ip := pp.Index(i)
		if !oneOf(string(pol.Type), scalingPolicyTypes) {
			errs = append(errs, field.NotSupported(ip.Child("type"), pol.Type, scalingPolicyTypes))
		}
		if pol.Value <= 0 {
			errs = append(errs, field.Invalid(ip.Child("value"), pol.Value, "must be greater than zero"))
		}
		if pol.PeriodSeconds <= 0 {
			errs = append(errs, field.Invalid(ip.Child("periodSeconds"), pol.PeriodSeconds, "must be greater than zero"))
		}
		if pol.PeriodSeconds > maxScalingPeriodSeconds {
			errs = append(errs, field.Invalid(ip.Child("periodSeconds"), pol.PeriodSeconds, fmt.Sprintf("must be less than or equal to %d", maxScalingPeriodSeconds)))
		}
	}
	return errs
}

// validateMetricSpec checks one metric: a known type, exactly the source its type
// names, and that source's own rules.
func validateMetricSpec(m *autoscalingv2.MetricSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m.Type == "" {
		errs = append(errs, field.Required(p.Child("type"), "must specify a metric source type"))
	}
	if !oneOf(string(m.Type), metricSourceTypes) {
		errs = append(errs, field.NotSupported(p.Child("type"), m.Type, metricSourceTypes))
	}
	// The sources that are set, in upstream's order; only the first is checked in depth.
	var present []string
	check := func(name string, set bool, fn func() field.ErrorList) {
		if !set {
			return
		}
		present = append(present, name)
		if len(present) == 1 {
			errs = append(errs, fn()...)
		}
	}
	check("object", m.Object != nil, func() field.ErrorList { return validateObjectSource(m.Object, p.Child("object")) })
	check("external", m.External != nil, func() field.ErrorList { return validateExternalSource(m.External, p.Child("external")) })
	check("pods", m.Pods != nil, func() field.ErrorList { return validatePodsSource(m.Pods, p.Child("pods")) })
	check("resource", m.Resource != nil, func() field.ErrorList {
		return validateResourceTarget(string(m.Resource.Name), "", false, m.Resource.Target, p.Child("resource"))
	})
	check("containerResource", m.ContainerResource != nil, func() field.ErrorList {
		c := m.ContainerResource
		return validateResourceTarget(string(c.Name), c.Container, true, c.Target, p.Child("containerResource"))
	})

	want := map[autoscalingv2.MetricSourceType]struct {
		field string
		set   bool
	}{
		autoscalingv2.ObjectMetricSourceType:            {"object", m.Object != nil},
		autoscalingv2.PodsMetricSourceType:              {"pods", m.Pods != nil},
		autoscalingv2.ResourceMetricSourceType:          {"resource", m.Resource != nil},
		autoscalingv2.ExternalMetricSourceType:          {"external", m.External != nil},
		autoscalingv2.ContainerResourceMetricSourceType: {"containerResource", m.ContainerResource != nil},
	}
	expected := ""
	if w, ok := want[m.Type]; ok {
		expected = w.field
		if !w.set {
			errs = append(errs, field.Required(p.Child(w.field), "must populate information for the given metric source"))
		}
	} else {
		errs = append(errs, field.NotSupported(p.Child("type"), m.Type, metricSourceTypes))
	}
	if len(present) != 1 {
		for _, name := range present {
			if name != expected {
				errs = append(errs, field.Forbidden(p.Child(name), "must populate the given metric source only"))
			}
		}
	}
	return errs
}

func validateObjectSource(s *autoscalingv2.ObjectMetricSource, p *field.Path) field.ErrorList {
	errs := validateObjectReference(s.DescribedObject, p.Child("describedObject"))
	errs = append(errs, validateMetricIdentifier(s.Metric, p.Child("metric"))...)
	errs = append(errs, validateMetricTarget(s.Target, p.Child("target"))...)
	if s.Target.Value == nil && s.Target.AverageValue == nil {
		errs = append(errs, field.Required(p.Child("target", "averageValue"), "must set either a target value or averageValue"))
	}
	return errs
}

func validateExternalSource(s *autoscalingv2.ExternalMetricSource, p *field.Path) field.ErrorList {
	errs := validateMetricIdentifier(s.Metric, p.Child("metric"))
	errs = append(errs, validateMetricTarget(s.Target, p.Child("target"))...)
	if s.Target.Value == nil && s.Target.AverageValue == nil {
		errs = append(errs, field.Required(p.Child("target", "averageValue"), "must set either a target value for metric or a per-pod target"))
	}
	if s.Target.Value != nil && s.Target.AverageValue != nil {
		errs = append(errs, field.Forbidden(p.Child("target", "value"), "may not set both a target value for metric and a per-pod target"))
	}
	return errs
}

func validatePodsSource(s *autoscalingv2.PodsMetricSource, p *field.Path) field.ErrorList {
	errs := validateMetricIdentifier(s.Metric, p.Child("metric"))
	errs = append(errs, validateMetricTarget(s.Target, p.Child("target"))...)
	if s.Target.AverageValue == nil {
		errs = append(errs, field.Required(p.Child("target", "averageValue"), "must specify a positive target averageValue"))
	}
	return errs
}

// validateResourceTarget checks a resource or container-resource metric: a resource
// name, the container for the latter, and a utilization or an average value (not both).
func validateResourceTarget(name, container string, perContainer bool, t autoscalingv2.MetricTarget, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(p.Child("name"), "must specify a resource name"))
	} else if perContainer {
		errs = append(errs, validateContainerResourceName(name, p.Child("name"))...)
	}
	if perContainer {
		if container == "" {
			errs = append(errs, field.Required(p.Child("container"), "must specify a container"))
		} else {
			errs = append(errs, validateDNS1123Label(container, p.Child("container"))...)
		}
	}
	errs = append(errs, validateMetricTarget(t, p.Child("target"))...)
	if t.AverageUtilization == nil && t.AverageValue == nil {
		errs = append(errs, field.Required(p.Child("target", "averageUtilization"), "must set either a target raw value or a target utilization"))
	}
	if t.AverageUtilization != nil && t.AverageValue != nil {
		errs = append(errs, field.Forbidden(p.Child("target", "averageValue"), "may not set both a target raw value and a target utilization"))
	}
	return errs
}

func validateMetricTarget(t autoscalingv2.MetricTarget, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Type == "" {
		errs = append(errs, field.Required(p.Child("type"), "must specify a metric target type"))
	}
	switch t.Type {
	case autoscalingv2.UtilizationMetricType, autoscalingv2.ValueMetricType, autoscalingv2.AverageValueMetricType:
	default:
		errs = append(errs, field.Invalid(p.Child("type"), t.Type, "must be either Utilization, Value, or AverageValue"))
	}
	if t.Value != nil && t.Value.Sign() != 1 {
		errs = append(errs, field.Invalid(p.Child("value"), t.Value, "must be positive"))
	}
	if t.AverageValue != nil && t.AverageValue.Sign() != 1 {
		errs = append(errs, field.Invalid(p.Child("averageValue"), t.AverageValue, "must be positive"))
	}
	if t.AverageUtilization != nil && *t.AverageUtilization < 1 {
		errs = append(errs, field.Invalid(p.Child("averageUtilization"), t.AverageUtilization, "must be greater than 0"))
	}
	return errs
}

func validateMetricIdentifier(id autoscalingv2.MetricIdentifier, p *field.Path) field.ErrorList {
	if id.Name == "" {
		return field.ErrorList{field.Required(p.Child("name"), "must specify a metric name")}
	}
	var errs field.ErrorList
	for _, msg := range path.IsValidPathSegmentName(id.Name) {
		errs = append(errs, field.Invalid(p.Child("name"), id.Name, msg))
	}
	return errs
}

func oneOf(v string, allowed []string) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}
