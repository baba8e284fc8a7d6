// Package serviceaccount is the service account controller: every active namespace
// has a "default" ServiceAccount, created when the namespace appears and again when
// it is deleted, but never in a namespace that is being terminated.
//
// It follows upstream pkg/controller/serviceaccount (ServiceAccountsController): a
// queue of namespace names fed by namespace adds and updates and by ServiceAccount
// deletions, and a sync that creates what the lister says is missing.
package serviceaccount

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kubette/kubette/internal/controller/worker"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubette/kubette/internal/controller"
)

// Name is the controller's name in the controller manager's registry.
const Name = "serviceaccount"

// DefaultName is the name of the ServiceAccount every namespace gets.
const DefaultName = "default"

// syncTimeout bounds one sync, so that a hanging request cannot hold a worker forever.
const syncTimeout = time.Minute

// Controller ensures the default ServiceAccount of every active namespace.
type Controller struct {
	client   kubernetes.Interface
	nsLister corelisters.NamespaceLister
	saLister corelisters.ServiceAccountLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	log      *slog.Logger
	// ensure lists the names of the ServiceAccounts every namespace must have.
	ensure []string
}

var _ controller.Runner = (*Controller)(nil)

// New builds the controller and registers its namespace and ServiceAccount informers.
func New(d controller.Deps) (*Controller, error) {
	if d.Client == nil || d.Informers == nil {
		return nil, errors.New("serviceaccount controller: Client and Informers are required")
	}
	c := &Controller{
		client: d.Client,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: Name}),
		log:    slog.Default().With("controller", Name),
		ensure: []string{DefaultName},
	}
	saInformer := d.Informers.Core().V1().ServiceAccounts()
	saHandler, err := saInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: c.serviceAccountDeleted,
	})
	if err != nil {
		return nil, fmt.Errorf("serviceaccount controller: service account event handler: %w", err)
	}
	nsInformer := d.Informers.Core().V1().Namespaces()
	nsHandler, err := nsInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.namespaceChanged,
		UpdateFunc: func(_, obj any) { c.namespaceChanged(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("serviceaccount controller: namespace event handler: %w", err)
	}
	c.saLister = saInformer.Lister()
	c.nsLister = nsInformer.Lister()
	c.synced = []cache.InformerSynced{saHandler.HasSynced, nsHandler.HasSynced}
	return c, nil
}

// namespaceChanged queues a namespace that was added or updated (or re-listed).
func (c *Controller) namespaceChanged(obj any) {
	if ns, ok := obj.(*corev1.Namespace); ok {
		c.queue.Add(ns.Name)
	}
}

// serviceAccountDeleted queues the namespace of a deleted ServiceAccount, to recreate it.
func (c *Controller) serviceAccountDeleted(obj any) {
	sa, ok := obj.(*corev1.ServiceAccount)
	if !ok {
		tombstone, isTombstone := obj.(cache.DeletedFinalStateUnknown)
		if !isTombstone {
			return
		}
		if sa, ok = tombstone.Obj.(*corev1.ServiceAccount); !ok {
			return
		}
	}
	c.queue.Add(sa.Namespace)
}

// Run waits for the informers to sync, then runs workers until ctx is done and they
// have all returned.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, c.workerOptions(workers))
}

// workerOptions are the options of the controller's workers.
func (c *Controller) workerOptions(workers int) worker.Options {
	return worker.Options{
		Name: Name, Workers: workers, Synced: c.synced, Sync: c.Sync, Log: c.log,
		SyncTimeout: syncTimeout,
	}
}

// Sync creates the missing ServiceAccounts of one namespace, by name. A namespace that
// is absent or not Active is left alone, and a create refused because the namespace
// is being terminated is not an error.
func (c *Controller) Sync(ctx context.Context, namespace string) error {
	ns, err := c.nsLister.Get(namespace)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to get namespace %q from the cache: %w", namespace, err)
	}
	if ns.Status.Phase != corev1.NamespaceActive || ns.DeletionTimestamp != nil {
		return nil
	}
	var errs []error
	for _, name := range c.ensure {
		_, err := c.saLister.ServiceAccounts(namespace).Get(name)
		if err == nil {
			continue
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to get service account %s/%s from the cache: %w", namespace, name, err)
		}
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
		_, err = c.client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) || c.terminating(ctx, namespace, err) {
			continue
		}
		errs = append(errs, fmt.Errorf("failed to create service account %s/%s: %w", namespace, name, err))
	}
	return errors.Join(errs...)
}

// terminating reports whether a create failed because the namespace is being terminated
// (or is gone). Upstream recognises the NamespaceTerminating status cause; a 403
// without it is confirmed by reading the namespace.
func (c *Controller) terminating(ctx context.Context, namespace string, err error) bool {
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return true
	}
	if !apierrors.IsForbidden(err) {
		return false
	}
	ns, getErr := c.client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(getErr) {
		return true
	}
	return getErr == nil && (ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating)
}
