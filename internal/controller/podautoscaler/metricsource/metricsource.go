// Package metricsource reads the metrics a HorizontalPodAutoscaler names from the
// three metrics APIs, as upstream's controller manager does: pod resource usage from
// metrics.k8s.io/v1beta1 (k8s.io/metrics' clientset), custom metrics from
// custom.metrics.k8s.io in whichever version discovery prefers, and external metrics
// from external.metrics.k8s.io/v1beta1. Errors are the clients' own, unwrapped: the
// autoscaler adds upstream's context to them.
package metricsource

import (
	"context"
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	custommetricsv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalmetricsv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	"k8s.io/metrics/pkg/client/clientset/versioned"
	resourceclient "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"
	"k8s.io/metrics/pkg/client/custom_metrics"
	"k8s.io/metrics/pkg/client/external_metrics"
)

// REST reads metrics through the API server (or the extension servers it proxies).
type REST struct {
	resources resourceclient.PodMetricsesGetter
	custom    custom_metrics.CustomMetricsClient
	versions  custom_metrics.AvailableAPIsGetter
	external  external_metrics.ExternalMetricsClient
}

// New builds the clients from cfg (not changed). The custom metrics version is found
// through disc (uncached: the group may appear at any time) and remembered until
// Run forgets it; mapper names the resource of the kind a custom metric describes.
func New(cfg *rest.Config, mapper apimeta.RESTMapper, disc discovery.DiscoveryInterface) (*REST, error) {
	if cfg == nil || mapper == nil || disc == nil {
		return nil, fmt.Errorf("metrics source needs a client configuration, a REST mapper and discovery")
	}
	cs, err := versioned.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("resource metrics client: %w", err)
	}
	ext, err := external_metrics.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("external metrics client: %w", err)
	}
	versions := custom_metrics.NewAvailableAPIsGetter(disc)
	return &REST{
		resources: cs.MetricsV1beta1(),
		custom:    custom_metrics.NewForConfig(rest.CopyConfig(cfg), mapper, versions),
		versions:  versions,
		external:  ext,
	}, nil
}

// Run forgets the custom metrics API version every interval until ctx is done, so
// that an adapter installed, changed or removed is seen (upstream does the same at
// its sync period).
func (r *REST) Run(ctx context.Context, interval time.Duration) {
	custom_metrics.PeriodicallyInvalidate(r.versions, interval, ctx.Done())
}

// PodMetrics lists the PodMetrics of namespace whose pods match selector.
func (r *REST) PodMetrics(ctx context.Context, namespace string, selector labels.Selector) ([]metricsv1beta1.PodMetrics, error) {
	list, err := r.resources.PodMetricses(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// ObjectsMetric reads the custom metric of every object of kind gk in namespace
// that selector matches.
func (r *REST) ObjectsMetric(_ context.Context, namespace string, gk schema.GroupKind, selector labels.Selector, metric string, metricSelector labels.Selector) ([]custommetricsv1beta2.MetricValue, error) {
	list, err := r.custom.NamespacedMetrics(namespace).GetForObjects(gk, selector, metric, metricSelector)
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// ObjectMetric reads the custom metric of one object: a namespaced one, or with
// namespace "" a cluster-scoped one (a Namespace, say).
func (r *REST) ObjectMetric(_ context.Context, namespace string, gk schema.GroupKind, name, metric string, metricSelector labels.Selector) (*custommetricsv1beta2.MetricValue, error) {
	if namespace == "" {
		return r.custom.RootScopedMetrics().GetForObject(gk, name, metric, metricSelector)
	}
	return r.custom.NamespacedMetrics(namespace).GetForObject(gk, name, metric, metricSelector)
}

// ExternalMetric lists the values of an external metric for namespace.
func (r *REST) ExternalMetric(_ context.Context, namespace, metric string, metricSelector labels.Selector) ([]externalmetricsv1beta1.ExternalMetricValue, error) {
	list, err := r.external.NamespacedMetrics(namespace).List(metric, metricSelector)
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}
