// Package endpoints is the Endpoints controller: for every Service with a
// selector it keeps the legacy core/v1 Endpoints object of the same name
// listing the selected pods (ready ones in addresses, the others in
// notReadyAddresses) by port set, truncated at 1000 addresses, and deletes it
// with the Service. It follows upstream's k8s.io/kubernetes
// pkg/controller/endpoint.
//
// Event handlers turn Service, pod and Endpoints changes into Service keys on
// a rate-limited work queue; workers run Sync.
package endpoints

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/kubette/kubette/internal/controller/worker"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/endpointslice/podendpoint"
	"github.com/kubette/kubette/internal/controller/endpointslice/triggertime"
)

// Name is the controller's name in the controller manager's registry (upstream's "endpoint").
const Name = "endpoint"

// eventComponent is the component name on the events the controller records.
const eventComponent = "endpoint-controller"

// Controller syncs the Endpoints of Services.
type Controller struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	log      *slog.Logger

	triggerTime *triggertime.Tracker
	stale       *staleTracker

	serviceLister   corelisters.ServiceLister
	podLister       corelisters.PodLister
	endpointsLister corelisters.EndpointsLister
	synced          []cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
}

var _ controller.Runner = (*Controller)(nil)

// New builds the controller on the shared informers of d, registering its
// Service, pod and Endpoints informers and handlers there; it is the
// controller's controller.Constructor. The Runner it returns is a *Controller.
func New(d controller.Deps) (controller.Runner, error) {
	return newController(d)
}

func newController(d controller.Deps) (*Controller, error) {
	if d.Client == nil || d.Informers == nil || d.Recorder == nil {
		return nil, errors.New("endpoints controller needs a client, informers and an event recorder")
	}
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	svcInformer := d.Informers.Core().V1().Services()
	podInformer := d.Informers.Core().V1().Pods()
	epInformer := d.Informers.Core().V1().Endpoints()
	c := &Controller{
		client:          d.Client,
		recorder:        d.Recorder(eventComponent),
		log:             log.With("controller", Name),
		triggerTime:     triggertime.New(),
		stale:           newStaleTracker(),
		serviceLister:   svcInformer.Lister(),
		podLister:       podInformer.Lister(),
		endpointsLister: epInformer.Lister(),
		synced: []cache.InformerSynced{svcInformer.Informer().HasSynced, podInformer.Informer().HasSynced,
			epInformer.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: Name},
		),
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
		{"Endpoints", epInformer.Informer(), c.endpointsHandler()},
	}
	for _, h := range handlers {
		if _, err := h.informer.AddEventHandler(h.h); err != nil {
			return nil, fmt.Errorf("failed to add %s event handler: %w", h.what, err)
		}
	}
	return c, nil
}

// Run waits for the informer caches, queues leftover Endpoints whose Service
// may be gone, then runs workers until ctx is done and returns after every
// worker stopped.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, c.workerOptions(workers))
}

// workerOptions are the options of the controller's workers.
func (c *Controller) workerOptions(workers int) worker.Options {
	return worker.Options{
		Name: Name, Workers: workers, Synced: c.synced, Sync: c.Sync, Log: c.log,
		AfterSync: c.checkLeftoverEndpoints,
		OnError:   c.routineError,
	}
}

// checkLeftoverEndpoints queues every Endpoints object once, so that those
// whose Service was deleted while the controller was not running go too.
func (c *Controller) checkLeftoverEndpoints() {
	list, err := c.endpointsLister.List(labels.Everything())
	if err != nil {
		c.log.Error("failed to list Endpoints; leftovers stay", "err", err)
		return
	}
	for _, ep := range list {
		c.enqueueEndpoints(ep)
	}
}

// routineError retries a sync that found the cache behind its own write
// without logging it as a failure: the watch of that write is on its way.
func (c *Controller) routineError(key string, err error) bool {
	var stale errStaleCache
	if !errors.As(err, &stale) {
		return false
	}
	c.log.Debug("waiting for the cache", "service", key)
	c.queue.AddRateLimited(key)
	return true
}

func (c *Controller) enqueueObject(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		c.log.Error("no key for object", "err", err)
		return
	}
	c.queue.Add(key)
}

// endpointsHandler handles the Endpoints informer's events: someone else deleted an
// Endpoints object, so recreate it if its Service selects pods. Only deletions, as
// upstream: Endpoints that users create and update for Services without a selector,
// or without a Service, are theirs (the Services conformance test of an Endpoint's
// lifecycle updates and patches one that has no Service).
func (c *Controller) endpointsHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{DeleteFunc: c.enqueueEndpoints}
}

// enqueueEndpoints queues an Endpoints object's key, except for the leader
// election records some components still keep in Endpoints objects without a
// Service.
func (c *Controller) enqueueEndpoints(obj any) {
	o := obj
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	if ep, ok := o.(*corev1.Endpoints); ok {
		if _, leader := ep.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]; leader {
			return
		}
	}
	c.enqueueObject(obj)
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

// staleTracker remembers the resourceVersions of Endpoints objects the
// controller replaced, so that a sync that still finds one of them in the
// cache waits for the cache instead of writing over its own write.
type staleTracker struct {
	mu       sync.Mutex
	replaced map[string]string
}

func newStaleTracker() *staleTracker { return &staleTracker{replaced: make(map[string]string)} }

// isStale reports whether ep is a state the controller already replaced.
func (t *staleTracker) isStale(ep *corev1.Endpoints) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	rv, ok := t.replaced[ep.Namespace+"/"+ep.Name]
	return ok && rv == ep.ResourceVersion
}

// replacedState records that the controller wrote over ep.
func (t *staleTracker) replacedState(ep *corev1.Endpoints) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.replaced[ep.Namespace+"/"+ep.Name] = ep.ResourceVersion
}

// forget drops what is known of namespace/name.
func (t *staleTracker) forget(namespace, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.replaced, namespace+"/"+name)
}
