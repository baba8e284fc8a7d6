// Package namespace is the namespace controller: when a namespace is marked for
// deletion it deletes everything inside it, waits until that content is really gone
// (terminating pods, objects held by finalizers), and then removes the "kubernetes"
// finalizer from spec.finalizers so that the API server can delete the namespace.
//
// It follows upstream pkg/controller/namespace: a rate-limited queue of namespace
// names, fed only by namespaces that carry a deletionTimestamp, a deleter that walks
// every namespaced resource found by discovery (deletecollection, or list and delete
// each item), and a requeue after an estimate while content remains.
package namespace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/kubette/kubette/internal/controller/worker"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/kubette/kubette/internal/controller"
)

// Name is the controller's name in the controller manager's registry.
const Name = "namespace"

const (
	// deletionDelay is how long a namespace event waits before it is processed, as
	// upstream's namespaceDeletionGracePeriod: other API servers observe the deletion
	// (and refuse new content) and last-moment creations reach every etcd member
	// before the content is listed.
	deletionDelay = 5 * time.Second
	// resyncPeriod is how often every namespace being deleted is queued again, a
	// safety net against a lost requeue (upstream's default --namespace-sync-period).
	resyncPeriod = 5 * time.Minute
	// discoveryMaxAge bounds how old the (shared, cached) discovery may be when a
	// deletion pass starts, so that resources added later are not left behind.
	discoveryMaxAge = 30 * time.Second
	// syncTimeout bounds one deletion pass, so that a hanging request cannot hold a
	// worker forever; a pass that runs out is retried with backoff.
	syncTimeout = 5 * time.Minute
	// finalizerToken is the spec finalizer this controller owns.
	finalizerToken = corev1.FinalizerKubernetes
)

// Controller deletes the content of namespaces that are being deleted.
type Controller struct {
	client    kubernetes.Interface
	metadata  metadata.Interface
	discovery discovery.DiscoveryInterface
	nsLister  corelisters.NamespaceLister
	podLister corelisters.PodLister
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
	clock     clock.PassiveClock
	log       *slog.Logger
	// delay postpones the processing of a namespace event (deletionDelay).
	delay time.Duration

	discoveryMu          sync.Mutex
	discoveryRefreshedAt time.Time
}

var _ controller.Runner = (*Controller)(nil)

// New builds the namespace controller and registers its namespace and pod informers.
func New(d controller.Deps) (*Controller, error) {
	if d.Client == nil || d.Metadata == nil || d.Discovery == nil || d.Informers == nil {
		return nil, errors.New("namespace controller: Client, Metadata, Discovery and Informers are required")
	}
	c := &Controller{
		client:    d.Client,
		metadata:  d.Metadata,
		discovery: d.Discovery,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(rateLimiter(),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: Name}),
		clock: clock.RealClock{},
		log:   slog.Default().With("controller", Name),
		delay: deletionDelay,
	}
	nsInformer := d.Informers.Core().V1().Namespaces()
	nsHandler, err := nsInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.namespaceChanged,
		UpdateFunc: func(_, obj any) { c.namespaceChanged(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("namespace controller: namespace event handler: %w", err)
	}
	podInformer := d.Informers.Core().V1().Pods()
	podHandler, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: c.podDeleted,
	})
	if err != nil {
		return nil, fmt.Errorf("namespace controller: pod event handler: %w", err)
	}
	c.nsLister = nsInformer.Lister()
	c.podLister = podInformer.Lister()
	c.synced = []cache.InformerSynced{nsHandler.HasSynced, podHandler.HasSynced}
	return c, nil
}

// rateLimiter is upstream's nsControllerRateLimiter: a failing namespace is retried
// at least once a minute, with an overall bucket of 10 qps.
func rateLimiter() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 60*time.Second),
		&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// namespaceChanged queues a namespace that is being deleted, after the deletion delay.
func (c *Controller) namespaceChanged(obj any) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok || ns.DeletionTimestamp == nil || ns.DeletionTimestamp.IsZero() {
		return
	}
	c.queue.AddAfter(ns.Name, c.delay)
}

// requeueTerminating queues every cached namespace that is being deleted.
func (c *Controller) requeueTerminating() {
	all, err := c.nsLister.List(labels.Everything())
	if err != nil {
		c.log.Error("failed to list namespaces from the cache", "err", err)
		return
	}
	for _, ns := range all {
		if ns.DeletionTimestamp != nil {
			c.queue.Add(ns.Name)
		}
	}
}

// podDeleted queues a terminating namespace at once when its last pod is gone, so
// that a namespace waiting for its pods' graceful termination is finalized without
// waiting for the estimate-based requeue. (Upstream relies on the requeue alone.)
func (c *Controller) podDeleted(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		tombstone, isTombstone := obj.(cache.DeletedFinalStateUnknown)
		if !isTombstone {
			return
		}
		if pod, ok = tombstone.Obj.(*corev1.Pod); !ok {
			return
		}
	}
	ns, err := c.nsLister.Get(pod.Namespace)
	if err != nil || ns.DeletionTimestamp == nil {
		return
	}
	if rest, err := c.podLister.Pods(pod.Namespace).List(labels.Everything()); err == nil && len(rest) == 0 {
		c.queue.Add(pod.Namespace)
	}
}

// Run waits for the informers to sync, then runs workers until ctx is done and they
// have all returned.
func (c *Controller) Run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	wg.Go(func() {
		// The shared informers may not resync: requeue what is being deleted ourselves.
		tick := time.NewTicker(resyncPeriod)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				c.requeueTerminating()
			}
		}
	})
	worker.Run(ctx, c.queue, c.workerOptions(workers))
	wg.Wait()
}

// workerOptions are the options of the controller's workers.
func (c *Controller) workerOptions(workers int) worker.Options {
	return worker.Options{
		Name: Name, Workers: workers, Synced: c.synced, Sync: c.Sync, Log: c.log,
		SyncTimeout: syncTimeout,
		OnError:     c.contentRemaining,
	}
}

// contentRemaining requeues a namespace whose content is still on its way out
// after the estimated wait; that is not a failure.
func (c *Controller) contentRemaining(key string, err error) bool {
	var remaining *ResourcesRemainingError
	if !errors.As(err, &remaining) {
		return false
	}
	c.queue.Forget(key)
	wait := remaining.requeueAfter()
	c.log.Debug("content remaining in namespace", "namespace", key, "wait", wait)
	c.queue.AddAfter(key, wait)
	return true
}

// Sync brings one namespace, by name, closer to deletion. It does nothing for a
// namespace that is absent or not being deleted. Otherwise it marks it Terminating,
// deletes its content and removes the "kubernetes" finalizer once nothing is left.
// It returns a *ResourcesRemainingError while content is still going away.
func (c *Controller) Sync(ctx context.Context, name string) error {
	start := c.clock.Now()
	defer func() { c.log.Debug("finished syncing namespace", "namespace", name, "duration", c.clock.Since(start)) }()

	if _, err := c.nsLister.Get(name); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("failed to get namespace %q from the cache: %w", name, err)
	}
	// Several controllers edit a terminating namespace: work from its latest state.
	ns, err := c.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to get namespace %q: %w", name, err)
	}
	if ns.DeletionTimestamp == nil || ns.DeletionTimestamp.IsZero() {
		return nil
	}
	ns, err = c.retryOnConflict(ctx, ns, c.ensureTerminating)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to mark namespace %q terminating: %w", name, err)
	}
	if !hasFinalizer(ns, finalizerToken) {
		// Our part is done; other spec finalizers belong to other controllers.
		return nil
	}
	ns, estimate, err := c.deleteAllContent(ctx, ns)
	if err != nil {
		return fmt.Errorf("failed to delete the content of namespace %q: %w", name, err)
	}
	if estimate > 0 {
		return &ResourcesRemainingError{Estimate: estimate}
	}
	if _, err := c.retryOnConflict(ctx, ns, c.finalize); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to finalize namespace %q: %w", name, err)
	}
	return nil
}

// ResourcesRemainingError reports that the content of a namespace was deleted but
// some of it has not gone away yet.
type ResourcesRemainingError struct {
	// Estimate is how many seconds the remaining content is expected to take.
	Estimate int64
}

func (e *ResourcesRemainingError) Error() string {
	return fmt.Sprintf("some content remains in the namespace, estimate %d seconds before it is removed", e.Estimate)
}

// requeueAfter is upstream's wait before looking again: half the estimate plus a second.
func (e *ResourcesRemainingError) requeueAfter() time.Duration {
	return time.Duration(e.Estimate/2+1) * time.Second
}

// maxConflictRetries bounds the optimistic-concurrency retries of one namespace write.
const maxConflictRetries = 5

// retryOnConflict applies fn, re-reading the namespace after each conflict. It gives up
// when the namespace was replaced by another with the same name.
func (c *Controller) retryOnConflict(ctx context.Context, ns *corev1.Namespace, fn func(context.Context, *corev1.Namespace) (*corev1.Namespace, error)) (*corev1.Namespace, error) {
	latest := ns
	for attempt := 0; ; attempt++ {
		out, err := fn(ctx, latest)
		if err == nil || !apierrors.IsConflict(err) || attempt >= maxConflictRetries {
			return out, err
		}
		prev := latest
		if latest, err = c.client.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{}); err != nil {
			return nil, err
		}
		if prev.UID != latest.UID {
			return nil, fmt.Errorf("namespace %q was replaced (uid %s, now %s)", ns.Name, prev.UID, latest.UID)
		}
	}
}

// ensureTerminating sets status.phase Terminating on a namespace that is being deleted.
func (c *Controller) ensureTerminating(ctx context.Context, ns *corev1.Namespace) (*corev1.Namespace, error) {
	if ns.DeletionTimestamp.IsZero() || ns.Status.Phase == corev1.NamespaceTerminating {
		return ns, nil
	}
	updated := ns.DeepCopy()
	updated.Status.Phase = corev1.NamespaceTerminating
	return c.client.CoreV1().Namespaces().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
}

// finalize removes this controller's token from spec.finalizers through /finalize.
func (c *Controller) finalize(ctx context.Context, ns *corev1.Namespace) (*corev1.Namespace, error) {
	out := ns.DeepCopy()
	out.Spec.Finalizers = nil
	for _, f := range ns.Spec.Finalizers {
		if f != finalizerToken {
			out.Spec.Finalizers = append(out.Spec.Finalizers, f)
		}
	}
	return c.client.CoreV1().Namespaces().Finalize(ctx, out, metav1.UpdateOptions{})
}

func hasFinalizer(ns *corev1.Namespace, token corev1.FinalizerName) bool {
	for _, f := range ns.Spec.Finalizers {
		if f == token {
			return true
		}
	}
	return false
}
