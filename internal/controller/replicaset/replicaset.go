// Package replicaset is the ReplicaSet controller: it keeps the number of
// active pods a ReplicaSet controls equal to spec.replicas, adopting matching
// orphans and releasing pods that no longer match, and reports what it sees
// in the ReplicaSet's status. It follows upstream's
// k8s.io/kubernetes pkg/controller/replicaset.
//
// Event handlers only turn pod and ReplicaSet changes into ReplicaSet keys on a
// rate-limited work queue; workers take a key and run Sync, which reads the
// informer caches, decides, and writes through the API.
package replicaset

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/kubette/kubette/internal/controller/worker"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/expectations"
	"github.com/kubette/kubette/internal/controller/podstate"
)

// Name is the controller's name in the controller manager's registry.
const Name = "replicaset"

// BurstReplicas bounds how many pods one sync creates or deletes; the rest
// wait until the watch events of these were observed.
const BurstReplicas = 500

// statusUpdateRetries is how many times a failed status update is retried
// after re-reading the ReplicaSet before the key is requeued.
const statusUpdateRetries = 1

// slowStartInitialBatchSize is the size of the first batch of pod creations.
const slowStartInitialBatchSize = 1

// controllerUIDIndex indexes ReplicaSets by the UID of their controller, to
// find sibling ReplicaSets of one Deployment.
const controllerUIDIndex = "controllerUID"

// eventComponent is the component name on the events the controller records.
const eventComponent = "replicaset-controller"

// Event reasons, as upstream.
const (
	reasonSuccessfulCreate = "SuccessfulCreate"
	reasonFailedCreate     = "FailedCreate"
	reasonSuccessfulDelete = "SuccessfulDelete"
	reasonFailedDelete     = "FailedDelete"
)

// controllerKind is the kind of the objects this controller syncs.
var controllerKind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")

// Controller syncs ReplicaSets, or the objects of another Kind seen as ReplicaSets.
type Controller struct {
	kind          Kind
	gvk           schema.GroupVersionKind
	name          string
	client        kubernetes.Interface
	recorder      record.EventRecorder
	log           *slog.Logger
	clock         clock.WithTicker
	burstReplicas int

	expectations *expectations.UIDTrackingControllerExpectations

	// indexer is the cache of the Kind's informer; its objects are read through kind.AsReplicaSet.
	indexer   cache.Indexer
	rsSynced  cache.InformerSynced
	podLister corelisters.PodLister
	podSynced cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
}

var _ controller.Runner = (*Controller)(nil)

// Config says what a Controller syncs and how it names itself.
type Config struct {
	// Kind is the kind of the objects synced (ReplicaSets when nil).
	Kind Kind
	// Name names the controller in its logs and its queue (default Name).
	Name string
	// EventComponent is the source component of its events (default "replicaset-controller").
	EventComponent string
}

// New builds the ReplicaSet controller on the shared informers of d, registering its
// ReplicaSet and pod informers and handlers there; it is the controller's
// controller.Constructor. The Runner it returns is a *Controller. Events are
// recorded as "replicaset-controller".
func New(d controller.Deps) (controller.Runner, error) {
	return NewFor(d, Config{})
}

// NewFor builds the controller for the objects of cfg.Kind (package replication
// builds the replication manager with it).
func NewFor(d controller.Deps, cfg Config) (*Controller, error) {
	return newController(d, cfg, clock.RealClock{}, BurstReplicas)
}

func newController(d controller.Deps, cfg Config, clk clock.WithTicker, burst int) (*Controller, error) {
	if cfg.Kind == nil {
		cfg.Kind = replicaSets{}
	}
	if cfg.Name == "" {
		cfg.Name = Name
	}
	if cfg.EventComponent == "" {
		cfg.EventComponent = eventComponent
	}
	if d.Client == nil || d.Informers == nil || d.Recorder == nil {
		return nil, fmt.Errorf("%s controller needs a client, informers and an event recorder", cfg.Name)
	}
	informer := cfg.Kind.Informer(d.Informers)
	podInformer := d.Informers.Core().V1().Pods()
	gvk := cfg.Kind.GroupVersionKind()
	c := &Controller{
		kind:          cfg.Kind,
		gvk:           gvk,
		name:          cfg.Name,
		client:        d.Client,
		recorder:      d.Recorder(cfg.EventComponent),
		log:           slog.Default().With("controller", cfg.Name),
		clock:         clk,
		burstReplicas: burst,
		expectations:  expectations.NewUIDTrackingControllerExpectations(expectations.NewControllerExpectationsWithClock(clk)),
		indexer:       informer.GetIndexer(),
		rsSynced:      informer.HasSynced,
		podLister:     podInformer.Lister(),
		podSynced:     podInformer.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: cfg.Name, Clock: clk},
		),
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addRS,
		UpdateFunc: c.updateRS,
		DeleteFunc: c.deleteRS,
	}); err != nil {
		return nil, fmt.Errorf("failed to add %s event handler: %w", gvk.Kind, err)
	}
	if err := informer.AddIndexers(cache.Indexers{controllerUIDIndex: indexByControllerUID}); err != nil {
		if _, exists := informer.GetIndexer().GetIndexers()[controllerUIDIndex]; !exists {
			return nil, fmt.Errorf("failed to add %s index %s: %w", gvk.Kind, controllerUIDIndex, err)
		}
	}
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addPod,
		UpdateFunc: c.updatePod,
		DeleteFunc: c.deletePod,
	}); err != nil {
		return nil, fmt.Errorf("failed to add pod event handler: %w", err)
	}
	return c, nil
}

// Run waits for the informer caches, then runs workers until ctx is done and
// returns after every worker stopped.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, c.workerOptions(workers))
}

// workerOptions are the options of the controller's workers.
func (c *Controller) workerOptions(workers int) worker.Options {
	return worker.Options{
		Name: c.name, Workers: workers, Synced: []cache.InformerSynced{c.podSynced, c.rsSynced},
		Sync: c.Sync, Log: c.log,
	}
}

func (c *Controller) enqueue(rs *appsv1.ReplicaSet) {
	key, err := cache.MetaNamespaceKeyFunc(rs)
	if err != nil {
		c.log.Error("no key for ReplicaSet", "err", err)
		return
	}
	c.queue.Add(key)
}

func (c *Controller) enqueueAfter(rs *appsv1.ReplicaSet, d time.Duration) {
	key, err := cache.MetaNamespaceKeyFunc(rs)
	if err != nil {
		c.log.Error("no key for ReplicaSet", "err", err)
		return
	}
	c.queue.AddAfter(key, d)
}

func (c *Controller) addRS(obj any) {
	if rs, ok := c.kind.AsReplicaSet(obj); ok {
		c.enqueue(rs)
	}
}

func (c *Controller) updateRS(oldObj, curObj any) {
	oldRS, ok1 := c.kind.AsReplicaSet(oldObj)
	curRS, ok2 := c.kind.AsReplicaSet(curObj)
	if !ok1 || !ok2 {
		return
	}
	if curRS.UID != oldRS.UID {
		// Deleted and recreated under the same name between two events.
		key, err := cache.MetaNamespaceKeyFunc(oldRS)
		if err == nil {
			c.deleteRS(cache.DeletedFinalStateUnknown{Key: key, Obj: oldRS})
		}
	}
	// Every update is synced, not only spec changes: a resync then retries
	// ReplicaSets whose pod creations failed, and syncs of ReplicaSets that
	// wait on expectations are cheap.
	c.enqueue(curRS)
}

func (c *Controller) deleteRS(obj any) {
	rs, ok := c.kind.AsReplicaSet(obj)
	if !ok {
		tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			c.log.Error("unexpected object in "+c.gvk.Kind+" delete", "object", fmt.Sprintf("%T", obj))
			return
		}
		if rs, ok = c.kind.AsReplicaSet(tombstone.Obj); !ok {
			c.log.Error("tombstone holds no "+c.gvk.Kind, "object", fmt.Sprintf("%T", tombstone.Obj))
			return
		}
	}
	key, err := cache.MetaNamespaceKeyFunc(rs)
	if err != nil {
		return
	}
	// A new ReplicaSet of the same name starts without expectations.
	c.expectations.DeleteExpectations(key)
	c.queue.Add(key)
}

// resolveControllerRef returns the ReplicaSet ref points to in namespace, or
// nil when ref is of another kind or the ReplicaSet of that name has another UID.
// (ReplicaSet stands for the controller's Kind here and below.)
func (c *Controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *appsv1.ReplicaSet {
	// Names are looked up, then the UID verified; a reference of another kind
	// is not even looked up.
	if ref.Kind != c.gvk.Kind {
		return nil
	}
	rs, ok, err := c.cached(namespace, ref.Name)
	if err != nil || !ok || rs.UID != ref.UID {
		return nil
	}
	return rs
}

// podReplicaSets returns the ReplicaSets whose selector matches pod.
func (c *Controller) podReplicaSets(pod *corev1.Pod) []*appsv1.ReplicaSet {
	rss, err := c.selecting(pod)
	if err != nil {
		return nil
	}
	if len(rss) > 1 {
		c.log.Warn("user error: more than one "+c.gvk.Kind+" selects the pod's labels",
			"pod", pod.Namespace+"/"+pod.Name, "labels", pod.Labels)
	}
	return rss
}

// addPod observes a creation for the pod's controller, or wakes the
// ReplicaSets that may adopt an orphan.
func (c *Controller) addPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if pod.DeletionTimestamp != nil {
		// Seen for the first time already being deleted (e.g. after a restart):
		// not a creation to observe.
		c.deletePod(pod)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		rs := c.resolveControllerRef(pod.Namespace, ref)
		if rs == nil {
			return
		}
		key, err := cache.MetaNamespaceKeyFunc(rs)
		if err != nil {
			return
		}
		c.expectations.CreationObserved(key)
		c.queue.Add(key)
		return
	}
	// An orphan: no controller waits for it, so no creation is observed.
	for _, rs := range c.podReplicaSets(pod) {
		c.enqueue(rs)
	}
}

// updatePod wakes the pod's old and new controllers, or the ReplicaSets that
// may adopt it; a pod being deleted counts as deleted at once.
func (c *Controller) updatePod(oldObj, curObj any) {
	oldPod, ok1 := oldObj.(*corev1.Pod)
	curPod, ok2 := curObj.(*corev1.Pod)
	if !ok1 || !ok2 || curPod.ResourceVersion == oldPod.ResourceVersion {
		// A resync: nothing changed.
		return
	}
	labelChanged := !reflect.DeepEqual(curPod.Labels, oldPod.Labels)
	if curPod.DeletionTimestamp != nil {
		// Graceful deletion: replace the pod now rather than when the kubelet
		// removes it.
		c.deletePod(curPod)
		if labelChanged {
			c.deletePod(oldPod)
		}
		return
	}

	curRef := metav1.GetControllerOfNoCopy(curPod)
	oldRef := metav1.GetControllerOfNoCopy(oldPod)
	refChanged := !reflect.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if rs := c.resolveControllerRef(oldPod.Namespace, oldRef); rs != nil {
			c.enqueue(rs)
		}
	}
	if curRef != nil {
		rs := c.resolveControllerRef(curPod.Namespace, curRef)
		if rs == nil {
			return
		}
		c.enqueue(rs)
		// Availability changes with time, not with an event: look again once
		// the newly ready pod has been ready for minReadySeconds (plus a
		// second against clock skew).
		if !podstate.IsPodReady(oldPod) && podstate.IsPodReady(curPod) && rs.Spec.MinReadySeconds > 0 {
			c.enqueueAfter(rs, time.Duration(rs.Spec.MinReadySeconds)*time.Second+time.Second)
		}
		return
	}
	if labelChanged || refChanged {
		for _, rs := range c.podReplicaSets(curPod) {
			c.enqueue(rs)
		}
	}
}

// deletePod observes a deletion for the pod's controller.
func (c *Controller) deletePod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			c.log.Error("unexpected object in pod delete", "object", fmt.Sprintf("%T", obj))
			return
		}
		if pod, ok = tombstone.Obj.(*corev1.Pod); !ok {
			c.log.Error("tombstone holds no pod", "object", fmt.Sprintf("%T", tombstone.Obj))
			return
		}
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		return // no controller cares about a deleted orphan
	}
	rs := c.resolveControllerRef(pod.Namespace, ref)
	if rs == nil {
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(rs)
	if err != nil {
		return
	}
	c.expectations.DeletionObserved(key, podKey(pod))
	c.queue.Add(key)
}

// podKey is the key of a pod in deletion expectations.
func podKey(pod *corev1.Pod) string {
	return pod.Namespace + "/" + pod.Name
}
