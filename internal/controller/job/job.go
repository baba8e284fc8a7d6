// Package job is the Job controller: it runs a Job's pods to completion. It
// creates pods up to spec.parallelism while completions remain, counts the pods
// that finished through the pod tracking finalizer and
// status.uncountedTerminatedPods, retries failed pods with an exponential
// back-off up to spec.backoffLimit (or per index with backoffLimitPerIndex),
// applies the pod failure policy, enforces activeDeadlineSeconds, suspends and
// resumes, runs Indexed Jobs (one pod per completion index), and reports the
// conditions of upstream 1.32 (FailureTarget before Failed, SuccessCriteriaMet
// before Complete). It follows upstream's k8s.io/kubernetes pkg/controller/job.
//
// Event handlers turn Job and pod changes into Job keys on a rate-limited queue;
// workers run Sync, which reads the informer caches and writes through the API.
package job

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/expectations"
	"github.com/kubette/kubette/internal/controller/worker"
)

// Name is the controller's name in the controller manager's registry.
const Name = "job"

// ClientName is the name upstream's controller manager gives the controller's client
// (and its ServiceAccount, bound to system:controller:job-controller).
const ClientName = "job-controller"

// Upstream's back-off of failed pods: 10 s, doubling, at most 6 minutes.
const (
	DefaultBackoff = 10 * time.Second
	MaxBackoff     = 6 * time.Minute
)

// controllerName is the value of spec.managedBy that this controller handles
// (a Job without managedBy is handled too).
const controllerName = "kubernetes.io/job-controller"

var controllerKind = batchv1.SchemeGroupVersion.WithKind("Job")

// Controller syncs Jobs.
type Controller struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	log      *slog.Logger
	clock    clock.WithTicker
	backoff  time.Duration
	maxDelay time.Duration

	expectations *expectations.UIDTrackingControllerExpectations

	jobLister batchlisters.JobLister
	jobSynced cache.InformerSynced
	podLister corelisters.PodLister
	podSynced cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]

	mu sync.Mutex
	// removing holds, per Job key, the pods whose tracking finalizer this controller
	// removed and whose change the cache has not shown yet: they are not counted again.
	removing map[string]sets.Set[types.UID]
	// backoffs holds, per Job key, the failures since the last success.
	backoffs map[string]backoffRecord
}

var _ controller.Runner = (*Controller)(nil)

// backoffRecord is how many pods failed since the last success, and when the last did.
type backoffRecord struct {
	failures    int
	lastFailure time.Time
}

// Options tune a Controller (tests shorten the back-off; zero values are upstream's).
type Options struct {
	// Clock is the controller's clock (default the real one).
	Clock clock.WithTicker
	// Backoff is the delay after the first failure, doubling with each further one.
	Backoff time.Duration
	// MaxBackoff bounds the delay.
	MaxBackoff time.Duration
}

// New builds the Job controller on the shared informers of d; it is the
// controller's controller.Constructor.
func New(d controller.Deps) (controller.Runner, error) { return NewWith(d, Options{}) }

// NewWith builds the Job controller with options.
func NewWith(d controller.Deps, o Options) (*Controller, error) {
	if d.Client == nil || d.Informers == nil || d.Recorder == nil {
		return nil, fmt.Errorf("job controller needs a client, informers and an event recorder")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = MaxBackoff
	}
	jobInformer := d.Informers.Batch().V1().Jobs()
	podInformer := d.Informers.Core().V1().Pods()
	c := &Controller{
		client:       d.Client,
		recorder:     d.Recorder(ClientName),
		log:          slog.Default().With("controller", Name),
		clock:        o.Clock,
		backoff:      o.Backoff,
		maxDelay:     o.MaxBackoff,
		expectations: expectations.NewUIDTrackingControllerExpectations(expectations.NewControllerExpectationsWithClock(o.Clock)),
		jobLister:    jobInformer.Lister(),
		jobSynced:    jobInformer.Informer().HasSynced,
		podLister:    podInformer.Lister(),
		podSynced:    podInformer.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: Name, Clock: o.Clock},
		),
		removing: map[string]sets.Set[types.UID]{},
		backoffs: map[string]backoffRecord{},
	}
	if _, err := jobInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueJob,
		UpdateFunc: func(_, cur any) { c.enqueueJob(cur) },
		DeleteFunc: c.deleteJob,
	}); err != nil {
		return nil, fmt.Errorf("failed to add Job event handler: %w", err)
	}
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addPod,
		UpdateFunc: c.updatePod,
		DeleteFunc: c.deletePod,
	}); err != nil {
		return nil, fmt.Errorf("failed to add pod event handler: %w", err)
	}
	return c, nil
}

// Run waits for the informer caches, then runs workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, worker.Options{
		Name: Name, Workers: workers, Synced: []cache.InformerSynced{c.jobSynced, c.podSynced},
		Sync: c.Sync, Log: c.log,
	})
}

func (c *Controller) enqueueJob(obj any) {
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

func (c *Controller) deleteJob(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	c.expectations.DeleteExpectations(key)
	c.mu.Lock()
	delete(c.removing, key)
	delete(c.backoffs, key)
	c.mu.Unlock()
	c.queue.Add(key)
}

// jobKeyOf returns the key of the Job controlling pod, or "" when none does.
func jobKeyOf(pod *corev1.Pod) string {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != controllerKind.Kind || ref.APIVersion != controllerKind.GroupVersion().String() {
		return ""
	}
	return pod.Namespace + "/" + ref.Name
}

func (c *Controller) addPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if key := jobKeyOf(pod); key != "" {
		c.expectations.CreationObserved(key)
		if pod.DeletionTimestamp != nil {
			c.expectations.DeletionObserved(key, podKey(pod))
		}
		c.observeFinalizer(key, pod)
		c.queue.Add(key)
		return
	}
	c.enqueueSelecting(pod)
}

func (c *Controller) updatePod(oldObj, curObj any) {
	oldPod, ok1 := oldObj.(*corev1.Pod)
	curPod, ok2 := curObj.(*corev1.Pod)
	if !ok1 || !ok2 || oldPod.ResourceVersion == curPod.ResourceVersion {
		return
	}
	oldKey, curKey := jobKeyOf(oldPod), jobKeyOf(curPod)
	if oldKey != "" && oldKey != curKey {
		c.queue.Add(oldKey)
	}
	if curKey != "" {
		if curPod.DeletionTimestamp != nil {
			c.expectations.DeletionObserved(curKey, podKey(curPod))
		}
		c.observeFinalizer(curKey, curPod)
		c.queue.Add(curKey)
		return
	}
	c.enqueueSelecting(curPod)
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
	key := jobKeyOf(pod)
	if key == "" {
		return
	}
	c.expectations.DeletionObserved(key, podKey(pod))
	c.mu.Lock()
	if s := c.removing[key]; s != nil {
		s.Delete(pod.UID)
	}
	c.mu.Unlock()
	c.queue.Add(key)
}

// observeFinalizer forgets an expected finalizer removal that the cache now shows.
func (c *Controller) observeFinalizer(key string, pod *corev1.Pod) {
	if hasTrackingFinalizer(pod) {
		return
	}
	c.mu.Lock()
	if s := c.removing[key]; s != nil {
		s.Delete(pod.UID)
	}
	c.mu.Unlock()
}

// expectFinalizerRemoval records that the finalizer of uid is being removed.
func (c *Controller) expectFinalizerRemoval(key string, uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.removing[key] == nil {
		c.removing[key] = sets.New[types.UID]()
	}
	c.removing[key].Insert(uid)
}

// finalizerRemovalPending reports whether the cache may still show uid's finalizer.
func (c *Controller) finalizerRemovalPending(key string, uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.removing[key].Has(uid)
}

// enqueueSelecting wakes the Jobs whose selector matches an orphan pod (to adopt it).
func (c *Controller) enqueueSelecting(pod *corev1.Pod) {
	jobs, err := c.jobLister.Jobs(pod.Namespace).List(labelsEverything())
	if err != nil {
		return
	}
	for _, j := range jobs {
		sel, err := metav1.LabelSelectorAsSelector(j.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labelSet(pod.Labels)) {
			continue
		}
		c.enqueueJob(j)
	}
}

func hasTrackingFinalizer(pod *corev1.Pod) bool {
	return slices.Contains(pod.Finalizers, batchv1.JobTrackingFinalizer)
}

// podKey is the key of a pod in deletion expectations.
func podKey(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }
