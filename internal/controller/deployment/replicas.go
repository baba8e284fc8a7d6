package deployment

import (
	"fmt"
	"log/slog"
	"math"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// This file holds the arithmetic of replica counts: sums over ReplicaSets, the
// rolling-update fenceposts, how far a new ReplicaSet may grow, and the
// proportions of a scaling event (upstream's deployment/util).

// replicaCount sums spec.replicas of the ReplicaSets (nil entries skipped).
func replicaCount(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil && rs.Spec.Replicas != nil {
			n += *rs.Spec.Replicas
		}
	}
	return n
}

// actualReplicaCount sums status.replicas: the pods the ReplicaSets run.
func actualReplicaCount(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += rs.Status.Replicas
		}
	}
	return n
}

// readyReplicaCount sums status.readyReplicas.
func readyReplicaCount(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += rs.Status.ReadyReplicas
		}
	}
	return n
}

// availableReplicaCount sums status.availableReplicas.
func availableReplicaCount(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += rs.Status.AvailableReplicas
		}
	}
	return n
}

// terminatingReplicaCount sums status.terminatingReplicas. A ReplicaSet its
// controller never synced (observedGeneration 0, no count) counts as zero; one
// that was synced but reports no count makes the sum unknown (nil), as
// upstream's GetTerminatingReplicaCountForReplicaSets.
func terminatingReplicaCount(rss []*appsv1.ReplicaSet) *int32 {
	var n int32
	for _, rs := range rss {
		if rs == nil {
			continue
		}
		if rs.Status.TerminatingReplicas == nil {
			if rs.Status.ObservedGeneration == 0 {
				continue
			}
			return nil
		}
		n += *rs.Status.TerminatingReplicas
	}
	return &n
}

// isRollingUpdate reports whether d uses the RollingUpdate strategy.
func isRollingUpdate(d *appsv1.Deployment) bool {
	return d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType
}

// resolveFenceposts turns maxSurge and maxUnavailable (absolute or percent of
// desired, missing = 0) into numbers: the surge rounds up, the unavailable
// rounds down, and when both come to zero maxUnavailable becomes 1 (surge may
// be blocked by quota, so the rollout must be able to make room).
func resolveFenceposts(maxSurge, maxUnavailable *intstr.IntOrString, desired int32) (int32, int32, error) {
	surge, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(maxSurge, intstr.FromInt32(0)), int(desired), true)
	if err != nil {
		return 0, 0, fmt.Errorf("invalid maxSurge: %w", err)
	}
	unavailable, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(maxUnavailable, intstr.FromInt32(0)), int(desired), false)
	if err != nil {
		return 0, 0, fmt.Errorf("invalid maxUnavailable: %w", err)
	}
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	return int32(surge), int32(unavailable), nil
}

// rollingParams returns the rolling-update parameters of d (nil when unset).
func rollingParams(d *appsv1.Deployment) (maxSurge, maxUnavailable *intstr.IntOrString) {
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		return ru.MaxSurge, ru.MaxUnavailable
	}
	return nil, nil
}

// maxSurge is how many pods above spec.replicas a rolling update may run (0 for
// other strategies).
func maxSurge(d *appsv1.Deployment) int32 {
	if !isRollingUpdate(d) {
		return 0
	}
	s, u := rollingParams(d)
	surge, _, _ := resolveFenceposts(s, u, *d.Spec.Replicas)
	return surge
}

// maxUnavailable is how many pods below spec.replicas a rolling update may
// leave unavailable, at most spec.replicas (0 for other strategies).
func maxUnavailable(d *appsv1.Deployment) int32 {
	if !isRollingUpdate(d) || *d.Spec.Replicas == 0 {
		return 0
	}
	s, u := rollingParams(d)
	_, unavailable, _ := resolveFenceposts(s, u, *d.Spec.Replicas)
	if unavailable > *d.Spec.Replicas {
		return *d.Spec.Replicas
	}
	return unavailable
}

// minAvailable is spec.replicas less maxUnavailable for a rolling update (0 for
// other strategies).
func minAvailable(d *appsv1.Deployment) int32 {
	if !isRollingUpdate(d) {
		return 0
	}
	return *d.Spec.Replicas - maxUnavailable(d)
}

// newRSNewReplicas is how many replicas the new ReplicaSet should have now: for
// a rolling update as many as fit under spec.replicas + maxSurge counting every
// ReplicaSet's spec.replicas, never more than spec.replicas; for Recreate all.
func newRSNewReplicas(d *appsv1.Deployment, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (int32, error) {
	switch d.Spec.Strategy.Type {
	case appsv1.RollingUpdateDeploymentStrategyType:
		s, _ := rollingParams(d)
		surge, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(s, intstr.FromInt32(0)), int(*d.Spec.Replicas), true)
		if err != nil {
			return 0, fmt.Errorf("invalid maxSurge: %w", err)
		}
		current := replicaCount(allRSs)
		maxTotal := *d.Spec.Replicas + int32(surge)
		if current >= maxTotal {
			return *newRS.Spec.Replicas, nil
		}
		up := min(maxTotal-current, *d.Spec.Replicas-*newRS.Spec.Replicas)
		return *newRS.Spec.Replicas + up, nil
	case appsv1.RecreateDeploymentStrategyType:
		return *d.Spec.Replicas, nil
	default:
		return 0, fmt.Errorf("deployment type %v isn't supported", d.Spec.Strategy.Type)
	}
}

// isSaturated reports whether rs is the full-sized, fully available ReplicaSet
// of d, created for d's current size.
func isSaturated(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	if rs == nil {
		return false
	}
	desired, ok, err := nonNegativeInt32Annotation(rs, desiredReplicasAnnotation)
	if err != nil || !ok {
		return false
	}
	return *rs.Spec.Replicas == *d.Spec.Replicas && desired == *d.Spec.Replicas &&
		rs.Status.AvailableReplicas == *d.Spec.Replicas
}

// filterActive returns the ReplicaSets with spec.replicas above zero.
func filterActive(rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if rs != nil && *rs.Spec.Replicas > 0 {
			out = append(out, rs)
		}
	}
	return out
}

// findActiveOrLatest returns the one active ReplicaSet, or the newest one when
// none is active, or nil when several are active (then a scaling event must be
// distributed proportionally).
func findActiveOrLatest(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	if newRS == nil && len(oldRSs) == 0 {
		return nil
	}
	sort.Sort(sort.Reverse(byCreationTimestamp(oldRSs)))
	active := filterActive(append(oldRSs, newRS))
	switch len(active) {
	case 0:
		if newRS != nil {
			return newRS
		}
		return oldRSs[0]
	case 1:
		return active[0]
	default:
		return nil
	}
}

// replicaSetProportion is how many replicas rs gains (or loses, negative) when
// d's replicas change by toAdd in a scaling event, given that added replicas
// were handed out already; never more than what is left to hand out.
func replicaSetProportion(log *slog.Logger, rs *appsv1.ReplicaSet, d *appsv1.Deployment, toAdd, added int32) int32 {
	if rs == nil || *rs.Spec.Replicas == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	fraction := replicaSetFraction(log, rs, d)
	allowed := toAdd - added
	if toAdd > 0 {
		return min(fraction, allowed)
	}
	return max(fraction, allowed)
}

// replicaSetFraction is rs's share of the new size: its replicas scaled by the
// new (spec.replicas + maxSurge) over the max-replicas annotation it got when
// last sized, less its current replicas.
func replicaSetFraction(log *slog.Logger, rs *appsv1.ReplicaSet, d *appsv1.Deployment) int32 {
	if *d.Spec.Replicas == 0 {
		return -*rs.Spec.Replicas
	}
	deploymentMax := *d.Spec.Replicas + maxSurge(d)
	before, ok := nonNegativeInt32AnnotationVerbose(log, rs, maxReplicasAnnotation)
	if !ok || before == 0 {
		// Someone removed or broke the annotation: fall back to the size the
		// deployment had when last seen.
		before = d.Status.Replicas
		if before == 0 {
			return 0
		}
	}
	size := float64(*rs.Spec.Replicas*deploymentMax) / float64(before)
	return roundToInt32(size) - *rs.Spec.Replicas
}

// roundToInt32 rounds half up, as upstream's integer.RoundToInt32.
func roundToInt32(a float64) int32 {
	return int32(math.Floor(a + 0.5))
}

// deploymentComplete reports whether status shows d fully rolled out: every
// replica updated, no old ones left, all available, and the latest generation
// observed.
func deploymentComplete(d *appsv1.Deployment, status *appsv1.DeploymentStatus) bool {
	return status.UpdatedReplicas == *d.Spec.Replicas &&
		status.Replicas == *d.Spec.Replicas &&
		status.AvailableReplicas == *d.Spec.Replicas &&
		status.ObservedGeneration >= d.Generation
}

// deploymentProgressing reports whether status shows progress over d's last
// status: more updated, fewer old, more ready or more available replicas.
func deploymentProgressing(d *appsv1.Deployment, status *appsv1.DeploymentStatus) bool {
	old := d.Status
	oldOld := old.Replicas - old.UpdatedReplicas
	newOld := status.Replicas - status.UpdatedReplicas
	return status.UpdatedReplicas > old.UpdatedReplicas ||
		newOld < oldOld ||
		status.ReadyReplicas > old.ReadyReplicas ||
		status.AvailableReplicas > old.AvailableReplicas
}

// hasProgressDeadline reports whether d sets a finite progressDeadlineSeconds.
func hasProgressDeadline(d *appsv1.Deployment) bool {
	return d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds != math.MaxInt32
}

// hasRevisionHistoryLimit reports whether d sets a finite revisionHistoryLimit.
func hasRevisionHistoryLimit(d *appsv1.Deployment) bool {
	return d.Spec.RevisionHistoryLimit != nil && *d.Spec.RevisionHistoryLimit != math.MaxInt32
}
