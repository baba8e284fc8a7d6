// Package deployment is the Deployment controller. It turns each Deployment
// into ReplicaSets, one per pod template (named <deployment>-<pod-template-hash>),
// and moves replicas between them: a rolling update within maxSurge and
// maxUnavailable, or Recreate; proportional scaling of every active ReplicaSet
// when the size changes in the middle of a rollout; revision annotations that
// kubectl rollout history and undo read; the cleanup of old ReplicaSets beyond
// revisionHistoryLimit; and the status and conditions (Available, Progressing
// with its deadline) that kubectl rollout status waits on.
//
// It follows upstream's pkg/controller/deployment: informers on Deployments,
// ReplicaSets and Pods feed a rate-limited queue of Deployment keys, and Sync
// computes everything from the listers' current view.
package deployment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/kubette/kubette/internal/controller/worker"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/ownerref"
)

// Name is the controller's name in the controller manager's registry.
const Name = "deployment"

// component is the event source of the controller's Events.
const component = "deployment-controller"

// maxRetries is how many times a failing Deployment is retried (rate-limited)
// before it is dropped until its next event.
const maxRetries = 15

// deploymentKind is the kind the controller references in owner references.
func deploymentKind() schema.GroupVersionKind {
	return appsv1.SchemeGroupVersion.WithKind("Deployment")
}

// Controller syncs Deployments with their ReplicaSets.
type Controller struct {
	client    kubernetes.Interface
	recorder  record.EventRecorder
	dLister   appslisters.DeploymentLister
	rsLister  appslisters.ReplicaSetLister
	podLister corelisters.PodLister
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
	clock     clock.PassiveClock
	log       *slog.Logger
}

var _ controller.Runner = (*Controller)(nil)

// New builds the Deployment controller and registers its Deployment,
// ReplicaSet and Pod informers with d.Informers.
func New(d controller.Deps) (*Controller, error) {
	if d.Client == nil || d.Informers == nil || d.Recorder == nil {
		return nil, errors.New("deployment controller: Client, Informers and Recorder are required")
	}
	c := &Controller{
		client:   d.Client,
		recorder: d.Recorder(component),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: Name}),
		clock: clock.RealClock{},
		log:   slog.Default().With("controller", Name),
	}
	dInformer := d.Informers.Apps().V1().Deployments()
	rsInformer := d.Informers.Apps().V1().ReplicaSets()
	podInformer := d.Informers.Core().V1().Pods()
	dReg, err := dInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addDeployment,
		UpdateFunc: c.updateDeployment,
		DeleteFunc: c.deleteDeployment,
	})
	if err != nil {
		return nil, fmt.Errorf("deployment controller: deployment event handler: %w", err)
	}
	rsReg, err := rsInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addReplicaSet,
		UpdateFunc: c.updateReplicaSet,
		DeleteFunc: c.deleteReplicaSet,
	})
	if err != nil {
		return nil, fmt.Errorf("deployment controller: replica set event handler: %w", err)
	}
	podReg, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: c.deletePod,
	})
	if err != nil {
		return nil, fmt.Errorf("deployment controller: pod event handler: %w", err)
	}
	c.dLister = dInformer.Lister()
	c.rsLister = rsInformer.Lister()
	c.podLister = podInformer.Lister()
	c.synced = []cache.InformerSynced{dReg.HasSynced, rsReg.HasSynced, podReg.HasSynced}
	return c, nil
}

// Run waits for the informers to sync, then runs workers until ctx is done;
// it returns after every worker stopped.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, c.workerOptions(workers))
}

// workerOptions are the options of the controller's workers.
func (c *Controller) workerOptions(workers int) worker.Options {
	return worker.Options{
		Name: "deployment", Workers: workers, Synced: c.synced, Sync: c.Sync, Log: c.log,
		OnError: c.handleErr,
	}
}

// handleErr forgets a key whose namespace is going away, retries a failing
// one with backoff, and drops it after maxRetries.
func (c *Controller) handleErr(key string, err error) bool {
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		c.queue.Forget(key)
		return true
	}
	if c.queue.NumRequeues(key) < maxRetries {
		c.log.Debug("Error syncing deployment", "deployment", key, "err", err)
		c.queue.AddRateLimited(key)
		return true
	}
	c.log.Info("Dropping deployment out of the queue", "deployment", key, "err", err)
	c.queue.Forget(key)
	return true
}

func (c *Controller) enqueue(d *appsv1.Deployment) {
	key, err := cache.MetaNamespaceKeyFunc(d)
	if err != nil {
		c.log.Error("Cannot get the key of a deployment", "err", err)
		return
	}
	c.queue.Add(key)
}

func (c *Controller) enqueueRateLimited(d *appsv1.Deployment) {
	key, err := cache.MetaNamespaceKeyFunc(d)
	if err != nil {
		c.log.Error("Cannot get the key of a deployment", "err", err)
		return
	}
	c.queue.AddRateLimited(key)
}

// enqueueAfter queues d after a delay (the progress deadline check).
func (c *Controller) enqueueAfter(d *appsv1.Deployment, after time.Duration) {
	key, err := cache.MetaNamespaceKeyFunc(d)
	if err != nil {
		c.log.Error("Cannot get the key of a deployment", "err", err)
		return
	}
	c.queue.AddAfter(key, after)
}

func (c *Controller) addDeployment(obj any) {
	if d, ok := obj.(*appsv1.Deployment); ok {
		c.enqueue(d)
	}
}

func (c *Controller) updateDeployment(_, cur any) {
	if d, ok := cur.(*appsv1.Deployment); ok {
		c.enqueue(d)
	}
}

func (c *Controller) deleteDeployment(obj any) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		tombstone, isTombstone := obj.(cache.DeletedFinalStateUnknown)
		if !isTombstone {
			c.log.Error("Unexpected object in a deployment delete event", "type", fmt.Sprintf("%T", obj))
			return
		}
		if d, ok = tombstone.Obj.(*appsv1.Deployment); !ok {
			c.log.Error("Tombstone holds an object that is not a deployment", "type", fmt.Sprintf("%T", tombstone.Obj))
			return
		}
	}
	c.enqueue(d)
}

// addReplicaSet queues the Deployment that controls a new ReplicaSet, or, for
// an orphan, every Deployment whose selector matches it (one may adopt it).
func (c *Controller) addReplicaSet(obj any) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return
	}
	if rs.DeletionTimestamp != nil {
		// Seen for the first time already being deleted (a restart).
		c.deleteReplicaSet(rs)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(rs); ref != nil {
		if d := c.resolveControllerRef(rs.Namespace, ref); d != nil {
			c.enqueue(d)
		}
		return
	}
	for _, d := range c.deploymentsForReplicaSet(rs) {
		c.enqueue(d)
	}
}

// updateReplicaSet queues the Deployments a ReplicaSet change concerns: its
// former and current controllers, or, for an orphan whose labels or owner
// changed, every Deployment that may adopt it.
func (c *Controller) updateReplicaSet(old, cur any) {
	oldRS, ok1 := old.(*appsv1.ReplicaSet)
	curRS, ok2 := cur.(*appsv1.ReplicaSet)
	if !ok1 || !ok2 || curRS.ResourceVersion == oldRS.ResourceVersion {
		return // a resync: nothing changed
	}
	curRef := metav1.GetControllerOfNoCopy(curRS)
	oldRef := metav1.GetControllerOfNoCopy(oldRS)
	refChanged := !reflect.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if d := c.resolveControllerRef(oldRS.Namespace, oldRef); d != nil {
			c.enqueue(d)
		}
	}
	if curRef != nil {
		if d := c.resolveControllerRef(curRS.Namespace, curRef); d != nil {
			c.enqueue(d)
		}
		return
	}
	if refChanged || !reflect.DeepEqual(curRS.Labels, oldRS.Labels) {
		for _, d := range c.deploymentsForReplicaSet(curRS) {
			c.enqueue(d)
		}
	}
}

// deleteReplicaSet queues the Deployment that controlled a deleted ReplicaSet.
func (c *Controller) deleteReplicaSet(obj any) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		tombstone, isTombstone := obj.(cache.DeletedFinalStateUnknown)
		if !isTombstone {
			c.log.Error("Unexpected object in a replica set delete event", "type", fmt.Sprintf("%T", obj))
			return
		}
		if rs, ok = tombstone.Obj.(*appsv1.ReplicaSet); !ok {
			c.log.Error("Tombstone holds an object that is not a replica set", "type", fmt.Sprintf("%T", tombstone.Obj))
			return
		}
	}
	ref := metav1.GetControllerOfNoCopy(rs)
	if ref == nil {
		return // nobody cares about a deleted orphan
	}
	if d := c.resolveControllerRef(rs.Namespace, ref); d != nil {
		c.enqueue(d)
	}
}

// deletePod queues a Recreate Deployment once the last of its pods is gone:
// the new ReplicaSet waits for exactly that.
func (c *Controller) deletePod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		tombstone, isTombstone := obj.(cache.DeletedFinalStateUnknown)
		if !isTombstone {
			c.log.Error("Unexpected object in a pod delete event", "type", fmt.Sprintf("%T", obj))
			return
		}
		if pod, ok = tombstone.Obj.(*corev1.Pod); !ok {
			c.log.Error("Tombstone holds an object that is not a pod", "type", fmt.Sprintf("%T", tombstone.Obj))
			return
		}
	}
	d := c.deploymentForPod(pod)
	if d == nil || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		return
	}
	// Upstream lists the ReplicaSets from the API server here; the lister
	// keeps the event handler from blocking on the network.
	rsList, err := c.listOwnedReplicaSets(d)
	if err != nil {
		return
	}
	podMap, err := c.getPodMapForDeployment(d, rsList)
	if err != nil {
		return
	}
	for _, pods := range podMap {
		if len(pods) > 0 {
			return
		}
	}
	c.enqueue(d)
}

// deploymentForPod returns the Deployment controlling the ReplicaSet that
// controls pod, or nil.
func (c *Controller) deploymentForPod(pod *corev1.Pod) *appsv1.Deployment {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return nil
	}
	rs, err := c.rsLister.ReplicaSets(pod.Namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return nil
	}
	rsRef := metav1.GetControllerOfNoCopy(rs)
	if rsRef == nil {
		return nil
	}
	return c.resolveControllerRef(rs.Namespace, rsRef)
}

// resolveControllerRef returns the Deployment a controller reference names,
// or nil when it names another kind or a Deployment that no longer exists
// (same name, other UID).
func (c *Controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *appsv1.Deployment {
	if ref.Kind != deploymentKind().Kind {
		return nil
	}
	d, err := c.dLister.Deployments(namespace).Get(ref.Name)
	if err != nil || d.UID != ref.UID {
		return nil
	}
	return d
}

// deploymentsForReplicaSet returns the Deployments whose selector matches rs's
// labels (more than one is a user error; adoption decides).
func (c *Controller) deploymentsForReplicaSet(rs *appsv1.ReplicaSet) []*appsv1.Deployment {
	if len(rs.Labels) == 0 {
		return nil
	}
	ds, err := c.dLister.Deployments(rs.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []*appsv1.Deployment
	for _, d := range ds {
		selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || selector.Empty() || !selector.Matches(labels.Set(rs.Labels)) {
			continue
		}
		out = append(out, d)
	}
	if len(out) > 1 {
		c.log.Debug("More than one deployment selects a replica set", "replicaSet", rs.Namespace+"/"+rs.Name)
	}
	return out
}

// listOwnedReplicaSets returns the ReplicaSets in the lister that d's selector
// matches and d controls.
func (c *Controller) listOwnedReplicaSets(d *appsv1.Deployment) ([]*appsv1.ReplicaSet, error) {
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("deployment %s/%s has an invalid label selector: %w", d.Namespace, d.Name, err)
	}
	all, err := c.rsLister.ReplicaSets(d.Namespace).List(selector)
	if err != nil {
		return nil, fmt.Errorf("list replica sets of deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	var owned []*appsv1.ReplicaSet
	for _, rs := range all {
		if ref := metav1.GetControllerOfNoCopy(rs); ref != nil && ref.UID == d.UID {
			owned = append(owned, rs)
		}
	}
	return owned, nil
}

// Sync converges the Deployment with the given namespace/name key: it claims
// its ReplicaSets, then scales (a scaling event or a paused Deployment) or
// rolls out with the Deployment's strategy, and writes the status. It is not
// meant to run concurrently for one key (the queue guarantees that).
func (c *Controller) Sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("invalid deployment key %q: %w", key, err)
	}
	deployment, err := c.dLister.Deployments(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get deployment %s: %w", key, err)
	}
	d := deployment.DeepCopy() // never change the cache

	everything := metav1.LabelSelector{}
	if reflect.DeepEqual(d.Spec.Selector, &everything) {
		c.recorder.Eventf(d, corev1.EventTypeWarning, "SelectingAll", "This deployment is selecting all pods. A non-empty selector is required.")
		if d.Status.ObservedGeneration < d.Generation {
			d.Status.ObservedGeneration = d.Generation
			_ = c.updateStatus(ctx, d) // as upstream: best effort
		}
		return nil
	}

	rsList, err := c.getReplicaSetsForDeployment(ctx, d)
	if err != nil {
		return err
	}
	podMap, err := c.getPodMapForDeployment(d, rsList)
	if err != nil {
		return err
	}
	if d.DeletionTimestamp != nil {
		return c.syncStatusOnly(ctx, d, rsList)
	}
	// A paused (or resumed) Deployment gets an Unknown Progressing condition, so
	// that a resume does not find the deadline long exceeded.
	if err := c.checkPausedConditions(ctx, d); err != nil {
		return err
	}
	if d.Spec.Paused {
		return c.sync(ctx, d, rsList)
	}
	scaling, err := c.isScalingEvent(ctx, d, rsList)
	if err != nil {
		return err
	}
	if scaling {
		return c.sync(ctx, d, rsList)
	}
	switch d.Spec.Strategy.Type {
	case appsv1.RecreateDeploymentStrategyType:
		return c.rolloutRecreate(ctx, d, rsList, podMap)
	case appsv1.RollingUpdateDeploymentStrategyType:
		return c.rolloutRolling(ctx, d, rsList)
	}
	return fmt.Errorf("unexpected deployment strategy type: %s", d.Spec.Strategy.Type)
}

// getReplicaSetsForDeployment returns the ReplicaSets d controls, after
// adopting matching orphans and releasing owned ones that no longer match.
func (c *Controller) getReplicaSetsForDeployment(ctx context.Context, d *appsv1.Deployment) ([]*appsv1.ReplicaSet, error) {
	// All of the namespace: owned ReplicaSets that no longer match are released.
	rsList, err := c.rsLister.ReplicaSets(d.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list replica sets: %w", err)
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("deployment %s/%s has an invalid label selector: %w", d.Namespace, d.Name, err)
	}
	rsClient := c.client.AppsV1().ReplicaSets(d.Namespace)
	adopt := func(ctx context.Context, rs *appsv1.ReplicaSet) error {
		_, err := rsClient.Patch(ctx, rs.Name, types.StrategicMergePatchType,
			ownerref.AdoptPatch(d, deploymentKind(), rs.UID), metav1.PatchOptions{})
		return err
	}
	release := func(ctx context.Context, rs *appsv1.ReplicaSet) error {
		_, err := rsClient.Patch(ctx, rs.Name, types.StrategicMergePatchType,
			ownerref.ReleasePatch(d.UID, rs.UID), metav1.PatchOptions{})
		return err
	}
	// Before the first adoption, check with a live read that d was not deleted
	// (or replaced) since the cache saw it.
	canAdopt := ownerref.RecheckOwner(d, func(ctx context.Context) (metav1.Object, error) {
		return c.client.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
	})
	return ownerref.Claim(ctx, d, deploymentKind(), selector, rsList, adopt, release, canAdopt)
}

// getPodMapForDeployment groups the pods d's selector matches by the UID of
// the ReplicaSet (of rsList) controlling them; terminal pods included, since
// Recreate must know that no old pod runs.
func (c *Controller) getPodMapForDeployment(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) (map[types.UID][]*corev1.Pod, error) {
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("deployment %s/%s has an invalid label selector: %w", d.Namespace, d.Name, err)
	}
	pods, err := c.podLister.Pods(d.Namespace).List(selector)
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	podMap := make(map[types.UID][]*corev1.Pod, len(rsList))
	for _, rs := range rsList {
		podMap[rs.UID] = []*corev1.Pod{}
	}
	for _, pod := range pods {
		ref := metav1.GetControllerOfNoCopy(pod)
		if ref == nil {
			continue
		}
		if _, ok := podMap[ref.UID]; ok {
			podMap[ref.UID] = append(podMap[ref.UID], pod)
		}
	}
	return podMap, nil
}

// updateStatus writes d's status and keeps d's resourceVersion current, so
// that a later status write of the same sync does not conflict with this one.
func (c *Controller) updateStatus(ctx context.Context, d *appsv1.Deployment) error {
	out, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("update status of deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	if out != nil && out.ResourceVersion != "" {
		d.ResourceVersion = out.ResourceVersion
	}
	return nil
}
