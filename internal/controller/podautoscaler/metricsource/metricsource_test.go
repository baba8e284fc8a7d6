package metricsource

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	custommetricsv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalmetricsv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// server answers the three metrics APIs on loopback and records the requests.
type server struct {
	mu       sync.Mutex
	requests []string
	custom   bool // whether discovery lists custom.metrics.k8s.io
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.URL.RequestURI())
	custom := s.custom
	s.mu.Unlock()
	at := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	var body any
	switch r.URL.Path {
	case "/api":
		body = &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}}
	case "/apis":
		list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
		if custom {
			gv := metav1.GroupVersionForDiscovery{GroupVersion: "custom.metrics.k8s.io/v1beta2", Version: "v1beta2"}
			list.Groups = append(list.Groups, metav1.APIGroup{Name: "custom.metrics.k8s.io", Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv})
		}
		body = list
	case "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods":
		body = &metricsv1beta1.PodMetricsList{TypeMeta: metav1.TypeMeta{Kind: "PodMetricsList", APIVersion: "metrics.k8s.io/v1beta1"},
			Items: []metricsv1beta1.PodMetrics{{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default"}, Timestamp: at,
				Containers: []metricsv1beta1.ContainerMetrics{{Name: "c", Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}}}}}
	case "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/packets",
		"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/services/front/requests",
		"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/metrics/requests":
		body = &custommetricsv1beta2.MetricValueList{TypeMeta: metav1.TypeMeta{Kind: "MetricValueList", APIVersion: "custom.metrics.k8s.io/v1beta2"},
			Items: []custommetricsv1beta2.MetricValue{{DescribedObject: corev1.ObjectReference{Kind: "Pod", Name: "web-0"},
				Metric: custommetricsv1beta2.MetricIdentifier{Name: "packets"}, Timestamp: at, Value: resource.MustParse("7")}}}
	case "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue":
		body = &externalmetricsv1beta1.ExternalMetricValueList{TypeMeta: metav1.TypeMeta{Kind: "ExternalMetricValueList", APIVersion: "external.metrics.k8s.io/v1beta1"},
			Items: []externalmetricsv1beta1.ExternalMetricValue{{MetricName: "queue", Timestamp: at, Value: resource.MustParse("30")}}}
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
			Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound, Message: "the server could not find the requested resource"})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

func (s *server) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]string(nil), s.requests...)
	s.requests = nil
	return out
}

// Each read goes to its API's path with the selectors as query parameters; without
// the custom metrics group in discovery, a custom read fails as upstream's client does.
func TestREST(t *testing.T) {
	s := &server{}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	cfg := &rest.Config{Host: ts.URL}
	mapper := apimeta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, apimeta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Service"}, apimeta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, apimeta.RESTScopeRoot)
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src, err := New(cfg, mapper, disc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sel := labels.SelectorFromSet(labels.Set{"app": "web"})

	pods, err := src.PodMetrics(ctx, "default", sel)
	if err != nil || len(pods) != 1 || pods[0].Containers[0].Usage.Cpu().MilliValue() != 250 {
		t.Fatalf("pod metrics %+v, %v", pods, err)
	}
	if got := s.seen(); cmp.Diff([]string{"/apis/metrics.k8s.io/v1beta1/namespaces/default/pods?labelSelector=app%3Dweb"}, got) != "" {
		t.Fatalf("requests %q", got)
	}

	if _, err := src.ObjectsMetric(ctx, "default", schema.GroupKind{Kind: "Pod"}, sel, "packets", labels.Everything()); err == nil ||
		err.Error() != "no custom metrics API (custom.metrics.k8s.io) registered" {
		t.Fatalf("without the custom metrics group: %v", err)
	}
	s.seen()

	s.mu.Lock()
	s.custom = true
	s.mu.Unlock()
	vals, err := src.ObjectsMetric(ctx, "default", schema.GroupKind{Kind: "Pod"}, sel, "packets", labels.Everything())
	if err != nil || len(vals) != 1 || vals[0].Value.MilliValue() != 7000 {
		t.Fatalf("pods metric %+v, %v", vals, err)
	}
	if _, err := src.ObjectMetric(ctx, "default", schema.GroupKind{Kind: "Service"}, "front", "requests", labels.Everything()); err != nil {
		t.Fatal(err)
	}
	if _, err := src.ObjectMetric(ctx, "", schema.GroupKind{Kind: "Namespace"}, "default", "requests", labels.Everything()); err != nil {
		t.Fatal(err)
	}
	ext, err := src.ExternalMetric(ctx, "default", "queue", labels.Everything())
	if err != nil || len(ext) != 1 || ext[0].Value.MilliValue() != 30000 {
		t.Fatalf("external metric %+v, %v", ext, err)
	}
	want := []string{
		"/api?timeout=32s", "/apis?timeout=32s", // discovery again: a failed look-up is not remembered
		"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/%2A/packets?labelSelector=app%3Dweb",
		"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/services/front/requests",
		"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/metrics/requests",
		"/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue",
	}
	if d := cmp.Diff(want, s.seen()); d != "" {
		t.Fatalf("requests (-want +got):\n%s", d)
	}
	if _, err := src.ExternalMetric(ctx, "default", "absent", labels.Everything()); err == nil || err.Error() != "the server could not find the requested resource" {
		t.Fatalf("an external metric nobody serves: %v", err)
	}
}
