package statefulset

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"

	"github.com/kubette/kubette/internal/controller/history"
	"github.com/kubette/kubette/internal/controller/ownerref"
)

// Event reasons, as upstream's.
const (
	reasonSuccessfulCreate = "SuccessfulCreate"
	reasonFailedCreate     = "FailedCreate"
	reasonSuccessfulDelete = "SuccessfulDelete"
	reasonFailedDelete     = "FailedDelete"
	reasonSuccessfulUpdate = "SuccessfulUpdate"
	reasonFailedUpdate     = "FailedUpdate"
	reasonRecreatingFailed = "RecreatingFailedPod"
	reasonRecreatingEnded  = "RecreatingTerminatedPod"
)

// Sync brings the StatefulSet of key ("namespace/name") a step closer to its desired
// state: its revisions, its pods in ordinal order, the rolling update, the status and
// the history. It reads the informer caches and is never called concurrently for one key.
func (c *Controller) Sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("invalid key %q: %w", key, err)
	}
	set, err := c.setLister.StatefulSets(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to get StatefulSet %s from cache: %w", key, err)
	}
	selector, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil || selector.Empty() {
		c.log.Error("invalid selector", "statefulSet", key, "err", err)
		return nil
	}
	revs, err := c.claimRevisions(ctx, set, selector)
	if err != nil {
		return err
	}
	pods, err := c.claimPods(ctx, set, selector)
	if err != nil {
		return err
	}
	cur, upd, count, err := c.revisionsOf(ctx, set, revs)
	if err != nil {
		return fmt.Errorf("failed to construct revisions of StatefulSet %s: %w", key, err)
	}
	status, syncErr := c.reconcile(ctx, set, cur, upd, pods)
	status.CollisionCount = &count
	completeRollingUpdate(set, status)
	if err := c.updateStatus(ctx, set, status); err != nil {
		return errors.Join(syncErr, err)
	}
	if syncErr != nil {
		return syncErr
	}
	if set.Spec.MinReadySeconds > 0 && status.ReadyReplicas != status.AvailableReplicas {
		c.queue.AddAfter(key, time.Duration(set.Spec.MinReadySeconds)*time.Second)
	}
	return c.truncateHistory(ctx, set, pods, revs, cur, upd)
}

// claimPods returns the pods named as the set's that it controls, adopting orphans
// and releasing pods that no longer match its selector.
func (c *Controller) claimPods(ctx context.Context, set *appsv1.StatefulSet, selector labels.Selector) ([]*corev1.Pod, error) {
	all, err := c.podLister.Pods(set.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("failed to list pods of %s: %w", set.Namespace, err)
	}
	var members []*corev1.Pod
	for _, p := range all {
		if isMember(set, p) {
			members = append(members, p)
		}
	}
	api := c.client.CoreV1().Pods(set.Namespace)
	return ownerref.Claim(ctx, set, controllerKind, selector, members,
		func(ctx context.Context, p *corev1.Pod) error {
			_, err := api.Patch(ctx, p.Name, types.StrategicMergePatchType, ownerref.AdoptPatch(set, controllerKind, p.UID), metav1.PatchOptions{})
			return err
		},
		func(ctx context.Context, p *corev1.Pod) error {
			_, err := api.Patch(ctx, p.Name, types.StrategicMergePatchType, ownerref.ReleasePatch(set.UID, p.UID), metav1.PatchOptions{})
			return err
		},
		c.recheck(set))
}

func (c *Controller) recheck(set *appsv1.StatefulSet) func(context.Context) error {
	return ownerref.RecheckOwner(set, func(ctx context.Context) (metav1.Object, error) {
		return c.client.AppsV1().StatefulSets(set.Namespace).Get(ctx, set.Name, metav1.GetOptions{})
	})
}

// claimRevisions returns the set's revisions, sorted, adopting matching orphans.
func (c *Controller) claimRevisions(ctx context.Context, set *appsv1.StatefulSet, selector labels.Selector) ([]*appsv1.ControllerRevision, error) {
	all, err := c.revLister.ControllerRevisions(set.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("failed to list revisions: %w", err)
	}
	api := c.client.AppsV1().ControllerRevisions(set.Namespace)
	owned, err := ownerref.Claim(ctx, set, controllerKind, selector, all,
		func(ctx context.Context, r *appsv1.ControllerRevision) error {
			_, err := api.Patch(ctx, r.Name, types.StrategicMergePatchType, ownerref.AdoptPatch(set, controllerKind, r.UID), metav1.PatchOptions{})
			return err
		},
		func(ctx context.Context, r *appsv1.ControllerRevision) error {
			_, err := api.Patch(ctx, r.Name, types.StrategicMergePatchType, ownerref.ReleasePatch(set.UID, r.UID), metav1.PatchOptions{})
			return err
		},
		c.recheck(set))
	history.Sort(owned)
	return owned, err
}

// revisionsOf returns the current revision (status.currentRevision, or the update
// revision for a new set), the update revision of the set's template, made or reused,
// and the collision count.
func (c *Controller) revisionsOf(ctx context.Context, set *appsv1.StatefulSet, revs []*appsv1.ControllerRevision) (cur, upd *appsv1.ControllerRevision, count int32, err error) {
	if set.Status.CollisionCount != nil {
		count = *set.Status.CollisionCount
	}
	data, err := history.TemplatePatch(&set.Spec.Template)
	if err != nil {
		return nil, nil, 0, err
	}
	want := history.New(set, controllerKind, set.Spec.Template.Labels, data, history.Next(revs), &count)
	upd, _, err = c.history.Snapshot(ctx, set, revs, want, &count)
	if err != nil {
		return nil, nil, 0, err
	}
	for _, r := range revs {
		if r.Name == set.Status.CurrentRevision {
			cur = r
			break
		}
	}
	if cur == nil || cur.Name == upd.Name {
		cur = upd
	}
	return cur, upd, count, nil
}

// reconcile creates, repairs and deletes the set's pods and returns the status it
// leaves. OrderedReady acts on one pod per sync and waits for each to run and be ready
// (and available) before going on; Parallel acts on every pod at once.
func (c *Controller) reconcile(ctx context.Context, set *appsv1.StatefulSet, cur, upd *appsv1.ControllerRevision, pods []*corev1.Pod) (*appsv1.StatefulSetStatus, error) {
	now := metav1.NewTime(c.clock.Now())
	status := &appsv1.StatefulSetStatus{ObservedGeneration: set.Generation, CurrentRevision: cur.Name, UpdateRevision: upd.Name}
	for _, p := range pods {
		status.Replicas++
		if isRunningAndReady(p) {
			status.ReadyReplicas++
			if isRunningAndAvailable(p, set.Spec.MinReadySeconds, now) {
				status.AvailableReplicas++
			}
		}
		if isCreated(p) && !isTerminating(p) {
			if revisionOf(p) == cur.Name {
				status.CurrentReplicas++
			}
			if revisionOf(p) == upd.Name {
				status.UpdatedReplicas++
			}
		}
	}
	curTemplate, err := history.TemplateOf(cur)
	if err != nil {
		return status, err
	}
	updTemplate := &set.Spec.Template

	start, n := startOrdinal(set), replicas(set)
	slots := make([]*corev1.Pod, n)
	var condemned []*corev1.Pod
	for _, p := range pods {
		switch ord := ordinalOf(p); {
		case inRange(set, ord):
			slots[ord-start] = p
		case ord >= 0:
			condemned = append(condemned, p)
		}
	}
	// A pod that does not exist yet is made from the current revision below the
	// partition (or below the pods already at it) and from the update revision above.
	for i := range slots {
		if slots[i] != nil {
			continue
		}
		ord := start + i
		if useCurrent(set, ord) {
			slots[i] = newPod(set, curTemplate, cur.Name, ord)
		} else {
			slots[i] = newPod(set, updTemplate, upd.Name, ord)
		}
	}
	sort.Slice(condemned, func(i, j int) bool { return ordinalOf(condemned[i]) < ordinalOf(condemned[j]) })
	var firstUnhealthy *corev1.Pod
	for _, p := range append(append([]*corev1.Pod(nil), slots...), condemned...) {
		if !isHealthy(p) && (firstUnhealthy == nil || ordinalOf(p) < ordinalOf(firstUnhealthy)) {
			firstUnhealthy = p
		}
	}
	if set.DeletionTimestamp != nil {
		return status, nil
	}
	monotonic := set.Spec.PodManagementPolicy != appsv1.ParallelPodManagement
	var errs []error

	for _, p := range slots {
		if isFailed(p) || isSucceeded(p) {
			// The pod ended: delete it; the next sync after it is gone makes a new one.
			if !isTerminating(p) {
				reason := reasonRecreatingEnded
				if isFailed(p) {
					reason = reasonRecreatingFailed
				}
				c.recorder.Eventf(set, corev1.EventTypeWarning, reason, "StatefulSet %s/%s is recreating %s Pod %s", set.Namespace, set.Name, p.Status.Phase, p.Name)
				if err := c.deletePodOf(ctx, set, p); err != nil {
					return status, err
				}
				countGone(status, p, cur, upd)
			}
			if monotonic {
				return status, nil
			}
			continue
		}
		if !isCreated(p) && p.UID == "" {
			if err := c.createPod(ctx, set, p); err != nil {
				if monotonic {
					return status, err
				}
				errs = append(errs, err)
				continue
			}
			status.Replicas++
			if revisionOf(p) == cur.Name {
				status.CurrentReplicas++
			}
			if revisionOf(p) == upd.Name {
				status.UpdatedReplicas++
			}
			if monotonic {
				return status, nil
			}
			continue
		}
		if monotonic && (isTerminating(p) || !isRunningAndReady(p)) {
			return status, nil
		}
		if monotonic && !isRunningAndAvailable(p, set.Spec.MinReadySeconds, now) {
			c.queue.AddAfter(set.Namespace+"/"+set.Name, time.Duration(set.Spec.MinReadySeconds)*time.Second)
			return status, nil
		}
		if !identityMatches(set, p) && !isTerminating(p) {
			if err := c.fixIdentity(ctx, set, p); err != nil {
				if monotonic {
					return status, err
				}
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return status, errors.Join(errs...)
	}

	// Scale down from the highest ordinal; OrderedReady waits for every other pod to be
	// healthy and deletes one at a time.
	for i := len(condemned) - 1; i >= 0; i-- {
		p := condemned[i]
		if isTerminating(p) {
			if monotonic {
				return status, nil
			}
			continue
		}
		if monotonic && p != firstUnhealthy && (!isRunningAndReady(p) || !isRunningAndAvailable(p, set.Spec.MinReadySeconds, now)) {
			return status, nil
		}
		if err := c.deletePodOf(ctx, set, p); err != nil {
			return status, err
		}
		countGone(status, p, cur, upd)
		if monotonic {
			return status, nil
		}
	}

	if set.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return status, nil
	}
	return status, c.rollingUpdate(ctx, set, slots, cur, upd, status, now)
}

// useCurrent reports whether a missing pod of ordinal ord is made at the current
// revision: during a RollingUpdate, below the partition, or below the pods that are
// still at the current revision when the strategy has no rollingUpdate field.
func useCurrent(set *appsv1.StatefulSet, ord int) bool {
	s := set.Spec.UpdateStrategy
	if s.Type != appsv1.RollingUpdateStatefulSetStrategyType {
		return false
	}
	if s.RollingUpdate == nil {
		return ord < startOrdinal(set)+int(set.Status.CurrentReplicas)
	}
	return s.RollingUpdate.Partition != nil && ord < startOrdinal(set)+int(*s.RollingUpdate.Partition)
}

// countGone takes a deleted pod out of the revision counts.
func countGone(status *appsv1.StatefulSetStatus, p *corev1.Pod, cur, upd *appsv1.ControllerRevision) {
	if revisionOf(p) == cur.Name {
		status.CurrentReplicas--
	}
	if revisionOf(p) == upd.Name {
		status.UpdatedReplicas--
	}
}

// rollingUpdate deletes the pods of other revisions from the highest ordinal down to
// the partition, so that the create step brings them back at the update revision:
// without maxUnavailable one at a time, each once all above it are healthy; with it, as
// many as keep at most maxUnavailable pods unavailable.
func (c *Controller) rollingUpdate(ctx context.Context, set *appsv1.StatefulSet, slots []*corev1.Pod, cur, upd *appsv1.ControllerRevision, status *appsv1.StatefulSetStatus, now metav1.Time) error {
	partition := 0
	ru := set.Spec.UpdateStrategy.RollingUpdate
	if ru != nil && ru.Partition != nil {
		partition = int(*ru.Partition)
	}
	if ru == nil || ru.MaxUnavailable == nil {
		for i := len(slots) - 1; i >= partition; i-- {
			p := slots[i]
			if revisionOf(p) != upd.Name && !isTerminating(p) {
				if err := c.deletePodOf(ctx, set, p); err != nil {
					return err
				}
				countGone(status, p, cur, upd)
				return nil
			}
			if !isHealthy(p) {
				return nil
			}
		}
		return nil
	}
	maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, len(slots), true)
	if err != nil {
		return fmt.Errorf("maxUnavailable of StatefulSet %s/%s: %w", set.Namespace, set.Name, err)
	}
	maxUnavailable = max(maxUnavailable, 1)
	unavailable := 0
	for _, p := range slots {
		if !isHealthy(p) || !isRunningAndAvailable(p, set.Spec.MinReadySeconds, now) {
			unavailable++
		}
	}
	for i := len(slots) - 1; i >= partition && unavailable < maxUnavailable; i-- {
		p := slots[i]
		if revisionOf(p) == upd.Name || isTerminating(p) || !isHealthy(p) {
			continue
		}
		if err := c.deletePodOf(ctx, set, p); err != nil {
			return err
		}
		countGone(status, p, cur, upd)
		unavailable++
	}
	return nil
}

// completeRollingUpdate makes the update revision the current one once every pod is
// at it and ready.
func completeRollingUpdate(set *appsv1.StatefulSet, status *appsv1.StatefulSetStatus) {
	if set.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType &&
		status.UpdatedReplicas == status.Replicas && status.ReadyReplicas == status.Replicas {
		status.CurrentReplicas = status.UpdatedReplicas
		status.CurrentRevision = status.UpdateRevision
	}
}

// createPod makes the claims of the pod's volume claim templates that do not exist yet,
// then the pod.
func (c *Controller) createPod(ctx context.Context, set *appsv1.StatefulSet, p *corev1.Pod) error {
	if err := c.createClaims(ctx, set, p); err != nil {
		return err
	}
	_, err := c.client.CoreV1().Pods(set.Namespace).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil
		}
		c.recorder.Eventf(set, corev1.EventTypeWarning, reasonFailedCreate, "create Pod %s in StatefulSet %s failed error: %v", p.Name, set.Name, err)
		return fmt.Errorf("failed to create pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	c.recorder.Eventf(set, corev1.EventTypeNormal, reasonSuccessfulCreate, "create Pod %s in StatefulSet %s successful", p.Name, set.Name)
	return nil
}

// createClaims creates each missing claim of the pod's ordinal, labelled with the
// set's selector labels. Claims are read and written through the API: kubette does not
// serve PersistentVolumeClaims yet, and a create it refuses holds the pod back, as
// upstream does when a claim cannot be made.
func (c *Controller) createClaims(ctx context.Context, set *appsv1.StatefulSet, p *corev1.Pod) error {
	ord := ordinalOf(p)
	api := c.client.CoreV1().PersistentVolumeClaims(set.Namespace)
	for i := range set.Spec.VolumeClaimTemplates {
		t := &set.Spec.VolumeClaimTemplates[i]
		name := claimName(set, t, ord)
		_, err := api.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			continue
		}
		if apierrors.IsNotFound(err) {
			claim := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: set.Namespace, Labels: map[string]string{}, Annotations: t.Annotations},
				Spec:       t.Spec,
			}
			for k, v := range t.Labels {
				claim.Labels[k] = v
			}
			if set.Spec.Selector != nil {
				for k, v := range set.Spec.Selector.MatchLabels {
					claim.Labels[k] = v
				}
			}
			_, err = api.Create(ctx, claim, metav1.CreateOptions{})
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			c.recorder.Eventf(set, corev1.EventTypeWarning, reasonFailedCreate, "create Claim %s for Pod %s in StatefulSet %s failed error: %v", name, p.Name, set.Name, err)
			return fmt.Errorf("failed to create claim %s/%s: %w", set.Namespace, name, err)
		}
	}
	return nil
}

// deletePodOf deletes one of the set's pods (one already gone counts as deleted).
func (c *Controller) deletePodOf(ctx context.Context, set *appsv1.StatefulSet, p *corev1.Pod) error {
	err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		c.recorder.Eventf(set, corev1.EventTypeWarning, reasonFailedDelete, "delete Pod %s in StatefulSet %s failed error: %v", p.Name, set.Name, err)
		return fmt.Errorf("failed to delete pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	c.recorder.Eventf(set, corev1.EventTypeNormal, reasonSuccessfulDelete, "delete Pod %s in StatefulSet %s successful", p.Name, set.Name)
	return nil
}

// fixIdentity puts the identity labels of its ordinal back on a pod.
func (c *Controller) fixIdentity(ctx context.Context, set *appsv1.StatefulSet, p *corev1.Pod) error {
	fixed := p.DeepCopy()
	setIdentityLabels(fixed, ordinalOf(p))
	if _, err := c.client.CoreV1().Pods(p.Namespace).Update(ctx, fixed, metav1.UpdateOptions{}); err != nil {
		c.recorder.Eventf(set, corev1.EventTypeWarning, reasonFailedUpdate, "update Pod %s in StatefulSet %s failed error: %v", p.Name, set.Name, err)
		return fmt.Errorf("failed to update pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	c.recorder.Eventf(set, corev1.EventTypeNormal, reasonSuccessfulUpdate, "update Pod %s in StatefulSet %s successful", p.Name, set.Name)
	return nil
}

// updateStatus writes the status when it changed.
func (c *Controller) updateStatus(ctx context.Context, set *appsv1.StatefulSet, status *appsv1.StatefulSetStatus) error {
	status.Conditions = set.Status.Conditions
	if equality.Semantic.DeepEqual(*status, set.Status) {
		return nil
	}
	api := c.client.AppsV1().StatefulSets(set.Namespace)
	next := set.DeepCopy()
	for attempt := 0; ; attempt++ {
		next.Status = *status
		_, err := api.UpdateStatus(ctx, next, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt > 0 {
			return fmt.Errorf("failed to update the status of StatefulSet %s/%s: %w", set.Namespace, set.Name, err)
		}
		if next, err = api.Get(ctx, set.Name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("failed to read StatefulSet %s/%s: %w", set.Namespace, set.Name, err)
		}
		if next.Generation != set.Generation {
			return nil
		}
	}
}

// truncateHistory deletes the oldest revisions beyond revisionHistoryLimit that are
// neither current, nor the update revision, nor run by a pod.
func (c *Controller) truncateHistory(ctx context.Context, set *appsv1.StatefulSet, pods []*corev1.Pod, revs []*appsv1.ControllerRevision, cur, upd *appsv1.ControllerRevision) error {
	live := map[string]bool{cur.Name: true, upd.Name: true}
	for _, p := range pods {
		live[revisionOf(p)] = true
	}
	var old []*appsv1.ControllerRevision
	for _, r := range revs {
		if !live[r.Name] {
			old = append(old, r)
		}
	}
	limit := 10
	if set.Spec.RevisionHistoryLimit != nil {
		limit = int(*set.Spec.RevisionHistoryLimit)
	}
	for i := 0; i < len(old)-limit; i++ {
		if err := c.history.Delete(ctx, old[i]); err != nil {
			return err
		}
	}
	return nil
}
