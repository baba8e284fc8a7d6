package podautoscaler

import (
	"math"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/registry/defaults"
)

// Without a behavior, a scale-up goes at most to twice the current replicas, or to 4.
const (
	scaleUpLimitFactor  = 2.0
	scaleUpLimitMinimum = 4.0
)

// recommendation is a replica count the metrics asked for, and when.
type recommendation struct {
	replicas int32
	at       time.Time
}

// scaleEvent is one rescale by the controller: how many replicas it added or removed.
type scaleEvent struct {
	change   int32 // never negative
	at       time.Time
	outdated bool // older than every policy's period: its slot may be reused
}

// history is what the controller remembers of one autoscaler between syncs (as
// upstream, only in memory): the recent recommendations, and with a behavior its
// rescales up and down.
type history struct {
	recommendations []recommendation
	ups, downs      []scaleEvent
}

// historyOf returns the history of key, made on first use. Callers hold c.mu.
func (c *Controller) historyOf(key string) *history {
	h := c.histories[key]
	if h == nil {
		h = &history{}
		c.histories[key] = h
	}
	return h
}

// recordInitial gives an autoscaler seen for the first time the target's replicas as
// its first recommendation.
func (c *Controller) recordInitial(key string, current int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.historyOf(key)
	if h.recommendations == nil {
		h.recommendations = []recommendation{{replicas: current, at: c.clock.Now()}}
	}
}

// forget drops the history of a deleted autoscaler.
func (c *Controller) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.histories, key)
}

// stabilize, without a behavior, is the highest of desired and the recommendations
// of the downscale stabilization window; desired is recorded.
func (c *Controller) stabilize(key string, desired int32) int32 {
	now := c.clock.Now()
	cutoff := now.Add(-c.downscaleStabilization)
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.historyOf(key)
	highest := desired
	oldest := -1
	for i, r := range h.recommendations {
		if r.at.Before(cutoff) {
			oldest = i // upstream reuses the last old slot it finds
		} else if r.replicas > highest {
			highest = r.replicas
		}
	}
	rec := recommendation{replicas: desired, at: now}
	if oldest >= 0 {
		h.recommendations[oldest] = rec
	} else {
		h.recommendations = append(h.recommendations, rec)
	}
	return highest
}

// normalize turns the metrics' desired replicas into the replicas to set, for an
// autoscaler without a behavior: stabilized over the downscale window, then kept
// within minReplicas, maxReplicas and the scale-up limit; it sets AbleToScale and
// ScalingLimited.
func (c *Controller) normalize(hpa *autoscalingv2.HorizontalPodAutoscaler, key string, current, desired, minReplicas int32) int32 {
	stabilized := c.stabilize(key, desired)
	if stabilized != desired {
		c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation")
	} else {
		c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "ReadyForNewScale", "recommended size matches current size")
	}
	out, reason, message := limitWithRules(current, stabilized, minReplicas, hpa.Spec.MaxReplicas)
	status := corev1.ConditionTrue
	if out == stabilized {
		status = corev1.ConditionFalse
	}
	c.setCondition(hpa, autoscalingv2.ScalingLimited, status, reason, "%s", message)
	return out
}

// limitWithRules keeps desired within minReplicas and the lower of maxReplicas and
// the scale-up limit, with the ScalingLimited reason and message.
func limitWithRules(current, desired, minReplicas, maxReplicas int32) (int32, string, string) {
	upper, reason, message := maxReplicas, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
	if limit := int32(math.Max(scaleUpLimitFactor*float64(current), scaleUpLimitMinimum)); maxReplicas > limit {
		upper, reason, message = limit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
	}
	switch {
	case desired < minReplicas:
		return minReplicas, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
	case desired > upper:
		return upper, reason, message
	}
	return desired, "DesiredWithinRange", "the desired count is within the acceptable range"
}

// rules are an autoscaler's behavior with every field set: upstream's defaults where
// the API left one unset, and the controller's downscale stabilization window where
// the scale-down rules name none.
func (c *Controller) rules(b *autoscalingv2.HorizontalPodAutoscalerBehavior) (up, down *autoscalingv2.HPAScalingRules) {
	up, down = defaults.ScaleUpRules(b.ScaleUp), defaults.ScaleDownRules(b.ScaleDown)
	if down.StabilizationWindowSeconds == nil {
		w := int32(c.downscaleStabilization.Seconds())
		down.StabilizationWindowSeconds = &w
	}
	return up, down
}

// normalizeWithBehavior turns the metrics' desired replicas into the replicas to set
// for an autoscaler with a behavior: stabilized over each direction's window, then
// kept within minReplicas, maxReplicas and the policies' rates; it sets AbleToScale
// and ScalingLimited.
func (c *Controller) normalizeWithBehavior(hpa *autoscalingv2.HorizontalPodAutoscaler, key string, current, desired, minReplicas int32) int32 {
	up, down := c.rules(hpa.Spec.Behavior)
	stabilized, reason, message := c.stabilizeWithBehavior(key, current, desired, up, down)
	if stabilized != desired {
		c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, reason, "%s", message)
	} else {
		c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "ReadyForNewScale", "recommended size matches current size")
	}
	out, reason, message := c.limitWithBehavior(key, current, stabilized, minReplicas, hpa.Spec.MaxReplicas, up, down)
	status := corev1.ConditionTrue
	if out == stabilized {
		status = corev1.ConditionFalse
	}
	c.setCondition(hpa, autoscalingv2.ScalingLimited, status, reason, "%s", message)
	return out
}

// stabilizeWithBehavior keeps the recommendation between the lowest recommendation of
// the scale-up window and the highest of the scale-down window (current replicas
// brought within them); desired is recorded.
func (c *Controller) stabilizeWithBehavior(key string, current, desired int32, up, down *autoscalingv2.HPAScalingRules) (int32, string, string) {
	now := c.clock.Now()
	upCutoff := now.Add(-time.Duration(*up.StabilizationWindowSeconds) * time.Second)
	downCutoff := now.Add(-time.Duration(*down.StabilizationWindowSeconds) * time.Second)
	upFloor, downCeiling := desired, desired
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.historyOf(key)
	oldest := -1
	for i, r := range h.recommendations {
		if r.at.After(upCutoff) {
			upFloor = min(upFloor, r.replicas)
		}
		if r.at.After(downCutoff) {
			downCeiling = max(downCeiling, r.replicas)
		}
		if r.at.Before(upCutoff) && r.at.Before(downCutoff) {
			oldest = i
		}
	}
	out := max(current, upFloor)
	out = min(out, downCeiling)
	rec := recommendation{replicas: desired, at: now}
	if oldest >= 0 {
		h.recommendations[oldest] = rec
	} else {
		h.recommendations = append(h.recommendations, rec)
	}
	if desired >= current {
		return out, "ScaleUpStabilized", "recent recommendations were lower than current one, applying the lowest recent recommendation"
	}
	return out, "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation"
}

// limitWithBehavior keeps desired within minReplicas, maxReplicas and the rate the
// direction's policies allow given the rescales of their periods.
func (c *Controller) limitWithBehavior(key string, current, desired, minReplicas, maxReplicas int32, up, down *autoscalingv2.HPAScalingRules) (int32, string, string) {
	now := c.clock.Now()
	c.mu.Lock()
	h := c.historyOf(key)
	ups, downs := h.ups, h.downs
	c.mu.Unlock()
	switch {
	case desired > current:
		limit := max(scaleUpLimit(current, ups, downs, up, now), current) // no further up until old rescales age out
		upper, reason, message := maxReplicas, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
		if upper > limit {
			upper, reason, message = limit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
		}
		if desired > upper {
			return upper, reason, message
		}
	case desired < current:
		limit := min(scaleDownLimit(current, ups, downs, down, now), current)
		lower, reason, message := minReplicas, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
		if lower < limit {
			lower, reason, message = limit, "ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate"
		}
		if desired < lower {
			return lower, reason, message
		}
	}
	return desired, "DesiredWithinRange", "the desired count is within the acceptable range"
}

// changedWithin adds up the changes of the events of the last period seconds.
func changedWithin(periodSeconds int32, events []scaleEvent, now time.Time) int32 {
	cutoff := now.Add(-time.Duration(periodSeconds) * time.Second)
	var n int32
	for _, e := range events {
		if e.at.After(cutoff) {
			n += e.change
		}
	}
	return n
}

// scaleUpLimit is the most replicas the scale-up policies allow now: each policy's
// limit counts from the replicas at the start of its period; selectPolicy Max takes
// the highest, Min the lowest, Disabled allows none.
func scaleUpLimit(current int32, ups, downs []scaleEvent, rules *autoscalingv2.HPAScalingRules, now time.Time) int32 {
	if *rules.SelectPolicy == autoscalingv2.DisabledPolicySelect {
		return current
	}
	pickMin := *rules.SelectPolicy == autoscalingv2.MinChangePolicySelect
	result := int32(math.MinInt32)
	if pickMin {
		result = math.MaxInt32
	}
	for _, p := range rules.Policies {
		start := current - changedWithin(p.PeriodSeconds, ups, now) + changedWithin(p.PeriodSeconds, downs, now)
		var proposed int32
		switch p.Type {
		case autoscalingv2.PodsScalingPolicy:
			proposed = start + p.Value
		case autoscalingv2.PercentScalingPolicy:
			// Rounded up, or a small target would never grow.
			proposed = int32(math.Ceil(float64(start) * (1 + float64(p.Value)/100)))
		}
		if pickMin {
			result = min(result, proposed)
		} else {
			result = max(result, proposed)
		}
	}
	return result
}

// scaleDownLimit is the fewest replicas the scale-down policies allow now (Max takes
// the largest change, so the lowest count; Min the smallest change).
func scaleDownLimit(current int32, ups, downs []scaleEvent, rules *autoscalingv2.HPAScalingRules, now time.Time) int32 {
	if *rules.SelectPolicy == autoscalingv2.DisabledPolicySelect {
		return current
	}
	pickMin := *rules.SelectPolicy == autoscalingv2.MinChangePolicySelect
	result := int32(math.MaxInt32)
	if pickMin {
		result = math.MinInt32
	}
	for _, p := range rules.Policies {
		start := current - changedWithin(p.PeriodSeconds, ups, now) + changedWithin(p.PeriodSeconds, downs, now)
		var proposed int32
		switch p.Type {
		case autoscalingv2.PodsScalingPolicy:
			proposed = start - p.Value
		case autoscalingv2.PercentScalingPolicy:
			proposed = int32(float64(start) * (1 - float64(p.Value)/100))
		}
		if pickMin {
			result = max(result, proposed)
		} else {
			result = min(result, proposed)
		}
	}
	return result
}

// longestPeriod is the longest period of the rules' policies.
func longestPeriod(rules *autoscalingv2.HPAScalingRules) int32 {
	var longest int32
	for _, p := range rules.Policies {
		longest = max(longest, p.PeriodSeconds)
	}
	return longest
}

// recordRescale remembers a rescale of an autoscaler with a behavior, in the slot of
// an event older than every policy's period or in a new one.
func (c *Controller) recordRescale(hpa *autoscalingv2.HorizontalPodAutoscaler, key string, from, to int32) {
	if hpa.Spec.Behavior == nil {
		return // only the policies read them
	}
	up, down := c.rules(hpa.Spec.Behavior)
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.historyOf(key)
	events, rules, change := &h.downs, down, from-to
	if to > from {
		events, rules, change = &h.ups, up, to-from
	}
	cutoff := now.Add(-time.Duration(longestPeriod(rules)) * time.Second)
	slot := -1
	for i := range *events {
		if (*events)[i].at.Before(cutoff) {
			(*events)[i].outdated = true
		}
		if (*events)[i].outdated {
			slot = i
		}
	}
	e := scaleEvent{change: change, at: now}
	if slot >= 0 {
		(*events)[slot] = e
	} else {
		*events = append(*events, e)
	}
}
