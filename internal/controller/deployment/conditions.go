package deployment

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons of the Deployment conditions, as upstream's (kubectl rollout status
// reads timedOutReason).
const (
	// newRSReason: the Progressing condition after creating a ReplicaSet.
	newRSReason = "NewReplicaSetCreated"
	// foundNewRSReason: the Progressing condition first set on an existing ReplicaSet.
	foundNewRSReason = "FoundNewReplicaSet"
	// rsUpdatedReason: the Progressing condition while replicas move.
	rsUpdatedReason = "ReplicaSetUpdated"
	// newRSAvailableReason: the Progressing condition of a finished rollout.
	newRSAvailableReason = "NewReplicaSetAvailable"
	// timedOutReason: no progress within progressDeadlineSeconds.
	timedOutReason = "ProgressDeadlineExceeded"
	// failedRSCreateReason: the new ReplicaSet could not be created.
	failedRSCreateReason = "ReplicaSetCreateError"
	// pausedReason and resumedReason: Progressing is Unknown while paused.
	pausedReason  = "DeploymentPaused"
	resumedReason = "DeploymentResumed"
	// minimumReplicasAvailable and minimumReplicasUnavailable: the Available condition.
	minimumReplicasAvailable   = "MinimumReplicasAvailable"
	minimumReplicasUnavailable = "MinimumReplicasUnavailable"
)

// newCondition returns a condition whose update and transition times are now.
func newCondition(condType appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, message string, now metav1.Time) *appsv1.DeploymentCondition {
	return &appsv1.DeploymentCondition{
		Type:               condType,
		Status:             status,
		LastUpdateTime:     now,
		LastTransitionTime: now,
		Reason:             reason,
		Message:            message,
	}
}

// getCondition returns the condition of the given type, or nil.
func getCondition(status appsv1.DeploymentStatus, condType appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range status.Conditions {
		if status.Conditions[i].Type == condType {
			return &status.Conditions[i]
		}
	}
	return nil
}

// setCondition puts condition into status, as upstream's SetDeploymentCondition:
// nothing changes when a condition of that type already has the same status and
// reason; the transition time is kept when only the reason changes; the new
// condition goes last.
func setCondition(status *appsv1.DeploymentStatus, condition appsv1.DeploymentCondition) {
	cur := getCondition(*status, condition.Type)
	if cur != nil && cur.Status == condition.Status && cur.Reason == condition.Reason {
		return
	}
	if cur != nil && cur.Status == condition.Status {
		condition.LastTransitionTime = cur.LastTransitionTime
	}
	status.Conditions = append(filterOutCondition(status.Conditions, condition.Type), condition)
}

// removeCondition removes the condition of the given type.
func removeCondition(status *appsv1.DeploymentStatus, condType appsv1.DeploymentConditionType) {
	status.Conditions = filterOutCondition(status.Conditions, condType)
}

// filterOutCondition returns a new slice without the conditions of condType.
func filterOutCondition(conditions []appsv1.DeploymentCondition, condType appsv1.DeploymentConditionType) []appsv1.DeploymentCondition {
	var out []appsv1.DeploymentCondition
	for _, c := range conditions {
		if c.Type != condType {
			out = append(out, c)
		}
	}
	return out
}

// replicaSetToDeploymentCondition turns a ReplicaSet's condition into the
// Deployment's condition of the same type.
func replicaSetToDeploymentCondition(c appsv1.ReplicaSetCondition) appsv1.DeploymentCondition {
	return appsv1.DeploymentCondition{
		Type:               appsv1.DeploymentConditionType(c.Type),
		Status:             c.Status,
		LastTransitionTime: c.LastTransitionTime,
		LastUpdateTime:     c.LastTransitionTime,
		Reason:             c.Reason,
		Message:            c.Message,
	}
}
