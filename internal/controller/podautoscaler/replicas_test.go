package podautoscaler

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

var webSelector = labels.SelectorFromSet(labels.Set{"app": "web"})

func notReady(since time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Conditions[0].Status = corev1.ConditionFalse
		p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(since)
	}
}

func startedAt(at time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.StartTime = ptr.To(metav1.NewTime(at))
		p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(at.Add(5 * time.Second))
	}
}

func phase(ph corev1.PodPhase) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Status.Phase = ph } }

func deleting(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }

// The replica calculation of a CPU utilization target against upstream's rules for
// unready, missing, pending, deleted and failed pods.
func TestResourceUtilizationReplicas(t *testing.T) {
	for _, tc := range []struct {
		name        string
		current     int32
		target      int32
		pods        []*corev1.Pod
		usage       map[string]int64
		want        int32
		utilization int32
	}{
		{name: "all ready, up", current: 3, target: 50,
			pods:  []*corev1.Pod{pod("a", 1000), pod("b", 1000), pod("c", 1000)},
			usage: map[string]int64{"a": 900, "b": 900, "c": 900}, want: 6, utilization: 90},
		{name: "all ready, down", current: 4, target: 50,
			pods:  []*corev1.Pod{pod("a", 1000), pod("b", 1000), pod("c", 1000), pod("d", 1000)},
			usage: map[string]int64{"a": 100, "b": 100, "c": 100, "d": 100}, want: 1, utilization: 10},
		{name: "within tolerance", current: 2, target: 50,
			pods:  []*corev1.Pod{pod("a", 1000), pod("b", 1000)},
			usage: map[string]int64{"a": 540, "b": 540}, want: 2, utilization: 54},
		// An unready pod's sample is set aside: the two ready pods are on target.
		{name: "unready pod's high sample ignored", current: 3, target: 100,
			pods:  []*corev1.Pod{pod("a", 1000), pod("b", 1000), pod("c", 1000, startedAt(t0.Add(-time.Minute)), notReady(t0.Add(-time.Minute)))},
			usage: map[string]int64{"a": 1000, "b": 1000, "c": 3000}, want: 3, utilization: 100},
		// On a scale-up an unready pod counts as using nothing: (2000+2000+0)/3000 =
		// 133% → ceil(1.33 x 3) = 4 (6 if its sample counted).
		{name: "unready counts as zero on scale-up", current: 3, target: 100,
			pods:  []*corev1.Pod{pod("a", 1000), pod("b", 1000), pod("c", 1000, startedAt(t0.Add(-time.Minute)), notReady(t0.Add(-time.Minute)))},
			usage: map[string]int64{"a": 2000, "b": 2000, "c": 3000}, want: 4, utilization: 200},
		// Pending pods are unready whatever the resource.
		{name: "pending counts as zero on scale-up", current: 3, target: 100,
			pods:  []*corev1.Pod{pod("a", 1000), pod("b", 1000), pod("c", 1000, phase(corev1.PodPending))},
			usage: map[string]int64{"a": 2000, "b": 2000}, want: 4, utilization: 200},
		// On a scale-down a pod without a sample counts as using all it requests:
		// (100 x 3 + 1000)/4000 = 32% → ceil(0.64 x 4) = 3 (1 if left out).
		{name: "missing counts as 100% on scale-down", current: 4, target: 50,
			pods:  []*corev1.Pod{pod("a", 1000), pod("b", 1000), pod("c", 1000), pod("d", 1000)},
			usage: map[string]int64{"a": 100, "b": 100, "c": 100}, want: 3, utilization: 10},
		// ...or the target, when it is above 100%: (100 x 3 + 1500)/4000 = 45% →
		// 0.3 → ceil(0.3 x 4) = 2.
		{name: "missing counts as the target above 100%", current: 4, target: 150,
			pods:  []*corev1.Pod{pod("a", 1000), pod("b", 1000), pod("c", 1000), pod("d", 1000)},
			usage: map[string]int64{"a": 100, "b": 100, "c": 100}, want: 2, utilization: 10},
		// On a scale-up as using nothing: (2000 x 2 + 0)/3000 = 133% → 4.
		{name: "missing counts as zero on scale-up", current: 3, target: 100,
			pods:  []*corev1.Pod{pod("a", 1000), pod("b", 1000), pod("c", 1000)},
			usage: map[string]int64{"a": 2000, "b": 2000}, want: 4, utilization: 200},
		// Filling in the missing pod turns the direction around: keep.
		{name: "fill-in reverses the direction", current: 3, target: 100,
			pods:  []*corev1.Pod{pod("a", 1000), pod("b", 1000), pod("c", 1000)},
			usage: map[string]int64{"a": 1200, "b": 1200}, want: 3, utilization: 120},
		// Deleted and failed pods are ignored, their samples too (counted, the four
		// would be on target and 3 would stay).
		{name: "deleted and failed ignored", current: 3, target: 50,
			pods: []*corev1.Pod{pod("a", 1000), pod("b", 1000), pod("c", 1000, deleting),
				pod("d", 1000, phase(corev1.PodFailed))},
			usage: map[string]int64{"a": 1000, "b": 1000, "c": 10, "d": 10}, want: 4, utilization: 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.pods(tc.pods...)
			f.usage(tc.usage)
			got, utilization, _, _, err := f.c.resourceUtilizationReplicas(context.Background(), tc.current, tc.target, corev1.ResourceCPU, ns, webSelector, "")
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || utilization != tc.utilization {
				t.Fatalf("got %d replicas at %d%%, want %d at %d%%", got, utilization, tc.want, tc.utilization)
			}
		})
	}
}

// Which CPU samples are set aside by readiness (5-minute initialization period, 30 s
// initial readiness delay).
func TestCPUUnready(t *testing.T) {
	sample := podSample{timestamp: t0, window: 30 * time.Second}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"ready long ago", pod("p", 1), false},
		{"no start time", pod("p", 1, func(p *corev1.Pod) { p.Status.StartTime = nil }), true},
		{"no ready condition", pod("p", 1, func(p *corev1.Pod) { p.Status.Conditions = nil }), true},
		{"starting, not ready", pod("p", 1, startedAt(t0.Add(-time.Minute)), notReady(t0.Add(-time.Minute))), true},
		{"starting, ready for a whole window", pod("p", 1, startedAt(t0.Add(-2*time.Minute))), false},
		{"starting, ready less than a window ago", pod("p", 1, startedAt(t0.Add(-2*time.Minute)),
			func(p *corev1.Pod) {
				p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(-10 * time.Second))
			}), true},
		{"after initialization, never ready", pod("p", 1, notReady(t0.Add(-10*time.Minute+10*time.Second))), true},
		{"after initialization, was ready", pod("p", 1, notReady(t0.Add(-time.Minute))), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if got := f.c.cpuUnready(tc.pod, sample, t0); got != tc.want {
				t.Fatalf("unready %v, want %v", got, tc.want)
			}
		})
	}
}

// Memory samples are never judged by readiness (only CPU is).
func TestMemoryIgnoresReadiness(t *testing.T) {
	f := newFixture(t)
	p := pod("p", 1, startedAt(t0.Add(-time.Minute)), notReady(t0.Add(-time.Minute)))
	g := f.c.groupPods([]*corev1.Pod{p}, podSamples{"p": {}}, corev1.ResourceMemory)
	if g.ready != 1 || len(g.unready) != 0 {
		t.Fatalf("groups %+v", g)
	}
}

// The plain (AverageValue) calculation fills a missing pod with the target on a
// scale-down.
func TestPlainReplicasMissing(t *testing.T) {
	f := newFixture(t)
	f.pods(pod("a", 1000), pod("b", 1000), pod("c", 1000), pod("d", 1000))
	// 100m each of 3 against 500m: with d at 500m, (300+500)/4 = 200m → 0.4 → ceil(1.6) = 2.
	got, avg, err := f.c.plainReplicas(podSamples{"a": {value: 100}, "b": {value: 100}, "c": {value: 100}}, 4, 500, ns, webSelector, "")
	if err != nil {
		t.Fatal(err)
	}
	if got != 2 || avg != 100 {
		t.Fatalf("got %d replicas at %d, want 2 at 100", got, avg)
	}
}
