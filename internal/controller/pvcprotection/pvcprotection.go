// Package pvcprotection is the PVC protection controller, as upstream's
// pkg/controller/volume/pvcprotection: a PersistentVolumeClaim being deleted
// keeps its kubernetes.io/pvc-protection finalizer (put there by the
// StorageObjectInUseProtection admission plugin) while a scheduled pod uses it,
// and loses it once none does, so that a claim is never taken from under a pod.
// A claim without the finalizer that is not being deleted gets it (claims made
// before the plugin ran).
//
// A pod uses a claim when it is bound to a node and one of its volumes names
// the claim, whatever its phase, as upstream; a generic ephemeral volume's claim
// is used only while the pod is not shut down (deleted with a zero grace
// period) and owns the claim. The pods come from the informer's index by claim;
// when it finds none, a live list of the namespace's pods confirms it (a pod
// may not be in the cache yet).
package pvcprotection

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
	"k8s.io/component-helpers/storage/ephemeral"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/podclaims"
	"github.com/kubette/kubette/internal/controller/worker"
)

// Name is the controller's name in the controller manager's registry, as upstream's.
const Name = "persistentvolumeclaim-protection-controller"

// ClientName is the name of the controller's client and ServiceAccount upstream.
const ClientName = "pvc-protection-controller"

// Finalizer is the finalizer the controller removes, as upstream's.
const Finalizer = "kubernetes.io/pvc-protection"

// Controller removes the protection finalizer of deleted claims no pod uses.
type Controller struct {
	client     kubernetes.Interface
	log        *slog.Logger
	pvcLister  corelisters.PersistentVolumeClaimLister
	podIndexer cache.Indexer
	synced     []cache.InformerSynced
	queue      workqueue.TypedRateLimitingInterface[string]
}

var _ controller.Runner = (*Controller)(nil)

// New builds the controller on the shared informers of d.
func New(d controller.Deps) (controller.Runner, error) { return NewController(d) }

// NewController builds the controller on the shared informers of d.
func NewController(d controller.Deps) (*Controller, error) {
	if d.Client == nil || d.Informers == nil {
		return nil, errors.New("pvc protection controller needs a client and informers")
	}
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	pvcInf := d.Informers.Core().V1().PersistentVolumeClaims()
	podInf := d.Informers.Core().V1().Pods()
	if err := podclaims.AddIndex(podInf.Informer()); err != nil {
		return nil, err
	}
	c := &Controller{
		client: d.Client, log: log.With("controller", Name),
		pvcLister: pvcInf.Lister(), podIndexer: podInf.Informer().GetIndexer(),
		synced: []cache.InformerSynced{pvcInf.Informer().HasSynced, podInf.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "pvcprotection"}),
	}
	if _, err := pvcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.claimChanged,
		UpdateFunc: func(_, cur any) { c.claimChanged(cur) },
	}); err != nil {
		return nil, fmt.Errorf("add PersistentVolumeClaim event handler: %w", err)
	}
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.podChanged(nil, obj, false) },
		UpdateFunc: func(old, cur any) { c.podChanged(old, cur, false) },
		DeleteFunc: func(obj any) { c.podChanged(nil, obj, true) },
	}); err != nil {
		return nil, fmt.Errorf("add pod event handler: %w", err)
	}
	return c, nil
}

// Run runs workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, worker.Options{
		Name: Name, Workers: workers, Synced: c.synced, Sync: c.Sync, Log: c.log,
		OnError: func(key string, err error) bool {
			if !apierrors.IsConflict(err) {
				return false
			}
			// Another writer changed the claim: look again, without an error line.
			c.queue.AddRateLimited(key)
			return true
		},
	})
}

// isDeletionCandidate reports whether obj is being deleted and still has the finalizer.
func isDeletionCandidate(obj metav1.Object, finalizer string) bool {
	return obj.GetDeletionTimestamp() != nil && slices.Contains(obj.GetFinalizers(), finalizer)
}

// needsFinalizer reports whether obj is not being deleted and lacks the finalizer.
func needsFinalizer(obj metav1.Object, finalizer string) bool {
	return obj.GetDeletionTimestamp() == nil && !slices.Contains(obj.GetFinalizers(), finalizer)
}

func (c *Controller) claimChanged(obj any) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return
	}
	if needsFinalizer(pvc, Finalizer) || isDeletionCandidate(pvc, Finalizer) {
		c.queue.Add(pvc.Namespace + "/" + pvc.Name)
	}
}

// podChanged queues the claims of a pod that may have stopped using them: a
// deleted, finished or unscheduled pod. An update that replaced a pod by another
// of the same name queues the old one's claims too.
func (c *Controller) podChanged(old, cur any, deleted bool) {
	pod := asPod(cur)
	if pod == nil {
		return
	}
	c.queueClaims(pod, deleted)
	if oldPod := asPod(old); oldPod != nil && oldPod.UID != pod.UID {
		c.queueClaims(oldPod, true)
	}
}

func asPod(obj any) *corev1.Pod {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, _ := obj.(*corev1.Pod)
	return pod
}

func (c *Controller) queueClaims(pod *corev1.Pod, deleted bool) {
	if !deleted && !podclaims.IsTerminated(pod) && pod.Spec.NodeName != "" {
		// A running pod cannot help a claim lose its finalizer.
		return
	}
	for _, key := range podclaims.Keys(pod) {
		c.queue.Add(key)
	}
}

// Sync removes the finalizer of the claim of key (namespace/name) when it is being
// deleted and no pod uses it, or adds it to a claim that lacks it.
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("invalid key %q: %w", key, err)
	}
	pvc, err := c.pvcLister.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get PersistentVolumeClaim %s: %w", key, err)
	}
	if isDeletionCandidate(pvc, Finalizer) {
		used, err := c.isBeingUsed(ctx, pvc)
		if err != nil {
			return err
		}
		if !used {
			return c.setFinalizer(ctx, pvc, false)
		}
		c.log.Debug("keeping PersistentVolumeClaim because it is being used", "pvc", key)
	}
	if needsFinalizer(pvc, Finalizer) {
		return c.setFinalizer(ctx, pvc, true)
	}
	return nil
}

// setFinalizer adds or removes the finalizer with an update of the claim.
func (c *Controller) setFinalizer(ctx context.Context, pvc *corev1.PersistentVolumeClaim, add bool) error {
	clone := pvc.DeepCopy()
	if add {
		clone.Finalizers = append(clone.Finalizers, Finalizer)
	} else {
		clone.Finalizers = slices.DeleteFunc(clone.Finalizers, func(f string) bool { return f == Finalizer })
	}
	if _, err := c.client.CoreV1().PersistentVolumeClaims(clone.Namespace).Update(ctx, clone, metav1.UpdateOptions{}); err != nil {
		verb := "removing"
		if add {
			verb = "adding"
		}
		return fmt.Errorf("%s protection finalizer of PersistentVolumeClaim %s/%s: %w", verb, pvc.Namespace, pvc.Name, err)
	}
	c.log.Debug("protection finalizer of PersistentVolumeClaim changed", "pvc", pvc.Namespace+"/"+pvc.Name, "added", add)
	return nil
}

// isBeingUsed reports whether a pod uses the claim: from the informer's index,
// confirmed by a live list of the namespace's pods when the index shows none.
func (c *Controller) isBeingUsed(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (bool, error) {
	pods, err := podclaims.Pods(c.podIndexer, pvc.Namespace, pvc.Name)
	if err != nil {
		c.log.Error("cache-based list of pods failed; asking the API server", "pvc", pvc.Namespace+"/"+pvc.Name, "err", err)
	}
	for _, p := range pods {
		if podUsesClaim(p, pvc) {
			return true, nil
		}
	}
	list, err := c.client.CoreV1().Pods(pvc.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, fmt.Errorf("live list of pods failed: %w", err)
	}
	for i := range list.Items {
		if podUsesClaim(&list.Items[i], pvc) {
			return true, nil
		}
	}
	return false, nil
}

// podUsesClaim reports whether pod holds the claim, as upstream judges it: only a
// scheduled pod does (the kubelet starts no pod on a claim being deleted).
func podUsesClaim(pod *corev1.Pod, pvc *corev1.PersistentVolumeClaim) bool {
	if pod.Spec.NodeName == "" || pod.Namespace != pvc.Namespace {
		return false
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name {
			return true
		}
		if v.Ephemeral != nil && !podIsShutDown(pod) && ephemeral.VolumeClaimName(pod, v) == pvc.Name && ephemeral.VolumeIsForPod(pod, pvc) == nil {
			return true
		}
	}
	return false
}

// podIsShutDown reports whether the kubelet is done with the pod or it was force
// deleted: a deletion with a zero grace period. Its ephemeral claims are free then,
// which also breaks a cycle of a pod finalizer waiting for its claim.
func podIsShutDown(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil && *pod.DeletionGracePeriodSeconds == 0
}
