package podautoscaler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	scalefake "k8s.io/client-go/scale/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	custommetricsv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalmetricsv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
)

const ns = "default"

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// fakeMetrics is a MetricsSource over fixed values; each kind of read can fail.
type fakeMetrics struct {
	pods                          []metricsv1beta1.PodMetrics
	custom                        map[string][]custommetricsv1beta2.MetricValue // pods' metrics by name
	object                        map[string]*custommetricsv1beta2.MetricValue  // "Kind/name/metric"
	external                      map[string][]externalmetricsv1beta1.ExternalMetricValue
	podsErr, customErr, externErr error
}

func (m *fakeMetrics) PodMetrics(_ context.Context, namespace string, sel labels.Selector) ([]metricsv1beta1.PodMetrics, error) {
	if m.podsErr != nil {
		return nil, m.podsErr
	}
	var out []metricsv1beta1.PodMetrics
	for _, p := range m.pods {
		if p.Namespace == namespace && sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out, nil
}

func (m *fakeMetrics) ObjectsMetric(_ context.Context, _ string, gk schema.GroupKind, _ labels.Selector, metric string, _ labels.Selector) ([]custommetricsv1beta2.MetricValue, error) {
	if m.customErr != nil {
		return nil, m.customErr
	}
	if gk.Kind != "Pod" {
		return nil, fmt.Errorf("unexpected kind %v", gk)
	}
	return m.custom[metric], nil
}

func (m *fakeMetrics) ObjectMetric(_ context.Context, namespace string, gk schema.GroupKind, name, metric string, _ labels.Selector) (*custommetricsv1beta2.MetricValue, error) {
	if m.customErr != nil {
		return nil, m.customErr
	}
	v, ok := m.object[gk.Kind+"/"+namespace+"/"+name+"/"+metric]
	if !ok {
		return nil, fmt.Errorf("no metric %s for %s %s/%s", metric, gk.Kind, namespace, name)
	}
	return v, nil
}

func (m *fakeMetrics) ExternalMetric(_ context.Context, _, metric string, _ labels.Selector) ([]externalmetricsv1beta1.ExternalMetricValue, error) {
	if m.externErr != nil {
		return nil, m.externErr
	}
	return m.external[metric], nil
}

// fixture is a controller over a fake clientset (the autoscalers), listers filled by
// hand, a fake scale client holding one Deployment's scale, fake metrics and a fake clock.
type fixture struct {
	t       testing.TB
	clock   *clocktesting.FakeClock
	kube    *fake.Clientset
	scales  *scalefake.FakeScaleClient
	scale   *autoscalingv1.Scale // web's current scale
	metrics *fakeMetrics
	rec     *record.FakeRecorder
	factory informers.SharedInformerFactory
	c       *Controller
}

func newFixture(t testing.TB, hpas ...*autoscalingv2.HorizontalPodAutoscaler) *fixture {
	t.Helper()
	objs := make([]runtime.Object, len(hpas))
	for i, h := range hpas {
		objs[i] = h
	}
	f := &fixture{
		t: t, clock: clocktesting.NewFakeClock(t0), kube: fake.NewClientset(objs...),
		scales: &scalefake.FakeScaleClient{}, metrics: &fakeMetrics{}, rec: record.NewFakeRecorder(100),
	}
	f.factory = informers.NewSharedInformerFactory(f.kube, 0)
	mapper := apimeta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "apps", Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, apimeta.RESTScopeNamespace)
	f.scales.AddReactor("get", "deployments", func(a core.Action) (bool, runtime.Object, error) {
		if f.scale == nil || a.(core.GetAction).GetName() != f.scale.Name {
			return true, nil, errors.New(`deployments.apps "` + a.(core.GetAction).GetName() + `" not found`)
		}
		return true, f.scale.DeepCopy(), nil
	})
	f.scales.AddReactor("update", "deployments", func(a core.Action) (bool, runtime.Object, error) {
		s := a.(core.UpdateAction).GetObject().(*autoscalingv1.Scale).DeepCopy()
		f.scale = s
		return true, s, nil
	})
	c, err := NewWithOptions(controller.Deps{
		Client: f.kube, Informers: f.factory, Logger: slog.New(slog.DiscardHandler),
		Recorder: func(string) record.EventRecorder { return f.rec },
	}, Options{Metrics: f.metrics, Scales: f.scales, Mapper: mapper, Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	for _, h := range hpas {
		f.putHPA(h)
		c.selectors.add(ns + "/" + h.Name)
	}
	return f
}

func (f *fixture) putHPA(h *autoscalingv2.HorizontalPodAutoscaler) {
	f.t.Helper()
	if err := f.factory.Autoscaling().V2().HorizontalPodAutoscalers().Informer().GetIndexer().Update(h); err != nil {
		f.t.Fatal(err)
	}
}

// target sets web's scale: replicas in spec and status, selector app=web.
func (f *fixture) target(replicas int32) {
	f.scale = &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: autoscalingv1.ScaleSpec{Replicas: replicas}, Status: autoscalingv1.ScaleStatus{Replicas: replicas, Selector: "app=web"}}
}

// pods adds pods to the lister.
func (f *fixture) pods(pods ...*corev1.Pod) {
	f.t.Helper()
	for _, p := range pods {
		if err := f.factory.Core().V1().Pods().Informer().GetIndexer().Add(p); err != nil {
			f.t.Fatal(err)
		}
	}
}

// usage sets the CPU usage (milli-cores) of pods, one container "c" each, sampled at
// the fixture's time over a 30 s window.
func (f *fixture) usage(cpu map[string]int64) {
	f.metrics.pods = nil
	for name, v := range cpu {
		f.metrics.pods = append(f.metrics.pods, podMetrics(name, f.clock.Now(), map[string]int64{"c": v}))
	}
}

func podMetrics(name string, at time.Time, cpu map[string]int64) metricsv1beta1.PodMetrics {
	m := metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "web"}},
		Timestamp: metav1.NewTime(at), Window: metav1.Duration{Duration: 30 * time.Second}}
	for c, v := range cpu {
		m.Containers = append(m.Containers, metricsv1beta1.ContainerMetrics{Name: c, Usage: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(v, resource.DecimalSI),
			corev1.ResourceMemory: resource.MustParse("10Mi"),
		}})
	}
	return m
}

// sync runs one sync of the autoscaler named, feeds the status it wrote back to the
// lister (as the informer would) and returns its error.
func (f *fixture) sync(name string) error {
	f.t.Helper()
	f.kube.ClearActions()
	f.scales.ClearActions()
	err := f.c.Sync(context.Background(), ns+"/"+name)
	for _, a := range f.kube.Actions() {
		if u, ok := a.(core.UpdateAction); ok && a.GetSubresource() == "status" {
			f.putHPA(u.GetObject().(*autoscalingv2.HorizontalPodAutoscaler))
		}
	}
	return err
}

// hpa is the autoscaler as the lister has it.
func (f *fixture) hpa(name string) *autoscalingv2.HorizontalPodAutoscaler {
	f.t.Helper()
	h, err := f.c.hpaLister.HorizontalPodAutoscalers(ns).Get(name)
	if err != nil {
		f.t.Fatal(err)
	}
	return h
}

// events drains the recorded events.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// scaleActions describes the scale client's actions: "get deployments" or
// "update deployments 6".
func (f *fixture) scaleActions() []string {
	var out []string
	for _, a := range f.scales.Actions() {
		s := a.GetVerb() + " " + a.GetResource().Resource
		if u, ok := a.(core.UpdateAction); ok {
			s += fmt.Sprintf(" %d", u.GetObject().(*autoscalingv1.Scale).Spec.Replicas)
		}
		out = append(out, s)
	}
	return out
}

// kubeActions describes the clientset's actions: "update horizontalpodautoscalers/status".
func (f *fixture) kubeActions() []string {
	var out []string
	for _, a := range f.kube.Actions() {
		s := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			s += "/" + a.GetSubresource()
		}
		out = append(out, s)
	}
	return out
}

func (f *fixture) check(what string, got, want any) {
	f.t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		f.t.Fatalf("%s (-want +got):\n%s", what, d)
	}
}

// conditions renders the status's conditions as "Type Status Reason: message".
func conditions(h *autoscalingv2.HorizontalPodAutoscaler) []string {
	var out []string
	for _, c := range h.Status.Conditions {
		out = append(out, fmt.Sprintf("%s %s %s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	return out
}

// pod is a running, ready pod of web started 10 minutes before t0 that requests
// cpu milli-cores in its one container "c" (none when cpu is 0).
func pod(name string, cpu int64, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: ptr.To(metav1.NewTime(t0.Add(-10 * time.Minute))),
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(t0.Add(-9 * time.Minute))}}},
	}
	if cpu > 0 {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI)}
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// hpaFor is an autoscaler of Deployment web between minReplicas and maxReplicas
// with the given metrics (a 50% CPU utilization target when none).
func hpaFor(name string, minReplicas, maxReplicas int32, metrics ...autoscalingv2.MetricSpec) *autoscalingv2.HorizontalPodAutoscaler {
	if len(metrics) == 0 {
		metrics = []autoscalingv2.MetricSpec{cpuUtilization(50)}
	}
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Generation: 1},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    &minReplicas, MaxReplicas: maxReplicas, Metrics: metrics,
		},
	}
}

func cpuUtilization(percent int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &percent}}}
}
