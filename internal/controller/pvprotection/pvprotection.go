// Package pvprotection is the PV protection controller, as upstream's
// pkg/controller/volume/pvprotection: a PersistentVolume being deleted keeps its
// kubernetes.io/pv-protection finalizer (put there by the
// StorageObjectInUseProtection admission plugin) while it is Bound to a claim,
// and loses it once it is not (the PersistentVolume binder releases it when its
// claim is gone). A volume without the finalizer that is not being deleted gets
// it (volumes made before the plugin ran).
package pvprotection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/worker"
)

// Name is the controller's name in the controller manager's registry, as upstream's.
const Name = "persistentvolume-protection-controller"

// ClientName is the name of the controller's client and ServiceAccount upstream.
const ClientName = "pv-protection-controller"

// Finalizer is the finalizer the controller removes, as upstream's.
const Finalizer = "kubernetes.io/pv-protection"

// Controller removes the protection finalizer of deleted volumes that are not Bound.
type Controller struct {
	client   kubernetes.Interface
	log      *slog.Logger
	pvLister corelisters.PersistentVolumeLister
	synced   cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
}

var _ controller.Runner = (*Controller)(nil)

// New builds the controller on the shared informers of d.
func New(d controller.Deps) (controller.Runner, error) { return NewController(d) }

// NewController builds the controller on the shared informers of d.
func NewController(d controller.Deps) (*Controller, error) {
	if d.Client == nil || d.Informers == nil {
		return nil, errors.New("pv protection controller needs a client and informers")
	}
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	inf := d.Informers.Core().V1().PersistentVolumes()
	c := &Controller{
		client: d.Client, log: log.With("controller", Name),
		pvLister: inf.Lister(), synced: inf.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "pvprotection"}),
	}
	enqueue := func(obj any) {
		pv, ok := obj.(*corev1.PersistentVolume)
		if ok && (needsFinalizer(pv) || isDeletionCandidate(pv)) {
			c.queue.Add(pv.Name)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, cur any) { enqueue(cur) },
	}); err != nil {
		return nil, fmt.Errorf("add PersistentVolume event handler: %w", err)
	}
	return c, nil
}

// Run runs workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, worker.Options{
		Name: Name, Workers: workers, Synced: []cache.InformerSynced{c.synced}, Sync: c.Sync, Log: c.log,
		OnError: func(key string, err error) bool {
			if !apierrors.IsConflict(err) {
				return false
			}
			// Another writer (the binder) changed the volume: look again quietly.
			c.queue.AddRateLimited(key)
			return true
		},
	})
}

func isDeletionCandidate(pv *corev1.PersistentVolume) bool {
	return pv.DeletionTimestamp != nil && slices.Contains(pv.Finalizers, Finalizer)
}

func needsFinalizer(pv *corev1.PersistentVolume) bool {
	return pv.DeletionTimestamp == nil && !slices.Contains(pv.Finalizers, Finalizer)
}

// Sync removes the finalizer of the volume named key when it is being deleted and
// is not Bound, or adds it to a volume that lacks it.
func (c *Controller) Sync(ctx context.Context, key string) error {
	pv, err := c.pvLister.Get(key)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get PersistentVolume %s: %w", key, err)
	}
	if isDeletionCandidate(pv) {
		// The binder keeps the phase: Bound while a claim holds the volume.
		if pv.Status.Phase != corev1.VolumeBound {
			return c.setFinalizer(ctx, pv, false)
		}
		c.log.Debug("keeping PersistentVolume because it is being used", "pv", key)
	}
	if needsFinalizer(pv) {
		return c.setFinalizer(ctx, pv, true)
	}
	return nil
}

// setFinalizer adds or removes the finalizer with an update of the volume.
func (c *Controller) setFinalizer(ctx context.Context, pv *corev1.PersistentVolume, add bool) error {
	clone := pv.DeepCopy()
	if add {
		clone.Finalizers = append(clone.Finalizers, Finalizer)
	} else {
		clone.Finalizers = slices.DeleteFunc(clone.Finalizers, func(f string) bool { return f == Finalizer })
	}
	if _, err := c.client.CoreV1().PersistentVolumes().Update(ctx, clone, metav1.UpdateOptions{}); err != nil {
		verb := "removing"
		if add {
			verb = "adding"
		}
		return fmt.Errorf("%s protection finalizer of PersistentVolume %s: %w", verb, pv.Name, err)
	}
	c.log.Debug("protection finalizer of PersistentVolume changed", "pv", pv.Name, "added", add)
	return nil
}
