package deployment

import (
	"context"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
)

// rolloutRolling advances a rolling update by one step: scale the new
// ReplicaSet up within maxSurge, or else scale old ones down within
// maxUnavailable; once complete, clean up old ReplicaSets.
func (c *Controller) rolloutRolling(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, true)
	if err != nil {
		return err
	}
	allRSs := append(oldRSs, newRS)

	scaledUp, err := c.reconcileNewReplicaSet(ctx, allRSs, newRS, d)
	if err != nil {
		return err
	}
	if scaledUp {
		return c.syncRolloutStatus(ctx, allRSs, newRS, d)
	}

	scaledDown, err := c.reconcileOldReplicaSets(ctx, allRSs, filterActive(oldRSs), newRS, d)
	if err != nil {
		return err
	}
	if scaledDown {
		return c.syncRolloutStatus(ctx, allRSs, newRS, d)
	}

	if deploymentComplete(d, &d.Status) {
		if err := c.cleanupDeployment(ctx, oldRSs, d); err != nil {
			return err
		}
	}
	return c.syncRolloutStatus(ctx, allRSs, newRS, d)
}

// reconcileNewReplicaSet scales the new ReplicaSet towards spec.replicas: down
// at once when above, up as far as maxSurge allows when below.
func (c *Controller) reconcileNewReplicaSet(ctx context.Context, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) (bool, error) {
	if *newRS.Spec.Replicas == *d.Spec.Replicas {
		return false, nil
	}
	if *newRS.Spec.Replicas > *d.Spec.Replicas {
		scaled, _, err := c.scaleReplicaSetAndRecordEvent(ctx, newRS, *d.Spec.Replicas, d)
		return scaled, err
	}
	replicas, err := newRSNewReplicas(d, allRSs, newRS)
	if err != nil {
		return false, err
	}
	scaled, _, err := c.scaleReplicaSetAndRecordEvent(ctx, newRS, replicas, d)
	return scaled, err
}

// reconcileOldReplicaSets scales old ReplicaSets down as far as availability
// allows. At most
//
//	maxScaledDown = allPods - minAvailable - newRSUnavailable
//
// pods go (all counted by spec.replicas, so that unavailable new pods and surge
// pods are taken into account): first unhealthy old pods, which removes no
// availability, then available ones while more than minAvailable remain.
func (c *Controller) reconcileOldReplicaSets(ctx context.Context, allRSs, oldRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) (bool, error) {
	if replicaCount(oldRSs) == 0 {
		return false, nil // nothing left to scale down
	}
	allPods := replicaCount(allRSs)
	minAvail := *d.Spec.Replicas - maxUnavailable(d)
	newRSUnavailable := *newRS.Spec.Replicas - newRS.Status.AvailableReplicas
	maxScaledDown := allPods - minAvail - newRSUnavailable
	if maxScaledDown <= 0 {
		return false, nil
	}

	// Unhealthy replicas first: they would otherwise block the rollout until
	// the deadline.
	oldRSs, cleaned, err := c.cleanupUnhealthyReplicas(ctx, oldRSs, d, maxScaledDown)
	if err != nil {
		c.log.Debug("Cleaning up unhealthy replicas failed", "deployment", d.Namespace+"/"+d.Name, "err", err)
		return false, nil // as upstream: retried on the next sync
	}
	allRSs = append(oldRSs, newRS)
	scaledDown, err := c.scaleDownOldReplicaSetsForRollingUpdate(ctx, allRSs, oldRSs, d)
	if err != nil {
		c.log.Debug("Scaling down old replica sets failed", "deployment", d.Namespace+"/"+d.Name, "err", err)
		return false, nil
	}
	return cleaned+scaledDown > 0, nil
}

// cleanupUnhealthyReplicas scales old ReplicaSets (oldest first) down by their
// unavailable replicas, at most maxCleanupCount in all. The ReplicaSet
// controller removes not-ready pods first, so availability does not drop.
func (c *Controller) cleanupUnhealthyReplicas(ctx context.Context, oldRSs []*appsv1.ReplicaSet, d *appsv1.Deployment, maxCleanupCount int32) ([]*appsv1.ReplicaSet, int32, error) {
	sort.Sort(byCreationTimestamp(oldRSs))
	var total int32
	for i, rs := range oldRSs {
		if total >= maxCleanupCount {
			break
		}
		if *rs.Spec.Replicas == 0 || *rs.Spec.Replicas == rs.Status.AvailableReplicas {
			continue // nothing, or nothing unhealthy, to remove
		}
		count := min(maxCleanupCount-total, *rs.Spec.Replicas-rs.Status.AvailableReplicas)
		newReplicas := *rs.Spec.Replicas - count
		if newReplicas > *rs.Spec.Replicas {
			return nil, 0, fmt.Errorf("when cleaning up unhealthy replicas, got invalid request to scale down %s/%s %d -> %d",
				rs.Namespace, rs.Name, *rs.Spec.Replicas, newReplicas)
		}
		_, updated, err := c.scaleReplicaSetAndRecordEvent(ctx, rs, newReplicas, d)
		if err != nil {
			return nil, total, err
		}
		total += count
		oldRSs[i] = updated
	}
	return oldRSs, total, nil
}

// scaleDownOldReplicaSetsForRollingUpdate scales old ReplicaSets (oldest
// first) down by as many pods as are available beyond minAvailable.
func (c *Controller) scaleDownOldReplicaSetsForRollingUpdate(ctx context.Context, allRSs, oldRSs []*appsv1.ReplicaSet, d *appsv1.Deployment) (int32, error) {
	minAvail := *d.Spec.Replicas - maxUnavailable(d)
	available := availableReplicaCount(allRSs)
	if available <= minAvail {
		return 0, nil
	}
	sort.Sort(byCreationTimestamp(oldRSs))
	var total int32
	want := available - minAvail
	for _, rs := range oldRSs {
		if total >= want {
			break
		}
		if *rs.Spec.Replicas == 0 {
			continue
		}
		count := min(*rs.Spec.Replicas, want-total)
		newReplicas := *rs.Spec.Replicas - count
		if newReplicas > *rs.Spec.Replicas {
			return 0, fmt.Errorf("when scaling down old RS, got invalid request to scale down %s/%s %d -> %d",
				rs.Namespace, rs.Name, *rs.Spec.Replicas, newReplicas)
		}
		if _, _, err := c.scaleReplicaSetAndRecordEvent(ctx, rs, newReplicas, d); err != nil {
			return total, err
		}
		total += count
	}
	return total, nil
}
