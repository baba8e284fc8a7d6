package podautoscaler_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	custommetricsv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalmetricsv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/podautoscaler"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// cpuSource is a MetricsSource with the CPU usage of pods set by the test; it has no
// custom or external metrics.
type cpuSource struct {
	mu    sync.Mutex
	usage map[string]int64 // namespace/pod → milli-cores
	pods  map[string]map[string]string
}

func (s *cpuSource) set(ns, pod string, lbls map[string]string, milli int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.usage[ns+"/"+pod] = milli
	s.pods[ns+"/"+pod] = lbls
}

func (s *cpuSource) PodMetrics(_ context.Context, namespace string, sel labels.Selector) ([]metricsv1beta1.PodMetrics, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []metricsv1beta1.PodMetrics
	for key, v := range s.usage {
		ns, name, _ := strings.Cut(key, "/")
		if ns != namespace || !sel.Matches(labels.Set(s.pods[key])) {
			continue
		}
		out = append(out, metricsv1beta1.PodMetrics{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: s.pods[key]},
			Timestamp:  metav1.Now(), Window: metav1.Duration{Duration: 30 * time.Second},
			Containers: []metricsv1beta1.ContainerMetrics{{Name: "app", Usage: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(v, resource.DecimalSI)}}},
		})
	}
	return out, nil
}

func (s *cpuSource) ObjectsMetric(context.Context, string, schema.GroupKind, labels.Selector, string, labels.Selector) ([]custommetricsv1beta2.MetricValue, error) {
	return nil, fmt.Errorf("no custom metrics in this test")
}

func (s *cpuSource) ObjectMetric(context.Context, string, schema.GroupKind, string, string, labels.Selector) (*custommetricsv1beta2.MetricValue, error) {
	return nil, fmt.Errorf("no custom metrics in this test")
}

func (s *cpuSource) ExternalMetric(context.Context, string, string, labels.Selector) ([]externalmetricsv1beta1.ExternalMetricValue, error) {
	return nil, fmt.Errorf("no external metrics in this test")
}

// startController runs the controller as its ServiceAccount (so the default policy's
// system:controller:horizontal-pod-autoscaler role is what it may do), with src as
// its metrics (nil: the metrics APIs) and a 1 s sync period.
func startController(t *testing.T, env *testenv.Env, src podautoscaler.MetricsSource) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	cfg, err := env.ServiceAccountConfig(podautoscaler.ClientName)
	if err != nil {
		t.Fatal(err)
	}
	deps, starter, err := controller.NewDeps(cfg, podautoscaler.ClientName)
	if err != nil {
		t.Fatal(err)
	}
	c, err := podautoscaler.NewWithOptions(deps, podautoscaler.Options{Metrics: src, SyncPeriod: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	starter.Start(ctx)
	wg.Go(func() { c.Run(ctx, 2) })
}

// deployment makes Deployment web in ns with replicas and, as its ReplicaSet would,
// that many running, ready pods requesting 100m CPU (no Deployment controller runs
// here).
func deployment(t *testing.T, client kubernetes.Interface, ns string, replicas int32) []string {
	t.Helper()
	ctx := context.Background()
	if ns != "default" {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lbls := map[string]string{"app": "web"}
	container := corev1.Container{Name: "app", Image: "busybox",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbls}, Spec: corev1.PodSpec{Containers: []corev1.Container{container}}}}}
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := range replicas {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: ns, Labels: lbls},
			Spec: corev1.PodSpec{Containers: []corev1.Container{container}}}
		p, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		started := metav1.NewTime(time.Now().Add(-10 * time.Minute))
		p.Status.Phase, p.Status.StartTime = corev1.PodRunning, &started
		p.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(started.Add(5 * time.Second))}}
		if _, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		names = append(names, p.Name)
	}
	return names
}

func cpuHPA(ns string, target int32) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 10,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &target}}}},
		},
	}
}

func conditionsOf(h *autoscalingv2.HorizontalPodAutoscaler) []string {
	var out []string
	for _, c := range h.Status.Conditions {
		out = append(out, fmt.Sprintf("%s %s %s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	return out
}

// A Deployment of two pods at 90% of their CPU request and an autoscaler with a 50%
// target: the controller sets the Deployment's scale to 4, writes upstream's status
// and event, and the autoscaling/v1 view is the same object.
func TestScalesDeployment(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client
	src := &cpuSource{usage: map[string]int64{}, pods: map[string]map[string]string{}}
	for _, name := range deployment(t, c, "default", 2) {
		src.set("default", name, map[string]string{"app": "web"}, 90)
	}
	startController(t, env, src)
	if _, err := c.AutoscalingV2().HorizontalPodAutoscalers("default").Create(ctx, cpuHPA("default", 50), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	poll.Until(t, "the Deployment's scale at 4", func() error {
		s, err := c.AppsV1().Deployments("default").GetScale(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.Spec.Replicas != 4 {
			return fmt.Errorf("spec.replicas %d", s.Spec.Replicas)
		}
		return nil
	})
	// Two pods still ask for 1.8 x 2 = 4: the next syncs keep 4 and see it current.
	var h *autoscalingv2.HorizontalPodAutoscaler
	want := []string{
		"AbleToScale True ReadyForNewScale: recommended size matches current size",
		"ScalingActive True ValidMetricFound: the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)",
		"ScalingLimited False DesiredWithinRange: the desired count is within the acceptable range",
	}
	poll.Until(t, "the autoscaler's status at 4 replicas", func() error {
		var err error
		if h, err = c.AutoscalingV2().HorizontalPodAutoscalers("default").Get(ctx, "web", metav1.GetOptions{}); err != nil {
			return err
		}
		if h.Status.CurrentReplicas != 4 || h.Status.DesiredReplicas != 4 || fmt.Sprint(conditionsOf(h)) != fmt.Sprint(want) {
			return fmt.Errorf("replicas %d/%d, conditions %q", h.Status.CurrentReplicas, h.Status.DesiredReplicas, conditionsOf(h))
		}
		return nil
	})
	if h.Status.LastScaleTime == nil {
		t.Fatal("no lastScaleTime")
	}
	if n := len(h.Status.CurrentMetrics); n != 1 || h.Status.CurrentMetrics[0].Resource == nil ||
		ptr.Deref(h.Status.CurrentMetrics[0].Resource.Current.AverageUtilization, 0) != 90 ||
		h.Status.CurrentMetrics[0].Resource.Current.AverageValue.String() != "90m" {
		t.Fatalf("current metrics %+v", h.Status.CurrentMetrics)
	}

	// The event of the rescale, as upstream's controller reports it.
	poll.Until(t, "the SuccessfulRescale event", func() error {
		evs, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web,reason=SuccessfulRescale"})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind == "HorizontalPodAutoscaler" && e.Source.Component == "horizontal-pod-autoscaler" && e.Type == corev1.EventTypeNormal &&
				e.Message == "New size: 4; reason: cpu resource utilization (percentage of request) above target" {
				return nil
			}
		}
		return fmt.Errorf("events %+v", evs.Items)
	})

	// The autoscaling/v1 view of the same object.
	v1, err := c.AutoscalingV1().HorizontalPodAutoscalers("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(v1.Spec.TargetCPUUtilizationPercentage, 0) != 50 || v1.Status.CurrentReplicas != 4 || v1.Status.DesiredReplicas != 4 ||
		ptr.Deref(v1.Status.CurrentCPUUtilizationPercentage, 0) != 90 || v1.Status.LastScaleTime == nil || !v1.Status.LastScaleTime.Equal(h.Status.LastScaleTime) {
		t.Fatalf("v1 view %+v", v1.Status)
	}
	if conds := v1.Annotations["autoscaling.alpha.kubernetes.io/conditions"]; !strings.Contains(conds, `"reason":"ValidMetricFound"`) {
		t.Fatalf("v1 conditions annotation %q", conds)
	}

	// The load goes away: a scale-down waits for the stabilization window (5 minutes),
	// so the autoscaler only says so.
	for _, name := range []string{"web-0", "web-1"} {
		src.set("default", name, map[string]string{"app": "web"}, 10)
	}
	poll.Until(t, "ScaleDownStabilized", func() error {
		h, err := c.AutoscalingV2().HorizontalPodAutoscalers("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(h.Status.Conditions) == 0 || h.Status.Conditions[0].Reason != "ScaleDownStabilized" {
			return fmt.Errorf("conditions %q", conditionsOf(h))
		}
		return nil
	})
	s, err := c.AppsV1().Deployments("default").GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil || s.Spec.Replicas != 4 {
		t.Fatalf("scale %v, %v: stabilization did not hold", s, err)
	}
}

// Any kind with a scale subresource is a target: a custom resource whose scale maps
// spec.replicas and status.selector goes from 2 to 4.
func TestScalesCustomResource(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	ac, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	props := map[string]apiextensionsv1.JSONSchemaProps{
		"spec":   {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"replicas": {Type: "integer"}}},
		"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"replicas": {Type: "integer"}, "selector": {Type: "string"}}},
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "webapps.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "webapps", Singular: "webapp", Kind: "WebApp", ListKind: "WebAppList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{
					Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
					Scale: &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas",
						LabelSelectorPath: ptr.To(".status.selector")}}}},
		},
	}
	if _, err := ac.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	webapps := dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "webapps"}).Namespace("default")
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "WebApp",
		"metadata": map[string]any{"name": "web"}, "spec": map[string]any{"replicas": int64(2)}}}
	poll.Until(t, "the WebApp created", func() error {
		var err error
		_, err = webapps.Create(ctx, obj, metav1.CreateOptions{})
		return err
	})
	cur, err := webapps.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Object["status"] = map[string]any{"replicas": int64(2), "selector": "app=web"}
	if _, err := webapps.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Pods of the custom resource (no Deployment: the one made below is not the target).
	src := &cpuSource{usage: map[string]int64{}, pods: map[string]map[string]string{}}
	for _, name := range deployment(t, env.Client, "default", 2) {
		src.set("default", name, map[string]string{"app": "web"}, 90)
	}
	startController(t, env, src)
	hpa := cpuHPA("default", 50)
	hpa.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "example.com/v1", Kind: "WebApp", Name: "web"}
	if _, err := env.Client.AutoscalingV2().HorizontalPodAutoscalers("default").Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the WebApp at 4 replicas", func() error {
		w, err := webapps.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		n, _, _ := unstructured.NestedInt64(w.Object, "spec", "replicas")
		if n != 4 {
			return fmt.Errorf("spec.replicas %d", n)
		}
		return nil
	})
	d, err := env.Client.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil || *d.Spec.Replicas != 2 {
		t.Fatalf("the Deployment was scaled: %v, %v", d.Spec.Replicas, err)
	}
}
