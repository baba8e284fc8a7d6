package podautoscaler_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// kubelet is the metrics scraper's source for node-a: each read of /metrics/resource
// is 15 s after the one before (in the samples' own timestamps), every container
// burning the CPU set for its pod, so the API's rates are exact.
type kubelet struct {
	mu    sync.Mutex
	base  time.Time
	calls int
	cpu   map[string]int64 // default/pod → milli-cores of its container "app"
}

func (k *kubelet) set(pod string, milli int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cpu[pod] = milli
}

func (k *kubelet) ResourceMetrics(_ context.Context, n *corev1.Node) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if n.Name != "node-a" {
		return nil, fmt.Errorf("no kubelet on %s", n.Name)
	}
	k.calls++
	secs := float64(15 * k.calls)
	ts := k.base.Add(time.Duration(secs) * time.Second).UnixMilli()
	var b strings.Builder
	fmt.Fprintf(&b, "node_cpu_usage_seconds_total %v %d\nnode_memory_working_set_bytes %d %d\n", secs, ts, 1<<30, ts)
	for pod, milli := range k.cpu {
		l := fmt.Sprintf(`{container="app",namespace="default",pod=%q}`, pod)
		fmt.Fprintf(&b, "container_cpu_usage_seconds_total%s %v %d\n", l, float64(milli)/1000*secs, ts)
		fmt.Fprintf(&b, "container_memory_working_set_bytes%s %d %d\n", l, 10<<20, ts)
		fmt.Fprintf(&b, "container_start_time_seconds%s %d %d\n", l, k.base.Add(-time.Hour).Unix(), ts)
	}
	return []byte(b.String()), nil
}

// bindPods puts the Deployment's pods on node-a, where the metrics scraper looks.
func bindPods(t *testing.T, env *testenv.Env, names []string) {
	t.Helper()
	ctx := context.Background()
	if _, err := env.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if err := env.Client.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name},
			Target: corev1.ObjectReference{Kind: "Node", Name: "node-a"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// The whole path: kubelet samples → the API server's metrics.k8s.io → the
// controller's metrics client (as its ServiceAccount) → the Deployment's scale.
func TestScalesOnTheMetricsAPI(t *testing.T) {
	k := &kubelet{base: time.Now(), cpu: map[string]int64{}}
	env := testenv.Start(t, testenv.Options{MetricsSource: k, MetricResolution: 100 * time.Millisecond})
	ctx := context.Background()
	c := env.Client
	names := deployment(t, c, "default", 2)
	bindPods(t, env, names)
	for _, name := range names {
		k.set(name, 90)
	}
	startController(t, env, nil)
	if _, err := c.AutoscalingV2().HorizontalPodAutoscalers("default").Create(ctx, cpuHPA("default", 50), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the Deployment's scale at 4", func() error {
		s, err := c.AppsV1().Deployments("default").GetScale(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.Spec.Replicas != 4 {
			h, _ := c.AutoscalingV2().HorizontalPodAutoscalers("default").Get(ctx, "web", metav1.GetOptions{})
			return fmt.Errorf("spec.replicas %d, autoscaler %q", s.Spec.Replicas, conditionsOf(h))
		}
		return nil
	})
	poll.Until(t, "the status at 4 with the API's utilization", func() error {
		h, err := c.AutoscalingV2().HorizontalPodAutoscalers("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if h.Status.CurrentReplicas != 4 || len(h.Status.CurrentMetrics) != 1 || h.Status.CurrentMetrics[0].Resource == nil ||
			ptr.Deref(h.Status.CurrentMetrics[0].Resource.Current.AverageUtilization, 0) != 90 {
			return fmt.Errorf("status %+v", h.Status)
		}
		return nil
	})
}

// Served resource metrics without samples for the pods, and no custom metrics API:
// both in upstream's words, nothing scaled.
func TestWithoutMetricsAPIs(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client
	deployment(t, c, "default", 2)
	startController(t, env, nil)
	hpa := cpuHPA("default", 50)
	hpa.Spec.Metrics = append(hpa.Spec.Metrics, autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType,
		Pods: &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "packets"},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))}}})
	if _, err := c.AutoscalingV2().HorizontalPodAutoscalers("default").Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "ScalingActive False FailedGetResourceMetric", func() error {
		h, err := c.AutoscalingV2().HorizontalPodAutoscalers("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		want := "ScalingActive False FailedGetResourceMetric: the HPA was unable to compute the replica count: failed to get cpu utilization: unable to get metrics for resource cpu: no metrics returned from resource metrics API"
		if conds := conditionsOf(h); len(conds) != 2 || conds[1] != want {
			return fmt.Errorf("conditions %q", conds)
		}
		return nil
	})
	poll.Until(t, "the FailedGetPodsMetric event", func() error {
		evs, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web,reason=FailedGetPodsMetric"})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Message == "unable to get metric packets: unable to fetch metrics from custom metrics API: no custom metrics API (custom.metrics.k8s.io) registered" {
				return nil
			}
		}
		return fmt.Errorf("events %+v", evs.Items)
	})
	s, err := c.AppsV1().Deployments("default").GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil || s.Spec.Replicas != 2 {
		t.Fatalf("scale %v, %v", s, err)
	}
}
