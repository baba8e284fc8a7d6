package replicaset

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"

	"github.com/kubette/kubette/internal/controller/ownerref"
	"github.com/kubette/kubette/internal/controller/podstate"
)

// Sync brings the ReplicaSet of key ("namespace/name") to its desired state:
// it claims the pods it selects, creates or deletes pods unless it still waits
// for its earlier creations and deletions to show in the cache, and updates
// the status. It reads only the informer caches and is never called
// concurrently for one key.
func (c *Controller) Sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("invalid key %q: %w", key, err)
	}
	rs, ok, err := c.cached(namespace, name)
	if err != nil {
		return fmt.Errorf("failed to get %s %s from cache: %w", c.gvk.Kind, key, err)
	}
	if !ok {
		c.expectations.DeleteExpectations(key)
		return nil
	}

	needsSync := c.expectations.SatisfiedExpectations(key)
	selector, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		// Retrying cannot fix the selector; an update of the ReplicaSet will.
		c.log.Error("invalid selector", "replicaSet", key, "err", err)
		return nil
	}

	// All pods of the namespace, to also find pods that no longer match the
	// selector but still carry this ReplicaSet's controller reference.
	allPods, err := c.podLister.Pods(namespace).List(labels.Everything())
	if err != nil {
		return fmt.Errorf("failed to list pods of %s: %w", namespace, err)
	}
	// The pods point into the cache: copy before changing any.
	pods, err := c.claimPods(ctx, rs, selector, podstate.FilterActive(allPods))
	if err != nil {
		return err
	}

	var manageErr error
	if needsSync && rs.DeletionTimestamp == nil {
		manageErr = c.manageReplicas(ctx, pods, rs)
	}
	rs = rs.DeepCopy()
	newStatus := calculateStatus(rs, pods, manageErr, metav1.NewTime(c.clock.Now()))
	updated, err := c.updateStatus(ctx, rs, newStatus)
	if err != nil {
		return errors.Join(manageErr, err)
	}
	// Availability comes with time: look again after minReadySeconds, a last
	// line of defence behind the pod-update requeue.
	if manageErr == nil && updated.Spec.MinReadySeconds > 0 &&
		updated.Status.ReadyReplicas == replicas(updated) &&
		updated.Status.AvailableReplicas != replicas(updated) {
		c.queue.AddAfter(key, time.Duration(updated.Spec.MinReadySeconds)*time.Second)
	}
	return manageErr
}

// replicas is the ReplicaSet's desired count (the API server defaults it to 1).
func replicas(rs *appsv1.ReplicaSet) int32 {
	if rs.Spec.Replicas == nil {
		return 1
	}
	return *rs.Spec.Replicas
}

// claimPods adopts matching orphans and releases owned pods that no longer
// match, and returns the pods rs controls.
func (c *Controller) claimPods(ctx context.Context, rs *appsv1.ReplicaSet, selector labels.Selector, pods []*corev1.Pod) ([]*corev1.Pod, error) {
	pods = clonePodSlice(pods)
	// Before adopting anything, re-read the ReplicaSet from the API server (not
	// the cache) to make sure it is neither being deleted nor replaced.
	canAdopt := ownerref.RecheckOwner(rs, func(ctx context.Context) (metav1.Object, error) {
		return c.kind.Get(ctx, c.client, rs.Namespace, rs.Name)
	})
	adopt := func(ctx context.Context, pod *corev1.Pod) error {
		_, err := c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType,
			ownerref.AdoptPatch(rs, c.gvk, pod.UID), metav1.PatchOptions{})
		return err
	}
	release := func(ctx context.Context, pod *corev1.Pod) error {
		_, err := c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType,
			ownerref.ReleasePatch(rs.UID, pod.UID), metav1.PatchOptions{})
		return err
	}
	claimed, err := ownerref.Claim(ctx, rs, c.gvk, selector, pods, adopt, release, canAdopt)
	if err != nil {
		return nil, fmt.Errorf("failed to claim pods of %s %s/%s: %w", c.gvk.Kind, rs.Namespace, rs.Name, err)
	}
	return claimed, nil
}

// clonePodSlice copies the slice (not the pods) so that sorting it never
// reorders a slice the caller holds.
func clonePodSlice(pods []*corev1.Pod) []*corev1.Pod {
	return append([]*corev1.Pod(nil), pods...)
}

// manageReplicas creates or deletes pods so that rs controls spec.replicas
// active pods, at most burstReplicas at a time. It does not modify pods.
func (c *Controller) manageReplicas(ctx context.Context, pods []*corev1.Pod, rs *appsv1.ReplicaSet) error {
	key, err := cache.MetaNamespaceKeyFunc(rs)
	if err != nil {
		return fmt.Errorf("no key for ReplicaSet: %w", err)
	}
	diff := len(pods) - int(replicas(rs))
	switch {
	case diff < 0:
		diff = min(-diff, c.burstReplicas)
		// Expect every creation before issuing any, so that the watch events
		// of the first pods cannot satisfy the expectations early.
		c.expectations.ExpectCreations(key, diff)
		c.log.Debug("too few replicas", "replicaSet", key, "need", replicas(rs), "creating", diff)
		ref := ownerref.NewControllerRef(rs, c.gvk)
		created, err := slowStartBatch(ctx, diff, slowStartInitialBatchSize, func(ctx context.Context) error {
			err := c.createPod(ctx, rs, ref)
			if err != nil && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				// Every creation in a terminating namespace fails: nothing to do.
				return nil
			}
			return err
		})
		// The pods never attempted (and those that failed) will not be
		// observed: stop expecting them; the next sync tries again.
		for range diff - created {
			c.expectations.CreationObserved(key)
		}
		return err

	case diff > 0:
		diff = min(diff, c.burstReplicas)
		c.log.Debug("too many replicas", "replicaSet", key, "need", replicas(rs), "deleting", diff)
		related, err := c.indirectlyRelatedPods(rs)
		if err != nil {
			c.log.Error("failed to find related pods; ranking without them", "replicaSet", key, "err", err)
		}
		victims := podsToDelete(pods, related, diff, metav1.NewTime(c.clock.Now()))
		// Remember exactly which pods go, so that each deletion is counted
		// once whether it shows as a deletionTimestamp or as the delete.
		keys := make([]string, 0, len(victims))
		for _, p := range victims {
			keys = append(keys, podKey(p))
		}
		c.expectations.ExpectDeletions(key, keys)

		errCh := make(chan error, len(victims))
		var wg sync.WaitGroup
		for _, p := range victims {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.deletePodOf(ctx, rs, p.Name); err != nil {
					// The deletion will not be observed.
					c.expectations.DeletionObserved(key, podKey(p))
					if !apierrors.IsNotFound(err) {
						errCh <- err
					}
				}
			}()
		}
		wg.Wait()
		select {
		case err := <-errCh:
			// Likely all the same: report the first.
			return err
		default:
		}
	}
	return nil
}

// slowStartBatch calls fn count times, in batches that start at initial and
// double after every batch that fully succeeds; the calls of one batch run
// concurrently. After a batch with a failure (or once ctx is done) the rest
// is skipped. It returns the number of successful calls and the first error.
// Many creations that would all fail the same way (a quota, a bad template)
// thus cost one request, not hundreds, and one event.
func slowStartBatch(ctx context.Context, count, initial int, fn func(context.Context) error) (int, error) {
	remaining, successes := count, 0
	for batch := min(remaining, initial); batch > 0; batch = min(2*batch, remaining) {
		if err := ctx.Err(); err != nil {
			return successes, fmt.Errorf("stopped creating pods: %w", err)
		}
		errCh := make(chan error, batch)
		var wg sync.WaitGroup
		for range batch {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := fn(ctx); err != nil {
					errCh <- err
				}
			}()
		}
		wg.Wait()
		successes += batch - len(errCh)
		if len(errCh) > 0 {
			return successes, <-errCh
		}
		remaining -= batch
	}
	return successes, nil
}

// createPod creates one pod from rs's template, controlled by ref, and
// records the outcome as an event on rs.
func (c *Controller) createPod(ctx context.Context, rs *appsv1.ReplicaSet, ref *metav1.OwnerReference) error {
	pod := podFromTemplate(&rs.Spec.Template, rs.Name, ref)
	if len(pod.Labels) == 0 {
		return errors.New("unable to create pods, no labels")
	}
	created, err := c.client.CoreV1().Pods(rs.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		if !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			c.recorder.Eventf(c.kind.EventObject(rs), corev1.EventTypeWarning, reasonFailedCreate, "Error creating: %v", err)
		}
		return fmt.Errorf("failed to create pod for %s %s/%s: %w", c.gvk.Kind, rs.Namespace, rs.Name, err)
	}
	c.recorder.Eventf(c.kind.EventObject(rs), corev1.EventTypeNormal, reasonSuccessfulCreate, "Created pod: %v", created.Name)
	return nil
}

// podFromTemplate builds a pod from template: its labels, annotations,
// finalizers and spec, the name prefix "<owner>-" and the controller reference.
func podFromTemplate(template *corev1.PodTemplateSpec, ownerName string, ref *metav1.OwnerReference) *corev1.Pod {
	t := template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Labels:       t.Labels,
			Annotations:  t.Annotations,
			Finalizers:   t.Finalizers,
			GenerateName: podNamePrefix(ownerName),
		},
		Spec: t.Spec,
	}
	if ref != nil {
		pod.OwnerReferences = append(pod.OwnerReferences, *ref)
	}
	return pod
}

// podNamePrefix is "<name>-" when that is a valid name prefix, else name.
func podNamePrefix(name string) string {
	prefix := name + "-"
	// A generateName prefix is valid when it is a DNS subdomain once the
	// random suffix follows the dash (upstream masks the trailing dash).
	if len(validation.IsDNS1123Subdomain(prefix[:len(prefix)-1]+"a")) != 0 {
		return name
	}
	return prefix
}

// deletePodOf deletes the pod name of rs and records the outcome as an event.
func (c *Controller) deletePodOf(ctx context.Context, rs *appsv1.ReplicaSet, name string) error {
	err := c.client.CoreV1().Pods(rs.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return err
		}
		c.recorder.Eventf(c.kind.EventObject(rs), corev1.EventTypeWarning, reasonFailedDelete, "Error deleting: %v", err)
		return fmt.Errorf("failed to delete pod %s/%s: %w", rs.Namespace, name, err)
	}
	c.recorder.Eventf(c.kind.EventObject(rs), corev1.EventTypeNormal, reasonSuccessfulDelete, "Deleted pod: %v", name)
	return nil
}

// indirectlyRelatedPods returns the pods selected by every ReplicaSet that
// has the same controller as rs (the ReplicaSets of one Deployment), each
// once. With no controller it returns nil.
func (c *Controller) indirectlyRelatedPods(rs *appsv1.ReplicaSet) ([]*corev1.Pod, error) {
	ref := metav1.GetControllerOfNoCopy(rs)
	if ref == nil {
		return nil, nil
	}
	siblings, err := c.byIndex(controllerUIDIndex, string(ref.UID))
	if err != nil {
		return nil, fmt.Errorf("failed to find %ss controlled by %s: %w", c.gvk.Kind, ref.UID, err)
	}
	var related []*corev1.Pod
	seen := make(map[types.UID]bool)
	for _, sibling := range siblings {
		selector, err := metav1.LabelSelectorAsSelector(sibling.Spec.Selector)
		if err != nil {
			continue // an invalid selector matches no pods
		}
		pods, err := c.podLister.Pods(sibling.Namespace).List(selector)
		if err != nil {
			return nil, fmt.Errorf("failed to list pods of ReplicaSet %s/%s: %w", sibling.Namespace, sibling.Name, err)
		}
		for _, p := range pods {
			if !seen[p.UID] {
				seen[p.UID] = true
				related = append(related, p)
			}
		}
	}
	return related, nil
}
