package podautoscaler

import (
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/utils/ptr"
)

func scalingRules(window *int32, sel autoscalingv2.ScalingPolicySelect, policies ...autoscalingv2.HPAScalingPolicy) *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: window, SelectPolicy: &sel, Policies: policies}
}

func pods(n int32, period int32) autoscalingv2.HPAScalingPolicy {
	return autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PodsScalingPolicy, Value: n, PeriodSeconds: period}
}

func percent(n int32, period int32) autoscalingv2.HPAScalingPolicy {
	return autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PercentScalingPolicy, Value: n, PeriodSeconds: period}
}

// withBehavior gives web's autoscaler a behavior and n pods using each usage
// milli-cores of a 1000m request (against the 50% target).
func withBehavior(t *testing.T, minReplicas, maxReplicas, n int32, usage int64, b *autoscalingv2.HorizontalPodAutoscalerBehavior) *fixture {
	h := hpaFor("web", minReplicas, maxReplicas)
	h.Spec.Behavior = b
	f := newFixture(t, h)
	f.target(n)
	u := map[string]int64{}
	for i := range n {
		name := "web-" + itoa(i)
		f.pods(pod(name, 1000))
		u[name] = usage
	}
	f.usage(u)
	return f
}

func (f *fixture) syncOK() {
	f.t.Helper()
	if err := f.sync("web"); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) limited() string {
	conds := conditions(f.hpa("web"))
	return conds[len(conds)-1]
}

const (
	upLimited   = "ScalingLimited True ScaleUpLimit: the desired replica count is increasing faster than the maximum scale rate"
	downLimited = "ScalingLimited True ScaleDownLimit: the desired replica count is decreasing faster than the maximum scale rate"
)

// One pod per minute: 2 → 3, nothing more within the minute, 4 once the first
// rescale is a minute old.
func TestScaleUpPodsPolicy(t *testing.T) {
	f := withBehavior(t, 1, 10, 2, 1500, &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: scalingRules(ptr.To[int32](0), autoscalingv2.MaxChangePolicySelect, pods(1, 60)),
	})
	f.syncOK()
	f.check("first sync", f.scaleActions(), []string{"get deployments", "update deployments 3"})
	f.check("limited", f.limited(), upLimited)

	f.clock.Step(15 * time.Second)
	f.syncOK()
	f.check("within the minute", f.scaleActions(), []string{"get deployments"})
	f.check("still limited", f.limited(), upLimited)

	f.clock.Step(46 * time.Second)
	f.syncOK()
	f.check("a minute later", f.scaleActions(), []string{"get deployments", "update deployments 4"})
}

// Half the pods per minute at most: 8 → 4 although 1 is asked for.
func TestScaleDownPercentPolicy(t *testing.T) {
	f := withBehavior(t, 1, 10, 8, 50, &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleDown: scalingRules(ptr.To[int32](0), autoscalingv2.MaxChangePolicySelect, percent(50, 60)),
	})
	f.syncOK()
	f.check("scale actions", f.scaleActions(), []string{"get deployments", "update deployments 4"})
	f.check("limited", f.limited(), downLimited)
	f.check("events", f.events(), []string{"Normal SuccessfulRescale New size: 4; reason: All metrics below target"})
}

// selectPolicy picks among the policies: Max the largest change, Min the smallest,
// Disabled none.
func TestSelectPolicy(t *testing.T) {
	for _, tc := range []struct {
		sel  autoscalingv2.ScalingPolicySelect
		want []string
	}{
		{autoscalingv2.MaxChangePolicySelect, []string{"get deployments", "update deployments 6"}}, // 2+4 beats 2x2
		{autoscalingv2.MinChangePolicySelect, []string{"get deployments", "update deployments 4"}},
		{autoscalingv2.DisabledPolicySelect, []string{"get deployments"}},
	} {
		t.Run(string(tc.sel), func(t *testing.T) {
			f := withBehavior(t, 1, 50, 2, 5000, &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp: scalingRules(ptr.To[int32](0), tc.sel, pods(4, 15), percent(100, 15)),
			})
			f.syncOK()
			f.check("scale actions", f.scaleActions(), tc.want)
			f.check("limited", f.limited(), upLimited)
		})
	}
}

// A scale-up stabilization window takes the lowest recommendation of the window.
func TestScaleUpStabilization(t *testing.T) {
	f := withBehavior(t, 1, 10, 2, 1000, &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: scalingRules(ptr.To[int32](60), autoscalingv2.MaxChangePolicySelect, percent(100, 15)),
	})
	f.syncOK()
	f.check("first sync", f.scaleActions(), []string{"get deployments"})
	conds := conditions(f.hpa("web"))
	f.check("AbleToScale", conds[0], "AbleToScale True ScaleUpStabilized: recent recommendations were lower than current one, applying the lowest recent recommendation")
	f.clock.Step(61 * time.Second)
	f.syncOK()
	f.check("after the window", f.scaleActions(), []string{"get deployments", "update deployments 4"})
}

// A scale-down below minReplicas stops at it.
func TestTooFewReplicas(t *testing.T) {
	f := withBehavior(t, 2, 10, 3, 50, &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleDown: scalingRules(ptr.To[int32](0), autoscalingv2.MaxChangePolicySelect, percent(100, 15)),
	})
	f.syncOK()
	f.check("scale actions", f.scaleActions(), []string{"get deployments", "update deployments 2"})
	f.check("limited", f.limited(), "ScalingLimited True TooFewReplicas: the desired replica count is less than the minimum replica count")
}

// A behavior whose scale-down rules name no window gets the controller's (5 minutes),
// and missing rules get upstream's defaults.
func TestBehaviorDefaults(t *testing.T) {
	f := withBehavior(t, 1, 10, 4, 50, &autoscalingv2.HorizontalPodAutoscalerBehavior{})
	f.syncOK()
	f.check("stabilized", f.scaleActions(), []string{"get deployments"})
	f.clock.Step(301 * time.Second)
	f.usage(map[string]int64{"web-0": 50, "web-1": 50, "web-2": 50, "web-3": 50})
	f.syncOK()
	f.check("after the window: 100% per 15 s allows 4 → 1", f.scaleActions(), []string{"get deployments", "update deployments 1"})
}
