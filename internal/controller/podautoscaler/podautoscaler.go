// Package podautoscaler is the HorizontalPodAutoscaler controller, as upstream's
// pkg/controller/podautoscaler: every sync period it reads an autoscaler's target
// through the scale subresource (any kind the RESTMapper knows), computes the replicas
// each metric asks for (resource and container-resource usage from metrics.k8s.io,
// pods and object metrics from custom.metrics.k8s.io, external metrics), takes the
// largest, stabilizes it and limits it by minReplicas, maxReplicas and the scaling
// rules of spec.behavior, rescales the target, and writes the autoscaler's status with
// upstream's conditions, messages and Events.
package podautoscaler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/podautoscaler/metricsource"
	"github.com/kubette/kubette/internal/controller/worker"
)

// Name is the controller's name in the controller manager's registry (upstream's
// --controllers name).
const Name = "horizontalpodautoscaling"

// ClientName is the name of the controller's client, ServiceAccount and Event source
// upstream.
const ClientName = "horizontal-pod-autoscaler"

// Upstream's defaults of the kube-controller-manager flags of the controller.
const (
	// DefaultSyncPeriod is --horizontal-pod-autoscaler-sync-period.
	DefaultSyncPeriod = 15 * time.Second
	// DefaultDownscaleStabilization is --horizontal-pod-autoscaler-downscale-stabilization.
	DefaultDownscaleStabilization = 5 * time.Minute
	// DefaultTolerance is --horizontal-pod-autoscaler-tolerance.
	DefaultTolerance = 0.1
	// DefaultCPUInitializationPeriod is --horizontal-pod-autoscaler-cpu-initialization-period.
	DefaultCPUInitializationPeriod = 5 * time.Minute
	// DefaultInitialReadinessDelay is --horizontal-pod-autoscaler-initial-readiness-delay.
	DefaultInitialReadinessDelay = 30 * time.Second
)

// Options tune the controller; zero fields take upstream's defaults.
type Options struct {
	// Metrics is where metrics are read (default: the metrics APIs, through Deps.Config).
	Metrics MetricsSource
	// Scales reads and writes targets' scale subresource (default: through Deps.Config).
	Scales scale.ScalesGetter
	// Mapper finds the resources of a target's kind (default: Deps.RESTMapper).
	Mapper apimeta.RESTMapper
	// Clock is the controller's time (default: the real clock).
	Clock clock.WithTicker
	// SyncPeriod is how often each autoscaler is synced (DefaultSyncPeriod).
	SyncPeriod time.Duration
	// DownscaleStabilization is the scale-down window of an autoscaler whose behavior
	// sets none (DefaultDownscaleStabilization).
	DownscaleStabilization time.Duration
	// Tolerance is how far from 1 a usage ratio must be to rescale (DefaultTolerance;
	// a negative value means 0).
	Tolerance float64
	// CPUInitializationPeriod is how long after its start a pod's CPU samples are
	// trusted only once it is ready (DefaultCPUInitializationPeriod).
	CPUInitializationPeriod time.Duration
	// InitialReadinessDelay is how long after its start a pod that is not ready counts
	// as one that never was (DefaultInitialReadinessDelay).
	InitialReadinessDelay time.Duration
}

// Controller scales the targets of HorizontalPodAutoscalers.
type Controller struct {
	client   kubernetes.Interface
	scales   scale.ScalesGetter
	mapper   apimeta.RESTMapper
	metrics  MetricsSource
	refresh  func(ctx context.Context) // forgets the metrics source's cached discovery; nil for a given source
	recorder record.EventRecorder
	clock    clock.WithTicker
	log      *slog.Logger

	syncPeriod             time.Duration
	downscaleStabilization time.Duration
	tolerance              float64
	cpuInitializationPeriod,
	initialReadinessDelay time.Duration

	hpaLister autoscalinglisters.HorizontalPodAutoscalerLister
	podLister corelisters.PodLister
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]

	mu        sync.Mutex
	histories map[string]*history // by namespace/name
	selectors *selectorIndex
}

var _ controller.Runner = (*Controller)(nil)

// New builds the controller on the shared informers of d with upstream's settings.
func New(d controller.Deps) (controller.Runner, error) { return NewWithOptions(d, Options{}) }

// NewWithOptions builds the controller with o.
func NewWithOptions(d controller.Deps, o Options) (*Controller, error) {
	if d.Client == nil || d.Informers == nil {
		return nil, fmt.Errorf("horizontal pod autoscaler controller needs a client and informers")
	}
	o = withDefaults(o)
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Controller{
		client: d.Client, scales: o.Scales, mapper: o.Mapper, metrics: o.Metrics, clock: o.Clock,
		log:        log.With("controller", Name),
		syncPeriod: o.SyncPeriod, downscaleStabilization: o.DownscaleStabilization, tolerance: o.Tolerance,
		cpuInitializationPeriod: o.CPUInitializationPeriod, initialReadinessDelay: o.InitialReadinessDelay,
		histories: map[string]*history{},
		selectors: &selectorIndex{m: map[string]labels.Selector{}},
	}
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig[string](fixedInterval(o.SyncPeriod),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "horizontalpodautoscaler", Clock: o.Clock})
	if d.Recorder != nil {
		c.recorder = d.Recorder(ClientName)
	} else {
		c.recorder = &record.FakeRecorder{}
	}
	if c.mapper == nil && d.RESTMapper != nil {
		c.mapper = d.RESTMapper
	}
	if c.scales == nil || c.metrics == nil {
		if d.Config == nil || d.RESTMapper == nil || d.Discovery == nil {
			return nil, fmt.Errorf("horizontal pod autoscaler controller needs a client configuration, a REST mapper and discovery (or a scale client and a metrics source)")
		}
	}
	if c.scales == nil {
		sc, err := scale.NewForConfig(rest.CopyConfig(d.Config), d.RESTMapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(d.Discovery))
		if err != nil {
			return nil, fmt.Errorf("scale client: %w", err)
		}
		c.scales = sc
	}
	if c.metrics == nil {
		// The custom metrics version is looked up uncached, as upstream's controller
		// asks its own client's discovery (the shared one is cached until a miss).
		var disc discovery.DiscoveryInterface = d.Discovery
		if dc, err := discovery.NewDiscoveryClientForConfig(rest.CopyConfig(d.Config)); err == nil {
			disc = dc
		}
		src, err := metricsource.New(d.Config, d.RESTMapper, disc)
		if err != nil {
			return nil, err
		}
		c.metrics = src
		c.refresh = func(ctx context.Context) { src.Run(ctx, o.SyncPeriod) }
	}
	if c.mapper == nil {
		return nil, fmt.Errorf("horizontal pod autoscaler controller needs a REST mapper")
	}

	hpas := d.Informers.Autoscaling().V2().HorizontalPodAutoscalers()
	pods := d.Informers.Core().V1().Pods()
	c.hpaLister, c.podLister = hpas.Lister(), pods.Lister()
	c.synced = []cache.InformerSynced{hpas.Informer().HasSynced, pods.Informer().HasSynced}
	if _, err := hpas.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueue(obj, true) },
		UpdateFunc: c.updated,
		DeleteFunc: c.deleted,
	}); err != nil {
		return nil, fmt.Errorf("failed to add HorizontalPodAutoscaler event handler: %w", err)
	}
	return c, nil
}

func withDefaults(o Options) Options {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.SyncPeriod <= 0 {
		o.SyncPeriod = DefaultSyncPeriod
	}
	if o.DownscaleStabilization <= 0 {
		o.DownscaleStabilization = DefaultDownscaleStabilization
	}
	switch {
	case o.Tolerance == 0:
		o.Tolerance = DefaultTolerance
	case o.Tolerance < 0:
		o.Tolerance = 0
	}
	if o.CPUInitializationPeriod <= 0 {
		o.CPUInitializationPeriod = DefaultCPUInitializationPeriod
	}
	if o.InitialReadinessDelay <= 0 {
		o.InitialReadinessDelay = DefaultInitialReadinessDelay
	}
	return o
}

// enqueue queues an autoscaler: now when it is new (or its spec changed), else after
// the sync period (a key already waiting keeps its earlier time).
func (c *Controller) enqueue(obj any, now bool) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	c.selectors.add(key)
	if now {
		c.queue.Add(key)
		return
	}
	c.queue.AddRateLimited(key)
}

// updated queues an autoscaler at once when its spec changed (its generation moved);
// a status update, the controller's own among them, waits for the sync period.
func (c *Controller) updated(old, cur any) {
	o, ok1 := old.(*autoscalingv2.HorizontalPodAutoscaler)
	n, ok2 := cur.(*autoscalingv2.HorizontalPodAutoscaler)
	c.enqueue(cur, ok1 && ok2 && o.Generation != n.Generation)
}

func (c *Controller) deleted(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	c.queue.Forget(key)
	c.selectors.remove(key)
}

// Run runs workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	defer wg.Wait()
	if c.refresh != nil {
		wg.Go(func() { c.refresh(ctx) })
	}
	worker.Run(ctx, c.queue, worker.Options{
		Name: Name, Workers: workers, Synced: c.synced, Sync: c.Sync, Log: c.log,
	})
}

// Sync reconciles the autoscaler of key and queues it again for the next sync period.
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("invalid key %q: %w", key, err)
	}
	hpa, err := c.hpaLister.HorizontalPodAutoscalers(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.forget(key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get HorizontalPodAutoscaler %s: %w", key, err)
	}
	// Requeued whatever happens: every autoscaler is looked at each sync period.
	defer c.queue.AddRateLimited(key)
	return c.reconcile(ctx, hpa, key)
}

// reconcile is one sync of an autoscaler.
func (c *Controller) reconcile(ctx context.Context, shared *autoscalingv2.HorizontalPodAutoscaler, key string) (retErr error) {
	hpa := shared.DeepCopy()
	old := hpa.Status.DeepCopy()
	ref := hpa.Spec.ScaleTargetRef
	target := fmt.Sprintf("%s/%s/%s", ref.Kind, hpa.Namespace, ref.Name)

	failedGetScale := func(err error) {
		c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedGetScale", err.Error())
		c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedGetScale", "the HPA controller was unable to get the target's current scale: %v", err)
		c.writeStatusLogged(ctx, old, hpa)
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		failedGetScale(err)
		return fmt.Errorf("invalid API version in scale target reference: %v", err)
	}
	mappings, err := c.mapper.RESTMappings(schema.GroupKind{Group: gv.Group, Kind: ref.Kind})
	if err != nil {
		failedGetScale(err)
		return fmt.Errorf("unable to determine resource for scale target reference: %v", err)
	}
	sc, gr, err := c.scaleFor(ctx, hpa.Namespace, ref.Name, mappings)
	if err != nil {
		failedGetScale(err)
		return fmt.Errorf("failed to query scale subresource for %s: %v", target, err)
	}
	c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededGetScale", "the HPA controller was able to get the target's current scale")
	current := sc.Spec.Replicas
	c.recordInitial(key, current)

	minReplicas := int32(1)
	if hpa.Spec.MinReplicas != nil {
		minReplicas = *hpa.Spec.MinReplicas
	}
	var (
		desired  int32
		reason   string
		statuses []autoscalingv2.MetricStatus
		rescale  = true
	)
	switch {
	case current == 0 && minReplicas != 0:
		// A target scaled to zero by hand is left alone.
		rescale = false
		c.setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")
	case current > hpa.Spec.MaxReplicas:
		reason, desired = "Current number of replicas above Spec.MaxReplicas", hpa.Spec.MaxReplicas
	case current < minReplicas:
		reason, desired = "Current number of replicas below Spec.MinReplicas", minReplicas
	default:
		var p proposal
		p, statuses, err = c.replicasForMetrics(ctx, hpa, sc)
		if err != nil && p.replicas == -1 {
			c.keepDesired(hpa, current, statuses)
			c.writeStatusLogged(ctx, old, hpa)
			c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedComputeMetricsReplicas", err.Error())
			return fmt.Errorf("failed to compute desired number of replicas based on listed metrics for %s: %v", target, err)
		}
		if err != nil {
			retErr = err // some metrics failed, the others still scale
		}
		metric := ""
		if p.replicas > desired {
			desired, metric = p.replicas, p.metric
		}
		switch {
		case desired > current:
			reason = metric + " above target"
		case desired < current:
			reason = "All metrics below target"
		}
		if hpa.Spec.Behavior == nil {
			desired = c.normalize(hpa, key, current, desired, minReplicas)
		} else {
			desired = c.normalizeWithBehavior(hpa, key, current, desired, minReplicas)
		}
		rescale = desired != current
	}

	if rescale {
		sc.Spec.Replicas = desired
		if _, err := c.scales.Scales(hpa.Namespace).Update(ctx, gr, sc, metav1.UpdateOptions{}); err != nil {
			c.recorder.Eventf(hpa, corev1.EventTypeWarning, "FailedRescale", "New size: %d; reason: %s; error: %v", desired, reason, err.Error())
			c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedUpdateScale", "the HPA controller was unable to update the target scale: %v", err)
			c.keepDesired(hpa, current, statuses)
			c.writeStatusLogged(ctx, old, hpa)
			return fmt.Errorf("failed to rescale %s: %v", target, err)
		}
		c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededRescale", "the HPA controller was able to update the target scale to %d", desired)
		c.recorder.Eventf(hpa, corev1.EventTypeNormal, "SuccessfulRescale", "New size: %d; reason: %s", desired, reason)
		c.recordRescale(hpa, key, current, desired)
		c.log.Info("rescaled", "hpa", key, "target", target, "from", current, "to", desired, "reason", reason)
	} else {
		desired = current
	}
	c.setStatus(hpa, current, desired, statuses, rescale)
	if err := c.writeStatus(ctx, old, hpa); err != nil {
		return err
	}
	return retErr
}

// scaleFor reads the target's scale through each mapping in turn; it returns the
// first that answers, or the first mapping's error.
func (c *Controller) scaleFor(ctx context.Context, namespace, name string, mappings []*apimeta.RESTMapping) (*autoscalingv1.Scale, schema.GroupResource, error) {
	var firstErr error
	for i, m := range mappings {
		gr := m.Resource.GroupResource()
		sc, err := c.scales.Scales(namespace).Get(ctx, gr, name, metav1.GetOptions{})
		if err == nil {
			return sc, gr, nil
		}
		if i == 0 {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = errors.New("unrecognized resource")
	}
	return nil, schema.GroupResource{}, firstErr
}

// fixedInterval is a rate limiter that always waits the sync period: what keeps each
// autoscaler on its period whether its last sync failed or not.
type fixedInterval time.Duration

func (f fixedInterval) When(string) time.Duration { return time.Duration(f) }
func (fixedInterval) NumRequeues(string) int      { return 1 }
func (fixedInterval) Forget(string)               {}
