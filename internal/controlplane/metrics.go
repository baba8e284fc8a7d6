package controlplane

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver"
	"github.com/kubette/kubette/internal/logging"
	"github.com/kubette/kubette/internal/metrics/resourcemetrics"
	"github.com/kubette/kubette/internal/metrics/scraper"
	"github.com/kubette/kubette/internal/registry"
)

// resourceMetricsAccept asks the kubelet for the Prometheus text format.
const resourceMetricsAccept = "text/plain;version=0.0.4;q=1,*/*;q=0.1"

// kubeletMetrics reads a node's /metrics/resource through the API server's kubelet
// client, as nodes/proxy reaches the kubelet.
type kubeletMetrics struct{ srv *apiserver.Server }

func (k kubeletMetrics) ResourceMetrics(ctx context.Context, n *corev1.Node) ([]byte, error) {
	return k.srv.GetFromKubelet(ctx, n.Name, "/metrics/resource", resourceMetricsAccept)
}

// metricsAPI builds the resource metrics API of the server s (metrics.k8s.io, which
// upstream's metrics-server serves): the scraper of the kubelets, which the caller
// runs once the server is ready, and the reads of NodeMetrics and PodMetrics from it.
func metricsAPI(cfg Config, s *apiserver.Server) (*scraper.Scraper, error) {
	src := cfg.MetricsSource
	if src == nil {
		src = kubeletMetrics{s}
	}
	nodesGR := schema.GroupResource{Resource: "nodes"}
	sc, err := scraper.New(scraper.Config{
		Source: src, Resolution: cfg.MetricResolution,
		Logger: cfg.Logger.With(logging.ComponentKey, "metrics-scraper"),
		Nodes: func(ctx context.Context) ([]*corev1.Node, error) {
			objs, err := s.List(ctx, nodesGR, "")
			if err != nil {
				return nil, err
			}
			nodes := make([]*corev1.Node, 0, len(objs))
			for _, o := range objs {
				if n, ok := o.(*corev1.Node); ok {
					nodes = append(nodes, n)
				}
			}
			return nodes, nil
		},
	})
	if err != nil {
		return nil, err
	}
	if err := s.ServeReads(registry.MetricsResource("nodes"), &resourcemetrics.Nodes{Objects: s, Usages: sc.Store()}); err != nil {
		return nil, fmt.Errorf("metrics API: %w", err)
	}
	if err := s.ServeReads(registry.MetricsResource("pods"), &resourcemetrics.Pods{Objects: s, Usages: sc.Store()}); err != nil {
		return nil, fmt.Errorf("metrics API: %w", err)
	}
	return sc, nil
}
