package deployment

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// rolloutRecreate replaces all pods at once: old ReplicaSets go to zero, and
// only when no old pod runs any more is the new ReplicaSet created (or scaled)
// to full size.
func (c *Controller) rolloutRecreate(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet, podMap map[types.UID][]*corev1.Pod) error {
	// No new ReplicaSet yet: it must not start before the old pods stop.
	newRS, oldRSs, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	allRSs := append(oldRSs, newRS)

	scaledDown, err := c.scaleDownOldReplicaSetsForRecreate(ctx, filterActive(oldRSs), d)
	if err != nil {
		return err
	}
	if scaledDown {
		return c.syncRolloutStatus(ctx, allRSs, newRS, d)
	}
	if oldPodsRunning(newRS, oldRSs, podMap) {
		return c.syncRolloutStatus(ctx, allRSs, newRS, d)
	}

	if newRS == nil {
		newRS, oldRSs, err = c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, true)
		if err != nil {
			return err
		}
		allRSs = append(oldRSs, newRS)
	}
	if _, _, err := c.scaleReplicaSetAndRecordEvent(ctx, newRS, *d.Spec.Replicas, d); err != nil {
		return err
	}

	if deploymentComplete(d, &d.Status) {
		if err := c.cleanupDeployment(ctx, oldRSs, d); err != nil {
			return err
		}
	}
	return c.syncRolloutStatus(ctx, allRSs, newRS, d)
}

// scaleDownOldReplicaSetsForRecreate scales every old ReplicaSet to zero,
// reporting whether any was scaled.
func (c *Controller) scaleDownOldReplicaSetsForRecreate(ctx context.Context, oldRSs []*appsv1.ReplicaSet, d *appsv1.Deployment) (bool, error) {
	scaled := false
	for i, rs := range oldRSs {
		if *rs.Spec.Replicas == 0 {
			continue
		}
		did, updated, err := c.scaleReplicaSetAndRecordEvent(ctx, rs, 0, d)
		if err != nil {
			return false, err
		}
		if did {
			oldRSs[i] = updated
			scaled = true
		}
	}
	return scaled, nil
}

// oldPodsRunning reports whether an old ReplicaSet still reports pods, or a pod
// of one is in a non-terminal phase (Unknown counts as running).
func oldPodsRunning(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet, podMap map[types.UID][]*corev1.Pod) bool {
	if actualReplicaCount(oldRSs) > 0 {
		return true
	}
	for rsUID, pods := range podMap {
		if newRS != nil && newRS.UID == rsUID {
			continue
		}
		for _, pod := range pods {
			switch pod.Status.Phase {
			case corev1.PodFailed, corev1.PodSucceeded:
				continue
			default:
				return true
			}
		}
	}
	return false
}
