package podautoscaler

import (
	"errors"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

const (
	cpuMetric = "cpu resource utilization (percentage of request)"
	valid     = "ScalingActive True ValidMetricFound: the HPA was able to successfully calculate a replica count from " + cpuMetric
	gotScale  = "AbleToScale True SucceededGetScale: the HPA controller was able to get the target's current scale"
	ready     = "AbleToScale True ReadyForNewScale: recommended size matches current size"
	inRange   = "ScalingLimited False DesiredWithinRange: the desired count is within the acceptable range"
)

// Three pods at 90% of their CPU request against a 50% target: 1.8 x 3 = 6 replicas,
// the scale is written, the status says why, and the event is upstream's.
func TestScaleUpOnCPU(t *testing.T) {
	f := newFixture(t, hpaFor("web", 1, 10))
	f.target(3)
	f.pods(pod("web-0", 1000), pod("web-1", 1000), pod("web-2", 1000))
	f.usage(map[string]int64{"web-0": 900, "web-1": 900, "web-2": 900})
	if err := f.sync("web"); err != nil {
		t.Fatal(err)
	}
	f.check("scale actions", f.scaleActions(), []string{"get deployments", "update deployments 6"})
	f.check("client actions", f.kubeActions(), []string{"update horizontalpodautoscalers/status"})
	f.check("events", f.events(), []string{"Normal SuccessfulRescale New size: 6; reason: " + cpuMetric + " above target"})
	h := f.hpa("web")
	f.check("conditions", conditions(h), []string{
		"AbleToScale True SucceededRescale: the HPA controller was able to update the target scale to 6",
		valid, inRange,
	})
	for _, c := range h.Status.Conditions {
		if !c.LastTransitionTime.Time.Equal(t0) {
			t.Errorf("%s moved at %v, want %v", c.Type, c.LastTransitionTime, t0)
		}
	}
	f.check("replicas", []int32{h.Status.CurrentReplicas, h.Status.DesiredReplicas}, []int32{3, 6})
	if h.Status.LastScaleTime == nil || !h.Status.LastScaleTime.Time.Equal(t0) {
		t.Fatalf("lastScaleTime %v", h.Status.LastScaleTime)
	}
	f.check("current metrics", h.Status.CurrentMetrics, []autoscalingv2.MetricStatus{{
		Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{
			AverageUtilization: ptr.To[int32](90), AverageValue: resource.NewMilliQuantity(900, resource.DecimalSI)}},
	}})
	if h.Status.ObservedGeneration != nil {
		t.Errorf("observedGeneration %d: upstream's controller writes none", *h.Status.ObservedGeneration)
	}

	// The next sync, before the new pods exist: the three pods still ask for 1.8 x 3
	// (the ready pods count, not the replicas), so 6 stays.
	f.target(6)
	f.clock.Step(15 * time.Second)
	if err := f.sync("web"); err != nil {
		t.Fatal(err)
	}
	f.check("scale actions of the second sync", f.scaleActions(), []string{"get deployments"})
	f.check("replicas after the second sync", []int32{f.hpa("web").Status.CurrentReplicas, f.hpa("web").Status.DesiredReplicas}, []int32{6, 6})
}

// Within the tolerance (10%) nothing changes: no scale update, no event, and the
// status says the size matches.
func TestTolerance(t *testing.T) {
	f := newFixture(t, hpaFor("web", 1, 10))
	f.target(2)
	f.pods(pod("web-0", 1000), pod("web-1", 1000))
	f.usage(map[string]int64{"web-0": 520, "web-1": 530}) // 52%: ratio 1.04
	if err := f.sync("web"); err != nil {
		t.Fatal(err)
	}
	f.check("scale actions", f.scaleActions(), []string{"get deployments"})
	f.check("events", f.events(), []string(nil))
	h := f.hpa("web")
	f.check("conditions", conditions(h), []string{ready, valid, inRange})
	f.check("replicas", []int32{h.Status.CurrentReplicas, h.Status.DesiredReplicas}, []int32{2, 2})
	if h.Status.LastScaleTime != nil {
		t.Fatalf("lastScaleTime %v without a rescale", h.Status.LastScaleTime)
	}
	// A sync that changes nothing writes nothing.
	if err := f.sync("web"); err != nil {
		t.Fatal(err)
	}
	f.check("client actions of an idle sync", f.kubeActions(), []string(nil))
}

// Without a behavior a scale-down waits for the 5-minute stabilization window: the
// highest recommendation of the window (the replicas first seen) wins until it ages out.
func TestScaleDownStabilization(t *testing.T) {
	f := newFixture(t, hpaFor("web", 1, 10))
	f.target(4)
	f.pods(pod("web-0", 1000), pod("web-1", 1000), pod("web-2", 1000), pod("web-3", 1000))
	low := map[string]int64{"web-0": 100, "web-1": 100, "web-2": 100, "web-3": 100} // 10%: 0.2 x 4 → 1
	f.usage(low)
	if err := f.sync("web"); err != nil {
		t.Fatal(err)
	}
	f.check("scale actions", f.scaleActions(), []string{"get deployments"})
	stabilized := "AbleToScale True ScaleDownStabilized: recent recommendations were higher than current one, applying the highest recent recommendation"
	f.check("conditions", conditions(f.hpa("web")), []string{stabilized, valid, inRange})

	f.clock.Step(4 * time.Minute)
	f.usage(low)
	if err := f.sync("web"); err != nil {
		t.Fatal(err)
	}
	f.check("scale actions after 4 minutes", f.scaleActions(), []string{"get deployments"})

	// 5 minutes after the first sync its recommendation (4) is out of the window; the
	// one of 4 minutes ago (1) is not, and is as low.
	f.clock.Step(61 * time.Second)
	f.usage(low)
	if err := f.sync("web"); err != nil {
		t.Fatal(err)
	}
	f.check("scale actions after 5 minutes", f.scaleActions(), []string{"get deployments", "update deployments 1"})
	f.check("events", f.events(), []string{"Normal SuccessfulRescale New size: 1; reason: All metrics below target"})
	h := f.hpa("web")
	f.check("conditions after the scale-down", conditions(h), []string{
		"AbleToScale True SucceededRescale: the HPA controller was able to update the target scale to 1", valid, inRange})
	if !h.Status.Conditions[0].LastTransitionTime.Time.Equal(t0) {
		t.Errorf("AbleToScale stayed True, its transition time moved to %v", h.Status.Conditions[0].LastTransitionTime)
	}
}

// A replica count outside [minReplicas, maxReplicas] is brought back without
// looking at metrics.
func TestOutsideLimits(t *testing.T) {
	for _, tc := range []struct {
		name          string
		current, want int32
		reason        string
	}{
		{"above", 12, 10, "Current number of replicas above Spec.MaxReplicas"},
		{"below", 1, 2, "Current number of replicas below Spec.MinReplicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, hpaFor("web", 2, 10))
			f.target(tc.current)
			f.metrics.podsErr = errors.New("must not be asked")
			if err := f.sync("web"); err != nil {
				t.Fatal(err)
			}
			f.check("scale actions", f.scaleActions(), []string{"get deployments", "update deployments " + itoa(tc.want)})
			f.check("events", f.events(), []string{"Normal SuccessfulRescale New size: " + itoa(tc.want) + "; reason: " + tc.reason})
			h := f.hpa("web")
			f.check("conditions", conditions(h), []string{"AbleToScale True SucceededRescale: the HPA controller was able to update the target scale to " + itoa(tc.want)})
			f.check("replicas", []int32{h.Status.CurrentReplicas, h.Status.DesiredReplicas}, []int32{tc.current, tc.want})
		})
	}
}

// The metrics' proposal is limited by maxReplicas, minReplicas and (without a
// behavior) the scale-up limit of max(2 x current, 4).
func TestScalingLimited(t *testing.T) {
	for _, tc := range []struct {
		name     string
		min, max int32
		current  int32
		usage    int64 // each pod's, of a 1000m request, against 50%
		want     int32
		limited  string
	}{
		{name: "scale-up limit", min: 1, max: 20, current: 2, usage: 2000, want: 4, // 400%: 8 asked, 2 x 2 allowed
			limited: "ScalingLimited True ScaleUpLimit: the desired replica count is increasing faster than the maximum scale rate"},
		{name: "too many", min: 1, max: 5, current: 4, usage: 1000, want: 5,
			limited: "ScalingLimited True TooManyReplicas: the desired replica count is more than the maximum replica count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, hpaFor("web", tc.min, tc.max))
			f.target(tc.current)
			u := map[string]int64{}
			for i := range tc.current {
				name := "web-" + itoa(i)
				f.pods(pod(name, 1000))
				u[name] = tc.usage
			}
			f.usage(u)
			if err := f.sync("web"); err != nil {
				t.Fatal(err)
			}
			f.check("scale actions", f.scaleActions(), []string{"get deployments", "update deployments " + itoa(tc.want)})
			conds := conditions(f.hpa("web"))
			f.check("ScalingLimited", conds[len(conds)-1], tc.limited)
		})
	}
}

// A target scaled to zero by hand is left alone: ScalingActive False ScalingDisabled.
func TestScaledToZero(t *testing.T) {
	f := newFixture(t, hpaFor("web", 1, 10))
	f.target(0)
	f.metrics.podsErr = errors.New("must not be asked")
	if err := f.sync("web"); err != nil {
		t.Fatal(err)
	}
	f.check("scale actions", f.scaleActions(), []string{"get deployments"})
	h := f.hpa("web")
	f.check("conditions", conditions(h), []string{gotScale,
		"ScalingActive False ScalingDisabled: scaling is disabled since the replica count of the target is zero"})
	f.check("replicas", []int32{h.Status.CurrentReplicas, h.Status.DesiredReplicas}, []int32{0, 0})
	f.check("events", f.events(), []string(nil))
}

// A container without a CPU request makes utilization meaningless: upstream's
// FailedGetResourceMetric condition and events, and the replicas are kept.
func TestMissingRequests(t *testing.T) {
	f := newFixture(t, hpaFor("web", 1, 10))
	f.target(2)
	f.pods(pod("web-0", 1000), pod("web-1", 0))
	f.usage(map[string]int64{"web-0": 900, "web-1": 900})
	err := f.sync("web")
	msg := "failed to get cpu utilization: missing request for cpu in container c of Pod web-1"
	if err == nil || err.Error() != "failed to compute desired number of replicas based on listed metrics for Deployment/default/web: invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: "+msg {
		t.Fatalf("error %v", err)
	}
	f.check("scale actions", f.scaleActions(), []string{"get deployments"})
	f.check("events", f.events(), []string{
		"Warning FailedGetResourceMetric " + msg,
		"Warning FailedComputeMetricsReplicas invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: " + msg,
	})
	h := f.hpa("web")
	f.check("conditions", conditions(h), []string{gotScale, "ScalingActive False FailedGetResourceMetric: the HPA was unable to compute the replica count: " + msg})
	f.check("replicas", []int32{h.Status.CurrentReplicas, h.Status.DesiredReplicas}, []int32{2, 0})
	// Upstream keeps an empty status in the failed metric's place.
	f.check("current metrics", h.Status.CurrentMetrics, []autoscalingv2.MetricStatus{{}})
}

// Without the resource metrics API the condition carries the API's error.
func TestNoResourceMetricsAPI(t *testing.T) {
	f := newFixture(t, hpaFor("web", 1, 10))
	f.target(2)
	f.pods(pod("web-0", 1000), pod("web-1", 1000))
	f.metrics.podsErr = errors.New("the server could not find the requested resource (get pods.metrics.k8s.io)")
	if err := f.sync("web"); err == nil {
		t.Fatal("no error")
	}
	h := f.hpa("web")
	f.check("conditions", conditions(h), []string{gotScale,
		"ScalingActive False FailedGetResourceMetric: the HPA was unable to compute the replica count: failed to get cpu utilization: unable to get metrics for resource cpu: unable to fetch metrics from resource metrics API: the server could not find the requested resource (get pods.metrics.k8s.io)"})
}

// The target's scale cannot be read: FailedGetScale everywhere.
func TestFailedGetScale(t *testing.T) {
	f := newFixture(t, hpaFor("web", 1, 10))
	err := f.sync("web")
	if err == nil || err.Error() != `failed to query scale subresource for Deployment/default/web: deployments.apps "web" not found` {
		t.Fatalf("error %v", err)
	}
	f.check("events", f.events(), []string{`Warning FailedGetScale deployments.apps "web" not found`})
	f.check("conditions", conditions(f.hpa("web")), []string{
		`AbleToScale False FailedGetScale: the HPA controller was unable to get the target's current scale: deployments.apps "web" not found`})

	// A kind the mapper does not know.
	h := hpaFor("other", 1, 10)
	h.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "w"}
	f.putHPA(h)
	if err := f.sync("other"); err == nil {
		t.Fatal("no error for an unknown kind")
	}
	f.check("conditions of an unknown kind", conditions(f.hpa("other")), []string{
		`AbleToScale False FailedGetScale: the HPA controller was unable to get the target's current scale: no matches for kind "Widget" in group "example.com"`})
}

// A scale update that fails: FailedRescale, AbleToScale False FailedUpdateScale.
func TestFailedRescale(t *testing.T) {
	f := newFixture(t, hpaFor("web", 1, 10))
	f.target(1)
	f.pods(pod("web-0", 1000))
	f.usage(map[string]int64{"web-0": 1000})
	f.scales.PrependReactor("update", "deployments", func(a core.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("conflict")
	})
	if err := f.sync("web"); err == nil || err.Error() != "failed to rescale Deployment/default/web: conflict" {
		t.Fatalf("error %v", err)
	}
	f.check("events", f.events(), []string{"Warning FailedRescale New size: 2; reason: " + cpuMetric + " above target; error: conflict"})
	h := f.hpa("web")
	f.check("conditions", conditions(h), []string{
		"AbleToScale False FailedUpdateScale: the HPA controller was unable to update the target scale: conflict", valid, inRange})
	f.check("replicas", []int32{h.Status.CurrentReplicas, h.Status.DesiredReplicas}, []int32{1, 0})
}

// Two autoscalers whose targets select the same pods: neither scales.
func TestAmbiguousSelector(t *testing.T) {
	f := newFixture(t, hpaFor("a", 1, 10), hpaFor("b", 1, 10))
	f.target(1)
	f.pods(pod("web-0", 1000))
	f.usage(map[string]int64{"web-0": 1000})
	if err := f.sync("a"); err != nil {
		t.Fatal(err) // b's selector is not known yet
	}
	f.events()
	if err := f.sync("b"); err == nil {
		t.Fatal("no error")
	}
	msg := "pods by selector app=web are controlled by multiple HPAs: [default/a default/b]"
	f.check("events", f.events(), []string{"Warning AmbiguousSelector " + msg,
		"Warning FailedComputeMetricsReplicas " + msg})
	f.check("conditions", conditions(f.hpa("b")), []string{gotScale, "ScalingActive False AmbiguousSelector: " + msg})
}

// A deleted autoscaler is forgotten and not queued again.
func TestDeleted(t *testing.T) {
	f := newFixture(t)
	f.c.recordInitial(ns+"/gone", 3)
	if err := f.sync("gone"); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.c.histories[ns+"/gone"]; ok {
		t.Fatal("history kept")
	}
	if n := f.c.queue.Len(); n != 0 {
		t.Fatalf("queue holds %d", n)
	}
}

func itoa(i int32) string { return resource.NewQuantity(int64(i), resource.DecimalSI).String() }
