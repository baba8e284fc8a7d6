package podautoscaler

import (
	"context"
	"fmt"
	"math"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// podGroups sorts the pods of a target for one metric: ready pods are counted; unready
// pods (pending, or for CPU not ready or still starting) count as using nothing when
// the target scales up and not at all otherwise; pods without a sample (missing)
// count, per direction, as using the target or nothing; deleted and failed pods are
// ignored.
type podGroups struct {
	ready                    int
	unready, missing, ignore map[string]bool
}

// groupPods sorts pods against samples of resource ("" for a metric that is no
// resource, whose pods are never judged by readiness).
func (c *Controller) groupPods(pods []*corev1.Pod, samples podSamples, resource corev1.ResourceName) podGroups {
	g := podGroups{unready: map[string]bool{}, missing: map[string]bool{}, ignore: map[string]bool{}}
	now := c.clock.Now()
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed {
			g.ignore[pod.Name] = true
			continue
		}
		if pod.Status.Phase == corev1.PodPending {
			g.unready[pod.Name] = true
			continue
		}
		sample, ok := samples[pod.Name]
		if !ok {
			g.missing[pod.Name] = true
			continue
		}
		if resource == corev1.ResourceCPU && c.cpuUnready(pod, sample, now) {
			g.unready[pod.Name] = true
			continue
		}
		g.ready++
	}
	return g
}

// cpuUnready says whether a pod's CPU sample is to be set aside: a pod without a Ready
// condition or start time; within the CPU initialization period, a pod that is not
// ready or whose sample does not yet cover a whole window since its readiness last
// changed; after it, a pod that is not ready and has never been (its readiness last
// changed within the initial readiness delay of its start).
func (c *Controller) cpuUnready(pod *corev1.Pod, sample podSample, now time.Time) bool {
	ready := podReadyCondition(pod)
	if ready == nil || pod.Status.StartTime == nil {
		return true
	}
	start := pod.Status.StartTime.Time
	if start.Add(c.cpuInitializationPeriod).After(now) {
		return ready.Status == corev1.ConditionFalse || sample.timestamp.Before(ready.LastTransitionTime.Add(sample.window))
	}
	return ready.Status == corev1.ConditionFalse && start.Add(c.initialReadinessDelay).After(ready.LastTransitionTime.Time)
}

func podReadyCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// podRequests adds up, per pod, the requests of resource of its containers (and its
// restartable init containers), or of the one container named. A container that
// requests none makes utilization meaningless: that is an error.
func podRequests(pods []*corev1.Pod, container string, resource corev1.ResourceName) (map[string]int64, error) {
	out := make(map[string]int64, len(pods))
	for _, pod := range pods {
		containers := append([]corev1.Container{}, pod.Spec.Containers...)
		for _, ic := range pod.Spec.InitContainers {
			if ic.RestartPolicy != nil && *ic.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				containers = append(containers, ic)
			}
		}
		var sum int64
		for _, ct := range containers {
			if container != "" && ct.Name != container {
				continue
			}
			q, ok := ct.Resources.Requests[resource]
			if !ok {
				return nil, fmt.Errorf("missing request for %s in container %s of Pod %s", resource, ct.Name, pod.Name)
			}
			sum += q.MilliValue()
		}
		out[pod.Name] = sum
	}
	return out, nil
}

// utilizationRatio is the samples' usage over their pods' requests, against target:
// the ratio to the target, the utilization in percent and the average raw usage.
// Samples of pods without a request (not in the pod list) are left out.
func utilizationRatio(samples podSamples, requests map[string]int64, target int32) (float64, int32, int64, error) {
	var used, requested int64
	n := 0
	for name, s := range samples {
		r, ok := requests[name]
		if !ok {
			continue
		}
		used += s.value
		requested += r
		n++
	}
	if requested == 0 {
		return 0, 0, 0, fmt.Errorf("no metrics returned matched known pods")
	}
	utilization := int32(used * 100 / requested)
	return float64(utilization) / float64(target), utilization, used / int64(n), nil
}

// usageRatio is the samples' average against target: the ratio and the average.
func usageRatio(samples podSamples, target int64) (float64, int64) {
	var total int64
	for _, s := range samples {
		total += s.value
	}
	avg := total / int64(len(samples))
	return float64(avg) / float64(target), avg
}

func (c *Controller) listPods(namespace string, selector labels.Selector) ([]*corev1.Pod, error) {
	pods, err := c.podLister.Pods(namespace).List(selector)
	if err != nil {
		return nil, fmt.Errorf("unable to get pods while calculating replica count: %v", err)
	}
	if len(pods) == 0 {
		return nil, fmt.Errorf("no pods returned by selector while calculating replica count")
	}
	return pods, nil
}

// withinTolerance says whether ratio is too close to 1 to act on.
func (c *Controller) withinTolerance(ratio float64) bool { return math.Abs(1.0-ratio) <= c.tolerance }

// settle finishes a per-pod calculation once the first ratio is known: without unready
// pods on a scale-up and without missing pods, the ready pods scale by the ratio. Else
// the missing and unready pods get fill-in samples (fillDown for missing pods on a
// scale-down, nothing on a scale-up; unready pods nothing on a scale-up), the ratio is
// taken again, and the replicas stay as they are if the new ratio is within tolerance
// or turned the direction around (or the pod count would).
func (c *Controller) settle(current int32, ratio float64, g podGroups, samples podSamples, fillDown func(pod string) int64, again func() (float64, error)) (int32, error) {
	upWithUnready := len(g.unready) > 0 && ratio > 1.0
	if !upWithUnready && len(g.missing) == 0 {
		if c.withinTolerance(ratio) {
			return current, nil
		}
		return int32(math.Ceil(ratio * float64(g.ready))), nil
	}
	if len(g.missing) > 0 {
		switch {
		case ratio < 1.0:
			for pod := range g.missing {
				samples[pod] = podSample{value: fillDown(pod)}
			}
		case ratio > 1.0:
			for pod := range g.missing {
				samples[pod] = podSample{}
			}
		}
	}
	if upWithUnready {
		for pod := range g.unready {
			samples[pod] = podSample{}
		}
	}
	newRatio, err := again()
	if err != nil {
		return 0, err
	}
	if c.withinTolerance(newRatio) || (ratio < 1.0 && newRatio > 1.0) || (ratio > 1.0 && newRatio < 1.0) {
		return current, nil
	}
	replicas := int32(math.Ceil(newRatio * float64(len(samples))))
	if (newRatio < 1.0 && replicas > current) || (newRatio > 1.0 && replicas < current) {
		return current, nil
	}
	return replicas, nil
}

// dropPods removes the samples of the ignored and unready pods.
func dropPods(samples podSamples, g podGroups) {
	for pod := range g.ignore {
		delete(samples, pod)
	}
	for pod := range g.unready {
		delete(samples, pod)
	}
}

// resourceUtilizationReplicas is the replica count that brings the pods' utilization
// of resource (percent of their requests) to target; also the utilization now, the
// average raw usage and the samples' time.
func (c *Controller) resourceUtilizationReplicas(ctx context.Context, current, target int32, resource corev1.ResourceName, namespace string, selector labels.Selector, container string) (int32, int32, int64, time.Time, error) {
	samples, ts, err := c.resourceSamples(ctx, resource, namespace, selector, container)
	if err != nil {
		return 0, 0, 0, time.Time{}, fmt.Errorf("unable to get metrics for resource %s: %v", resource, err)
	}
	pods, err := c.listPods(namespace, selector)
	if err != nil {
		return 0, 0, 0, time.Time{}, err
	}
	g := c.groupPods(pods, samples, resource)
	dropPods(samples, g)
	if len(samples) == 0 {
		return 0, 0, 0, time.Time{}, fmt.Errorf("did not receive metrics for targeted pods (pods might be unready)")
	}
	requests, err := podRequests(pods, container, resource)
	if err != nil {
		return 0, 0, 0, time.Time{}, err
	}
	ratio, utilization, raw, err := utilizationRatio(samples, requests, target)
	if err != nil {
		return 0, 0, 0, time.Time{}, err
	}
	// A missing pod on a scale-down is taken to use all it requests, or the target
	// when that is above 100%.
	fill := int64(max(100, target))
	replicas, err := c.settle(current, ratio, g, samples,
		func(pod string) int64 { return requests[pod] * fill / 100 },
		func() (float64, error) {
			r, _, _, err := utilizationRatio(samples, requests, target)
			return r, err
		})
	if err != nil {
		return 0, utilization, raw, time.Time{}, err
	}
	return replicas, utilization, raw, ts, nil
}

// plainReplicas is the replica count that brings the pods' average of a metric
// (resource "" when it is not a resource) to target (milli-units); also the average
// now.
func (c *Controller) plainReplicas(samples podSamples, current int32, target int64, namespace string, selector labels.Selector, resource corev1.ResourceName) (int32, int64, error) {
	pods, err := c.listPods(namespace, selector)
	if err != nil {
		return 0, 0, err
	}
	g := c.groupPods(pods, samples, resource)
	dropPods(samples, g)
	if len(samples) == 0 {
		return 0, 0, fmt.Errorf("did not receive metrics for targeted pods (pods might be unready)")
	}
	ratio, avg := usageRatio(samples, target)
	replicas, err := c.settle(current, ratio, g, samples,
		func(string) int64 { return target },
		func() (float64, error) {
			r, _ := usageRatio(samples, target)
			return r, nil
		})
	return replicas, avg, err
}

// resourceValueReplicas is plainReplicas over a resource's usage (an AverageValue target).
func (c *Controller) resourceValueReplicas(ctx context.Context, current int32, target int64, resource corev1.ResourceName, namespace string, selector labels.Selector, container string) (int32, int64, time.Time, error) {
	samples, ts, err := c.resourceSamples(ctx, resource, namespace, selector, container)
	if err != nil {
		return 0, 0, time.Time{}, fmt.Errorf("unable to get metrics for resource %s: %v", resource, err)
	}
	replicas, avg, err := c.plainReplicas(samples, current, target, namespace, selector, resource)
	return replicas, avg, ts, err
}

// podsMetricReplicas is plainReplicas over a custom metric of the pods.
func (c *Controller) podsMetricReplicas(ctx context.Context, current int32, target int64, metric, namespace string, selector, metricSelector labels.Selector) (int32, int64, time.Time, error) {
	samples, ts, err := c.podsMetricSamples(ctx, metric, namespace, selector, metricSelector)
	if err != nil {
		return 0, 0, time.Time{}, fmt.Errorf("unable to get metric %s: %v", metric, err)
	}
	replicas, avg, err := c.plainReplicas(samples, current, target, namespace, selector, "")
	return replicas, avg, ts, err
}

// ratioReplicas scales the ready pods by ratio, unless it is within tolerance; a
// target at zero replicas goes to ceil(ratio) (scaling from zero). The time is zero:
// upstream reports none for these metrics.
func (c *Controller) ratioReplicas(current int32, ratio float64, namespace string, selector labels.Selector) (int32, error) {
	if current == 0 {
		return int32(math.Ceil(ratio)), nil
	}
	if c.withinTolerance(ratio) {
		return current, nil
	}
	pods, err := c.listPods(namespace, selector)
	if err != nil {
		return 0, fmt.Errorf("unable to calculate ready pods: %s", err)
	}
	ready := 0
	for _, pod := range pods {
		if pod.Status.Phase == corev1.PodRunning && isReady(pod) {
			ready++
		}
	}
	return int32(math.Ceil(ratio * float64(ready))), nil
}

func isReady(pod *corev1.Pod) bool {
	c := podReadyCondition(pod)
	return c != nil && c.Status == corev1.ConditionTrue
}

// objectValueReplicas is the replica count for an Object metric with a Value target.
func (c *Controller) objectValueReplicas(ctx context.Context, current int32, target int64, metric, namespace string, ref *autoscalingv2.CrossVersionObjectReference, selector, metricSelector labels.Selector) (int32, int64, error) {
	usage, _, err := c.objectMetric(ctx, metric, namespace, ref, metricSelector)
	if err != nil {
		// Upstream's arguments, in upstream's order (the error comes last).
		return 0, 0, fmt.Errorf("unable to get metric %s: %v on %s %s/%s", metric, ref.Kind, namespace, ref.Name, err)
	}
	replicas, err := c.ratioReplicas(current, float64(usage)/float64(target), namespace, selector)
	return replicas, usage, err
}

// perPodReplicas is the replica count that brings a total (an object's or an external
// metric's) to target per replica, from statusReplicas; also the total per replica.
func (c *Controller) perPodReplicas(statusReplicas int32, total, target int64) (int32, int64) {
	replicas := statusReplicas
	if !c.withinTolerance(float64(total) / (float64(target) * float64(statusReplicas))) {
		replicas = int32(math.Ceil(float64(total) / float64(target)))
	}
	return replicas, int64(math.Ceil(float64(total) / float64(statusReplicas)))
}

// objectAverageReplicas is the replica count for an Object metric with an
// AverageValue target.
func (c *Controller) objectAverageReplicas(ctx context.Context, statusReplicas int32, target int64, metric, namespace string, ref *autoscalingv2.CrossVersionObjectReference, metricSelector labels.Selector) (int32, int64, time.Time, error) {
	usage, ts, err := c.objectMetric(ctx, metric, namespace, ref, metricSelector)
	if err != nil {
		return 0, 0, time.Time{}, fmt.Errorf("unable to get metric %s: %v on %s %s/%s", metric, ref.Kind, namespace, ref.Name, err)
	}
	replicas, avg := c.perPodReplicas(statusReplicas, usage, target)
	return replicas, avg, ts, nil
}

// externalTotal reads an external metric and adds up its values.
func (c *Controller) externalTotal(ctx context.Context, metric, namespace string, metricSelector *metav1.LabelSelector) (int64, time.Time, error) {
	sel, err := metav1.LabelSelectorAsSelector(metricSelector)
	if err != nil {
		return 0, time.Time{}, err
	}
	values, ts, err := c.externalMetric(ctx, metric, namespace, sel)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("unable to get external metric %s/%s/%+v: %s", namespace, metric, metricSelector, err)
	}
	var total int64
	for _, v := range values {
		total += v
	}
	return total, ts, nil
}

// externalValueReplicas is the replica count for an External metric with a Value target.
func (c *Controller) externalValueReplicas(ctx context.Context, current int32, target int64, metric, namespace string, metricSelector *metav1.LabelSelector, selector labels.Selector) (int32, int64, error) {
	total, _, err := c.externalTotal(ctx, metric, namespace, metricSelector)
	if err != nil {
		return 0, 0, err
	}
	replicas, err := c.ratioReplicas(current, float64(total)/float64(target), namespace, selector)
	return replicas, total, err
}

// externalAverageReplicas is the replica count for an External metric with an
// AverageValue target.
func (c *Controller) externalAverageReplicas(ctx context.Context, statusReplicas int32, target int64, metric, namespace string, metricSelector *metav1.LabelSelector) (int32, int64, time.Time, error) {
	total, ts, err := c.externalTotal(ctx, metric, namespace, metricSelector)
	if err != nil {
		return 0, 0, time.Time{}, err
	}
	replicas, avg := c.perPodReplicas(statusReplicas, total, target)
	return replicas, avg, ts, nil
}
