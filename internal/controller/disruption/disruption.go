// Package disruption is the disruption controller: it keeps each PodDisruptionBudget's
// status (expectedPods, currentHealthy, desiredHealthy, disruptionsAllowed, the
// DisruptionAllowed condition, disruptedPods and observedGeneration) from the pods its
// selector matches and the scale of the controllers that own them, as upstream's
// pkg/controller/disruption. The pods/eviction subresource (package eviction) grants
// evictions from that status. The controller also resets a DisruptionTarget condition
// left True on a pod that was never deleted.
package disruption

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	pdbhelper "k8s.io/component-helpers/apps/poddisruptionbudget"
	"k8s.io/utils/clock"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/worker"
)

// Name is the controller's name in the controller manager's registry.
const Name = "disruption"

// ClientName is the name of the controller's client and ServiceAccount upstream.
const ClientName = "disruption-controller"

// DeletionTimeout is how long a pod the eviction subresource granted stays in a
// budget's disruptedPods (not counted as healthy) waiting to be deleted; and how long a
// DisruptionTarget condition may stay True on a pod that is not being deleted.
const DeletionTimeout = 2 * time.Minute

// Controller keeps the status of PodDisruptionBudgets.
type Controller struct {
	client   kubernetes.Interface
	scales   scale.ScalesGetter // nil: only the kinds with listers are known
	mapper   apimeta.RESTMapper
	clock    clock.PassiveClock
	log      *slog.Logger
	recorder record.EventRecorder

	pdbLister policylisters.PodDisruptionBudgetLister
	podLister corelisters.PodLister
	rcLister  corelisters.ReplicationControllerLister
	rsLister  appslisters.ReplicaSetLister
	dLister   appslisters.DeploymentLister
	synced    []cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
	// stale holds pods whose DisruptionTarget condition may have to be reset.
	stale workqueue.TypedRateLimitingInterface[string]
}

var _ controller.Runner = (*Controller)(nil)

// New builds the controller on the shared informers of d. StatefulSets and every
// other owner with a scale subresource are found through it.
func New(d controller.Deps) (controller.Runner, error) {
	return NewWithClock(d, clock.RealClock{})
}

// NewWithClock builds the controller with its clock (tests give a fake one).
func NewWithClock(d controller.Deps, clk clock.WithTicker) (*Controller, error) {
	if d.Client == nil || d.Informers == nil {
		return nil, fmt.Errorf("disruption controller needs a client and informers")
	}
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Controller{
		client: d.Client, clock: clk, log: log.With("controller", Name),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: Name, Clock: clk}),
		stale: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: Name + "-stale-pod-disruption", Clock: clk}),
	}
	if d.Recorder != nil {
		c.recorder = d.Recorder(ClientName)
	} else {
		c.recorder = &record.FakeRecorder{}
	}
	if d.Discovery != nil && d.RESTMapper != nil {
		// The fake clientset of unit tests has no REST client: no scale look-ups there.
		if rc, ok := d.Client.CoreV1().RESTClient().(*rest.RESTClient); ok && rc != nil {
			c.scales = scale.New(rc, d.RESTMapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(d.Discovery))
			c.mapper = d.RESTMapper
		}
	}
	pdbs := d.Informers.Policy().V1().PodDisruptionBudgets()
	pods := d.Informers.Core().V1().Pods()
	rcs := d.Informers.Core().V1().ReplicationControllers()
	rss := d.Informers.Apps().V1().ReplicaSets()
	deps := d.Informers.Apps().V1().Deployments()
	c.pdbLister, c.podLister = pdbs.Lister(), pods.Lister()
	c.rcLister, c.rsLister, c.dLister = rcs.Lister(), rss.Lister(), deps.Lister()
	c.synced = []cache.InformerSynced{pdbs.Informer().HasSynced, pods.Informer().HasSynced,
		rcs.Informer().HasSynced, rss.Informer().HasSynced, deps.Informer().HasSynced}

	onPDB := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	if _, err := pdbs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onPDB, UpdateFunc: func(_, cur any) { onPDB(cur) }, DeleteFunc: onPDB,
	}); err != nil {
		return nil, fmt.Errorf("failed to add PodDisruptionBudget event handler: %w", err)
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.podChanged(obj, true) },
		UpdateFunc: func(_, cur any) { c.podChanged(cur, true) },
		DeleteFunc: func(obj any) { c.podChanged(obj, false) },
	}); err != nil {
		return nil, fmt.Errorf("failed to add Pod event handler: %w", err)
	}
	return c, nil
}

// podChanged queues the budgets matching the pod and, for a live pod, the pod itself
// when its DisruptionTarget condition is to be reset.
func (c *Controller) podChanged(obj any, live bool) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		tomb, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if pod, ok = tomb.Obj.(*corev1.Pod); !ok {
			return
		}
	}
	pdbs := c.budgetsFor(pod)
	if len(pdbs) > 1 && live {
		msg := fmt.Sprintf("Pod %q/%q matches multiple PodDisruptionBudgets.  Chose %q arbitrarily.", pod.Namespace, pod.Name, pdbs[0].Name)
		c.recorder.Event(pod, corev1.EventTypeWarning, "MultiplePodDisruptionBudgets", msg)
	}
	// Every matching budget counts the pod, so each is synced (upstream syncs one).
	for _, pdb := range pdbs {
		if key, err := cache.MetaNamespaceKeyFunc(pdb); err == nil {
			c.queue.Add(key)
		}
	}
	if live {
		if has, after := c.staleDisruptionTarget(pod); has {
			if key, err := cache.MetaNamespaceKeyFunc(pod); err == nil {
				c.stale.AddAfter(key, after)
			}
		}
	}
}

// budgetsFor returns the budgets whose selector matches the pod, by name.
func (c *Controller) budgetsFor(pod *corev1.Pod) []*policyv1.PodDisruptionBudget {
	all, err := c.pdbLister.PodDisruptionBudgets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []*policyv1.PodDisruptionBudget
	for _, pdb := range all {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, pdb)
	}
	sortByName(out)
	return out
}

func sortByName(pdbs []*policyv1.PodDisruptionBudget) {
	for i := 1; i < len(pdbs); i++ {
		for j := i; j > 0 && pdbs[j].Name < pdbs[j-1].Name; j-- {
			pdbs[j], pdbs[j-1] = pdbs[j-1], pdbs[j]
		}
	}
}

// Run runs the budgets' workers and the stale-condition worker until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	wg.Go(func() {
		worker.Run(ctx, c.stale, worker.Options{Name: Name + "-stale-pod-disruption", Workers: 1,
			Synced: c.synced, Sync: c.SyncStalePod, Log: c.log})
	})
	worker.Run(ctx, c.queue, worker.Options{Name: Name, Workers: workers, Synced: c.synced, Sync: c.Sync, Log: c.log})
	wg.Wait()
}

// Sync computes the status of the budget of key and writes it when it changed. A
// failure other than a conflict sets disruptionsAllowed to 0 with the SyncFailed
// reason, so that no eviction is granted on a status that could not be computed.
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("invalid key %q: %w", key, err)
	}
	pdb, err := c.pdbLister.PodDisruptionBudgets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get PodDisruptionBudget %s: %w", key, err)
	}
	err = c.trySync(ctx, pdb)
	if err == nil || apierrors.IsConflict(err) {
		return err
	}
	c.log.Error("failed to sync PodDisruptionBudget", "pdb", key, "err", err)
	if ferr := c.failSafe(ctx, pdb, err); ferr != nil {
		return fmt.Errorf("sync %s: %w (and its fail-safe status: %v)", key, err, ferr)
	}
	return fmt.Errorf("sync %s: %w", key, err)
}

func (c *Controller) trySync(ctx context.Context, pdb *policyv1.PodDisruptionBudget) error {
	pods, err := c.podsFor(pdb)
	if err != nil {
		c.recorder.Eventf(pdb, corev1.EventTypeWarning, "NoPods", "Failed to get pods: %v", err)
		return err
	}
	if len(pods) == 0 {
		c.recorder.Eventf(pdb, corev1.EventTypeNormal, "NoPods", "No matching pods found")
	}
	expected, desired, unmanaged, err := c.expectedPodCount(ctx, pdb, pods)
	if err != nil {
		c.recorder.Eventf(pdb, corev1.EventTypeWarning, "CalculateExpectedPodCountFailed", "Failed to calculate the number of expected pods: %v", err)
		return err
	}
	if len(unmanaged) > 0 {
		c.recorder.Eventf(pdb, corev1.EventTypeWarning, "UnmanagedPods", "Pods selected by this PodDisruptionBudget (selector: %v) were found "+
			"to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. "+
			"To account for these pods please set \".spec.minAvailable\" "+
			"field of the PDB to an integer value.", pdb.Spec.Selector)
	}
	now := c.clock.Now()
	disrupted, recheck := c.disruptedPods(pods, pdb, now)
	healthy := countHealthy(pods, disrupted, now)
	if err := c.updateStatus(ctx, pdb, healthy, desired, expected, disrupted); err != nil {
		return err
	}
	if recheck != nil {
		if key, err := cache.MetaNamespaceKeyFunc(pdb); err == nil {
			c.queue.AddAfter(key, recheck.Sub(now))
		}
	}
	return nil
}

// podsFor lists the pods the budget's selector matches (an empty selector: every pod
// of the namespace, as policy/v1 says).
func (c *Controller) podsFor(pdb *policyv1.PodDisruptionBudget) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		return nil, err
	}
	return c.podLister.Pods(pdb.Namespace).List(sel)
}

// expectedPodCount returns how many pods the budget expects and how many of them must
// be healthy: an integer minAvailable counts the matching pods; a percentage, or any
// maxUnavailable, counts the scale of the pods' controllers. unmanaged names the pods
// that have no controller.
func (c *Controller) expectedPodCount(ctx context.Context, pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod) (expected, desired int32, unmanaged []string, err error) {
	switch {
	case pdb.Spec.MaxUnavailable != nil:
		expected, unmanaged, err = c.expectedScale(ctx, pods)
		if err != nil {
			return 0, 0, nil, err
		}
		maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, int(expected), true)
		if err != nil {
			return 0, 0, nil, err
		}
		desired = max(expected-int32(maxUnavailable), 0)
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.Int:
		desired = pdb.Spec.MinAvailable.IntVal
		expected = int32(len(pods))
	case pdb.Spec.MinAvailable != nil:
		expected, unmanaged, err = c.expectedScale(ctx, pods)
		if err != nil {
			return 0, 0, nil, err
		}
		minAvailable, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, int(expected), true)
		if err != nil {
			return 0, 0, nil, err
		}
		desired = int32(minAvailable)
	}
	return expected, desired, unmanaged, nil
}

// expectedScale adds up the desired replicas of the controllers of the pods, each
// controller once; a pod whose controller is none of the known ones fails the sync.
func (c *Controller) expectedScale(ctx context.Context, pods []*corev1.Pod) (int32, []string, error) {
	scales := map[types.UID]int32{}
	var unmanaged []string
	for _, pod := range pods {
		ref := metav1.GetControllerOf(pod)
		if ref == nil {
			unmanaged = append(unmanaged, pod.Name)
			continue
		}
		if _, seen := scales[ref.UID]; seen {
			continue
		}
		uid, n, found, err := c.controllerScale(ctx, ref, pod.Namespace)
		if err != nil {
			return 0, nil, err
		}
		if !found {
			return 0, nil, fmt.Errorf("found no controllers for pod %q", pod.Name)
		}
		scales[uid] = n
	}
	var total int32
	for _, n := range scales {
		total += n
	}
	return total, unmanaged, nil
}

// controllerScale finds the controller ref names and its desired replicas: a
// ReplicationController, a Deployment through its ReplicaSet, a ReplicaSet of no
// Deployment, or any kind with a scale subresource (StatefulSets among them).
func (c *Controller) controllerScale(ctx context.Context, ref *metav1.OwnerReference, ns string) (types.UID, int32, bool, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return "", 0, false, err
	}
	isApps := gv.Group == "apps" || gv.Group == "extensions"
	switch {
	case ref.Kind == "ReplicationController" && gv.Group == "":
		rc, err := c.rcLister.ReplicationControllers(ns).Get(ref.Name)
		if err == nil && rc.UID == ref.UID {
			return rc.UID, replicas(rc.Spec.Replicas), true, nil
		}
	case ref.Kind == "ReplicaSet" && isApps:
		rs, err := c.rsLister.ReplicaSets(ns).Get(ref.Name)
		if err != nil || rs.UID != ref.UID {
			break
		}
		owner := metav1.GetControllerOf(rs)
		if owner == nil || owner.Kind != "Deployment" {
			return rs.UID, replicas(rs.Spec.Replicas), true, nil
		}
		if ogv, err := schema.ParseGroupVersion(owner.APIVersion); err != nil || (ogv.Group != "apps" && ogv.Group != "extensions") {
			break
		}
		d, err := c.dLister.Deployments(ns).Get(owner.Name)
		if err == nil && d.UID == owner.UID {
			return d.UID, replicas(d.Spec.Replicas), true, nil
		}
		// A ReplicaSet of a Deployment that is gone is nobody's: the scale look-up
		// below finds it no more than upstream's finders do.
		return "", 0, false, nil
	}
	return c.scaleOf(ctx, ref, gv, ns)
}

// scaleOf reads the scale subresource of the controller ref names.
func (c *Controller) scaleOf(ctx context.Context, ref *metav1.OwnerReference, gv schema.GroupVersion, ns string) (types.UID, int32, bool, error) {
	if c.scales == nil {
		return "", 0, false, nil
	}
	mapping, err := c.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: ref.Kind}, gv.Version)
	if err != nil {
		return "", 0, false, err
	}
	gr := mapping.Resource.GroupResource()
	s, err := c.scales.Scales(ns).Get(ctx, gr, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, err
	}
	if s.UID != ref.UID {
		return "", 0, false, nil
	}
	return s.UID, s.Spec.Replicas, true, nil
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// disruptedPods keeps the entries of the budget's disruptedPods whose pod still exists,
// is not being deleted and was granted its eviction less than DeletionTimeout ago; it
// returns when the earliest of them expires.
func (c *Controller) disruptedPods(pods []*corev1.Pod, pdb *policyv1.PodDisruptionBudget, now time.Time) (map[string]metav1.Time, *time.Time) {
	out := map[string]metav1.Time{}
	var recheck *time.Time
	if pdb.Status.DisruptedPods == nil {
		return out, nil
	}
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		at, ok := pdb.Status.DisruptedPods[pod.Name]
		if !ok {
			continue
		}
		expires := at.Add(DeletionTimeout)
		if expires.Before(now) {
			c.recorder.Eventf(pod, corev1.EventTypeWarning, "NotDeleted", "Pod was expected by PDB %s/%s to be deleted but it wasn't",
				pdb.Namespace, pdb.Name)
			continue
		}
		if recheck == nil || expires.Before(*recheck) {
			recheck = &expires
		}
		out[pod.Name] = at
	}
	return out, recheck
}

// countHealthy counts the ready pods that are neither being deleted nor waiting in
// disruptedPods.
func countHealthy(pods []*corev1.Pod, disrupted map[string]metav1.Time, now time.Time) int32 {
	var n int32
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if at, ok := disrupted[pod.Name]; ok && at.Add(DeletionTimeout).After(now) {
			continue
		}
		if isReady(pod) {
			n++
		}
	}
	return n
}

func isReady(pod *corev1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// updateStatus writes the computed status when it differs from the budget's. No
// disruption is allowed while the budget expects no pods, so that a budget whose pods
// appear before its first sync is safe.
func (c *Controller) updateStatus(ctx context.Context, pdb *policyv1.PodDisruptionBudget, healthy, desired, expected int32, disrupted map[string]metav1.Time) error {
	allowed := healthy - desired
	if expected <= 0 || allowed <= 0 {
		allowed = 0
	}
	st := pdb.Status
	if st.CurrentHealthy == healthy && st.DesiredHealthy == desired && st.ExpectedPods == expected &&
		st.DisruptionsAllowed == allowed && apiequality.Semantic.DeepEqual(st.DisruptedPods, disrupted) &&
		st.ObservedGeneration == pdb.Generation && pdbhelper.ConditionsAreUpToDate(pdb) {
		return nil
	}
	next := pdb.DeepCopy()
	next.Status = policyv1.PodDisruptionBudgetStatus{
		CurrentHealthy: healthy, DesiredHealthy: desired, ExpectedPods: expected, DisruptionsAllowed: allowed,
		DisruptedPods: disrupted, ObservedGeneration: pdb.Generation, Conditions: next.Status.Conditions,
	}
	pdbhelper.UpdateDisruptionAllowedCondition(next)
	_, err := c.client.PolicyV1().PodDisruptionBudgets(pdb.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{})
	return err
}

// failSafe sets disruptionsAllowed to 0 and the DisruptionAllowed condition False with
// the SyncFailed reason and the error.
func (c *Controller) failSafe(ctx context.Context, pdb *policyv1.PodDisruptionBudget, cause error) error {
	next := pdb.DeepCopy()
	next.Status.DisruptionsAllowed = 0
	if next.Status.Conditions == nil {
		next.Status.Conditions = []metav1.Condition{}
	}
	apimeta.SetStatusCondition(&next.Status.Conditions, metav1.Condition{
		Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse, Reason: policyv1.SyncFailedReason,
		Message: cause.Error(), ObservedGeneration: next.Status.ObservedGeneration,
	})
	_, err := c.client.PolicyV1().PodDisruptionBudgets(pdb.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{})
	return err
}

// staleDisruptionTarget reports whether the pod carries a DisruptionTarget condition
// that must be reset once DeletionTimeout after it was set passed (and in how long): a
// pod the eviction marked but that was never deleted. Conditions the kubelet set, and
// those of terminal pods, are never stale.
func (c *Controller) staleDisruptionTarget(pod *corev1.Pod) (bool, time.Duration) {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false, 0
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type != corev1.DisruptionTarget {
			continue
		}
		if cond.Status != corev1.ConditionTrue || cond.Reason == corev1.PodReasonTerminationByKubelet {
			return false, 0
		}
		return true, max(DeletionTimeout-c.clock.Since(cond.LastTransitionTime.Time), 0)
	}
	return false, 0
}

// SyncStalePod resets the stale DisruptionTarget condition of the pod of key to False.
func (c *Controller) SyncStalePod(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("invalid key %q: %w", key, err)
	}
	pod, err := c.podLister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get pod %s: %w", key, err)
	}
	has, after := c.staleDisruptionTarget(pod)
	if !has {
		return nil
	}
	if after > 0 {
		c.stale.AddAfter(key, after)
		return nil
	}
	next := pod.DeepCopy()
	for i := range next.Status.Conditions {
		cond := &next.Status.Conditions[i]
		if cond.Type == corev1.DisruptionTarget {
			cond.Status, cond.Reason, cond.Message = corev1.ConditionFalse, "", ""
			cond.LastTransitionTime = metav1.NewTime(c.clock.Now())
		}
	}
	if _, err := c.client.CoreV1().Pods(ns).UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("reset the DisruptionTarget condition of pod %s: %w", key, err)
	}
	c.log.Info("reset stale DisruptionTarget condition to False", "pod", key)
	return nil
}
