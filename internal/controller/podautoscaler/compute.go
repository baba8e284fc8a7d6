package podautoscaler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// proposal is what one metric asks for.
type proposal struct {
	replicas  int32
	metric    string // how the rescale reason names the metric
	timestamp time.Time
}

// metricFailure is a metric that could not be read: the ScalingActive condition it
// would set, and its error.
type metricFailure struct {
	condition autoscalingv2.HorizontalPodAutoscalerCondition
	err       error
}

// replicasForMetrics computes each metric's proposal and returns the largest, with
// the metrics' statuses (an empty status for a metric that failed, as upstream). When
// every metric failed, or some failed and the rest would scale down, it sets the
// first failure's condition and returns replicas -1 with the error; when some failed
// but the rest scale up (or keep), it returns the proposal and the error. It sets
// ScalingActive True (ValidMetricFound) when it proposes.
func (c *Controller) replicasForMetrics(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, sc *autoscalingv1.Scale) (proposal, []autoscalingv2.MetricStatus, error) {
	selector, err := c.targetSelector(hpa, sc.Status.Selector)
	if err != nil {
		return proposal{replicas: -1}, nil, err
	}
	specs := hpa.Spec.Metrics
	statuses := make([]autoscalingv2.MetricStatus, len(specs))
	var best proposal
	var first *metricFailure
	failed := 0
	for i, spec := range specs {
		p, f := c.replicasForMetric(ctx, hpa, spec, sc.Spec.Replicas, sc.Status.Replicas, selector, &statuses[i])
		if f != nil {
			if first == nil {
				first = f
			}
			failed++
			continue
		}
		if best.replicas == 0 || p.replicas > best.replicas {
			best = p
		}
	}
	if first == nil {
		c.setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionTrue, "ValidMetricFound", "the HPA was able to successfully calculate a replica count from %s", best.metric)
		return best, statuses, nil
	}
	err = fmt.Errorf("invalid metrics (%v invalid out of %v), first error is: %v", failed, len(specs), first.err)
	if failed >= len(specs) || best.replicas < sc.Spec.Replicas {
		cond := first.condition
		c.setCondition(hpa, cond.Type, cond.Status, cond.Reason, "%s", cond.Message)
		return proposal{replicas: -1}, statuses, err
	}
	c.setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionTrue, "ValidMetricFound", "the HPA was able to successfully calculate a replica count from %s", best.metric)
	return best, statuses, err
}

// targetSelector parses the scale's selector and checks that no other autoscaler
// controls the pods it selects; a failure sets ScalingActive False and an Event.
func (c *Controller) targetSelector(hpa *autoscalingv2.HorizontalPodAutoscaler, s string) (labels.Selector, error) {
	if s == "" {
		msg := "selector is required"
		c.recorder.Event(hpa, corev1.EventTypeWarning, "SelectorRequired", msg)
		c.setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "InvalidSelector", "the HPA target's scale is missing a selector")
		return nil, errors.New(msg)
	}
	sel, err := labels.Parse(s)
	if err != nil {
		msg := fmt.Sprintf("couldn't convert selector into a corresponding internal selector object: %v", err)
		c.recorder.Event(hpa, corev1.EventTypeWarning, "InvalidSelector", msg)
		c.setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "InvalidSelector", "%s", msg)
		return nil, errors.New(msg)
	}
	key := hpa.Namespace + "/" + hpa.Name
	c.selectors.update(key, sel)
	pods, err := c.podLister.Pods(hpa.Namespace).List(sel)
	if err != nil {
		return nil, fmt.Errorf("list pods of %s: %w", key, err)
	}
	if owners := c.selectors.controlling(hpa.Namespace, pods); len(owners) > 1 {
		msg := fmt.Sprintf("pods by selector %v are controlled by multiple HPAs: %v", s, owners)
		c.recorder.Event(hpa, corev1.EventTypeWarning, "AmbiguousSelector", msg)
		c.setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "AmbiguousSelector", "%s", msg)
		return nil, errors.New(msg)
	}
	return sel, nil
}

// unable makes the failure of a metric: a Warning Event of reason and the
// ScalingActive False condition it would set.
func (c *Controller) unable(hpa *autoscalingv2.HorizontalPodAutoscaler, reason string, err error) autoscalingv2.HorizontalPodAutoscalerCondition {
	c.recorder.Event(hpa, corev1.EventTypeWarning, reason, err.Error())
	return autoscalingv2.HorizontalPodAutoscalerCondition{
		Type: autoscalingv2.ScalingActive, Status: corev1.ConditionFalse, Reason: reason,
		Message: fmt.Sprintf("the HPA was unable to compute the replica count: %v", err),
	}
}

// fail is a metric failure: its condition (and Event) by reason, and err wrapped as
// the metric's type words it.
func (c *Controller) fail(hpa *autoscalingv2.HorizontalPodAutoscaler, reason string, condErr, err error) *metricFailure {
	return &metricFailure{condition: c.unable(hpa, reason, condErr), err: err}
}

// replicasForMetric computes one metric's proposal and fills its status.
func (c *Controller) replicasForMetric(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, spec autoscalingv2.MetricSpec, specReplicas, statusReplicas int32, selector labels.Selector, status *autoscalingv2.MetricStatus) (proposal, *metricFailure) {
	switch spec.Type {
	case autoscalingv2.ObjectMetricSourceType:
		metricSel, err := metav1.LabelSelectorAsSelector(spec.Object.Metric.Selector)
		if err != nil {
			return proposal{}, c.fail(hpa, "FailedGetObjectMetric", err, fmt.Errorf("failed to get object metric value: %v", err))
		}
		p, f := c.objectProposal(ctx, hpa, spec, specReplicas, statusReplicas, selector, metricSel, status)
		if f != nil {
			f.err = fmt.Errorf("failed to get object metric value: %v", f.err)
		}
		return p, f
	case autoscalingv2.PodsMetricSourceType:
		metricSel, err := metav1.LabelSelectorAsSelector(spec.Pods.Metric.Selector)
		if err != nil {
			return proposal{}, c.fail(hpa, "FailedGetPodsMetric", err, fmt.Errorf("failed to get pods metric value: %v", err))
		}
		replicas, avg, ts, err := c.podsMetricReplicas(ctx, specReplicas, spec.Pods.Target.AverageValue.MilliValue(), spec.Pods.Metric.Name, hpa.Namespace, selector, metricSel)
		if err != nil {
			return proposal{}, c.fail(hpa, "FailedGetPodsMetric", err, fmt.Errorf("failed to get pods metric value: %v", err))
		}
		*status = autoscalingv2.MetricStatus{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{
			Metric:  autoscalingv2.MetricIdentifier{Name: spec.Pods.Metric.Name, Selector: spec.Pods.Metric.Selector},
			Current: autoscalingv2.MetricValueStatus{AverageValue: resource.NewMilliQuantity(avg, resource.DecimalSI)},
		}}
		return proposal{replicas: replicas, metric: "pods metric " + spec.Pods.Metric.Name, timestamp: ts}, nil
	case autoscalingv2.ResourceMetricSourceType:
		p, cur, err := c.resourceProposal(ctx, specReplicas, spec.Resource.Target, spec.Resource.Name, hpa.Namespace, "", selector, autoscalingv2.ResourceMetricSourceType)
		if err != nil {
			return proposal{}, c.fail(hpa, "FailedGetResourceMetric", err, fmt.Errorf("failed to get %s resource metric value: %v", spec.Resource.Name, err))
		}
		*status = autoscalingv2.MetricStatus{Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricStatus{Name: spec.Resource.Name, Current: cur}}
		return p, nil
	case autoscalingv2.ContainerResourceMetricSourceType:
		r := spec.ContainerResource
		p, cur, err := c.resourceProposal(ctx, specReplicas, r.Target, r.Name, hpa.Namespace, r.Container, selector, autoscalingv2.ContainerResourceMetricSourceType)
		if err != nil {
			return proposal{}, c.fail(hpa, "FailedGetContainerResourceMetric", err, fmt.Errorf("failed to get %s container metric value: %v", r.Container, err))
		}
		*status = autoscalingv2.MetricStatus{Type: autoscalingv2.ContainerResourceMetricSourceType,
			ContainerResource: &autoscalingv2.ContainerResourceMetricStatus{Name: r.Name, Container: r.Container, Current: cur}}
		return p, nil
	case autoscalingv2.ExternalMetricSourceType:
		return c.externalProposal(ctx, hpa, spec, specReplicas, statusReplicas, selector, status)
	}
	// Validation refuses other types; an object stored before may still have one.
	err := fmt.Errorf("unknown metric source type %q", string(spec.Type))
	return proposal{}, c.fail(hpa, "InvalidMetricSourceType", err, err)
}

// resourceProposal is the proposal of a (container) resource metric, with its current
// value, for an AverageValue or an AverageUtilization target.
func (c *Controller) resourceProposal(ctx context.Context, current int32, target autoscalingv2.MetricTarget, name corev1.ResourceName, namespace, container string, selector labels.Selector, typ autoscalingv2.MetricSourceType) (proposal, autoscalingv2.MetricValueStatus, error) {
	if target.AverageValue != nil {
		replicas, avg, ts, err := c.resourceValueReplicas(ctx, current, target.AverageValue.MilliValue(), name, namespace, selector, container)
		if err != nil {
			return proposal{}, autoscalingv2.MetricValueStatus{}, fmt.Errorf("failed to get %s usage: %v", name, err)
		}
		return proposal{replicas: replicas, metric: fmt.Sprintf("%s resource", name), timestamp: ts},
			autoscalingv2.MetricValueStatus{AverageValue: resource.NewMilliQuantity(avg, resource.DecimalSI)}, nil
	}
	if target.AverageUtilization == nil {
		return proposal{}, autoscalingv2.MetricValueStatus{}, errors.New("invalid resource metric source: neither an average utilization target nor an average value (usage) target was set")
	}
	replicas, utilization, raw, ts, err := c.resourceUtilizationReplicas(ctx, current, *target.AverageUtilization, name, namespace, selector, container)
	if err != nil {
		return proposal{}, autoscalingv2.MetricValueStatus{}, fmt.Errorf("failed to get %s utilization: %v", name, err)
	}
	metric := fmt.Sprintf("%s resource utilization (percentage of request)", name)
	if typ == autoscalingv2.ContainerResourceMetricSourceType {
		metric = fmt.Sprintf("%s container resource utilization (percentage of request)", name)
	}
	return proposal{replicas: replicas, metric: metric, timestamp: ts},
		autoscalingv2.MetricValueStatus{AverageUtilization: &utilization, AverageValue: resource.NewMilliQuantity(raw, resource.DecimalSI)}, nil
}

// objectProposal is the proposal of an Object metric.
func (c *Controller) objectProposal(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, spec autoscalingv2.MetricSpec, specReplicas, statusReplicas int32, selector, metricSel labels.Selector, status *autoscalingv2.MetricStatus) (proposal, *metricFailure) {
	o := spec.Object
	id := autoscalingv2.MetricIdentifier{Name: o.Metric.Name, Selector: o.Metric.Selector}
	switch {
	case o.Target.Type == autoscalingv2.ValueMetricType && o.Target.Value != nil:
		replicas, usage, err := c.objectValueReplicas(ctx, specReplicas, o.Target.Value.MilliValue(), o.Metric.Name, hpa.Namespace, &o.DescribedObject, selector, metricSel)
		if err != nil {
			return proposal{}, c.fail(hpa, "FailedGetObjectMetric", err, err)
		}
		*status = autoscalingv2.MetricStatus{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricStatus{
			DescribedObject: o.DescribedObject, Metric: id,
			Current: autoscalingv2.MetricValueStatus{Value: resource.NewMilliQuantity(usage, resource.DecimalSI)},
		}}
		return proposal{replicas: replicas, metric: fmt.Sprintf("%s metric %s", o.DescribedObject.Kind, o.Metric.Name)}, nil
	case o.Target.Type == autoscalingv2.AverageValueMetricType && o.Target.AverageValue != nil:
		replicas, avg, ts, err := c.objectAverageReplicas(ctx, statusReplicas, o.Target.AverageValue.MilliValue(), o.Metric.Name, hpa.Namespace, &o.DescribedObject, metricSel)
		if err != nil {
			return proposal{}, c.fail(hpa, "FailedGetObjectMetric", err, fmt.Errorf("failed to get %s object metric: %v", o.Metric.Name, err))
		}
		// Upstream's status of this target names no described object, and its
		// reason calls the metric external.
		*status = autoscalingv2.MetricStatus{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricStatus{
			Metric:  id,
			Current: autoscalingv2.MetricValueStatus{AverageValue: resource.NewMilliQuantity(avg, resource.DecimalSI)},
		}}
		return proposal{replicas: replicas, metric: fmt.Sprintf("external metric %s(%+v)", o.Metric.Name, o.Metric.Selector), timestamp: ts}, nil
	}
	err := errors.New("invalid object metric source: neither a value target nor an average value target was set")
	return proposal{}, c.fail(hpa, "FailedGetObjectMetric", err, err)
}

// externalProposal is the proposal of an External metric.
func (c *Controller) externalProposal(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, spec autoscalingv2.MetricSpec, specReplicas, statusReplicas int32, selector labels.Selector, status *autoscalingv2.MetricStatus) (proposal, *metricFailure) {
	e := spec.External
	id := autoscalingv2.MetricIdentifier{Name: e.Metric.Name, Selector: e.Metric.Selector}
	metric := fmt.Sprintf("external metric %s(%+v)", e.Metric.Name, e.Metric.Selector)
	wrap := func(err error) error {
		return fmt.Errorf("failed to get %s external metric value: %v", e.Metric.Name, err)
	}
	switch {
	case e.Target.AverageValue != nil:
		replicas, avg, ts, err := c.externalAverageReplicas(ctx, statusReplicas, e.Target.AverageValue.MilliValue(), e.Metric.Name, hpa.Namespace, e.Metric.Selector)
		if err != nil {
			return proposal{}, c.fail(hpa, "FailedGetExternalMetric", err, wrap(fmt.Errorf("failed to get %s external metric: %v", e.Metric.Name, err)))
		}
		*status = autoscalingv2.MetricStatus{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricStatus{
			Metric: id, Current: autoscalingv2.MetricValueStatus{AverageValue: resource.NewMilliQuantity(avg, resource.DecimalSI)},
		}}
		return proposal{replicas: replicas, metric: metric, timestamp: ts}, nil
	case e.Target.Value != nil:
		replicas, total, err := c.externalValueReplicas(ctx, specReplicas, e.Target.Value.MilliValue(), e.Metric.Name, hpa.Namespace, e.Metric.Selector, selector)
		if err != nil {
			return proposal{}, c.fail(hpa, "FailedGetExternalMetric", err, wrap(fmt.Errorf("failed to get external metric %s: %v", e.Metric.Name, err)))
		}
		*status = autoscalingv2.MetricStatus{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricStatus{
			Metric: id, Current: autoscalingv2.MetricValueStatus{Value: resource.NewMilliQuantity(total, resource.DecimalSI)},
		}}
		return proposal{replicas: replicas, metric: metric}, nil
	}
	err := errors.New("invalid external metric source: neither a value target nor an average value target was set")
	return proposal{}, c.fail(hpa, "FailedGetExternalMetric", err, wrap(err))
}

// selectorIndex knows the selector of each autoscaler's target (Nothing until its
// first sync), to find pods that two autoscalers would control.
type selectorIndex struct {
	mu sync.Mutex
	m  map[string]labels.Selector // namespace/name → selector
}

// add registers an autoscaler that has none yet.
func (s *selectorIndex) add(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[key]; !ok {
		s.m[key] = labels.Nothing()
	}
}

// update sets a registered autoscaler's selector (a deleted one stays out).
func (s *selectorIndex) update(key string, sel labels.Selector) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[key]; ok {
		s.m[key] = sel
	}
}

func (s *selectorIndex) remove(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

// controlling names, in order, the autoscalers of namespace whose selector matches
// one of pods.
func (s *selectorIndex) controlling(namespace string, pods []*corev1.Pod) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for key, sel := range s.m {
		if ns, _, _ := strings.Cut(key, "/"); ns != namespace {
			continue
		}
		for _, pod := range pods {
			if sel.Matches(labels.Set(pod.Labels)) {
				out = append(out, key)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}
