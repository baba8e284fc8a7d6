package replicaset

import (
	"context"
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubette/kubette/internal/controller/podstate"
)

// calculateStatus derives rs's status from the active pods it controls and
// the outcome of managing replicas. rs must be a copy the caller owns.
func calculateStatus(rs *appsv1.ReplicaSet, pods []*corev1.Pod, manageErr error, now metav1.Time) appsv1.ReplicaSetStatus {
	status := rs.Status
	// The template's labels include the selector's, so fully labelled pods
	// are among the claimed ones.
	template := labels.Set(rs.Spec.Template.Labels).AsSelectorPreValidated()
	var fullyLabeled, ready, available int32
	for _, p := range pods {
		if template.Matches(labels.Set(p.Labels)) {
			fullyLabeled++
		}
		if podstate.IsPodReady(p) {
			ready++
			if podstate.IsPodAvailable(p, rs.Spec.MinReadySeconds, now) {
				available++
			}
		}
	}

	failure := getCondition(rs.Status, appsv1.ReplicaSetReplicaFailure)
	switch {
	case manageErr != nil && failure == nil:
		var reason string
		if diff := len(pods) - int(replicas(rs)); diff < 0 {
			reason = reasonFailedCreate
		} else if diff > 0 {
			reason = reasonFailedDelete
		}
		setCondition(&status, appsv1.ReplicaSetCondition{
			Type:               appsv1.ReplicaSetReplicaFailure,
			Status:             corev1.ConditionTrue,
			LastTransitionTime: now,
			Reason:             reason,
			Message:            manageErr.Error(),
		})
	case manageErr == nil && failure != nil:
		removeCondition(&status, appsv1.ReplicaSetReplicaFailure)
	}

	status.Replicas = int32(len(pods))
	status.FullyLabeledReplicas = fullyLabeled
	status.ReadyReplicas = ready
	status.AvailableReplicas = available
	return status
}

// updateStatus writes status to rs (a copy the caller owns) unless nothing
// changed, retrying once on a fresh read after a failure.
func (c *Controller) updateStatus(ctx context.Context, rs *appsv1.ReplicaSet, status appsv1.ReplicaSetStatus) (*appsv1.ReplicaSet, error) {
	// The steady state: nothing to write. A generation ahead of
	// observedGeneration is written even with the same counts (e.g. a
	// scale to the same size).
	if rs.Status.Replicas == status.Replicas &&
		rs.Status.FullyLabeledReplicas == status.FullyLabeledReplicas &&
		rs.Status.ReadyReplicas == status.ReadyReplicas &&
		rs.Status.AvailableReplicas == status.AvailableReplicas &&
		rs.Generation == rs.Status.ObservedGeneration &&
		reflect.DeepEqual(rs.Status.Conditions, status.Conditions) {
		return rs, nil
	}
	// The generation acted on, so that a retry does not claim a newer spec.
	status.ObservedGeneration = rs.Generation
	for i := 0; ; i++ {
		rs.Status = status
		updated, err := c.kind.UpdateStatus(ctx, c.client, rs)
		if err == nil {
			return updated, nil
		}
		if i >= statusUpdateRetries {
			return nil, fmt.Errorf("failed to update status of %s %s/%s: %w", c.gvk.Kind, rs.Namespace, rs.Name, err)
		}
		fresh, getErr := c.kind.Get(ctx, c.client, rs.Namespace, rs.Name)
		if getErr != nil {
			// Without a fresh copy the counts cannot be trusted either.
			return nil, fmt.Errorf("failed to re-read %s %s/%s for a status update: %w", c.gvk.Kind, rs.Namespace, rs.Name, getErr)
		}
		rs = fresh
	}
}

func getCondition(status appsv1.ReplicaSetStatus, t appsv1.ReplicaSetConditionType) *appsv1.ReplicaSetCondition {
	for i := range status.Conditions {
		if status.Conditions[i].Type == t {
			return &status.Conditions[i]
		}
	}
	return nil
}

// setCondition sets cond on status, keeping an existing condition of the
// same type, status and reason as it is.
func setCondition(status *appsv1.ReplicaSetStatus, cond appsv1.ReplicaSetCondition) {
	if cur := getCondition(*status, cond.Type); cur != nil && cur.Status == cond.Status && cur.Reason == cond.Reason {
		return
	}
	status.Conditions = append(withoutCondition(status.Conditions, cond.Type), cond)
}

func removeCondition(status *appsv1.ReplicaSetStatus, t appsv1.ReplicaSetConditionType) {
	status.Conditions = withoutCondition(status.Conditions, t)
}

// withoutCondition returns a new slice of conds without those of type t.
func withoutCondition(conds []appsv1.ReplicaSetCondition, t appsv1.ReplicaSetConditionType) []appsv1.ReplicaSetCondition {
	var out []appsv1.ReplicaSetCondition
	for _, c := range conds {
		if c.Type != t {
			out = append(out, c)
		}
	}
	return out
}
