package flowcontrol

import (
	"context"
	"fmt"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	flowcontrolclient "k8s.io/client-go/kubernetes/typed/flowcontrol/v1"
)

// statusInterval is how often RunStatus looks whether the configuration moved.
const statusInterval = time.Second

// StatusFieldManager is the field manager of the status writes, as upstream's.
const StatusFieldManager = "api-priority-and-fairness-config-consumer-v1"

// RunStatus keeps each FlowSchema's Dangling condition (True, with upstream's reason and
// message, when it names a priority level that does not exist; False otherwise) until
// ctx ends, writing through client and leaving other conditions as they are.
func (c *Controller) RunStatus(ctx context.Context, client flowcontrolclient.FlowSchemasGetter) {
	var lastFS, lastPL int64 = -1, -1
	t := time.NewTicker(statusInterval)
	defer t.Stop()
	for {
		fsRev, plRev := c.cfg.Source.Revision(FlowSchemas), c.cfg.Source.Revision(PriorityLevels)
		if fsRev != lastFS || plRev != lastPL || fsRev == 0 {
			if err := c.syncStatus(ctx, client); err != nil {
				if ctx.Err() == nil {
					c.cfg.Logger.Debug("flow control: flow schema status", "err", err)
				}
			} else {
				lastFS, lastPL = fsRev, plRev
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Controller) syncStatus(ctx context.Context, client flowcontrolclient.FlowSchemasGetter) error {
	fss, err := c.cfg.Source.List(ctx, FlowSchemas, "")
	if err != nil {
		return fmt.Errorf("list flow schemas: %w", err)
	}
	pls, err := c.cfg.Source.List(ctx, PriorityLevels, "")
	if err != nil {
		return fmt.Errorf("list priority levels: %w", err)
	}
	exists := map[string]bool{}
	for _, o := range pls {
		if pl, ok := o.(*flowcontrolv1.PriorityLevelConfiguration); ok {
			exists[pl.Name] = true
		}
	}
	var errs []error
	for _, o := range fss {
		fs, ok := o.(*flowcontrolv1.FlowSchema)
		if !ok {
			continue
		}
		want := danglingCondition(fs, exists[fs.Spec.PriorityLevelConfiguration.Name])
		if have := condition(fs, flowcontrolv1.FlowSchemaConditionDangling); have != nil &&
			have.Status == want.Status && have.Reason == want.Reason && have.Message == want.Message {
			continue
		}
		next := fs.DeepCopy()
		setCondition(next, want)
		if _, err := client.FlowSchemas().UpdateStatus(ctx, next, metav1.UpdateOptions{FieldManager: StatusFieldManager}); err != nil &&
			!apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("update status of %s: %w", fs.Name, err))
		}
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// danglingCondition is upstream's Dangling condition for a schema whose level exists or not.
func danglingCondition(fs *flowcontrolv1.FlowSchema, exists bool) flowcontrolv1.FlowSchemaCondition {
	if exists {
		return flowcontrolv1.FlowSchemaCondition{Type: flowcontrolv1.FlowSchemaConditionDangling, Status: flowcontrolv1.ConditionFalse,
			Reason: "Found", Message: "This FlowSchema references the PriorityLevelConfiguration object named " +
				fmt.Sprintf("%q", fs.Spec.PriorityLevelConfiguration.Name) + " and it exists"}
	}
	return flowcontrolv1.FlowSchemaCondition{Type: flowcontrolv1.FlowSchemaConditionDangling, Status: flowcontrolv1.ConditionTrue,
		Reason: "NotFound", Message: "This FlowSchema references the PriorityLevelConfiguration object named " +
			fmt.Sprintf("%q", fs.Spec.PriorityLevelConfiguration.Name) + " but there is no such object"}
}

func condition(fs *flowcontrolv1.FlowSchema, t flowcontrolv1.FlowSchemaConditionType) *flowcontrolv1.FlowSchemaCondition {
	for i := range fs.Status.Conditions {
		if fs.Status.Conditions[i].Type == t {
			return &fs.Status.Conditions[i]
		}
	}
	return nil
}

// setCondition puts c in place of the condition of its type (or appends it), with
// lastTransitionTime now when the status changes.
func setCondition(fs *flowcontrolv1.FlowSchema, c flowcontrolv1.FlowSchemaCondition) {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	if old := condition(fs, c.Type); old != nil {
		c.LastTransitionTime = old.LastTransitionTime
		if old.Status != c.Status || c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = now
		}
		*old = c
		return
	}
	c.LastTransitionTime = now
	fs.Status.Conditions = append(fs.Status.Conditions, c)
}
