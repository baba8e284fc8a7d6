// Package garbagecollector deletes objects whose owners are gone and carries out the
// Foreground and Orphan deletion policies, as upstream's garbage collector does.
//
// Monitors (the garbage collector's handlers on a shared metadata informer per deletable
// resource, re-discovered periodically) feed one goroutine that maintains a graph of
// objects by UID: each node lists its owners (ownerReferences) and dependents. Owners that
// are referenced but not observed are virtual nodes until a worker has checked them with
// a live GET. The graph builder queues UIDs on two rate-limited queues:
//
//   - attemptToDelete: an object whose owners may be gone, or an owner deleting its
//     dependents in the foreground. A worker reads the live object and its owners from
//     the API server, then deletes it (all owners gone), patches away references to
//     missing owners (some owner alive), or, for a foreground owner, deletes its
//     dependents and removes the foregroundDeletion finalizer once no blocking dependent
//     remains;
//   - attemptToOrphan: an owner deleted with the orphan finalizer. A worker removes the
//     owner's reference from every dependent, then the finalizer.
//
// Decisions are pure functions (decide.go); API calls live in operations.go.
//
// Simplifications against upstream: queues hold UIDs (workers read the node's current
// state from the graph) instead of node pointers; one lock guards the graph instead of a
// lock per node field; updates that change neither owner references, finalizers nor the
// deletion timestamp are dropped before they reach the graph; the discovery client is the
// shared cached one, invalidated before each periodic discovery; there are no metrics and
// no graph dump endpoint.
package garbagecollector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubette/kubette/internal/controller"
)

// Name is the controller's name in the controller manager's registry.
const Name = "garbagecollector"

const (
	// resyncPeriod is how often discovery is re-read for new or removed resources.
	resyncPeriod = 30 * time.Second
	// initialSyncTimeout bounds the wait for the first full graph before workers start.
	initialSyncTimeout = 30 * time.Second
	// absentCacheSize bounds the memory of owners known to be absent.
	absentCacheSize = 500
	// orphanParallelism bounds concurrent patches when orphaning dependents.
	orphanParallelism = 16
)

// Controller is the garbage collector.
type Controller struct {
	metadata          metadata.Interface
	metadataInformers metadatainformer.SharedInformerFactory
	discovery         discovery.DiscoveryInterface
	mapper            meta.ResettableRESTMapper
	log               *slog.Logger

	builder  *builder
	graph    *graph
	absent   *absentCache
	changes  workqueue.TypedInterface[*event]
	toDelete workqueue.TypedRateLimitingInterface[types.UID]
	toOrphan workqueue.TypedRateLimitingInterface[types.UID]

	monitorsMu sync.Mutex
	monitors   map[schema.GroupVersionResource]*monitor

	resyncPeriod       time.Duration
	initialSyncTimeout time.Duration
}

var _ controller.Runner = (*Controller)(nil)

// New builds the garbage collector from the shared dependencies; it uses the metadata
// client and informers, discovery and the REST mapper, logs to d.Logger (slog.Default()
// when nil) and records Events when d.Recorder is set. It makes no API calls: discovery
// happens in Run.
func New(d controller.Deps) (*Controller, error) {
	switch {
	case d.Metadata == nil:
		return nil, errors.New("garbagecollector: a metadata client is required")
	case d.MetadataInformers == nil:
		return nil, errors.New("garbagecollector: a metadata informer factory is required")
	case d.Discovery == nil:
		return nil, errors.New("garbagecollector: a discovery client is required")
	case d.RESTMapper == nil:
		return nil, errors.New("garbagecollector: a REST mapper is required")
	}
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("controller", Name)
	c := &Controller{
		metadata:          d.Metadata,
		metadataInformers: d.MetadataInformers,
		discovery:         d.Discovery,
		mapper:            d.RESTMapper,
		log:               log,
		graph:             newGraph(),
		absent:            newAbsentCache(absentCacheSize),
		changes: workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[*event]{
			Name: "garbage_collector_graph_changes",
		}),
		toDelete: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[types.UID](),
			workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "garbage_collector_attempt_to_delete"}),
		toOrphan: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[types.UID](),
			workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "garbage_collector_attempt_to_orphan"}),
		monitors:           make(map[schema.GroupVersionResource]*monitor),
		resyncPeriod:       resyncPeriod,
		initialSyncTimeout: initialSyncTimeout,
	}
	c.builder = &builder{
		graph: c.graph, absent: c.absent, changes: c.changes,
		toDelete: c.toDelete, toOrphan: c.toOrphan, log: log,
	}
	if d.Recorder != nil {
		c.builder.recorder = d.Recorder("garbage-collector-controller")
	}
	return c, nil
}

// Run discovers the deletable resources and monitors them (again every 30 s), waits up to
// 30 s for the graph's initial sync, then runs workers on each queue until ctx is done. It
// returns after every goroutine it started has stopped. Call it once.
func (c *Controller) Run(ctx context.Context, workers int) {
	if workers <= 0 {
		workers = 1
	}
	c.log.Info("starting")
	var wg sync.WaitGroup
	defer func() {
		c.changes.ShutDown()
		c.toDelete.ShutDown()
		c.toOrphan.ShutDown()
		wg.Wait()
		c.stopMonitors()
		c.log.Info("stopped")
	}()

	wg.Go(c.builder.run)
	wg.Go(func() {
		var last map[schema.GroupVersionResource]struct{}
		wait.UntilWithContext(ctx, func(ctx context.Context) { last = c.resync(ctx, last) }, c.resyncPeriod)
	})

	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, c.initialSyncTimeout, true,
		func(context.Context) (bool, error) { return c.monitorsSynced(), nil })
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		c.log.Warn("not all resource monitors synced; proceeding anyway")
	} else {
		c.log.Info("all resource monitors synced")
	}

	for range workers {
		wg.Go(func() {
			for c.processNextDelete(ctx) {
			}
		})
		wg.Go(func() {
			for c.processNextOrphan(ctx) {
			}
		})
	}
	<-ctx.Done()
}

// processNextDelete handles one attemptToDelete item; false when the queue shut down.
func (c *Controller) processNextDelete(ctx context.Context) bool {
	uid, quit := c.toDelete.Get()
	if quit {
		return false
	}
	defer c.toDelete.Done(uid)
	if c.syncDelete(ctx, uid) {
		c.toDelete.AddRateLimited(uid)
	} else {
		c.toDelete.Forget(uid)
	}
	return true
}

// errVirtualDelete reports that the item was found absent and a virtual delete event was
// queued for the graph builder: nothing to retry.
var errVirtualDelete = errors.New("item absent; virtual delete event queued")

// syncDelete runs attemptToDelete for uid and reports whether to retry it.
func (c *Controller) syncDelete(ctx context.Context, uid types.UID) (requeue bool) {
	n, ok := c.graph.view(uid)
	if !ok {
		// Deleted from the graph meanwhile.
		return false
	}
	err := c.attemptToDelete(ctx, n)
	var me *mappingError
	switch {
	case errors.Is(err, errVirtualDelete), errors.Is(err, errNamespacedOwnerOfClusterScoped):
		return false
	case errors.As(err, &me):
		// A kind not served (yet): retried, as upstream, until discovery knows it.
		c.log.Warn("cannot map reference", "item", n.identity, "err", err)
		return true
	case err != nil:
		if ctx.Err() == nil {
			c.log.Warn("attempt to delete failed; will retry", "item", n.identity, "err", err)
		}
		return true
	case n.virtual:
		// Exists but not yet observed: keep checking, so that a virtual node whose object is
		// created and deleted while a watch is down does not stay in the graph forever.
		return true
	}
	return false
}

// attemptToDelete looks up the live object of n and deletes it if all its owners are
// gone, removes its references to missing owners if some remain, or handles its foreground
// deletion.
func (c *Controller) attemptToDelete(ctx context.Context, n nodeView) error {
	if n.beingDeleted && !n.deletingDependents {
		// On its way out; its dependents are handled when the delete is observed.
		return nil
	}
	latest, err := c.getObject(ctx, n.identity)
	switch {
	case apierrors.IsNotFound(err):
		c.builder.enqueueVirtualDelete(n.identity)
		return errVirtualDelete
	case err != nil:
		return err
	case latest.UID != n.identity.UID:
		c.builder.enqueueVirtualDelete(n.identity)
		return errVirtualDelete
	}
	if n.deletingDependents {
		return c.deleteDependents(ctx, n)
	}
	refs := latest.OwnerReferences
	if len(refs) == 0 {
		return nil
	}
	cls, err := c.classify(ctx, n.identity, refs)
	if err != nil {
		return err
	}
	deps := c.graph.dependents(n.identity.UID)
	depDeleting := false
	for _, d := range deps {
		depDeleting = depDeleting || d.deletingDependents
	}
	dec := decide(cls, latest.Finalizers, len(deps) > 0, depDeleting)
	switch dec.kind {
	case decideNothing:
		c.log.Debug("item has a live owner", "item", n.identity)
		return nil
	case decideRemoveRefs:
		c.log.Info("removing references to missing or deleting owners", "item", n.identity, "owners", dec.remove)
		smp, err := deleteOwnerRefsPatch(n.identity.UID, dec.remove)
		if err != nil {
			return fmt.Errorf("build patch: %w", err)
		}
		_, err = c.patch(ctx, n.identity, smp, func(o metav1.Object) ([]byte, error) {
			return deleteOwnerRefsMergePatch(o, dec.remove)
		})
		return err
	}
	rv, refsAtRV := latest.ResourceVersion, refs
	if dec.unblock {
		c.log.Info("unblocking owner references to avoid a foreground deletion cycle", "item", n.identity)
		smp, err := unblockOwnerRefsPatch(n.identity.UID, refs)
		if err != nil {
			return fmt.Errorf("build patch: %w", err)
		}
		patched, err := c.patch(ctx, n.identity, smp, unblockOwnerRefsMergePatch)
		if err != nil {
			return err
		}
		rv, refsAtRV = patched.ResourceVersion, patched.OwnerReferences
	}
	c.log.Info("deleting", "item", n.identity, "propagation", dec.policy)
	err = c.deleteObject(ctx, n.identity, rv, refsAtRV, dec.policy)
	if apierrors.IsNotFound(err) {
		c.builder.enqueueVirtualDelete(n.identity)
		return errVirtualDelete
	}
	return err
}

// classify checks each owner reference of item against the API server.
func (c *Controller) classify(ctx context.Context, item objectReference, refs []metav1.OwnerReference) (classification, error) {
	var cls classification
	for _, ref := range refs {
		class, err := c.classifyRef(ctx, item, ref)
		if err != nil {
			return classification{}, err
		}
		cls.add(ref, class)
	}
	return cls, nil
}

// classifyRef looks up the owner named by ref (from item's namespace, or cluster-wide for a
// cluster-scoped kind), consulting the cache of owners known to be absent first.
func (c *Controller) classifyRef(ctx context.Context, item objectReference, ref metav1.OwnerReference) (refClass, error) {
	key := refIdentity(ref, "")
	if c.absent.has(key) {
		return refDangling, nil
	}
	key.Namespace = item.Namespace
	if c.absent.has(key) {
		return refDangling, nil
	}
	_, namespaced, err := c.resource(ref.APIVersion, ref.Kind)
	if err != nil {
		return 0, err
	}
	if !namespaced {
		key.Namespace = ""
	} else if item.Namespace == "" {
		return 0, errNamespacedOwnerOfClusterScoped
	}
	owner, err := c.getObject(ctx, key)
	switch {
	case apierrors.IsNotFound(err):
		c.absent.add(key)
		return refDangling, nil
	case err != nil:
		return 0, err
	}
	class := classifyOwner(ref, owner)
	if class == refDangling {
		c.absent.add(key)
	}
	return class, nil
}

// deleteDependents advances the foreground deletion of n: with no blocking dependent left
// it removes the foregroundDeletion finalizer, else it queues those dependents.
func (c *Controller) deleteDependents(ctx context.Context, n nodeView) error {
	blocking := blockingDependents(n.identity.UID, c.graph.dependents(n.identity.UID))
	if len(blocking) == 0 {
		c.log.Info("no blocking dependents left; removing the foregroundDeletion finalizer", "item", n.identity)
		return c.removeFinalizer(ctx, n.identity, metav1.FinalizerDeleteDependents)
	}
	for _, d := range blocking {
		if !d.deletingDependents {
			c.toDelete.Add(d.identity.UID)
		}
	}
	return nil
}

// processNextOrphan handles one attemptToOrphan item; false when the queue shut down.
func (c *Controller) processNextOrphan(ctx context.Context) bool {
	uid, quit := c.toOrphan.Get()
	if quit {
		return false
	}
	defer c.toOrphan.Done(uid)
	if err := c.orphan(ctx, uid); err != nil {
		if ctx.Err() == nil {
			c.log.Warn("orphaning failed; will retry", "uid", uid, "err", err)
		}
		c.toOrphan.AddRateLimited(uid)
		return true
	}
	c.toOrphan.Forget(uid)
	return true
}

// orphan removes the owner's reference from each of its dependents, then the owner's
// orphan finalizer.
func (c *Controller) orphan(ctx context.Context, uid types.UID) error {
	owner, ok := c.graph.view(uid)
	if !ok {
		return nil
	}
	deps := c.graph.dependents(uid)
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, orphanParallelism)
	)
	for _, d := range deps {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			smp, err := deleteOwnerRefsPatch(d.identity.UID, []types.UID{uid})
			if err == nil {
				_, err = c.patch(ctx, d.identity, smp, func(o metav1.Object) ([]byte, error) {
					return deleteOwnerRefsMergePatch(o, []types.UID{uid})
				})
			}
			if err != nil && !apierrors.IsNotFound(err) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("orphan dependents of %s: %w", owner.identity, err)
	}
	c.log.Info("orphaned dependents; removing the orphan finalizer", "item", owner.identity, "dependents", len(deps))
	return c.removeFinalizer(ctx, owner.identity, metav1.FinalizerOrphanDependents)
}
