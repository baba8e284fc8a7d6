// Package persistentvolume is the PersistentVolume binder, as upstream's
// pkg/controller/volume/persistentvolume: it binds each unbound claim to the
// smallest Available volume that fits it (class, access modes, capacity, selector,
// volume mode; the pre-bindings claim.spec.volumeName and volume.spec.claimRef
// first), keeps the phases of claims (Pending, Bound, Lost) and volumes (Available,
// Bound, Released, Failed) true, reclaims a volume whose claim is gone (Retain,
// Delete, Recycle) and hands claims of a provisioning StorageClass to their
// provisioner through the storage-provisioner annotation.
//
// It is level-based: event handlers only queue claim and volume keys, a periodic
// resync (upstream's --pvclaimbinder-sync-period) queues them all, and each sync
// works from the informers' caches, made current with the controller's own writes
// (a mutation cache) so that a sync right after a write does not undo it.
package persistentvolume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/podclaims"
	"github.com/kubette/kubette/internal/controller/worker"
)

// Name is the controller's name in the controller manager's registry, as upstream's.
const Name = "persistentvolume-binder"

// ClientName is the name of the controller's client and ServiceAccount upstream.
const ClientName = "persistent-volume-binder"

// EventComponent is the source component of the controller's events, as upstream's.
const EventComponent = "persistentvolume-controller"

// DefaultResyncPeriod is how often every claim and volume is synced again
// (upstream's --pvclaimbinder-sync-period default).
const DefaultResyncPeriod = 15 * time.Second

// Deleter removes the storage asset behind a dynamically provisioned volume. It
// plays the part of upstream's in-tree volume plugins: a released volume with
// reclaim policy Delete whose pv.kubernetes.io/provisioned-by annotation names a
// registered Deleter is deleted through it, then its PersistentVolume object is
// deleted. Volumes of other provisioners are left to them, as upstream leaves
// them to external provisioners.
type Deleter interface {
	// Delete removes the asset of pv; nil means it is gone.
	Delete(ctx context.Context, pv *corev1.PersistentVolume) error
}

// Options tune the controller.
type Options struct {
	// ResyncPeriod is how often everything is synced again (default DefaultResyncPeriod).
	ResyncPeriod time.Duration
	// Deleters are the in-process deleters by provisioner name.
	Deleters map[string]Deleter
}

// The cache indexes of the controller.
const (
	// volumesByClass indexes volumes by storage class name.
	volumesByClass = "persistentvolume-binder/class"
	// volumesByClaim indexes volumes by the namespace/name of their claimRef.
	volumesByClaim = "persistentvolume-binder/claim"
	// pendingClaimsByClass indexes the claims that have not completed binding by class.
	pendingClaimsByClass = "persistentvolume-binder/pending-class"
)

// Controller binds claims to volumes.
type Controller struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	log      *slog.Logger
	resync   time.Duration
	deleters map[string]Deleter

	// volumes and claims are the informers' caches with the controller's own
	// writes laid over them until the informers catch up.
	volumes      cache.MutationCache
	claims       cache.MutationCache
	volumeLister corelisters.PersistentVolumeLister
	claimLister  corelisters.PersistentVolumeClaimLister
	claimIndexer cache.Indexer
	classLister  storagelisters.StorageClassLister
	podIndexer   cache.Indexer
	synced       []cache.InformerSynced

	claimQueue  workqueue.TypedRateLimitingInterface[string]
	volumeQueue workqueue.TypedRateLimitingInterface[string]
}

var _ controller.Runner = (*Controller)(nil)

// New builds the controller on the shared informers of d with the default options;
// it is the controller's controller.Constructor.
func New(d controller.Deps) (controller.Runner, error) { return NewWithOptions(d, Options{}) }

// NewWithOptions builds the controller on the shared informers of d.
func NewWithOptions(d controller.Deps, o Options) (*Controller, error) {
	if d.Client == nil || d.Informers == nil || d.Recorder == nil {
		return nil, errors.New("persistentvolume binder needs a client, informers and an event recorder")
	}
	if o.ResyncPeriod <= 0 {
		o.ResyncPeriod = DefaultResyncPeriod
	}
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	pvInf := d.Informers.Core().V1().PersistentVolumes()
	pvcInf := d.Informers.Core().V1().PersistentVolumeClaims()
	classInf := d.Informers.Storage().V1().StorageClasses()
	podInf := d.Informers.Core().V1().Pods()
	if err := addIndexers(pvInf.Informer(), cache.Indexers{volumesByClass: indexVolumeByClass, volumesByClaim: indexVolumeByClaim}); err != nil {
		return nil, err
	}
	if err := addIndexers(pvcInf.Informer(), cache.Indexers{pendingClaimsByClass: indexPendingClaimByClass}); err != nil {
		return nil, err
	}
	if err := podclaims.AddIndex(podInf.Informer()); err != nil {
		return nil, err
	}
	// The mutation caches speak klog; their few lines go nowhere.
	quiet := klog.Background().V(10)
	c := &Controller{
		client: d.Client, recorder: d.Recorder(EventComponent), log: log.With("controller", Name),
		resync: o.ResyncPeriod, deleters: o.Deleters,
		volumes: cache.NewIntegerResourceVersionMutationCache(quiet, pvInf.Informer().GetStore(),
			pvInf.Informer().GetIndexer(), time.Minute, false),
		claims: cache.NewIntegerResourceVersionMutationCache(quiet, pvcInf.Informer().GetStore(),
			pvcInf.Informer().GetIndexer(), time.Minute, false),
		volumeLister: pvInf.Lister(), claimLister: pvcInf.Lister(), claimIndexer: pvcInf.Informer().GetIndexer(),
		classLister: classInf.Lister(), podIndexer: podInf.Informer().GetIndexer(),
		synced: []cache.InformerSynced{pvInf.Informer().HasSynced, pvcInf.Informer().HasSynced,
			classInf.Informer().HasSynced, podInf.Informer().HasSynced},
		claimQueue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "claims"}),
		volumeQueue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "volumes"}),
	}
	if _, err := pvInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.volumeChanged,
		UpdateFunc: func(_, cur any) { c.volumeChanged(cur) },
		DeleteFunc: c.volumeDeleted,
	}); err != nil {
		return nil, fmt.Errorf("add PersistentVolume event handler: %w", err)
	}
	if _, err := pvcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.claimChanged,
		UpdateFunc: func(_, cur any) { c.claimChanged(cur) },
		DeleteFunc: c.claimDeleted,
	}); err != nil {
		return nil, fmt.Errorf("add PersistentVolumeClaim event handler: %w", err)
	}
	if _, err := classInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.classChanged,
		UpdateFunc: func(_, cur any) { c.classChanged(cur) },
	}); err != nil {
		return nil, fmt.Errorf("add StorageClass event handler: %w", err)
	}
	// A new pod that uses pending claims of WaitForFirstConsumer classes changes what
	// their events say (upstream waits for the periodic resync).
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: c.podAdded}); err != nil {
		return nil, fmt.Errorf("add pod event handler: %w", err)
	}
	return c, nil
}

// podAdded queues the claims of an unscheduled pod.
func (c *Controller) podAdded(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName != "" {
		return
	}
	for _, key := range podclaims.Keys(pod) {
		c.claimQueue.Add(key)
	}
}

// addIndexers adds the indexers inf does not have yet.
func addIndexers(inf cache.SharedIndexInformer, want cache.Indexers) error {
	have := inf.GetIndexer().GetIndexers()
	add := cache.Indexers{}
	for name, fn := range want {
		if _, ok := have[name]; !ok {
			add[name] = fn
		}
	}
	if len(add) == 0 {
		return nil
	}
	if err := inf.AddIndexers(add); err != nil {
		return fmt.Errorf("add indexers: %w", err)
	}
	return nil
}

// Run runs the claim and volume workers and the periodic resync until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	done := make(chan struct{}, 2)
	run := func(q workqueue.TypedRateLimitingInterface[string], name string, sync func(context.Context, string) error) {
		defer func() { done <- struct{}{} }()
		worker.Run(ctx, q, worker.Options{
			Name: name, Workers: workers, Synced: c.synced, Sync: sync, Log: c.log.With("queue", name),
			OnError: func(key string, err error) bool { return c.routine(q, key, err) },
		})
	}
	go run(c.claimQueue, "persistentvolume-binder claims", c.SyncClaim)
	go run(c.volumeQueue, "persistentvolume-binder volumes", c.SyncVolume)
	if cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		ticker := time.NewTicker(c.resync)
	loop:
		for {
			select {
			case <-ctx.Done():
				break loop
			case <-ticker.C:
				c.resyncAll()
			}
		}
		ticker.Stop()
	}
	<-done
	<-done
}

// routine takes care of the failures that are part of normal operation: a write
// that lost a race (conflict) is retried with back-off without an error line.
func (c *Controller) routine(q workqueue.TypedRateLimitingInterface[string], key string, err error) bool {
	if !apierrors.IsConflict(err) {
		return false
	}
	c.log.Debug("sync lost a race, retrying", "key", key, "err", err)
	q.AddRateLimited(key)
	return true
}

// resyncAll queues every claim and volume, as upstream's periodic resync.
func (c *Controller) resyncAll() {
	claims, err := c.claimLister.List(labels.Everything())
	if err == nil {
		for _, pvc := range claims {
			c.claimQueue.Add(claimKey(pvc))
		}
	}
	volumes, err := c.volumeLister.List(labels.Everything())
	if err == nil {
		for _, pv := range volumes {
			c.volumeQueue.Add(pv.Name)
		}
	}
}

func (c *Controller) volumeChanged(obj any) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok {
		return
	}
	c.volumeQueue.Add(pv.Name)
	// A volume that may take a claim: the pending claims of its class look again
	// (upstream waits for the periodic resync).
	if pv.DeletionTimestamp == nil && (pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID == "") {
		c.queuePendingClaims(volumeClass(pv))
	}
}

func (c *Controller) volumeDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok {
		return
	}
	c.volumeQueue.Add(pv.Name)
	// Its claim learns at once that it is Lost.
	if ref := pv.Spec.ClaimRef; ref != nil {
		c.claimQueue.Add(ref.Namespace + "/" + ref.Name)
	}
}

func (c *Controller) claimChanged(obj any) {
	if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok {
		c.claimQueue.Add(claimKey(pvc))
	}
}

func (c *Controller) claimDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return
	}
	c.claimQueue.Add(claimKey(pvc))
	// Its volume is released at once rather than at the next resync.
	if pvc.Spec.VolumeName != "" {
		c.volumeQueue.Add(pvc.Spec.VolumeName)
	}
}

func (c *Controller) classChanged(obj any) {
	if sc, ok := obj.(*storagev1.StorageClass); ok {
		c.queuePendingClaims(sc.Name)
	}
}

// queuePendingClaims queues the claims of class that have not completed binding.
func (c *Controller) queuePendingClaims(class string) {
	keys, err := c.claimIndexer.IndexKeys(pendingClaimsByClass, class)
	if err != nil {
		return
	}
	for _, k := range keys {
		c.claimQueue.Add(k)
	}
}

func claimKey(pvc *corev1.PersistentVolumeClaim) string { return pvc.Namespace + "/" + pvc.Name }
