package deployment

import (
	"context"
	"fmt"
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// syncRolloutStatus writes the status of a rollout step: the counts and
// Available condition of calculateStatus, the Progressing condition when d has
// a progress deadline (NewReplicaSetAvailable once complete, ReplicaSetUpdated
// while replicas move, ProgressDeadlineExceeded when nothing moved within the
// deadline), and the ReplicaSets' ReplicaFailure condition. When nothing
// changed and the rollout is under way, d is requeued for its deadline.
func (c *Controller) syncRolloutStatus(ctx context.Context, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) error {
	status := c.calculateStatus(allRSs, newRS, d)
	if !hasProgressDeadline(d) {
		removeCondition(&status, appsv1.DeploymentProgressing)
	}

	// A resync of a finished rollout (one ReplicaSet) estimates no progress.
	current := getCondition(d.Status, appsv1.DeploymentProgressing)
	isComplete := status.Replicas == status.UpdatedReplicas && current != nil && current.Reason == newRSAvailableReason
	now := metav1.NewTime(c.clock.Now())
	if hasProgressDeadline(d) && !isComplete {
		switch {
		case deploymentComplete(d, &status):
			msg := fmt.Sprintf("Deployment %q has successfully progressed.", d.Name)
			if newRS != nil {
				msg = fmt.Sprintf("ReplicaSet %q has successfully progressed.", newRS.Name)
			}
			setCondition(&status, *newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, newRSAvailableReason, msg, now))
		case deploymentProgressing(d, &status):
			msg := fmt.Sprintf("Deployment %q is progressing.", d.Name)
			if newRS != nil {
				msg = fmt.Sprintf("ReplicaSet %q is progressing.", newRS.Name)
			}
			cond := newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, rsUpdatedReason, msg, now)
			// Progress with the same reason must still move lastUpdateTime
			// (the deadline counts from it), which setCondition would not do.
			if current != nil {
				if current.Status == corev1.ConditionTrue {
					cond.LastTransitionTime = current.LastTransitionTime
				}
				removeCondition(&status, appsv1.DeploymentProgressing)
			}
			setCondition(&status, *cond)
		case c.deploymentTimedOut(d, &status):
			msg := fmt.Sprintf("Deployment %q has timed out progressing.", d.Name)
			if newRS != nil {
				msg = fmt.Sprintf("ReplicaSet %q has timed out progressing.", newRS.Name)
			}
			setCondition(&status, *newCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, timedOutReason, msg, now))
		}
	}

	if failures := replicaFailures(allRSs, newRS); len(failures) > 0 {
		setCondition(&status, failures[0])
	} else {
		removeCondition(&status, appsv1.DeploymentReplicaFailure)
	}

	if reflect.DeepEqual(d.Status, status) {
		c.requeueStuckDeployment(d, status)
		return nil
	}
	d.Status = status
	return c.updateStatus(ctx, d)
}

// replicaFailures returns the ReplicaFailure conditions of the new
// ReplicaSet, or else of any ReplicaSet, as Deployment conditions.
func replicaFailures(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) []appsv1.DeploymentCondition {
	var out []appsv1.DeploymentCondition
	collect := func(rs *appsv1.ReplicaSet) {
		for _, cond := range rs.Status.Conditions {
			if cond.Type == appsv1.ReplicaSetReplicaFailure {
				out = append(out, replicaSetToDeploymentCondition(cond))
			}
		}
	}
	if newRS != nil {
		collect(newRS)
	}
	if len(out) > 0 {
		return out
	}
	for _, rs := range allRSs {
		if rs != nil {
			collect(rs)
		}
	}
	return out
}

// deploymentTimedOut reports whether d made no progress within its deadline,
// counted from the Progressing condition's lastUpdateTime in status.
func (c *Controller) deploymentTimedOut(d *appsv1.Deployment, status *appsv1.DeploymentStatus) bool {
	if !hasProgressDeadline(d) {
		return false
	}
	cond := getCondition(*status, appsv1.DeploymentProgressing)
	if cond == nil {
		return false
	}
	// A finished rollout cannot time out: a new ReplicaSet's creation may have
	// woken us before the cache saw the condition it set.
	if cond.Reason == newRSAvailableReason {
		return false
	}
	if cond.Reason == timedOutReason {
		return true
	}
	deadline := time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second
	return cond.LastUpdateTime.Add(deadline).Before(c.clock.Now())
}

// requeueStuckDeployment queues d again for when its progress deadline passes
// (at once, rate-limited, when less than a second is left), so that a stuck
// rollout is reported without waiting for another event. It returns the delay,
// negative when no check is needed.
func (c *Controller) requeueStuckDeployment(d *appsv1.Deployment, status appsv1.DeploymentStatus) time.Duration {
	current := getCondition(d.Status, appsv1.DeploymentProgressing)
	if !hasProgressDeadline(d) || current == nil {
		return -1
	}
	if deploymentComplete(d, &status) || current.Reason == timedOutReason {
		return -1
	}
	after := current.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Sub(c.clock.Now())
	if after < time.Second {
		c.enqueueRateLimited(d)
		return 0
	}
	// A second more absorbs the sub-second skew of AddAfter.
	c.enqueueAfter(d, after+time.Second)
	return after
}
