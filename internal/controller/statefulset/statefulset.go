// Package statefulset is the StatefulSet controller: it runs a set's pods with
// stable identities (ordinal names <set>-<n>, the statefulset.kubernetes.io/pod-name
// and apps.kubernetes.io/pod-index labels, hostname and subdomain from
// spec.serviceName, one claim per volume claim template and ordinal) as upstream's
// k8s.io/kubernetes pkg/controller/statefulset behaves in 1.32. With OrderedReady
// pods are created in ordinal order, each once its predecessors run and are ready,
// and removed in reverse order; with Parallel all at once. Updates follow the
// RollingUpdate strategy from the highest ordinal down to the partition, at most
// maxUnavailable at a time, or wait for pods to be deleted with OnDelete. The
// templates are kept in ControllerRevisions (pods are labelled with the revision's
// name) with a bounded history, and the status reports the replicas per revision.
//
// Event handlers turn StatefulSet and pod changes into set keys on a rate-limited
// queue; workers run Sync, which reads the informer caches and writes through the API.
package statefulset

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/history"
	"github.com/kubette/kubette/internal/controller/podstate"
	"github.com/kubette/kubette/internal/controller/worker"
)

// Name is the controller's name in the controller manager's registry.
const Name = "statefulset"

// ClientName is the name upstream's controller manager gives the controller's client
// (and its ServiceAccount, bound to system:controller:statefulset-controller).
const ClientName = "statefulset-controller"

var controllerKind = appsv1.SchemeGroupVersion.WithKind("StatefulSet")

// Controller syncs StatefulSets.
type Controller struct {
	client   kubernetes.Interface
	history  history.Client
	recorder record.EventRecorder
	log      *slog.Logger
	clock    clock.WithTicker

	setLister appslisters.StatefulSetLister
	revLister appslisters.ControllerRevisionLister
	podLister corelisters.PodLister
	synced    []cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
}

var _ controller.Runner = (*Controller)(nil)

// Options tune a Controller.
type Options struct {
	// Clock is the controller's clock (default the real one).
	Clock clock.WithTicker
}

// New builds the StatefulSet controller on the shared informers of d; it is the
// controller's controller.Constructor.
func New(d controller.Deps) (controller.Runner, error) { return NewWith(d, Options{}) }

// NewWith builds the StatefulSet controller with options.
func NewWith(d controller.Deps, o Options) (*Controller, error) {
	if d.Client == nil || d.Informers == nil || d.Recorder == nil {
		return nil, fmt.Errorf("statefulset controller needs a client, informers and an event recorder")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	setInformer := d.Informers.Apps().V1().StatefulSets()
	revInformer := d.Informers.Apps().V1().ControllerRevisions()
	podInformer := d.Informers.Core().V1().Pods()
	c := &Controller{
		client:    d.Client,
		history:   history.Client{Client: d.Client},
		recorder:  d.Recorder(ClientName),
		log:       slog.Default().With("controller", Name),
		clock:     o.Clock,
		setLister: setInformer.Lister(),
		revLister: revInformer.Lister(),
		podLister: podInformer.Lister(),
		synced:    []cache.InformerSynced{setInformer.Informer().HasSynced, revInformer.Informer().HasSynced, podInformer.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: Name, Clock: o.Clock},
		),
	}
	if _, err := setInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue, UpdateFunc: func(_, cur any) { c.enqueue(cur) }, DeleteFunc: c.enqueue,
	}); err != nil {
		return nil, fmt.Errorf("failed to add StatefulSet event handler: %w", err)
	}
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.addPod, UpdateFunc: c.updatePod, DeleteFunc: c.deletePod,
	}); err != nil {
		return nil, fmt.Errorf("failed to add pod event handler: %w", err)
	}
	return c, nil
}

// Run waits for the informer caches, then runs workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, worker.Options{Name: Name, Workers: workers, Synced: c.synced, Sync: c.Sync, Log: c.log})
}

func (c *Controller) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

// owner returns the StatefulSet that controls pod, if the cache has it.
func (c *Controller) owner(pod *corev1.Pod) *appsv1.StatefulSet {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != controllerKind.Kind || ref.APIVersion != controllerKind.GroupVersion().String() {
		return nil
	}
	set, err := c.setLister.StatefulSets(pod.Namespace).Get(ref.Name)
	if err != nil || set.UID != ref.UID {
		return nil
	}
	return set
}

// enqueueSelecting wakes the sets whose selector matches an orphan pod.
func (c *Controller) enqueueSelecting(pod *corev1.Pod) {
	sets, err := c.setLister.StatefulSets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, set := range sets {
		sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(pod.Labels)) {
			c.enqueue(set)
		}
	}
}

func (c *Controller) addPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if set := c.owner(pod); set != nil {
		c.enqueue(set)
		return
	}
	if metav1.GetControllerOfNoCopy(pod) == nil {
		c.enqueueSelecting(pod)
	}
}

func (c *Controller) updatePod(oldObj, curObj any) {
	old, ok1 := oldObj.(*corev1.Pod)
	cur, ok2 := curObj.(*corev1.Pod)
	if !ok1 || !ok2 || old.ResourceVersion == cur.ResourceVersion {
		return
	}
	oldSet, curSet := c.owner(old), c.owner(cur)
	if oldSet != nil && (curSet == nil || oldSet.UID != curSet.UID) {
		c.enqueue(oldSet)
	}
	if curSet != nil {
		c.enqueue(curSet)
		// A pod that became ready becomes available after minReadySeconds.
		if !podstate.IsPodReady(old) && podstate.IsPodReady(cur) && curSet.Spec.MinReadySeconds > 0 {
			c.queue.AddAfter(curSet.Namespace+"/"+curSet.Name, time.Duration(curSet.Spec.MinReadySeconds)*time.Second+time.Second)
		}
		return
	}
	if metav1.GetControllerOfNoCopy(cur) == nil && (!equality.Semantic.DeepEqual(old.Labels, cur.Labels) || oldSet != nil) {
		c.enqueueSelecting(cur)
	}
}

func (c *Controller) deletePod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if pod, ok = tombstone.Obj.(*corev1.Pod); !ok {
			return
		}
	}
	if set := c.owner(pod); set != nil {
		c.enqueue(set)
	}
}
