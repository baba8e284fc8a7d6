package podautoscaler

import (
	"errors"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	custommetricsv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalmetricsv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	"k8s.io/utils/ptr"
)

func podsMetric(name string, avg string) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: name},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse(avg))}}}
}

func objectMetric(name, value string) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
		DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Service", Name: "front"},
		Metric:          autoscalingv2.MetricIdentifier{Name: name},
		Target:          autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr.To(resource.MustParse(value))}}}
}

func externalMetric(name, avg string) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: name},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse(avg))}}}
}

func customValue(pod string, v string) custommetricsv1beta2.MetricValue {
	return custommetricsv1beta2.MetricValue{DescribedObject: corev1.ObjectReference{Kind: "Pod", Name: pod, Namespace: ns},
		Timestamp: metav1.NewTime(t0), Value: resource.MustParse(v)}
}

// Each metric type's proposal, status and rescale reason, from 2 replicas: every
// proposal is above 4, so the scale-up limit (4) applies.
func TestMetricTypes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spec   autoscalingv2.MetricSpec
		set    func(*fakeMetrics)
		reason string
		status autoscalingv2.MetricStatus
	}{
		{name: "pods", spec: podsMetric("packets", "100"),
			set: func(m *fakeMetrics) {
				m.custom = map[string][]custommetricsv1beta2.MetricValue{"packets": {customValue("web-0", "300"), customValue("web-1", "300")}}
			},
			reason: "pods metric packets above target",
			status: autoscalingv2.MetricStatus{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{
				Metric: autoscalingv2.MetricIdentifier{Name: "packets"}, Current: autoscalingv2.MetricValueStatus{AverageValue: resource.NewMilliQuantity(300000, resource.DecimalSI)}}},
		},
		{name: "object", spec: objectMetric("requests", "100"),
			set: func(m *fakeMetrics) {
				m.object = map[string]*custommetricsv1beta2.MetricValue{"Service/default/front/requests": ptr.To(customValue("front", "250"))}
			},
			reason: "Service metric requests above target",
			status: autoscalingv2.MetricStatus{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricStatus{
				DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Service", Name: "front"},
				Metric:          autoscalingv2.MetricIdentifier{Name: "requests"}, Current: autoscalingv2.MetricValueStatus{Value: resource.NewMilliQuantity(250000, resource.DecimalSI)}}},
		},
		{name: "external", spec: externalMetric("queue", "10"),
			set: func(m *fakeMetrics) {
				m.external = map[string][]externalmetricsv1beta1.ExternalMetricValue{"queue": {
					{MetricName: "queue", Timestamp: metav1.NewTime(t0), Value: resource.MustParse("30")},
					{MetricName: "queue", Timestamp: metav1.NewTime(t0), Value: resource.MustParse("30")}}}
			},
			reason: "external metric queue(nil) above target",
			status: autoscalingv2.MetricStatus{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricStatus{
				Metric: autoscalingv2.MetricIdentifier{Name: "queue"}, Current: autoscalingv2.MetricValueStatus{AverageValue: resource.NewMilliQuantity(30000, resource.DecimalSI)}}},
		},
		{name: "container resource", spec: autoscalingv2.MetricSpec{Type: autoscalingv2.ContainerResourceMetricSourceType,
			ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: corev1.ResourceCPU, Container: "c",
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](20)}}},
			set: func(m *fakeMetrics) {
				m.pods = []metricsv1beta1.PodMetrics{
					podMetrics("web-0", t0, map[string]int64{"c": 600, "sidecar": 5000}),
					podMetrics("web-1", t0, map[string]int64{"c": 600, "sidecar": 5000})}
			},
			reason: "cpu container resource utilization (percentage of request) above target",
			status: autoscalingv2.MetricStatus{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricStatus{
				Name: corev1.ResourceCPU, Container: "c", Current: autoscalingv2.MetricValueStatus{
					AverageUtilization: ptr.To[int32](60), AverageValue: resource.NewMilliQuantity(600, resource.DecimalSI)}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, hpaFor("web", 1, 10, tc.spec))
			f.target(2)
			sidecar := func(p *corev1.Pod) { p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "sidecar"}) }
			f.pods(pod("web-0", 1000, sidecar), pod("web-1", 1000, sidecar))
			tc.set(f.metrics)
			f.syncOK()
			f.check("scale actions", f.scaleActions(), []string{"get deployments", "update deployments 4"})
			f.check("events", f.events(), []string{"Normal SuccessfulRescale New size: 4; reason: " + tc.reason})
			h := f.hpa("web")
			f.check("current metrics", h.Status.CurrentMetrics, []autoscalingv2.MetricStatus{tc.status})
			f.check("ScalingActive", conditions(h)[1], "ScalingActive True ValidMetricFound: the HPA was able to successfully calculate a replica count from "+tc.reason[:len(tc.reason)-len(" above target")])
		})
	}
}

// Without a custom or external metrics API each type reports upstream's failure; none
// is skipped in silence.
func TestNoCustomMetricsAPI(t *testing.T) {
	noCustom := errors.New("no custom metrics API (custom.metrics.k8s.io) registered")
	noExternal := errors.New("the server could not find the requested resource")
	for _, tc := range []struct {
		name, event, condition string
		spec                   autoscalingv2.MetricSpec
	}{
		{name: "pods", spec: podsMetric("packets", "100"),
			event:     "Warning FailedGetPodsMetric unable to get metric packets: unable to fetch metrics from custom metrics API: " + noCustom.Error(),
			condition: "ScalingActive False FailedGetPodsMetric: the HPA was unable to compute the replica count: unable to get metric packets: unable to fetch metrics from custom metrics API: " + noCustom.Error()},
		{name: "object", spec: objectMetric("requests", "100"),
			// Upstream's words, in upstream's argument order.
			event:     "Warning FailedGetObjectMetric unable to get metric requests: Service on default front/unable to fetch metrics from custom metrics API: " + noCustom.Error(),
			condition: "ScalingActive False FailedGetObjectMetric: the HPA was unable to compute the replica count: unable to get metric requests: Service on default front/unable to fetch metrics from custom metrics API: " + noCustom.Error()},
		{name: "external", spec: externalMetric("queue", "10"),
			event:     "Warning FailedGetExternalMetric unable to get external metric default/queue/nil: unable to fetch metrics from external metrics API: " + noExternal.Error(),
			condition: "ScalingActive False FailedGetExternalMetric: the HPA was unable to compute the replica count: unable to get external metric default/queue/nil: unable to fetch metrics from external metrics API: " + noExternal.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, hpaFor("web", 1, 10, tc.spec))
			f.target(2)
			f.pods(pod("web-0", 1000), pod("web-1", 1000))
			f.metrics.customErr, f.metrics.externErr = noCustom, noExternal
			if err := f.sync("web"); err == nil {
				t.Fatal("no error")
			}
			ev := f.events()
			if len(ev) != 2 {
				t.Fatalf("events %q", ev)
			}
			f.check("event", ev[0], tc.event)
			f.check("conditions", conditions(f.hpa("web")), []string{gotScale, tc.condition})
		})
	}
}

// One metric fails, the other asks for more: the target scales on it and the sync
// reports the failure; the failed metric's status is empty.
func TestPartialMetricsFailure(t *testing.T) {
	f := newFixture(t, hpaFor("web", 1, 10, podsMetric("packets", "100"), cpuUtilization(50)))
	f.target(2)
	f.pods(pod("web-0", 1000), pod("web-1", 1000))
	f.usage(map[string]int64{"web-0": 1000, "web-1": 1000})
	f.metrics.customErr = errors.New("no custom metrics API (custom.metrics.k8s.io) registered")
	err := f.sync("web")
	if err == nil || err.Error() != "invalid metrics (1 invalid out of 2), first error is: failed to get pods metric value: unable to get metric packets: unable to fetch metrics from custom metrics API: no custom metrics API (custom.metrics.k8s.io) registered" {
		t.Fatalf("error %v", err)
	}
	f.check("scale actions", f.scaleActions(), []string{"get deployments", "update deployments 4"})
	h := f.hpa("web")
	f.check("ScalingActive", conditions(h)[1], valid)
	if len(h.Status.CurrentMetrics) != 2 || h.Status.CurrentMetrics[0].Type != "" || h.Status.CurrentMetrics[1].Type != autoscalingv2.ResourceMetricSourceType {
		t.Fatalf("current metrics %+v", h.Status.CurrentMetrics)
	}

	// The same failure while the other metric would scale down: nothing moves and the
	// failed metric's condition is set.
	f.target(4)
	f.usage(map[string]int64{"web-0": 100, "web-1": 100})
	if err := f.sync("web"); err == nil {
		t.Fatal("no error")
	}
	f.check("scale actions on a scale-down", f.scaleActions(), []string{"get deployments"})
	f.check("ScalingActive on a scale-down", conditions(f.hpa("web"))[1],
		"ScalingActive False FailedGetPodsMetric: the HPA was unable to compute the replica count: unable to get metric packets: unable to fetch metrics from custom metrics API: no custom metrics API (custom.metrics.k8s.io) registered")
}
