package deployment

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/controller/ownerref"
)

// syncStatusOnly only writes the status (a Deployment being deleted).
func (c *Controller) syncStatusOnly(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	return c.syncDeploymentStatus(ctx, append(oldRSs, newRS), newRS, d)
}

// sync handles a scaling event or a paused Deployment: it resizes the
// ReplicaSets that exist (proportionally in the middle of a rollout) and never
// starts a rollout.
func (c *Controller) sync(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	if err := c.scale(ctx, d, newRS, oldRSs); err != nil {
		return err // requeued; the rest waits for the next sync
	}
	if d.Spec.Paused {
		if err := c.cleanupDeployment(ctx, oldRSs, d); err != nil {
			return err
		}
	}
	return c.syncDeploymentStatus(ctx, append(oldRSs, newRS), newRS, d)
}

// checkPausedConditions sets Progressing to Unknown (DeploymentPaused) when d
// is paused and to Unknown (DeploymentResumed) when it is resumed, unless the
// deadline was already reported exceeded; only with a progress deadline.
func (c *Controller) checkPausedConditions(ctx context.Context, d *appsv1.Deployment) error {
	if !hasProgressDeadline(d) {
		return nil
	}
	cond := getCondition(d.Status, appsv1.DeploymentProgressing)
	if cond != nil && cond.Reason == timedOutReason {
		return nil
	}
	pausedCondExists := cond != nil && cond.Reason == pausedReason
	now := metav1.NewTime(c.clock.Now())
	switch {
	case d.Spec.Paused && !pausedCondExists:
		setCondition(&d.Status, *newCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, pausedReason, "Deployment is paused", now))
	case !d.Spec.Paused && pausedCondExists:
		setCondition(&d.Status, *newCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, resumedReason, "Deployment is resumed", now))
	default:
		return nil
	}
	return c.updateStatus(ctx, d)
}

// getAllReplicaSetsAndSyncRevision splits rsList (from
// getReplicaSetsForDeployment) into the new ReplicaSet and the old ones. The
// new one's revision is raised to one above the old ones' highest and copied to
// d. With createIfNotExisted a missing new ReplicaSet is created.
func (c *Controller) getAllReplicaSetsAndSyncRevision(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet, createIfNotExisted bool) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet, error) {
	_, allOldRSs := findOldReplicaSets(d, rsList)
	newRS, err := c.getNewReplicaSet(ctx, d, rsList, allOldRSs, createIfNotExisted)
	if err != nil {
		return nil, nil, err
	}
	return newRS, allOldRSs, nil
}

// getNewReplicaSet returns d's new ReplicaSet (the one with d's template) with
// its annotations and minReadySeconds brought up to date, and d's revision and
// Progressing condition to match. When there is none it returns nil, or with
// createIfNotExisted creates it, sized as the strategy allows.
func (c *Controller) getNewReplicaSet(ctx context.Context, d *appsv1.Deployment, rsList, oldRSs []*appsv1.ReplicaSet, createIfNotExisted bool) (*appsv1.ReplicaSet, error) {
	existing := findNewReplicaSet(d, rsList)
	newRevision := strconv.FormatInt(maxRevision(c.log, oldRSs)+1, 10)
	now := metav1.NewTime(c.clock.Now())

	if existing != nil {
		rsCopy := existing.DeepCopy()
		annotationsUpdated := setNewReplicaSetAnnotations(c.log, d, rsCopy, newRevision, true, maxRevisionHistoryChars)
		minReadySecondsNeedsUpdate := rsCopy.Spec.MinReadySeconds != d.Spec.MinReadySeconds
		if annotationsUpdated || minReadySecondsNeedsUpdate {
			rsCopy.Spec.MinReadySeconds = d.Spec.MinReadySeconds
			out, err := c.client.AppsV1().ReplicaSets(rsCopy.Namespace).Update(ctx, rsCopy, metav1.UpdateOptions{})
			if err != nil {
				return nil, fmt.Errorf("update replica set %s/%s: %w", rsCopy.Namespace, rsCopy.Name, err)
			}
			return out, nil
		}
		// The revision the ReplicaSet has is the one that counts: it was set
		// before, and old ones may have gone since.
		needsUpdate := setDeploymentRevision(d, rsCopy.Annotations[revisionAnnotation])
		// A Deployment that just got a deadline starts counting from here.
		if hasProgressDeadline(d) && getCondition(d.Status, appsv1.DeploymentProgressing) == nil {
			msg := fmt.Sprintf("Found new replica set %q", rsCopy.Name)
			setCondition(&d.Status, *newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, foundNewRSReason, msg, now))
			needsUpdate = true
		}
		if needsUpdate {
			if err := c.updateStatus(ctx, d); err != nil {
				return nil, err
			}
		}
		return rsCopy, nil
	}
	if !createIfNotExisted {
		return nil, nil
	}

	template := *d.Spec.Template.DeepCopy()
	hash := computeHash(&template, d.Status.CollisionCount)
	template.Labels = cloneAndAddLabel(d.Spec.Template.Labels, appsv1.DefaultDeploymentUniqueLabelKey, hash)
	newRS := appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			// A deterministic name makes the creation idempotent.
			Name:            replicaSetName(d.Name, hash),
			Namespace:       d.Namespace,
			OwnerReferences: []metav1.OwnerReference{*ownerref.NewControllerRef(d, deploymentKind())},
			Labels:          template.Labels,
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        new(int32),
			MinReadySeconds: d.Spec.MinReadySeconds,
			Selector:        cloneSelectorAndAddLabel(d.Spec.Selector, appsv1.DefaultDeploymentUniqueLabelKey, hash),
			Template:        template,
		},
	}
	replicas, err := newRSNewReplicas(d, append(oldRSs, &newRS), &newRS)
	if err != nil {
		return nil, err
	}
	*newRS.Spec.Replicas = replicas
	setNewReplicaSetAnnotations(c.log, d, &newRS, newRevision, false, maxRevisionHistoryChars)

	alreadyExists := false
	created, err := c.client.AppsV1().ReplicaSets(d.Namespace).Create(ctx, &newRS, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		// A slow cache, or a hash collision.
		alreadyExists = true
		rs, getErr := c.rsLister.ReplicaSets(newRS.Namespace).Get(newRS.Name)
		if getErr != nil {
			return nil, fmt.Errorf("get replica set %s/%s: %w", newRS.Namespace, newRS.Name, getErr)
		}
		if ref := metav1.GetControllerOfNoCopy(rs); ref != nil && ref.UID == d.UID && equalIgnoreHash(&d.Spec.Template, &rs.Spec.Template) {
			created, err = rs, nil
			break
		}
		// Another template has this name: bump collisionCount so that the
		// next sync computes another hash.
		if d.Status.CollisionCount == nil {
			d.Status.CollisionCount = new(int32)
		}
		before := *d.Status.CollisionCount
		*d.Status.CollisionCount++
		if c.updateStatus(ctx, d) == nil {
			c.log.Info("Found a hash collision for deployment - bumping collisionCount to resolve it",
				"deployment", d.Namespace+"/"+d.Name, "oldCollisionCount", before, "newCollisionCount", *d.Status.CollisionCount)
		}
		return nil, fmt.Errorf("create replica set %s/%s: %w", newRS.Namespace, newRS.Name, err)
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil, err // every create will fail: nothing to report
	case err != nil:
		msg := fmt.Sprintf("Failed to create new replica set %q: %v", newRS.Name, err)
		if hasProgressDeadline(d) {
			setCondition(&d.Status, *newCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, failedRSCreateReason, msg, now))
			_ = c.updateStatus(ctx, d) // the creation error is the one to report
		}
		c.recorder.Event(d, corev1.EventTypeWarning, failedRSCreateReason, msg)
		return nil, fmt.Errorf("create replica set %s/%s: %w", newRS.Namespace, newRS.Name, err)
	}
	if !alreadyExists && replicas > 0 {
		c.recorder.Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled up replica set %s from 0 to %d", created.Name, replicas)
	}

	needsUpdate := setDeploymentRevision(d, newRevision)
	if !alreadyExists && hasProgressDeadline(d) {
		msg := fmt.Sprintf("Created new replica set %q", created.Name)
		setCondition(&d.Status, *newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, newRSReason, msg, now))
		needsUpdate = true
	}
	if needsUpdate {
		if err := c.updateStatus(ctx, d); err != nil {
			return created, err
		}
	}
	return created, nil
}

// scale resizes the ReplicaSets when d's size changed (or d is paused). With
// one active ReplicaSet (or none: the newest) that one gets all replicas; with
// a saturated new ReplicaSet the old ones go to zero; otherwise, in a rolling
// update, the difference to spec.replicas + maxSurge is handed out in
// proportion to each active ReplicaSet's size (larger ones first; on a tie
// newer ones first when growing and older ones first when shrinking), the
// rounding leftover to the first.
func (c *Controller) scale(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) error {
	if activeOrLatest := findActiveOrLatest(newRS, oldRSs); activeOrLatest != nil {
		if *activeOrLatest.Spec.Replicas == *d.Spec.Replicas {
			return nil
		}
		_, _, err := c.scaleReplicaSetAndRecordEvent(ctx, activeOrLatest, *d.Spec.Replicas, d)
		return err
	}

	if isSaturated(d, newRS) {
		for _, old := range filterActive(oldRSs) {
			if _, _, err := c.scaleReplicaSetAndRecordEvent(ctx, old, 0, d); err != nil {
				return err
			}
		}
		return nil
	}

	if !isRollingUpdate(d) {
		return nil
	}
	allRSs := filterActive(append(oldRSs, newRS))
	allRSsReplicas := replicaCount(allRSs)
	var allowedSize int32
	if *d.Spec.Replicas > 0 {
		allowedSize = *d.Spec.Replicas + maxSurge(d)
	}
	toAdd := allowedSize - allRSsReplicas

	var operation string
	switch {
	case toAdd > 0:
		sort.Sort(bySizeNewer(allRSs))
		operation = "up"
	case toAdd < 0:
		sort.Sort(bySizeOlder(allRSs))
		operation = "down"
	}

	var added int32
	sizes := make(map[string]int32, len(allRSs))
	for _, rs := range allRSs {
		if toAdd != 0 {
			proportion := replicaSetProportion(c.log, rs, d, toAdd, added)
			sizes[rs.Name] = *rs.Spec.Replicas + proportion
			added += proportion
		} else {
			sizes[rs.Name] = *rs.Spec.Replicas
		}
	}
	for i, rs := range allRSs {
		if i == 0 && toAdd != 0 {
			sizes[rs.Name] = max(sizes[rs.Name]+toAdd-added, 0)
		}
		if _, _, err := c.scaleReplicaSet(ctx, rs, sizes[rs.Name], d, operation); err != nil {
			return err // the Deployment is requeued
		}
	}
	return nil
}

// scaleReplicaSetAndRecordEvent sets rs's replicas to newScale (when they
// differ), recording a ScalingReplicaSet event.
func (c *Controller) scaleReplicaSetAndRecordEvent(ctx context.Context, rs *appsv1.ReplicaSet, newScale int32, d *appsv1.Deployment) (bool, *appsv1.ReplicaSet, error) {
	if *rs.Spec.Replicas == newScale {
		return false, rs, nil
	}
	operation := "down"
	if *rs.Spec.Replicas < newScale {
		operation = "up"
	}
	return c.scaleReplicaSet(ctx, rs, newScale, d, operation)
}

// scaleReplicaSet updates rs when its size or its replica annotations differ
// from what d wants; a size change is reported as an event ("Scaled up replica
// set web-7d4b9c6f8b from 0 to 3").
func (c *Controller) scaleReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet, newScale int32, d *appsv1.Deployment, operation string) (bool, *appsv1.ReplicaSet, error) {
	sizeNeedsUpdate := *rs.Spec.Replicas != newScale
	maxReplicas := *d.Spec.Replicas + maxSurge(d)
	annotationsNeedUpdate := replicasAnnotationsNeedUpdate(rs, *d.Spec.Replicas, maxReplicas)
	if !sizeNeedsUpdate && !annotationsNeedUpdate {
		return false, rs, nil
	}
	oldScale := *rs.Spec.Replicas
	rsCopy := rs.DeepCopy()
	*rsCopy.Spec.Replicas = newScale
	setReplicasAnnotations(rsCopy, *d.Spec.Replicas, maxReplicas)
	out, err := c.client.AppsV1().ReplicaSets(rsCopy.Namespace).Update(ctx, rsCopy, metav1.UpdateOptions{})
	if err != nil {
		return false, rs, fmt.Errorf("scale replica set %s/%s from %d to %d: %w", rs.Namespace, rs.Name, oldScale, newScale, err)
	}
	if sizeNeedsUpdate {
		c.recorder.Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled %s replica set %s from %d to %d", operation, out.Name, oldScale, newScale)
	}
	return sizeNeedsUpdate, out, nil
}

// cleanupDeployment deletes the oldest (by revision) old ReplicaSets beyond
// revisionHistoryLimit, skipping any that still have or may have pods, or are
// being deleted.
func (c *Controller) cleanupDeployment(ctx context.Context, oldRSs []*appsv1.ReplicaSet, d *appsv1.Deployment) error {
	if !hasRevisionHistoryLimit(d) {
		return nil
	}
	var cleanable []*appsv1.ReplicaSet
	for _, rs := range oldRSs {
		if rs != nil && rs.DeletionTimestamp == nil {
			cleanable = append(cleanable, rs)
		}
	}
	diff := int32(len(cleanable)) - *d.Spec.RevisionHistoryLimit
	if diff <= 0 {
		return nil
	}
	sort.Sort(byRevision(cleanable))
	for _, rs := range cleanable[:diff] {
		if rs.Status.Replicas != 0 || *rs.Spec.Replicas != 0 || rs.Generation > rs.Status.ObservedGeneration ||
			rs.DeletionTimestamp != nil || terminatingPodsMayRemain(rs) {
			continue
		}
		c.log.Debug("Deleting an old replica set beyond the revision history limit", "replicaSet", rs.Namespace+"/"+rs.Name)
		err := c.client.AppsV1().ReplicaSets(rs.Namespace).Delete(ctx, rs.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			// Stop at the first failure rather than pile up requests.
			return fmt.Errorf("delete old replica set %s/%s: %w", rs.Namespace, rs.Name, err)
		}
	}
	return nil
}

// terminatingPodsMayRemain reports whether rs says it still has terminating
// pods. Upstream (feature DeploymentReplicaSetTerminatingReplicas) also keeps a
// synced ReplicaSet that reports no count; here a missing count counts as none.
func terminatingPodsMayRemain(rs *appsv1.ReplicaSet) bool {
	return rs.Status.TerminatingReplicas != nil && *rs.Status.TerminatingReplicas != 0
}

// syncDeploymentStatus writes the status computed from the ReplicaSets when it
// differs from d's.
func (c *Controller) syncDeploymentStatus(ctx context.Context, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) error {
	status := c.calculateStatus(allRSs, newRS, d)
	if reflect.DeepEqual(d.Status, status) {
		return nil
	}
	d.Status = status
	return c.updateStatus(ctx, d)
}

// calculateStatus computes d's status from its ReplicaSets: the counts, and the
// Available condition (True while at least spec.replicas - maxUnavailable
// replicas are available). Other conditions are carried over.
func (c *Controller) calculateStatus(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) appsv1.DeploymentStatus {
	available := availableReplicaCount(allRSs)
	// More available than wanted (a scale-down in flight) is zero unavailable.
	unavailable := max(replicaCount(allRSs)-available, 0)
	status := appsv1.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            actualReplicaCount(allRSs),
		UpdatedReplicas:     actualReplicaCount([]*appsv1.ReplicaSet{newRS}),
		ReadyReplicas:       readyReplicaCount(allRSs),
		AvailableReplicas:   available,
		UnavailableReplicas: unavailable,
		TerminatingReplicas: terminatingReplicaCount(allRSs),
		CollisionCount:      d.Status.CollisionCount,
	}
	for _, cond := range d.Status.Conditions {
		status.Conditions = append(status.Conditions, cond)
	}
	now := metav1.NewTime(c.clock.Now())
	if available >= *d.Spec.Replicas-maxUnavailable(d) {
		setCondition(&status, *newCondition(appsv1.DeploymentAvailable, corev1.ConditionTrue, minimumReplicasAvailable, "Deployment has minimum availability.", now))
	} else {
		setCondition(&status, *newCondition(appsv1.DeploymentAvailable, corev1.ConditionFalse, minimumReplicasUnavailable, "Deployment does not have minimum availability.", now))
	}
	return status
}

// isScalingEvent reports whether d's size differs from the desired-replicas
// annotation of an active ReplicaSet: then the ReplicaSets are resized, not
// rolled.
func (c *Controller) isScalingEvent(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) (bool, error) {
	newRS, oldRSs, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, false)
	if err != nil {
		return false, err
	}
	for _, rs := range filterActive(append(oldRSs, newRS)) {
		desired, ok := nonNegativeInt32AnnotationVerbose(c.log, rs, desiredReplicasAnnotation)
		if !ok {
			continue
		}
		if desired != *d.Spec.Replicas {
			return true, nil
		}
	}
	return false, nil
}
