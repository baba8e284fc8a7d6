package registry

import (
	"context"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// MetricsV1beta1 is the resource metrics API's group-version, which upstream's
// metrics-server serves and kubectl top and the HorizontalPodAutoscaler read.
var MetricsV1beta1 = metricsv1beta1.SchemeGroupVersion

// Reader serves the reads of a resource whose objects are computed on request and
// never stored: the generic get and list handlers call it instead of reading storage
// (Resource.Read). Get returns one served object or an API error (NotFound in the
// kind's own shape); List the objects of namespace ("" for all) that match both
// selectors, in the order they are served. Neither pages nor watches.
type Reader interface {
	Get(ctx context.Context, namespace, name string) (runtime.Object, error)
	List(ctx context.Context, namespace string, labels labels.Selector, fields fields.Selector) ([]runtime.Object, error)
}

// metricsResources are metrics.k8s.io/v1beta1's NodeMetrics and PodMetrics: virtual,
// read-only (get and list, as metrics-server serves them) and computed by the Reader
// the API server is given for them (Server.ServeReads), from its scraper of the
// kubelets. Their singular name is empty in discovery, as metrics-server's.
func metricsResources() []*Resource {
	return []*Resource{
		{
			GroupVersion: MetricsV1beta1, Kind: "NodeMetrics", ListKind: "NodeMetricsList", Plural: "nodes",
			Verbs: []string{"get", "list"}, Virtual: true,
			New:     func() runtime.Object { return &metricsv1beta1.NodeMetrics{} },
			NewList: func() runtime.Object { return &metricsv1beta1.NodeMetricsList{} },
		},
		{
			GroupVersion: MetricsV1beta1, Kind: "PodMetrics", ListKind: "PodMetricsList", Plural: "pods", Namespaced: true,
			Verbs: []string{"get", "list"}, Virtual: true,
			New:     func() runtime.Object { return &metricsv1beta1.PodMetrics{} },
			NewList: func() runtime.Object { return &metricsv1beta1.PodMetricsList{} },
		},
	}
}

// MetricsResource returns the group-version-resource of metrics.k8s.io's plural
// (nodes or pods).
func MetricsResource(plural string) schema.GroupVersionResource {
	return MetricsV1beta1.WithResource(plural)
}
