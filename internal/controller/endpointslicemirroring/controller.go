// Package endpointslicemirroring is the EndpointSlice mirroring controller: the
// Endpoints of a Service without a selector (which users or other controllers write
// by hand) are mirrored into EndpointSlices labelled
// endpointslice.kubernetes.io/managed-by=endpointslicemirroring-controller.k8s.io and
// kubernetes.io/service-name=<service>, one per address type and port set, updated
// and deleted with them.
//
// It follows upstream pkg/controller/endpointslicemirroring: a queue of Endpoints
// keys fed by Endpoints events, by Services gaining or losing their selector, and by
// foreign changes to the mirrored slices; a sync that repacks the Endpoints' subsets,
// groups their addresses by address type and ports, and creates, updates or deletes
// slices to match. Endpoints labelled endpointslice.kubernetes.io/skip-mirror=true
// and leader-election records are not mirrored.
package endpointslicemirroring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/slicetracker"
	"github.com/kubette/kubette/internal/controller/worker"
)

// Name is the controller's name in the controller manager's registry (upstream's
// --controllers name).
const Name = "endpointslicemirroring"

// ManagedBy is the value of the managed-by label of the slices it writes.
const ManagedBy = "endpointslicemirroring-controller.k8s.io"

// DefaultMaxEndpointsPerSubset is upstream's default of
// --mirroring-max-endpoints-per-subset: the most addresses of one Endpoints subset mirrored.
const DefaultMaxEndpointsPerSubset = 1000

// eventComponent is the source of its events, as upstream's.
const eventComponent = "endpoint-slice-mirroring-controller"

// Event reasons, as upstream.
const (
	reasonInvalidIPAddress         = "InvalidIPAddress"
	reasonTooManyAddressesToMirror = "TooManyAddressesToMirror"
)

// Retry back-off, as upstream: 1 s doubling to 100 s, dropped after maxRetries.
const (
	syncBackOff    = time.Second
	maxSyncBackOff = 100 * time.Second
	maxRetries     = 15
)

// syncTimeout bounds one sync.
const syncTimeout = time.Minute

// Options tune the controller.
type Options struct {
	// MaxEndpointsPerSubset bounds the addresses mirrored per subset (default 1000).
	MaxEndpointsPerSubset int
}

// Controller mirrors custom Endpoints into EndpointSlices.
type Controller struct {
	client   kubernetes.Interface
	recorder record.EventRecorder // nil: no events
	log      *slog.Logger
	maxPer   int
	tracker  *slicetracker.Tracker

	endpointsLister corelisters.EndpointsLister
	serviceLister   corelisters.ServiceLister
	sliceLister     discoverylisters.EndpointSliceLister
	synced          []cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
}

var _ controller.Runner = (*Controller)(nil)

// New builds the controller with default options; it is its controller.Constructor.
func New(d controller.Deps) (controller.Runner, error) {
	return NewWithOptions(d, Options{})
}

// NewWithOptions builds the controller with o on the shared informers of d.
func NewWithOptions(d controller.Deps, o Options) (*Controller, error) {
	if d.Client == nil || d.Informers == nil {
		return nil, errors.New("endpointslicemirroring controller needs a client and informers")
	}
	if o.MaxEndpointsPerSubset == 0 {
		o.MaxEndpointsPerSubset = DefaultMaxEndpointsPerSubset
	}
	if o.MaxEndpointsPerSubset < 1 {
		return nil, fmt.Errorf("max endpoints per subset must be positive, not %d", o.MaxEndpointsPerSubset)
	}
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	var recorder record.EventRecorder
	if d.Recorder != nil {
		recorder = d.Recorder(eventComponent)
	}
	epInformer := d.Informers.Core().V1().Endpoints()
	svcInformer := d.Informers.Core().V1().Services()
	sliceInformer := d.Informers.Discovery().V1().EndpointSlices()
	c := &Controller{
		client:          d.Client,
		recorder:        recorder,
		log:             log.With("controller", Name),
		maxPer:          o.MaxEndpointsPerSubset,
		tracker:         slicetracker.New(),
		endpointsLister: epInformer.Lister(),
		serviceLister:   svcInformer.Lister(),
		sliceLister:     sliceInformer.Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](syncBackOff, maxSyncBackOff),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "endpoint_slice_mirroring"},
		),
	}
	handlers := []struct {
		what     string
		informer cache.SharedIndexInformer
		h        cache.ResourceEventHandler
	}{
		{"Endpoints", epInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    c.addEndpoints,
			UpdateFunc: c.updateEndpoints,
			DeleteFunc: c.deleteEndpoints,
		}},
		{"Service", svcInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    c.addOrDeleteService,
			UpdateFunc: c.updateService,
			DeleteFunc: c.addOrDeleteService,
		}},
		{"EndpointSlice", sliceInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    c.addSlice,
			UpdateFunc: c.updateSlice,
			DeleteFunc: c.deleteSlice,
		}},
	}
	for _, h := range handlers {
		reg, err := h.informer.AddEventHandler(h.h)
		if err != nil {
			return nil, fmt.Errorf("failed to add %s event handler: %w", h.what, err)
		}
		c.synced = append(c.synced, reg.HasSynced)
	}
	return c, nil
}

// Run waits for the informer caches, then runs workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, c.workerOptions(workers))
}

func (c *Controller) workerOptions(workers int) worker.Options {
	return worker.Options{
		Name: Name, Workers: workers, Synced: c.synced, Sync: c.Sync, Log: c.log,
		SyncTimeout: syncTimeout, OnError: c.onError,
	}
}

// onError retries a failed sync with back-off up to maxRetries times, then drops
// the key (a later event queues it again), as upstream; a cache behind the
// controller's own writes is retried without a log line.
func (c *Controller) onError(key string, err error) bool {
	var stale errStaleCache
	switch {
	case errors.As(err, &stale):
		c.queue.AddRateLimited(key)
	case c.queue.NumRequeues(key) < maxRetries:
		c.log.Info("mirroring EndpointSlices failed; retrying", "endpoints", key, "err", err)
		c.queue.AddRateLimited(key)
	default:
		c.log.Error("retry budget exceeded; dropping the Endpoints from the queue", "endpoints", key, "err", err)
		c.queue.Forget(key)
	}
	return true
}

// shouldMirror reports whether ep may be mirrored at all (its Service decides the rest).
func shouldMirror(ep *corev1.Endpoints) bool {
	if ep == nil || ep.Labels[discoveryv1.LabelSkipMirror] == "true" {
		return false
	}
	_, leader := ep.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]
	return !leader
}

func (c *Controller) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		c.log.Error("no key for object", "err", err)
		return
	}
	c.queue.Add(key)
}

func endpointsOf(obj any) *corev1.Endpoints {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	ep, _ := obj.(*corev1.Endpoints)
	return ep
}

func serviceOf(obj any) *corev1.Service {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	svc, _ := obj.(*corev1.Service)
	return svc
}

func sliceOf(obj any) *discoveryv1.EndpointSlice {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	s, _ := obj.(*discoveryv1.EndpointSlice)
	return s
}

func (c *Controller) addEndpoints(obj any) {
	if shouldMirror(endpointsOf(obj)) {
		c.enqueue(obj)
	}
}

// updateEndpoints queues Endpoints that are or were mirrored (a skip-mirror label
// added must remove the slices).
func (c *Controller) updateEndpoints(oldObj, curObj any) {
	if shouldMirror(endpointsOf(curObj)) || shouldMirror(endpointsOf(oldObj)) {
		c.enqueue(curObj)
	}
}

func (c *Controller) deleteEndpoints(obj any) {
	if shouldMirror(endpointsOf(obj)) {
		c.enqueue(obj)
	}
}

// addOrDeleteService queues the Endpoints of a Service without a selector.
func (c *Controller) addOrDeleteService(obj any) {
	if svc := serviceOf(obj); svc != nil && svc.Spec.Selector == nil {
		c.enqueue(obj)
	}
}

// updateService queues the Endpoints of a Service that gained or lost its selector.
func (c *Controller) updateService(oldObj, curObj any) {
	prev, cur := serviceOf(oldObj), serviceOf(curObj)
	if prev != nil && cur != nil && (prev.Spec.Selector == nil) != (cur.Spec.Selector == nil) {
		c.enqueue(curObj)
	}
}

func managed(s *discoveryv1.EndpointSlice) bool {
	return s.Labels[discoveryv1.LabelManagedBy] == ManagedBy
}

// enqueueSliceEndpoints queues the Endpoints a slice mirrors (its service-name label).
func (c *Controller) enqueueSliceEndpoints(s *discoveryv1.EndpointSlice) {
	name := s.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return
	}
	c.queue.Add(s.Namespace + "/" + name)
}

// addSlice queues a mirrored slice that is not the controller's own write.
func (c *Controller) addSlice(obj any) {
	if s := sliceOf(obj); s != nil && managed(s) && c.tracker.ShouldSync(s) {
		c.enqueueSliceEndpoints(s)
	}
}

// updateSlice queues the Endpoints of a slice whose service-name label or manager
// changed, or that someone else changed.
func (c *Controller) updateSlice(oldObj, curObj any) {
	prev, cur := sliceOf(oldObj), sliceOf(curObj)
	if prev == nil || cur == nil {
		return
	}
	if prev.Labels[discoveryv1.LabelServiceName] != cur.Labels[discoveryv1.LabelServiceName] {
		c.enqueueSliceEndpoints(cur)
		c.enqueueSliceEndpoints(prev)
		return
	}
	if managed(prev) != managed(cur) || (managed(cur) && c.tracker.ShouldSync(cur)) {
		c.enqueueSliceEndpoints(cur)
	}
}

// deleteSlice queues the Endpoints of a mirrored slice someone else deleted.
func (c *Controller) deleteSlice(obj any) {
	if s := sliceOf(obj); s != nil && managed(s) && c.tracker.Has(s) && c.tracker.HandleDeletion(s) {
		c.enqueueSliceEndpoints(s)
	}
}
