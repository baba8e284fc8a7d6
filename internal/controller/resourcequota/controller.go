// Package resourcequota is the resource quota controller, as upstream's
// pkg/controller/resourcequota: it keeps every ResourceQuota's status.hard equal to its
// spec.hard and status.used equal to what the namespace's objects use of each limited
// resource (pods, services and their node ports and load balancers, configmaps,
// secrets, replicationcontrollers, resourcequotas, claims, compute requests and limits,
// count/<resource>.<group> object counts), within the quota's scopes.
//
// A quota is recalculated when it is created or its spec changes, when an object it
// counts is deleted (or a pod finishes, a service changes type: what frees usage —
// new objects are charged by the ResourceQuota admission plugin as they are created),
// and every resync period. Objects of the typed resources are read from shared
// informers; those only counted (count/deployments.apps) from metadata informers
// started the first time a quota names them.
package resourcequota

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/worker"
	"github.com/kubette/kubette/internal/quota"
)

// Name is the controller's name in the controller manager's registry.
const Name = "resourcequota"

// ClientName is the name upstream's controller manager gives the controller's client.
const ClientName = "resourcequota-controller"

// ResyncPeriod is how often every quota is recalculated, as upstream's default
// --resource-quota-sync-period.
const ResyncPeriod = 5 * time.Minute

const syncTimeout = time.Minute

// lister lists the objects of one resource in a namespace.
type lister func(namespace string) ([]runtime.Object, error)

// Controller computes the usage of ResourceQuotas.
type Controller struct {
	client      kubernetes.Interface
	quotaLister corelisters.ResourceQuotaLister
	typed       map[schema.GroupResource]lister
	metadata    metadatainformer.SharedInformerFactory
	mapper      meta.RESTMapper
	synced      []cache.InformerSynced
	queue       workqueue.TypedRateLimitingInterface[string]
	log         *slog.Logger
	resync      time.Duration
	now         func() time.Time

	mu      sync.Mutex
	ctx     context.Context // Run's, to start the metadata informers
	generic map[schema.GroupResource]cache.SharedIndexInformer
}

var _ controller.Runner = (*Controller)(nil)

// New builds the controller and registers its informers.
func New(d controller.Deps) (*Controller, error) {
	if d.Client == nil || d.Informers == nil {
		return nil, errors.New("resourcequota controller: Client and Informers are required")
	}
	c := &Controller{
		client: d.Client, metadata: d.MetadataInformers, mapper: d.RESTMapper,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: Name}),
		log: slog.Default().With("controller", Name), resync: ResyncPeriod, now: time.Now,
		typed: map[schema.GroupResource]lister{}, generic: map[schema.GroupResource]cache.SharedIndexInformer{},
	}
	if d.Logger != nil {
		c.log = d.Logger.With("controller", Name)
	}
	qi := d.Informers.Core().V1().ResourceQuotas()
	h, err := qi.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueQuota,
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*corev1.ResourceQuota)
			n, ok2 := cur.(*corev1.ResourceQuota)
			// Status changes are the controller's own (or someone's to be undone at
			// the next resync, as upstream): only spec changes call for a recount.
			if ok1 && ok2 && !equality.Semantic.DeepEqual(o.Spec, n.Spec) {
				c.enqueueQuota(cur)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("resourcequota controller: quota event handler: %w", err)
	}
	c.quotaLister = qi.Lister()
	c.synced = append(c.synced, h.HasSynced)

	core := d.Informers.Core().V1()
	typed := []struct {
		gr       schema.GroupResource
		informer cache.SharedIndexInformer
		changed  func(old, cur any) bool
	}{
		{schema.GroupResource{Resource: "pods"}, core.Pods().Informer(), c.podFreed},
		{schema.GroupResource{Resource: "services"}, core.Services().Informer(), serviceChanged},
		{schema.GroupResource{Resource: "configmaps"}, core.ConfigMaps().Informer(), nil},
		{schema.GroupResource{Resource: "secrets"}, core.Secrets().Informer(), nil},
		{schema.GroupResource{Resource: "replicationcontrollers"}, core.ReplicationControllers().Informer(), nil},
		{schema.GroupResource{Resource: "resourcequotas"}, qi.Informer(), nil},
	}
	for _, t := range typed {
		handlers := cache.ResourceEventHandlerFuncs{DeleteFunc: c.enqueueNamespaceOf}
		if t.changed != nil {
			changed := t.changed
			handlers.UpdateFunc = func(old, cur any) {
				if changed(old, cur) {
					c.enqueueNamespaceOf(cur)
				}
			}
		}
		h, err := t.informer.AddEventHandler(handlers)
		if err != nil {
			return nil, fmt.Errorf("resourcequota controller: %s event handler: %w", t.gr, err)
		}
		c.synced = append(c.synced, h.HasSynced)
		c.typed[t.gr] = indexerLister(t.informer.GetIndexer())
	}
	return c, nil
}

// indexerLister lists an informer's objects of a namespace.
func indexerLister(idx cache.Indexer) lister {
	return func(ns string) ([]runtime.Object, error) {
		items, err := idx.ByIndex(cache.NamespaceIndex, ns)
		if err != nil {
			return nil, err
		}
		out := make([]runtime.Object, 0, len(items))
		for _, it := range items {
			if o, ok := it.(runtime.Object); ok {
				out = append(out, o)
			}
		}
		return out, nil
	}
}

// podFreed reports whether a pod update may free quota: it finished, or its deletion began.
func (c *Controller) podFreed(old, cur any) bool {
	o, ok1 := old.(*corev1.Pod)
	n, ok2 := cur.(*corev1.Pod)
	if !ok1 || !ok2 {
		return false
	}
	now := c.now()
	return quota.Charged(o, now) != quota.Charged(n, now) || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil)
}

// serviceChanged reports whether a service update may change its usage.
func serviceChanged(old, cur any) bool {
	o, ok1 := old.(*corev1.Service)
	n, ok2 := cur.(*corev1.Service)
	return ok1 && ok2 && (o.Spec.Type != n.Spec.Type || len(o.Spec.Ports) != len(n.Spec.Ports))
}

func (c *Controller) enqueueQuota(obj any) {
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

// enqueueNamespaceOf queues every quota of the namespace of obj (a deleted object or
// its tombstone).
func (c *Controller) enqueueNamespaceOf(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil || m.GetNamespace() == "" {
		return
	}
	c.enqueueNamespace(m.GetNamespace())
}

func (c *Controller) enqueueNamespace(ns string) {
	qs, err := c.quotaLister.ResourceQuotas(ns).List(labels.Everything())
	if err != nil {
		return
	}
	for _, q := range qs {
		c.queue.Add(q.Namespace + "/" + q.Name)
	}
}

// Run waits for the informers to sync, then recalculates quotas until ctx is done,
// every one of them each resync period.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.mu.Lock()
	c.ctx = ctx
	c.mu.Unlock()
	go c.resyncLoop(ctx)
	worker.Run(ctx, c.queue, worker.Options{
		Name: Name, Workers: workers, Synced: c.synced, Sync: c.Sync, Log: c.log, SyncTimeout: syncTimeout,
	})
}

// resyncLoop queues every quota each resync period.
func (c *Controller) resyncLoop(ctx context.Context) {
	t := time.NewTicker(c.resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			qs, err := c.quotaLister.List(labels.Everything())
			if err != nil {
				continue
			}
			for _, q := range qs {
				c.queue.Add(q.Namespace + "/" + q.Name)
			}
		}
	}
}

// listerFor returns how to list a resource's objects: its typed informer, else a
// metadata informer started now; ok is false while that informer syncs (the quota is
// retried) or for a resource the API does not serve.
func (c *Controller) listerFor(gr schema.GroupResource) (l lister, ok bool, err error) {
	if l, ok := c.typed[gr]; ok {
		return l, true, nil
	}
	if c.metadata == nil || c.mapper == nil {
		return nil, false, nil
	}
	c.mu.Lock()
	inf, found := c.generic[gr]
	c.mu.Unlock()
	if !found {
		gvr, err := c.mapper.ResourceFor(gr.WithVersion(""))
		if err != nil {
			// Not served (yet): count nothing, as upstream counts no unknown resource.
			return nil, false, nil
		}
		c.mu.Lock()
		if inf, found = c.generic[gr]; !found {
			inf = c.metadata.ForResource(gvr).Informer()
			if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: c.enqueueNamespaceOf}); err != nil {
				c.mu.Unlock()
				return nil, false, fmt.Errorf("event handler for %s: %w", gr, err)
			}
			c.generic[gr] = inf
			if c.ctx != nil {
				c.metadata.Start(c.ctx.Done())
			}
		}
		c.mu.Unlock()
	}
	if !inf.HasSynced() {
		return nil, false, fmt.Errorf("waiting for the informer of %s to sync", gr)
	}
	return indexerLister(inf.GetIndexer()), true, nil
}

// Sync recalculates the quota namespace/name and writes its status if it changed.
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	q, err := c.quotaLister.ResourceQuotas(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get quota %s from the cache: %w", key, err)
	}
	used, calcErr := c.usage(q)
	status := corev1.ResourceQuotaStatus{Hard: quota.Add(nil, q.Spec.Hard), Used: used}
	if q.Status.Hard != nil && q.Status.Used != nil && quota.Equal(q.Status.Hard, status.Hard) && quota.Equal(q.Status.Used, status.Used) {
		return calcErr
	}
	upd := q.DeepCopy()
	upd.Status = status
	if _, err := c.client.CoreV1().ResourceQuotas(ns).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
		return errors.Join(calcErr, fmt.Errorf("update the status of quota %s: %w", key, err))
	}
	return calcErr
}

// usage returns the quota's new status.used: what was measured of each limited
// resource, the previous value of those that could not be measured now.
func (c *Controller) usage(q *corev1.ResourceQuota) (corev1.ResourceList, error) {
	names := quota.Names(q.Spec.Hard)
	used := quota.Mask(q.Status.Used, names)
	now := c.now()
	var errs []error
	for _, gr := range quota.Resources(names) {
		e := quota.For(gr)
		matched := e.MatchingResources(names)
		if len(matched) == 0 {
			continue
		}
		list, ok, err := c.listerFor(gr)
		if err != nil {
			errs = append(errs, err)
		}
		if !ok {
			continue
		}
		objs, err := list(q.Namespace)
		if err != nil {
			errs = append(errs, fmt.Errorf("list %s: %w", gr, err))
			continue
		}
		sum := corev1.ResourceList{}
		for _, m := range matched {
			sum[m] = *resourceZero()
		}
		for _, obj := range objs {
			in, err := inScope(e, q, obj)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !in {
				continue
			}
			u, err := e.Usage(obj, now)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			sum = quota.Add(sum, quota.Mask(u, matched))
		}
		for k, v := range sum {
			used[k] = v
		}
	}
	return used, errors.Join(errs...)
}

// inScope reports whether every scope of q selects obj.
func inScope(e quota.Evaluator, q *corev1.ResourceQuota, obj runtime.Object) (bool, error) {
	for _, sel := range quota.Selectors(q) {
		ok, err := e.MatchesScope(sel, obj)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

func resourceZero() *resource.Quantity { return resource.NewQuantity(0, resource.DecimalSI) }
