package daemonset

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/kubette/kubette/internal/controller/history"
	"github.com/kubette/kubette/internal/controller/ownerref"
)

// Event reasons, as upstream's.
const (
	reasonSelectingAll     = "SelectingAll"
	reasonFailedDaemonPod  = "FailedDaemonPod"
	reasonSuccessfulCreate = "SuccessfulCreate"
	reasonFailedCreate     = "FailedCreate"
	reasonSuccessfulDelete = "SuccessfulDelete"
	reasonFailedDelete     = "FailedDelete"
)

// Sync brings the DaemonSet of key ("namespace/name") to its desired state: the
// revision of its template, a pod on every node that should run one and none
// elsewhere, the rolling update, the history and the status. It reads the informer
// caches and is never called concurrently for one key.
func (c *Controller) Sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("invalid key %q: %w", key, err)
	}
	ds, err := c.dsLister.DaemonSets(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.expectations.DeleteExpectations(key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to get DaemonSet %s from cache: %w", key, err)
	}
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		c.log.Error("invalid selector", "daemonSet", key, "err", err)
		return nil
	}
	if selector.Empty() {
		c.recorder.Event(ds, corev1.EventTypeWarning, reasonSelectingAll, "This daemon set is selecting all pods. A non-empty selector is required.")
		return nil
	}
	if ds.DeletionTimestamp != nil {
		// The garbage collector removes the pods; nothing to manage any more.
		return nil
	}
	nodes, err := c.nodeLister.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("failed to list nodes: %w", err)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })

	revs, err := c.constructHistory(ctx, ds, selector)
	if err != nil {
		return fmt.Errorf("failed to construct revisions of DaemonSet %s: %w", key, err)
	}
	hash := revs.cur.Labels[history.HashLabel]
	byNode, err := c.podsByNode(ctx, ds, selector)
	if err != nil {
		return err
	}
	if !c.expectations.SatisfiedExpectations(key) {
		return c.updateStatus(ctx, ds, nodes, byNode, hash, revs.collisionCount)
	}
	if err := c.manage(ctx, ds, nodes, byNode, hash); err != nil {
		return err
	}
	if c.expectations.SatisfiedExpectations(key) && ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if err := c.rollingUpdate(ctx, ds, nodes, byNode, hash); err != nil {
			return err
		}
	}
	if err := c.cleanupHistory(ctx, ds, revs.old, byNode); err != nil {
		return err
	}
	return c.updateStatus(ctx, ds, nodes, byNode, hash, revs.collisionCount)
}

// claimedPods returns the pods the DaemonSet controls, adopting matching orphans and
// releasing its pods that no longer match.
func (c *Controller) claimedPods(ctx context.Context, ds *appsv1.DaemonSet, selector labels.Selector) ([]*corev1.Pod, error) {
	all, err := c.podLister.Pods(ds.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("failed to list pods of %s: %w", ds.Namespace, err)
	}
	pods := c.client.CoreV1().Pods(ds.Namespace)
	return ownerref.Claim(ctx, ds, controllerKind, selector, all,
		func(ctx context.Context, p *corev1.Pod) error {
			_, err := pods.Patch(ctx, p.Name, types.StrategicMergePatchType, ownerref.AdoptPatch(ds, controllerKind, p.UID), metav1.PatchOptions{})
			return err
		},
		func(ctx context.Context, p *corev1.Pod) error {
			_, err := pods.Patch(ctx, p.Name, types.StrategicMergePatchType, ownerref.ReleasePatch(ds.UID, p.UID), metav1.PatchOptions{})
			return err
		},
		c.recheck(ds))
}

// recheck refuses adoption when the DaemonSet read afresh is another or being deleted.
func (c *Controller) recheck(ds *appsv1.DaemonSet) func(context.Context) error {
	return ownerref.RecheckOwner(ds, func(ctx context.Context) (metav1.Object, error) {
		return c.client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
	})
}

// podsByNode groups the DaemonSet's pods by the node each is for, leaving out pods that
// ended and are being deleted (nothing is left to do with them).
func (c *Controller) podsByNode(ctx context.Context, ds *appsv1.DaemonSet, selector labels.Selector) (map[string][]*corev1.Pod, error) {
	claimed, err := c.claimedPods(ctx, ds, selector)
	if err != nil {
		return nil, err
	}
	out := map[string][]*corev1.Pod{}
	for _, p := range claimed {
		if p.DeletionTimestamp != nil && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) {
			continue
		}
		node, err := targetNode(p)
		if err != nil {
			c.log.Info("daemon pod without a node", "pod", podKey(p), "err", err)
			continue
		}
		out[node] = append(out[node], p)
	}
	return out, nil
}

// manage creates the pods that nodes miss and deletes the pods that must go: failed or
// succeeded pods (failed ones after the node's back-off), extra pods on a node, pods on
// nodes that no longer admit the daemon, and unscheduled pods of nodes that are gone.
func (c *Controller) manage(ctx context.Context, ds *appsv1.DaemonSet, nodes []*corev1.Node, byNode map[string][]*corev1.Pod, hash string) error {
	tmpl := podTemplate(ds, hash)
	key := ds.Namespace + "/" + ds.Name
	var create []string
	var del []*corev1.Pod
	known := map[string]bool{}
	for _, node := range nodes {
		known[node.Name] = true
		run, keep := shouldRun(tmpl, node)
		pods := byNode[node.Name]
		switch {
		case run && len(pods) == 0:
			create = append(create, node.Name)
		case keep:
			del = append(del, c.excessPods(ds, key, node.Name, pods, hash)...)
		case len(pods) > 0:
			for _, p := range pods {
				if p.DeletionTimestamp == nil {
					del = append(del, p)
				}
			}
		}
	}
	for node, pods := range byNode {
		if known[node] {
			continue
		}
		for _, p := range pods {
			if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
				del = append(del, p)
			}
		}
	}
	return c.syncNodes(ctx, ds, del, create, hash)
}

// excessPods returns the pods to delete on a node that keeps the daemon: ended pods
// (a failed one only once the node's back-off allows), then all running pods but the
// oldest, or, with surge, all but the ones the rolling update still needs.
func (c *Controller) excessPods(ds *appsv1.DaemonSet, key, node string, pods []*corev1.Pod, hash string) []*corev1.Pod {
	var del, running []*corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		switch p.Status.Phase {
		case corev1.PodFailed:
			bk := key + "/" + node
			now := c.clock.Now()
			if c.failedBackoff.IsInBackOffSinceUpdate(bk, now) {
				c.queue.AddAfter(key, c.failedBackoff.Get(bk))
				continue
			}
			c.failedBackoff.Next(bk, now)
			c.recorder.Eventf(ds, corev1.EventTypeWarning, reasonFailedDaemonPod,
				"Found failed daemon pod %s/%s on node %s, will try to kill it", p.Namespace, p.Name, node)
			del = append(del, p)
		case corev1.PodSucceeded:
			del = append(del, p)
		default:
			running = append(running, p)
		}
	}
	if len(running) <= 1 {
		return del
	}
	sortOldestFirst(running)
	if !allowsSurge(ds) {
		return append(del, running[1:]...)
	}
	// With surge a node may run an old pod and a new one while the new one is not
	// ready; then the old one goes. Every other pod goes at once.
	gen, hasGen := templateGeneration(ds)
	var oldestNew, oldestOld *corev1.Pod
	for _, p := range running {
		if isUpdated(p, hash, gen, hasGen) {
			if oldestNew == nil {
				oldestNew = p
				continue
			}
		} else if oldestOld == nil {
			oldestOld = p
			continue
		}
		del = append(del, p)
	}
	if oldestNew != nil && oldestOld != nil && (ready(oldestNew) || !ready(oldestOld)) {
		del = append(del, oldestOld)
	}
	return del
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// sortOldestFirst orders pods by creation time, then by name.
func sortOldestFirst(pods []*corev1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
}

// syncNodes deletes pods and creates one pod on each named node, at most burstReplicas
// of each per sync, creating in batches that double after each success (upstream's
// slow start), so that a template the API refuses fails once instead of per node.
func (c *Controller) syncNodes(ctx context.Context, ds *appsv1.DaemonSet, del []*corev1.Pod, create []string, hash string) error {
	key := ds.Namespace + "/" + ds.Name
	if len(create) > burstReplicas {
		create = create[:burstReplicas]
	}
	if len(del) > burstReplicas {
		del = del[:burstReplicas]
	}
	delKeys := make([]string, len(del))
	for i, p := range del {
		delKeys[i] = podKey(p)
	}
	c.expectations.ExpectCreations(key, len(create))
	c.expectations.ExpectDeletions(key, delKeys)

	var mu sync.Mutex
	var errs []error
	addErr := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	tmpl := podTemplate(ds, hash)
	pending := create
	for batch := 1; len(pending) > 0; batch *= 2 {
		n := min(batch, len(pending))
		var wg sync.WaitGroup
		var failed bool
		for _, node := range pending[:n] {
			wg.Go(func() {
				if err := c.createPod(ctx, ds, tmpl, node); err != nil {
					c.expectations.CreationObserved(key)
					mu.Lock()
					failed = true
					mu.Unlock()
					addErr(err)
				}
			})
		}
		wg.Wait()
		pending = pending[n:]
		if failed {
			// The rest are not attempted now: lower the expectations by them.
			for range pending {
				c.expectations.CreationObserved(key)
			}
			break
		}
	}
	var wg sync.WaitGroup
	for _, p := range del {
		wg.Go(func() {
			err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
			switch {
			case err == nil:
				c.recorder.Eventf(ds, corev1.EventTypeNormal, reasonSuccessfulDelete, "Deleted pod: %s", p.Name)
			case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
				c.expectations.DeletionObserved(key, podKey(p))
			default:
				c.expectations.DeletionObserved(key, podKey(p))
				c.recorder.Eventf(ds, corev1.EventTypeWarning, reasonFailedDelete, "Error deleting: %v", err)
				addErr(fmt.Errorf("failed to delete pod %s: %w", podKey(p), err))
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// createPod creates the daemon pod of node from tmpl.
func (c *Controller) createPod(ctx context.Context, ds *appsv1.DaemonSet, tmpl *corev1.PodTemplateSpec, node string) error {
	t := tmpl.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    ds.Name + "-",
			Namespace:       ds.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*ownerref.NewControllerRef(ds, controllerKind)},
		},
		Spec: t.Spec,
	}
	pod.Spec.Affinity = nodeNameAffinity(pod.Spec.Affinity, node)
	created, err := c.client.CoreV1().Pods(ds.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil // the namespace goes, and the DaemonSet with it
		}
		c.recorder.Eventf(ds, corev1.EventTypeWarning, reasonFailedCreate, "Error creating: %v", err)
		return fmt.Errorf("failed to create a pod of DaemonSet %s/%s on node %s: %w", ds.Namespace, ds.Name, node, err)
	}
	c.recorder.Eventf(ds, corev1.EventTypeNormal, reasonSuccessfulCreate, "Created pod: %s", created.Name)
	return nil
}

// requeueAfter wakes the DaemonSet again after d.
func (c *Controller) requeueAfter(ds *appsv1.DaemonSet, d time.Duration) {
	c.queue.AddAfter(ds.Namespace+"/"+ds.Name, d)
}
