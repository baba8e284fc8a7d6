// Package endpointslice is the EndpointSlice controller: for every Service
// with a selector it keeps discovery.k8s.io/v1 EndpointSlices listing the
// selected pods as endpoints (address, readiness, serving and terminating
// conditions, node, zone, target) with the Service's ports resolved per pod,
// at most MaxEndpointsPerSlice endpoints a slice. It follows upstream's
// k8s.io/kubernetes pkg/controller/endpointslice and the reconciler of
// k8s.io/endpointslice: minimal changes (slices updated in place, filled
// before new ones are created, empty ones deleted), and a tracker of its own
// writes so that a lagging cache never makes it duplicate slices.
//
// Event handlers turn Service, pod, node and foreign slice changes into
// Service keys on a rate-limited work queue; workers run Sync.
package endpointslice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/kubette/kubette/internal/controller/worker"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/endpointslice/podendpoint"
	"github.com/kubette/kubette/internal/controller/endpointslice/triggertime"
	"github.com/kubette/kubette/internal/controller/slicetracker"
)

// Name is the controller's name in the controller manager's registry.
const Name = "endpointslice"

// DefaultMaxEndpointsPerSlice is upstream's default of --max-endpoints-per-slice.
const DefaultMaxEndpointsPerSlice = 100

// maxEndpointsPerSliceLimit is the most endpoints the API accepts in a slice.
const maxEndpointsPerSliceLimit = 1000

// eventComponent is the component name on the events the controller records.
const eventComponent = "endpointslice-controller"

// podNodeIndex indexes pods by the name of their node.
const podNodeIndex = "endpointslice.nodeName"

// Options tune the controller.
type Options struct {
	// MaxEndpointsPerSlice bounds the endpoints of one slice (default 100, at most 1000).
	MaxEndpointsPerSlice int
}

// Controller syncs the EndpointSlices of Services.
type Controller struct {
	client               kubernetes.Interface
	recorder             record.EventRecorder // nil: no events
	log                  *slog.Logger
	maxEndpointsPerSlice int

	tracker     *slicetracker.Tracker
	triggerTime *triggertime.Tracker

	serviceLister corelisters.ServiceLister
	podLister     corelisters.PodLister
	podIndexer    cache.Indexer
	nodeLister    corelisters.NodeLister
	sliceLister   discoverylisters.EndpointSliceLister
	synced        []cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
}

var _ controller.Runner = (*Controller)(nil)

// New builds the controller with default options on the shared informers of
// d; it is the controller's controller.Constructor.
func New(d controller.Deps) (controller.Runner, error) {
	return NewWithOptions(d, Options{})
}

// NewWithOptions builds the controller with o, registering its Service, pod,
// node and EndpointSlice informers and handlers on the shared factory of d.
// Failed syncs are recorded as events on the Service (as
// "endpointslice-controller") when d has a Recorder.
func NewWithOptions(d controller.Deps, o Options) (*Controller, error) {
	if d.Client == nil || d.Informers == nil {
		return nil, errors.New("endpointslice controller needs a client and informers")
	}
	if o.MaxEndpointsPerSlice == 0 {
		o.MaxEndpointsPerSlice = DefaultMaxEndpointsPerSlice
	}
	if o.MaxEndpointsPerSlice < 1 || o.MaxEndpointsPerSlice > maxEndpointsPerSliceLimit {
		return nil, fmt.Errorf("max endpoints per slice must be between 1 and %d, not %d", maxEndpointsPerSliceLimit, o.MaxEndpointsPerSlice)
	}
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	var recorder record.EventRecorder
	if d.Recorder != nil {
		recorder = d.Recorder(eventComponent)
	}
	svcInformer := d.Informers.Core().V1().Services()
	podInformer := d.Informers.Core().V1().Pods()
	nodeInformer := d.Informers.Core().V1().Nodes()
	sliceInformer := d.Informers.Discovery().V1().EndpointSlices()
	c := &Controller{
		client:               d.Client,
		recorder:             recorder,
		log:                  log.With("controller", Name),
		maxEndpointsPerSlice: o.MaxEndpointsPerSlice,
		tracker:              slicetracker.New(),
		triggerTime:          triggertime.New(),
		serviceLister:        svcInformer.Lister(),
		podLister:            podInformer.Lister(),
		podIndexer:           podInformer.Informer().GetIndexer(),
		nodeLister:           nodeInformer.Lister(),
		sliceLister:          sliceInformer.Lister(),
		synced: []cache.InformerSynced{svcInformer.Informer().HasSynced, podInformer.Informer().HasSynced,
			nodeInformer.Informer().HasSynced, sliceInformer.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: Name},
		),
	}
	if err := podInformer.Informer().AddIndexers(cache.Indexers{podNodeIndex: indexPodByNode}); err != nil {
		if _, exists := podInformer.Informer().GetIndexer().GetIndexers()[podNodeIndex]; !exists {
			return nil, fmt.Errorf("failed to add pod index %s: %w", podNodeIndex, err)
		}
	}
	handlers := []struct {
		what     string
		informer cache.SharedIndexInformer
		h        cache.ResourceEventHandler
	}{
		{"Service", svcInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueueObject,
			UpdateFunc: func(_, cur any) { c.enqueueObject(cur) },
			DeleteFunc: c.enqueueObject,
		}},
		{"pod", podInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.addPod, UpdateFunc: c.updatePod, DeleteFunc: c.deletePod,
		}},
		{"node", nodeInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.addOrDeleteNode, UpdateFunc: c.updateNode, DeleteFunc: c.addOrDeleteNode,
		}},
		{"EndpointSlice", sliceInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.addSlice, UpdateFunc: c.updateSlice, DeleteFunc: c.deleteSlice,
		}},
	}
	for _, h := range handlers {
		if _, err := h.informer.AddEventHandler(h.h); err != nil {
			return nil, fmt.Errorf("failed to add %s event handler: %w", h.what, err)
		}
	}
	return c, nil
}

func indexPodByNode(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return nil, nil
	}
	return []string{pod.Spec.NodeName}, nil
}

// Run waits for the informer caches, then runs workers until ctx is done and
// returns after every worker stopped.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, c.workerOptions(workers))
}

// workerOptions are the options of the controller's workers.
func (c *Controller) workerOptions(workers int) worker.Options {
	return worker.Options{
		Name: Name, Workers: workers, Synced: c.synced, Sync: c.Sync, Log: c.log,
		OnError: c.routineError,
	}
}

// routineError retries a sync that found the cache behind its own writes
// without logging it as a failure: the watch of those writes is on its way.
func (c *Controller) routineError(key string, err error) bool {
	var stale errStaleCache
	if !errors.As(err, &stale) {
		return false
	}
	c.log.Debug("waiting for the cache", "service", key)
	c.queue.AddRateLimited(key)
	return true
}

// enqueueObject queues the key of a Service (or of its tombstone).
func (c *Controller) enqueueObject(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		c.log.Error("no key for object", "err", err)
		return
	}
	c.queue.Add(key)
}

func (c *Controller) enqueueServicesOf(pod *corev1.Pod) {
	keys, err := podendpoint.ServicesForPod(c.serviceLister, pod)
	if err != nil {
		c.log.Error("failed to find the Services of a pod", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		return
	}
	for k := range keys {
		c.queue.Add(k)
	}
}

func (c *Controller) addPod(obj any) {
	if pod, ok := obj.(*corev1.Pod); ok {
		c.enqueueServicesOf(pod)
	}
}

func (c *Controller) updatePod(oldObj, curObj any) {
	oldPod, ok1 := oldObj.(*corev1.Pod)
	curPod, ok2 := curObj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return
	}
	keys, err := podendpoint.ServicesToSync(c.serviceLister, oldPod, curPod)
	if err != nil {
		c.log.Error("failed to find the Services of a pod", "pod", curPod.Namespace+"/"+curPod.Name, "err", err)
		return
	}
	for _, k := range keys {
		c.queue.Add(k)
	}
}

func (c *Controller) deletePod(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		c.enqueueServicesOf(pod)
	}
}

// enqueueServicesOnNode queues the Services of every pod on the node.
func (c *Controller) enqueueServicesOnNode(node string) {
	objs, err := c.podIndexer.ByIndex(podNodeIndex, node)
	if err != nil {
		c.log.Error("failed to list the pods of a node", "node", node, "err", err)
		return
	}
	for _, o := range objs {
		if pod, ok := o.(*corev1.Pod); ok {
			c.enqueueServicesOf(pod)
		}
	}
}

func (c *Controller) addOrDeleteNode(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if node, ok := obj.(*corev1.Node); ok {
		c.enqueueServicesOnNode(node.Name)
	}
}

func (c *Controller) updateNode(oldObj, curObj any) {
	oldNode, ok1 := oldObj.(*corev1.Node)
	curNode, ok2 := curObj.(*corev1.Node)
	if !ok1 || !ok2 || oldNode.Labels[corev1.LabelTopologyZone] == curNode.Labels[corev1.LabelTopologyZone] {
		return
	}
	c.enqueueServicesOnNode(curNode.Name)
}

// managed reports whether the controller manages the slice.
func managed(s *discoveryv1.EndpointSlice) bool {
	return s.Labels[discoveryv1.LabelManagedBy] == ControllerName && s.Labels[discoveryv1.LabelServiceName] != ""
}

// enqueueSliceService queues the Service a slice belongs to.
func (c *Controller) enqueueSliceService(s *discoveryv1.EndpointSlice) {
	if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
		c.queue.Add(s.Namespace + "/" + name)
	}
}

func (c *Controller) addSlice(obj any) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if ok && managed(s) && c.tracker.ShouldSync(s) {
		c.enqueueSliceService(s)
	}
}

func (c *Controller) updateSlice(oldObj, curObj any) {
	oldSlice, ok1 := oldObj.(*discoveryv1.EndpointSlice)
	curSlice, ok2 := curObj.(*discoveryv1.EndpointSlice)
	if !ok1 || !ok2 {
		return
	}
	// A slice relabelled away from a Service (or from this controller) leaves
	// that Service short of a slice.
	if oldSlice.Labels[discoveryv1.LabelServiceName] != curSlice.Labels[discoveryv1.LabelServiceName] ||
		oldSlice.Labels[discoveryv1.LabelManagedBy] != curSlice.Labels[discoveryv1.LabelManagedBy] {
		if managed(oldSlice) {
			c.enqueueSliceService(oldSlice)
		}
		if managed(curSlice) {
			c.enqueueSliceService(curSlice)
		}
		return
	}
	if managed(curSlice) && c.tracker.ShouldSync(curSlice) {
		c.enqueueSliceService(curSlice)
	}
}

func (c *Controller) deleteSlice(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if ok && managed(s) && c.tracker.HandleDeletion(s) {
		c.enqueueSliceService(s)
	}
}
