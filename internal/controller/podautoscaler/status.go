package podautoscaler

import (
	"context"
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// setCondition sets the condition of type t (adding it at the end when missing); its
// lastTransitionTime moves only when the status changes.
func (c *Controller) setCondition(hpa *autoscalingv2.HorizontalPodAutoscaler, t autoscalingv2.HorizontalPodAutoscalerConditionType, status corev1.ConditionStatus, reason, format string, args ...any) {
	conds := hpa.Status.Conditions
	i := 0
	for ; i < len(conds) && conds[i].Type != t; i++ {
	}
	if i == len(conds) {
		conds = append(conds, autoscalingv2.HorizontalPodAutoscalerCondition{Type: t})
	}
	cond := &conds[i]
	if cond.Status != status {
		cond.LastTransitionTime = metav1.NewTime(c.clock.Now())
	}
	cond.Status, cond.Reason, cond.Message = status, reason, fmt.Sprintf(format, args...)
	hpa.Status.Conditions = conds
}

// setStatus writes a new status: the replicas, the metrics, the conditions set so far,
// and lastScaleTime moved to now when the target was rescaled. Like upstream's, it
// keeps no other field (observedGeneration is not written).
func (c *Controller) setStatus(hpa *autoscalingv2.HorizontalPodAutoscaler, current, desired int32, metrics []autoscalingv2.MetricStatus, rescaled bool) {
	last := hpa.Status.LastScaleTime
	if rescaled {
		now := metav1.NewTime(c.clock.Now())
		last = &now
	}
	hpa.Status = autoscalingv2.HorizontalPodAutoscalerStatus{
		CurrentReplicas: current,
		DesiredReplicas: desired,
		LastScaleTime:   last,
		CurrentMetrics:  metrics,
		Conditions:      hpa.Status.Conditions,
	}
}

// keepDesired is setStatus for a sync that failed before deciding: the desired
// replicas stay what they were.
func (c *Controller) keepDesired(hpa *autoscalingv2.HorizontalPodAutoscaler, current int32, metrics []autoscalingv2.MetricStatus) {
	c.setStatus(hpa, current, hpa.Status.DesiredReplicas, metrics, false)
}

// writeStatus updates the autoscaler's status unless it equals old.
func (c *Controller) writeStatus(ctx context.Context, old *autoscalingv2.HorizontalPodAutoscalerStatus, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	if apiequality.Semantic.DeepEqual(old, &hpa.Status) {
		return nil
	}
	if _, err := c.client.AutoscalingV2().HorizontalPodAutoscalers(hpa.Namespace).UpdateStatus(ctx, hpa, metav1.UpdateOptions{}); err != nil {
		c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedUpdateStatus", err.Error())
		return fmt.Errorf("failed to update status for %s: %v", hpa.Name, err)
	}
	return nil
}

// writeStatusLogged is writeStatus on a path that already fails with its own error:
// a failed write is only logged (and reported as an Event by writeStatus).
func (c *Controller) writeStatusLogged(ctx context.Context, old *autoscalingv2.HorizontalPodAutoscalerStatus, hpa *autoscalingv2.HorizontalPodAutoscaler) {
	if err := c.writeStatus(ctx, old, hpa); err != nil {
		c.log.Error("status update failed", "hpa", hpa.Namespace+"/"+hpa.Name, "err", err)
	}
}
