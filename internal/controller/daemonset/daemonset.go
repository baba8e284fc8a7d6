// Package daemonset is the DaemonSet controller: it runs one pod of a DaemonSet on
// every node that its node selector, node affinity and tolerations admit, as
// upstream's k8s.io/kubernetes pkg/controller/daemon behaves in 1.32. Each pod is
// made for one node through a required node affinity on metadata.name and placed
// by the scheduler; it carries the tolerations upstream adds to daemon pods. The
// controller replaces failed pods (with a per-node back-off), removes pods from
// nodes that no longer admit them, rolls a new template out with maxUnavailable or
// maxSurge (or waits for pods to be deleted with OnDelete), keeps the templates in
// ControllerRevisions (controller-revision-hash and pod-template-generation label the
// pods) with a bounded history, and reports the status counts.
//
// Event handlers turn DaemonSet, pod, node and revision changes into DaemonSet keys
// on a rate-limited queue; workers run Sync, which reads the informer caches and
// writes through the API.
package daemonset

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/expectations"
	"github.com/kubette/kubette/internal/controller/history"
	"github.com/kubette/kubette/internal/controller/podstate"
	"github.com/kubette/kubette/internal/controller/worker"
)

// Name is the controller's name in the controller manager's registry.
const Name = "daemonset"

// ClientName is the name upstream's controller manager gives the controller's client
// (and its ServiceAccount, bound to system:controller:daemon-set-controller).
const ClientName = "daemon-set-controller"

// Upstream's limits: at most 250 pods created or deleted per sync, and the back-off of
// failed daemon pods on one node from 1 s to 15 minutes.
const (
	burstReplicas     = 250
	DefaultBackoff    = time.Second
	DefaultMaxBackoff = 15 * time.Minute
)

var controllerKind = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

// Controller syncs DaemonSets.
type Controller struct {
	client   kubernetes.Interface
	history  history.Client
	recorder record.EventRecorder
	log      *slog.Logger
	clock    clock.WithTicker

	expectations *expectations.UIDTrackingControllerExpectations
	// failedBackoff delays the replacement of failed pods per DaemonSet and node.
	failedBackoff *flowcontrol.Backoff

	dsLister   appslisters.DaemonSetLister
	revLister  appslisters.ControllerRevisionLister
	podLister  corelisters.PodLister
	nodeLister corelisters.NodeLister
	synced     []cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
}

var _ controller.Runner = (*Controller)(nil)

// Options tune a Controller (tests use a fake clock; zero values are upstream's).
type Options struct {
	// Clock is the controller's clock (default the real one).
	Clock clock.WithTicker
	// Backoff and MaxBackoff bound the delay before a failed daemon pod is replaced.
	Backoff, MaxBackoff time.Duration
}

// New builds the DaemonSet controller on the shared informers of d; it is the
// controller's controller.Constructor.
func New(d controller.Deps) (controller.Runner, error) { return NewWith(d, Options{}) }

// NewWith builds the DaemonSet controller with options.
func NewWith(d controller.Deps, o Options) (*Controller, error) {
	if d.Client == nil || d.Informers == nil || d.Recorder == nil {
		return nil, fmt.Errorf("daemonset controller needs a client, informers and an event recorder")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	dsInformer := d.Informers.Apps().V1().DaemonSets()
	revInformer := d.Informers.Apps().V1().ControllerRevisions()
	podInformer := d.Informers.Core().V1().Pods()
	nodeInformer := d.Informers.Core().V1().Nodes()
	c := &Controller{
		client:        d.Client,
		history:       history.Client{Client: d.Client},
		recorder:      d.Recorder(ClientName),
		log:           slog.Default().With("controller", Name),
		clock:         o.Clock,
		expectations:  expectations.NewUIDTrackingControllerExpectations(expectations.NewControllerExpectationsWithClock(o.Clock)),
		failedBackoff: flowcontrol.NewFakeBackOff(o.Backoff, o.MaxBackoff, o.Clock),
		dsLister:      dsInformer.Lister(),
		revLister:     revInformer.Lister(),
		podLister:     podInformer.Lister(),
		nodeLister:    nodeInformer.Lister(),
		synced: []cache.InformerSynced{
			dsInformer.Informer().HasSynced, revInformer.Informer().HasSynced,
			podInformer.Informer().HasSynced, nodeInformer.Informer().HasSynced,
		},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: Name, Clock: o.Clock},
		),
	}
	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{dsInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.enqueue, UpdateFunc: func(_, cur any) { c.enqueue(cur) }, DeleteFunc: c.enqueue,
		}},
		{podInformer.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: c.addPod, UpdateFunc: c.updatePod, DeleteFunc: c.deletePod}},
		{nodeInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { c.enqueueAll() },
			UpdateFunc: func(old, cur any) {
				o, ok1 := old.(*corev1.Node)
				n, ok2 := cur.(*corev1.Node)
				if ok1 && ok2 && !nodeChanged(o, n) {
					return
				}
				c.enqueueAll()
			},
			DeleteFunc: func(any) { c.enqueueAll() },
		}},
		{revInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.revisionChanged, UpdateFunc: func(_, cur any) { c.revisionChanged(cur) }, DeleteFunc: c.revisionChanged,
		}},
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return nil, fmt.Errorf("failed to add event handler: %w", err)
		}
	}
	return c, nil
}

// Run waits for the informer caches, then runs workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	go c.collectBackoff(ctx)
	worker.Run(ctx, c.queue, worker.Options{Name: Name, Workers: workers, Synced: c.synced, Sync: c.Sync, Log: c.log})
}

// collectBackoff forgets the back-off of nodes whose pods stopped failing.
func (c *Controller) collectBackoff(ctx context.Context) {
	t := c.clock.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			c.failedBackoff.GC()
		}
	}
}

func (c *Controller) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

// enqueueAll wakes every DaemonSet (a node came, went or changed what it admits).
func (c *Controller) enqueueAll() {
	all, err := c.dsLister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, ds := range all {
		c.enqueue(ds)
	}
}

// nodeChanged reports whether a node update can change which daemons it runs: its
// labels, taints, schedulability or the status of a condition (not their heartbeats).
func nodeChanged(old, cur *corev1.Node) bool {
	if !equality.Semantic.DeepEqual(old.Labels, cur.Labels) || !equality.Semantic.DeepEqual(old.Spec.Taints, cur.Spec.Taints) ||
		old.Spec.Unschedulable != cur.Spec.Unschedulable {
		return true
	}
	if len(old.Status.Conditions) != len(cur.Status.Conditions) {
		return true
	}
	status := map[corev1.NodeConditionType]corev1.ConditionStatus{}
	for _, cond := range old.Status.Conditions {
		status[cond.Type] = cond.Status
	}
	for _, cond := range cur.Status.Conditions {
		if status[cond.Type] != cond.Status {
			return true
		}
	}
	return false
}

// ownerKey returns the key of the DaemonSet that controls obj, if the cache has it.
func (c *Controller) ownerKey(obj metav1.Object) (string, bool) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != controllerKind.Kind || ref.APIVersion != controllerKind.GroupVersion().String() {
		return "", false
	}
	ds, err := c.dsLister.DaemonSets(obj.GetNamespace()).Get(ref.Name)
	if err != nil || ds.UID != ref.UID {
		return "", false
	}
	return ds.Namespace + "/" + ds.Name, true
}

// enqueueSelecting wakes the DaemonSets whose selector matches an orphan's labels.
func (c *Controller) enqueueSelecting(namespace string, set map[string]string) {
	all, err := c.dsLister.DaemonSets(namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, ds := range all {
		sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(set)) {
			c.enqueue(ds)
		}
	}
}

func podKey(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

func (c *Controller) addPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if key, ok := c.ownerKey(pod); ok {
		c.expectations.CreationObserved(key)
		if pod.DeletionTimestamp != nil {
			c.expectations.DeletionObserved(key, podKey(pod))
		}
		c.queue.Add(key)
		return
	}
	if metav1.GetControllerOfNoCopy(pod) == nil {
		c.enqueueSelecting(pod.Namespace, pod.Labels)
	}
}

func (c *Controller) updatePod(oldObj, curObj any) {
	old, ok1 := oldObj.(*corev1.Pod)
	cur, ok2 := curObj.(*corev1.Pod)
	if !ok1 || !ok2 || old.ResourceVersion == cur.ResourceVersion {
		return
	}
	oldKey, oldOwned := c.ownerKey(old)
	curKey, curOwned := c.ownerKey(cur)
	if oldOwned && (!curOwned || oldKey != curKey) {
		c.queue.Add(oldKey)
	}
	if curOwned {
		if cur.DeletionTimestamp != nil {
			c.expectations.DeletionObserved(curKey, podKey(cur))
		}
		c.queue.Add(curKey)
		// A pod that became ready becomes available after minReadySeconds.
		if !podstate.IsPodReady(old) && podstate.IsPodReady(cur) {
			if ref := metav1.GetControllerOfNoCopy(cur); ref == nil {
			} else if ds, err := c.dsLister.DaemonSets(cur.Namespace).Get(ref.Name); err == nil && ds.Spec.MinReadySeconds > 0 {
				c.queue.AddAfter(curKey, time.Duration(ds.Spec.MinReadySeconds)*time.Second+time.Second)
			}
		}
		return
	}
	if metav1.GetControllerOfNoCopy(cur) == nil && (!equality.Semantic.DeepEqual(old.Labels, cur.Labels) || oldOwned) {
		c.enqueueSelecting(cur.Namespace, cur.Labels)
	}
}

func (c *Controller) deletePod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if pod, ok = tombstone.Obj.(*corev1.Pod); !ok {
			return
		}
	}
	if key, ok := c.ownerKey(pod); ok {
		c.expectations.DeletionObserved(key, podKey(pod))
		c.queue.Add(key)
	}
}

func (c *Controller) revisionChanged(obj any) {
	rev, ok := obj.(*appsv1.ControllerRevision)
	if !ok {
		tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if rev, ok = tombstone.Obj.(*appsv1.ControllerRevision); !ok {
			return
		}
	}
	if key, ok := c.ownerKey(rev); ok {
		c.queue.Add(key)
		return
	}
	if metav1.GetControllerOfNoCopy(rev) == nil {
		c.enqueueSelecting(rev.Namespace, rev.Labels)
	}
}
