package podautoscaler

import (
	"context"
	"fmt"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	custommetricsv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalmetricsv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/kubette/kubette/internal/controller/podautoscaler/metricsource"
)

// MetricsSource is where the controller reads metrics: the metrics APIs in a cluster
// (metricsource.REST), a fake in tests. Its errors are the APIs' own; the controller
// words them as upstream does.
type MetricsSource interface {
	// PodMetrics lists the resource usage (metrics.k8s.io PodMetrics) of the pods of
	// namespace that selector matches.
	PodMetrics(ctx context.Context, namespace string, selector labels.Selector) ([]metricsv1beta1.PodMetrics, error)
	// ObjectsMetric reads a custom metric (custom.metrics.k8s.io) of every object of
	// kind gk in namespace that selector matches.
	ObjectsMetric(ctx context.Context, namespace string, gk schema.GroupKind, selector labels.Selector, metric string, metricSelector labels.Selector) ([]custommetricsv1beta2.MetricValue, error)
	// ObjectMetric reads a custom metric of one object (namespace "" for a
	// cluster-scoped object).
	ObjectMetric(ctx context.Context, namespace string, gk schema.GroupKind, name, metric string, metricSelector labels.Selector) (*custommetricsv1beta2.MetricValue, error)
	// ExternalMetric lists the values of an external metric (external.metrics.k8s.io).
	ExternalMetric(ctx context.Context, namespace, metric string, metricSelector labels.Selector) ([]externalmetricsv1beta1.ExternalMetricValue, error)
}

var _ MetricsSource = (*metricsource.REST)(nil)

// defaultMetricWindow is the window assumed for a custom metric that gives none
// (metrics-server's).
const defaultMetricWindow = time.Minute

// podSample is one pod's value of a metric, in milli-units, with the time it was
// taken and the window it covers.
type podSample struct {
	value     int64
	timestamp time.Time
	window    time.Duration
}

// podSamples are the samples of a metric by pod name.
type podSamples map[string]podSample

// resourceSamples reads the usage of resource by the pods selector matches: the sum
// over a pod's containers, or one container's when container is set. It also returns
// the first sample's time, as upstream.
func (c *Controller) resourceSamples(ctx context.Context, resource corev1.ResourceName, namespace string, selector labels.Selector, container string) (podSamples, time.Time, error) {
	items, err := c.metrics.PodMetrics(ctx, namespace, selector)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("unable to fetch metrics from resource metrics API: %v", err)
	}
	if len(items) == 0 {
		return nil, time.Time{}, fmt.Errorf("no metrics returned from resource metrics API")
	}
	out := make(podSamples, len(items))
	for _, m := range items {
		if container != "" {
			v, found, ok := containerUsage(m, resource, container)
			if !found {
				return nil, time.Time{}, fmt.Errorf("failed to get container metrics: container %s not present in metrics for pod %s/%s", container, m.Namespace, m.Name)
			}
			if ok {
				out[m.Name] = podSample{value: v, timestamp: m.Timestamp.Time, window: m.Window.Duration}
			}
			continue
		}
		if v, ok := podUsage(m, resource); ok {
			out[m.Name] = podSample{value: v, timestamp: m.Timestamp.Time, window: m.Window.Duration}
		}
	}
	return out, items[0].Timestamp.Time, nil
}

// podUsage adds up resource over a pod's containers; a pod without containers, or
// one of whose containers lacks the resource, has no usage.
func podUsage(m metricsv1beta1.PodMetrics, resource corev1.ResourceName) (int64, bool) {
	if len(m.Containers) == 0 {
		return 0, false
	}
	var sum int64
	for _, ct := range m.Containers {
		q, ok := ct.Usage[resource]
		if !ok {
			return 0, false
		}
		sum += q.MilliValue()
	}
	return sum, true
}

// containerUsage is one container's usage of resource: found says whether the pod's
// metrics list the container, ok whether they hold the resource for it.
func containerUsage(m metricsv1beta1.PodMetrics, resource corev1.ResourceName, container string) (v int64, found, ok bool) {
	for _, ct := range m.Containers {
		if ct.Name != container {
			continue
		}
		q, has := ct.Usage[resource]
		if !has {
			return 0, true, false
		}
		return q.MilliValue(), true, true
	}
	return 0, false, false
}

// podsMetricSamples reads a custom metric of the pods selector matches.
func (c *Controller) podsMetricSamples(ctx context.Context, metric, namespace string, selector, metricSelector labels.Selector) (podSamples, time.Time, error) {
	items, err := c.metrics.ObjectsMetric(ctx, namespace, schema.GroupKind{Kind: "Pod"}, selector, metric, metricSelector)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("unable to fetch metrics from custom metrics API: %v", err)
	}
	if len(items) == 0 {
		return nil, time.Time{}, fmt.Errorf("no metrics returned from custom metrics API")
	}
	out := make(podSamples, len(items))
	for _, m := range items {
		window := defaultMetricWindow
		if m.WindowSeconds != nil {
			window = time.Duration(*m.WindowSeconds) * time.Second
		}
		out[m.DescribedObject.Name] = podSample{value: m.Value.MilliValue(), timestamp: m.Timestamp.Time, window: window}
	}
	return out, items[0].Timestamp.Time, nil
}

// objectMetric reads a custom metric of the object ref names, in namespace (a
// Namespace is the autoscaler's own: a reference cannot leave it).
func (c *Controller) objectMetric(ctx context.Context, metric, namespace string, ref *autoscalingv2.CrossVersionObjectReference, metricSelector labels.Selector) (int64, time.Time, error) {
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	var (
		v   *custommetricsv1beta2.MetricValue
		err error
	)
	if gvk.Group == "" && gvk.Kind == "Namespace" {
		v, err = c.metrics.ObjectMetric(ctx, "", gvk.GroupKind(), namespace, metric, metricSelector)
	} else {
		v, err = c.metrics.ObjectMetric(ctx, namespace, gvk.GroupKind(), ref.Name, metric, metricSelector)
	}
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("unable to fetch metrics from custom metrics API: %v", err)
	}
	return v.Value.MilliValue(), v.Timestamp.Time, nil
}

// externalMetric reads the values of an external metric, in milli-units.
func (c *Controller) externalMetric(ctx context.Context, metric, namespace string, selector labels.Selector) ([]int64, time.Time, error) {
	items, err := c.metrics.ExternalMetric(ctx, namespace, metric, selector)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("unable to fetch metrics from external metrics API: %v", err)
	}
	if len(items) == 0 {
		return nil, time.Time{}, fmt.Errorf("no metrics returned from external metrics API")
	}
	out := make([]int64, 0, len(items))
	for _, m := range items {
		out = append(out, m.Value.MilliValue())
	}
	return out, items[0].Timestamp.Time, nil
}
