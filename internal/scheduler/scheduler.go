// Package scheduler is kubette's scheduler, as upstream's kube-scheduler: it
// watches pods that have no node and name this scheduler, and for each one runs a
// scheduling cycle — PreFilter, Filter on the nodes in parallel, PostFilter when
// none fits, PreScore, Score with normalisation and weights — then assumes the pod
// on the best node in its cache and binds it asynchronously through the Bind
// plugins (pods/binding), so that the next pod is scheduled while the last bind is
// in flight. Between the two cycles Reserve plugins hold plugin state for the
// assumed pod and Permit plugins may hold its binding; PreBind and PostBind
// plugins run around the bind. Pods that fit nowhere run the PostFilter plugins
// — DefaultPreemption evicts lower-priority pods and nominates the node for the
// pod (status.nominatedNodeName), whose room filtering then keeps for it — get a
// PodScheduled=False condition, a FailedScheduling event, and wait in the queue
// until a cluster event may help.
//
// The plugins live in plugins/, one package each, behind the interfaces of
// framework/; the queue and the cache with its snapshot live in queue/ and cache/.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	"github.com/kubette/kubette/internal/inprocess/objwatch"
	"github.com/kubette/kubette/internal/scheduler/cache"
	"github.com/kubette/kubette/internal/scheduler/framework"
	"github.com/kubette/kubette/internal/scheduler/plugins"
	"github.com/kubette/kubette/internal/scheduler/queue"
)

// Defaults.
const (
	// DefaultSchedulerName is the scheduler name pods get when they name none.
	DefaultSchedulerName = corev1.DefaultSchedulerName
	// DefaultParallelism is how many goroutines filter and score nodes (as upstream).
	DefaultParallelism = 16
	// DefaultMaxBindsInFlight bounds the concurrent binding goroutines: below the
	// 250 streams an HTTP/2 connection carries by default, so binds share one connection.
	DefaultMaxBindsInFlight = 128
)

// Options configure a Scheduler.
type Options struct {
	// Client talks to the API server (binding, pod status).
	Client kubernetes.Interface
	// Informers is the shared informer factory the scheduler registers its pod and
	// node informers on; the caller starts it after New.
	Informers informers.SharedInformerFactory
	// Recorder records the Scheduled and FailedScheduling events.
	Recorder events.EventRecorder
	// SchedulerName selects the pods this scheduler handles (default-scheduler).
	SchedulerName string
	// PercentageOfNodesToScore bounds how many feasible nodes are looked for: 0 is
	// adaptive as upstream (50% - nodes/125, at least 5%), never fewer than 100 nodes.
	PercentageOfNodesToScore int32
	// Registry builds plugins by name (plugins.NewInTreeRegistry when nil).
	Registry framework.Registry
	// Profile lists the enabled plugins in order (plugins.DefaultProfile when nil).
	Profile []plugins.PluginConfig
	// Parallelism is the number of goroutines that filter and score (16 when 0).
	Parallelism int
	// MaxBindsInFlight bounds the concurrent binds (128 when 0).
	MaxBindsInFlight int
	// Logger receives logs (slog.Default when nil).
	Logger *slog.Logger

	// LeaderElect makes RunWithLeaderElection schedule only while holding the Lease
	// LeaseNamespace/LeaseName (kube-system/kube-scheduler).
	LeaderElect               bool
	LeaseNamespace, LeaseName string
	// Identity is the holder identity (hostname and a random suffix when empty).
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election (15 s, 10 s, 2 s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	// PodInitialBackoff, PodMaxBackoff and PodMaxInUnschedulablePodsDuration tune
	// the queue (1 s, 10 s, 5 min).
	PodInitialBackoff, PodMaxBackoff, PodMaxInUnschedulablePodsDuration time.Duration
	// AssumedPodTTL is how long a bound pod may stay unconfirmed by the informer (30 s).
	AssumedPodTTL time.Duration
	// Clock is the time source of the queue and the cache (the real clock when nil).
	Clock clock.WithTicker
	// Rand breaks ties between the best nodes (a randomly seeded source when nil).
	// It is used by the scheduling goroutine only.
	Rand *rand.Rand
}

// Scheduler assigns nodes to pods.
type Scheduler struct {
	client        kubernetes.Interface
	informers     informers.SharedInformerFactory
	recorder      events.EventRecorder
	schedulerName string
	percentage    int32
	logger        *slog.Logger
	clock         clock.WithTicker
	rand          *rand.Rand

	cache    *cache.Cache
	queue    *queue.PriorityQueue
	snapshot *cache.Snapshot
	profile  *profile

	podInformer toolscache.SharedIndexInformer
	podLister   corelisters.PodLister
	handlers    []toolscache.ResourceEventHandlerRegistration

	// nextStartNodeIndex is where the next cycle starts filtering (round-robin).
	nextStartNodeIndex int
	// filterStatuses and filterPassed are the filter results by node, reused
	// across cycles (the scheduling goroutine owns them).
	filterStatuses []*framework.Status
	filterPassed   []bool
	// feasible is the array of the feasible nodes that findNodesThatPassFilters
	// returns, reused by the next cycle (a cycle's list is not kept past it).
	feasible []*framework.NodeInfo
	// bindSlots bounds the binds in flight and binds counts them; binderGroup and
	// binders track the goroutines that run them and stay for the next one, which
	// bindJobs hands to an idle one (see startBind).
	bindSlots   chan struct{}
	binds       sync.WaitGroup
	binderGroup sync.WaitGroup
	binders     atomic.Int64
	bindJobs    chan func()
	binderLeft  chan struct{} // one buffered signal that a binder left
}

// New builds a scheduler: its plugins, queue and cache, and registers its event
// handlers on the informers. Start the informer factory after New, then call Run.
func New(ctx context.Context, o Options) (*Scheduler, error) {
	if o.Client == nil || o.Informers == nil {
		return nil, errors.New("scheduler: Client and Informers are required")
	}
	if o.PercentageOfNodesToScore < 0 || o.PercentageOfNodesToScore > 100 {
		return nil, fmt.Errorf("scheduler: percentageOfNodesToScore %d is not in [0, 100]", o.PercentageOfNodesToScore)
	}
	if o.SchedulerName == "" {
		o.SchedulerName = DefaultSchedulerName
	}
	if o.Registry == nil {
		o.Registry = plugins.NewInTreeRegistry()
	}
	if o.Profile == nil {
		o.Profile = plugins.DefaultProfile()
	}
	if o.Parallelism <= 0 {
		o.Parallelism = DefaultParallelism
	}
	if o.MaxBindsInFlight <= 0 {
		o.MaxBindsInFlight = DefaultMaxBindsInFlight
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Rand == nil {
		o.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if o.Recorder == nil {
		o.Recorder = &events.FakeRecorder{}
	}
	var s *Scheduler
	preEnqueue := func(pod *corev1.Pod) bool {
		return s.profile.runPreEnqueue(context.Background(), pod, func(plugin, reason string) {
			s.logger.Debug("pod held back before the queue", "pod", podRef(pod), "plugin", plugin, "reason", reason)
		})
	}
	s = &Scheduler{
		client:        o.Client,
		informers:     o.Informers,
		recorder:      o.Recorder,
		schedulerName: o.SchedulerName,
		percentage:    o.PercentageOfNodesToScore,
		logger:        o.Logger.With("component", "scheduler"),
		clock:         o.Clock,
		rand:          o.Rand,
		cache:         cache.New(cache.Options{TTL: o.AssumedPodTTL, Clock: o.Clock, Logger: o.Logger}),
		queue: queue.New(queue.Options{Clock: o.Clock, Logger: o.Logger,
			PodInitialBackoff: o.PodInitialBackoff, PodMaxBackoff: o.PodMaxBackoff,
			PodMaxInUnschedulablePodsDuration: o.PodMaxInUnschedulablePodsDuration, PreEnqueue: preEnqueue}),
		snapshot:   cache.NewEmptySnapshot(),
		bindSlots:  make(chan struct{}, o.MaxBindsInFlight),
		bindJobs:   make(chan func()),
		binderLeft: make(chan struct{}, 1),
	}
	// The pod informer leaves out terminal pods, as upstream's: they use no resources.
	// It must exist before the plugins ask the factory for pods.
	podInformer := o.Informers.InformerFor(&corev1.Pod{}, newPodInformer)
	s.podInformer = podInformer
	s.podLister = corelisters.NewPodLister(podInformer.GetIndexer())
	h := &handle{snapshot: s.snapshot, client: o.Client, informers: o.Informers, recorder: o.Recorder}
	prof, err := newProfile(ctx, o.Registry, o.Profile, h, s.queue, o.Parallelism)
	if err != nil {
		return nil, fmt.Errorf("scheduler profile %s: %w", o.SchedulerName, err)
	}
	s.profile = prof
	if err := s.addEventHandlers(podInformer, o.Informers.Core().V1().Nodes().Informer()); err != nil {
		return nil, err
	}
	if err := s.addPluginEventHandlers(o.Informers); err != nil {
		return nil, err
	}
	return s, nil
}

// newPodInformer watches every pod that is not Succeeded or Failed.
func newPodInformer(cs kubernetes.Interface, resync time.Duration) toolscache.SharedIndexInformer {
	return podInformerWith(nil)(cs, resync)
}

// podInformerWith returns newPodInformer with its watch served as objects by ow
// (package objwatch: the scheduler in `kubette up`'s process); nil keeps client-go's.
func podInformerWith(ow *objwatch.Client) func(kubernetes.Interface, time.Duration) toolscache.SharedIndexInformer {
	return func(cs kubernetes.Interface, resync time.Duration) toolscache.SharedIndexInformer {
		selector := fields.ParseSelectorOrDie("status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed))
		tweak := func(o *metav1.ListOptions) { o.FieldSelector = selector.String() }
		indexers := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
		var inf toolscache.SharedIndexInformer
		if ow == nil {
			inf = coreinformers.NewFilteredPodInformer(cs, metav1.NamespaceAll, resync, indexers, tweak)
		} else {
			inf = ow.PodInformer(cs, tweak, copyWithoutManagedFields, resync, indexers)
		}
		// As upstream's: the scheduler never reads managedFields, so its cache keeps none.
		_ = inf.SetTransform(dropManagedFields) // fails only for an informer that has started
		return inf
	}
}

// newNodeInformer watches every node, keeping no managedFields in its cache.
func newNodeInformer(cs kubernetes.Interface, resync time.Duration) toolscache.SharedIndexInformer {
	return nodeInformerWith(nil)(cs, resync)
}

// nodeInformerWith returns newNodeInformer with its watch served as objects by ow;
// nil keeps client-go's.
func nodeInformerWith(ow *objwatch.Client) func(kubernetes.Interface, time.Duration) toolscache.SharedIndexInformer {
	return func(cs kubernetes.Interface, resync time.Duration) toolscache.SharedIndexInformer {
		var inf toolscache.SharedIndexInformer
		if ow == nil {
			inf = coreinformers.NewNodeInformer(cs, resync, toolscache.Indexers{})
		} else {
			inf = ow.NodeInformer(cs, copyWithoutManagedFields, resync, toolscache.Indexers{})
		}
		_ = inf.SetTransform(dropManagedFields) // fails only for an informer that has started
		return inf
	}
}

// copyWithoutManagedFields is the object watches' copy of a pod or node the API
// server shares: a deep copy that leaves out managedFields, which the informers'
// transform would drop anyway.
func copyWithoutManagedFields(obj runtime.Object) runtime.Object {
	switch o := obj.(type) {
	case *corev1.Pod:
		c := *o
		c.ManagedFields = nil
		return c.DeepCopy()
	case *corev1.Node:
		c := *o
		c.ManagedFields = nil
		return c.DeepCopy()
	}
	return obj.DeepCopyObject()
}

// dropManagedFields is an informer transform that empties an object's
// metadata.managedFields before the informer caches it: at 5000 nodes and
// 10000 pods they were a third of the decoded metadata the collector marks.
func dropManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// Run waits for the informers to sync, then schedules pods one at a time until ctx
// is done, and waits for the binds in flight before it returns.
func (s *Scheduler) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Add(2)
	go func() {
		defer wg.Done()
		s.queue.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		s.cache.Run(ctx)
	}()
	if !toolscache.WaitForCacheSync(ctx.Done(), s.hasSynced) {
		return fmt.Errorf("scheduler: informers did not sync: %w", context.Cause(ctx))
	}
	// The informers plugins registered (e.g. namespaces for InterPodAffinity).
	for typ, ok := range s.informers.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("scheduler: %v informer did not sync: %w", typ, context.Cause(ctx))
		}
	}
	s.logger.Info("scheduler started", "schedulerName", s.schedulerName)
	for ctx.Err() == nil {
		s.scheduleOne(ctx)
	}
	s.binds.Wait()
	s.binderGroup.Wait()
	return nil
}

// hasSynced reports whether every informer handler has seen the initial list.
func (s *Scheduler) hasSynced() bool {
	for _, h := range s.handlers {
		if !h.HasSynced() {
			return false
		}
	}
	return true
}

// Cache returns the scheduler's cache (for tests and debugging).
func (s *Scheduler) Cache() *cache.Cache { return s.cache }

// Queue returns the scheduler's queue (for tests and debugging).
func (s *Scheduler) Queue() *queue.PriorityQueue { return s.queue }
