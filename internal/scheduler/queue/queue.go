// Package queue holds the pods waiting for a node, as upstream's scheduling queue:
// activeQ (pods to try now, by priority then arrival), backoffQ (pods that failed
// and wait out an exponential backoff of 1 s doubling up to 10 s) and
// unschedulablePods (pods no node fits; a cluster event that may help — a node
// added or changed, a pod deleted, an assigned pod changed, or a change of an
// object that a plugin which rejected them registered and whose queueing hint
// says it may help — moves them back, and none stays longer than five minutes).
package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

// Defaults as upstream.
const (
	DefaultPodInitialBackoff                 = time.Second
	DefaultPodMaxBackoff                     = 10 * time.Second
	DefaultPodMaxInUnschedulablePodsDuration = 5 * time.Minute
	backoffFlushPeriod                       = time.Second
	unschedulableFlushPeriod                 = 30 * time.Second
)

// Names of plugins whose rejections pod events can resolve (see AssignedPodAdded).
const (
	podTopologySpreadName = "PodTopologySpread"
)

// ErrClosed is returned by Pop once the queue is closed.
var ErrClosed = errors.New("scheduling queue is closed")

// Events that move pods out of unschedulablePods (used in logs).
const (
	EventNodeAdd              = "NodeAdd"
	EventNodeUpdate           = "NodeUpdate"
	EventNodeDelete           = "NodeDelete"
	EventAssignedPodAdd       = "AssignedPodAdd"
	EventAssignedPodUpdate    = "AssignedPodUpdate"
	EventAssignedPodDelete    = "AssignedPodDelete"
	EventUnschedulableTimeout = "UnschedulableTimeout"
)

// QueuedPodInfo is a pod in the queue with its scheduling history.
type QueuedPodInfo struct {
	// Pod is the latest version of the pod the informer delivered.
	Pod *corev1.Pod
	// Timestamp is when the pod was last added to the queue (orders activeQ; starts the backoff).
	Timestamp time.Time
	// InitialAttemptTimestamp is when the pod first entered activeQ.
	InitialAttemptTimestamp time.Time
	// Attempts counts the scheduling attempts.
	Attempts int
	// UnschedulableCount counts the attempts that found no node; ConsecutiveErrorsCount
	// the attempts since the last such one that failed with an error. Either sets the backoff.
	UnschedulableCount     int
	ConsecutiveErrorsCount int
	// UnschedulablePlugins are the plugins that rejected the pod in its last attempt.
	UnschedulablePlugins sets.Set[string]

	requiredAffinity  []affinityTerm
	backoffExpiration time.Time
	index             int
}

type affinityTerm struct {
	namespaces sets.Set[string]
	anyNS      bool
	selector   labels.Selector
}

func (p *QueuedPodInfo) key() string { return p.Pod.Namespace + "/" + p.Pod.Name }

func newQueuedPodInfo(pod *corev1.Pod, now time.Time) *QueuedPodInfo {
	p := &QueuedPodInfo{Timestamp: now, UnschedulablePlugins: sets.New[string](), index: -1}
	p.setPod(pod)
	return p
}

func (p *QueuedPodInfo) setPod(pod *corev1.Pod) {
	p.Pod = pod
	p.requiredAffinity = nil
	a := pod.Spec.Affinity
	if a == nil || a.PodAffinity == nil {
		return
	}
	for _, t := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
		if err != nil {
			continue
		}
		at := affinityTerm{selector: sel, anyNS: t.NamespaceSelector != nil, namespaces: sets.New(t.Namespaces...)}
		if len(t.Namespaces) == 0 && t.NamespaceSelector == nil {
			at.namespaces.Insert(pod.Namespace)
		}
		p.requiredAffinity = append(p.requiredAffinity, at)
	}
}

func podPriority(p *corev1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// activeLess orders activeQ: higher priority first, then earlier timestamp (PrioritySort).
func activeLess(a, b *QueuedPodInfo) bool {
	pa, pb := podPriority(a.Pod), podPriority(b.Pod)
	return pa > pb || (pa == pb && a.Timestamp.Before(b.Timestamp))
}

// Options configure a PriorityQueue.
type Options struct {
	// Clock is the time source (the real clock when nil).
	Clock clock.WithTicker
	// PodInitialBackoff and PodMaxBackoff bound the exponential backoff (1 s and 10 s by default).
	PodInitialBackoff, PodMaxBackoff time.Duration
	// PodMaxInUnschedulablePodsDuration is the longest a pod stays unschedulable
	// without a retry (5 min by default).
	PodMaxInUnschedulablePodsDuration time.Duration
	// Logger receives the queue's logs (slog.Default when nil).
	Logger *slog.Logger
	// PreEnqueue, when set, runs before a pod enters activeQ (the PreEnqueue plugins):
	// a pod it holds back (returns false) is gated: it waits, untried, until an update
	// of it passes, and no cluster event moves it.
	PreEnqueue func(*corev1.Pod) bool
}

// PriorityQueue is the scheduling queue. It is safe for concurrent use.
type PriorityQueue struct {
	clock              clock.WithTicker
	initialBackoff     time.Duration
	maxBackoff         time.Duration
	maxInUnschedulable time.Duration
	logger             *slog.Logger

	mu                sync.Mutex
	cond              sync.Cond
	activeQ           *podHeap
	backoffQ          *podHeap
	unschedulablePods map[string]*QueuedPodInfo
	// gatedPods are the pods PreEnqueue held back.
	gatedPods  map[string]*QueuedPodInfo
	preEnqueue func(*corev1.Pod) bool
	// schedulingCycle counts Pops; moveRequestCycle is the cycle of the last move
	// request. A pod whose attempt started at or before a move request goes to
	// backoffQ, not unschedulablePods, when it fails: the event may have helped it.
	schedulingCycle  int64
	moveRequestCycle int64
	closed           bool

	nominator *nominator
}

// New returns an empty queue. Call Run to flush backoffQ and unschedulablePods.
func New(o Options) *PriorityQueue {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.PodInitialBackoff == 0 {
		o.PodInitialBackoff = DefaultPodInitialBackoff
	}
	if o.PodMaxBackoff == 0 {
		o.PodMaxBackoff = DefaultPodMaxBackoff
	}
	if o.PodMaxInUnschedulablePodsDuration == 0 {
		o.PodMaxInUnschedulablePodsDuration = DefaultPodMaxInUnschedulablePodsDuration
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	q := &PriorityQueue{
		clock:              o.Clock,
		initialBackoff:     o.PodInitialBackoff,
		maxBackoff:         o.PodMaxBackoff,
		maxInUnschedulable: o.PodMaxInUnschedulablePodsDuration,
		logger:             o.Logger,
		activeQ:            newPodHeap(activeLess),
		unschedulablePods:  map[string]*QueuedPodInfo{},
		gatedPods:          map[string]*QueuedPodInfo{},
		preEnqueue:         o.PreEnqueue,
		moveRequestCycle:   -1,
		nominator:          newNominator(),
	}
	q.backoffQ = newPodHeap(func(a, b *QueuedPodInfo) bool { return q.backoffTime(a).Before(q.backoffTime(b)) })
	q.cond.L = &q.mu
	return q
}

// Run moves pods whose backoff completed to activeQ every second and pods left in
// unschedulablePods too long every 30 s, until ctx is done; then it closes the queue.
func (q *PriorityQueue) Run(ctx context.Context) {
	backoff := q.clock.NewTicker(backoffFlushPeriod)
	defer backoff.Stop()
	leftover := q.clock.NewTicker(unschedulableFlushPeriod)
	defer leftover.Stop()
	for {
		select {
		case <-ctx.Done():
			q.Close()
			return
		case <-backoff.C():
			q.FlushBackoffQCompleted()
		case <-leftover.C():
			q.FlushUnschedulablePodsLeftover()
		}
	}
}

// Close wakes every Pop, which then returns ErrClosed.
func (q *PriorityQueue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.cond.Broadcast()
}

// backoffTime is when the pod's backoff ends: Timestamp + initial·2^(n-1), at most
// the max, where n counts the failed attempts (errors and rejections separately).
func (q *PriorityQueue) backoffTime(p *QueuedPodInfo) time.Time {
	count := p.UnschedulableCount
	if p.ConsecutiveErrorsCount > 0 {
		count = p.ConsecutiveErrorsCount
	}
	if count == 0 {
		return time.Time{}
	}
	if p.backoffExpiration.IsZero() {
		p.backoffExpiration = p.Timestamp.Add(q.backoffDuration(count))
	}
	return p.backoffExpiration
}

func (q *PriorityQueue) backoffDuration(count int) time.Duration {
	d := q.initialBackoff
	for i := 1; i < count; i++ {
		if d > q.maxBackoff-d {
			return q.maxBackoff
		}
		d += d
	}
	return min(d, q.maxBackoff)
}

func (q *PriorityQueue) isBackingOff(p *QueuedPodInfo) bool {
	return q.backoffTime(p).After(q.clock.Now())
}

// moveToActiveQ puts p in activeQ, taking it out of the other queues, unless
// PreEnqueue holds it back: then it goes to gatedPods and moveToActiveQ returns false.
// The caller holds q.mu.
func (q *PriorityQueue) moveToActiveQ(p *QueuedPodInfo) bool {
	key := p.key()
	delete(q.unschedulablePods, key)
	q.backoffQ.delete(key)
	if q.preEnqueue != nil && !q.preEnqueue(p.Pod) {
		q.activeQ.delete(key)
		q.gatedPods[key] = p
		return false
	}
	delete(q.gatedPods, key)
	if p.InitialAttemptTimestamp.IsZero() {
		p.InitialAttemptTimestamp = q.clock.Now()
	}
	q.activeQ.addOrUpdate(p)
	return true
}

// moveToBackoffQ puts p in backoffQ. The caller holds q.mu.
func (q *PriorityQueue) moveToBackoffQ(p *QueuedPodInfo) {
	delete(q.unschedulablePods, p.key())
	q.backoffQ.addOrUpdate(p)
}

// Add queues a new unscheduled pod for scheduling (nominated for its
// status.nominatedNodeName, if any).
func (q *PriorityQueue) Add(pod *corev1.Pod) {
	q.nominator.update(nil, pod)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.moveToActiveQ(newQueuedPodInfo(pod, q.clock.Now())) {
		q.cond.Broadcast()
	}
}

// Pop blocks until activeQ has a pod and returns the first one, or returns an
// error once ctx is done or the queue is closed.
func (q *PriorityQueue) Pop(ctx context.Context) (*QueuedPodInfo, error) {
	stop := context.AfterFunc(ctx, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.cond.Broadcast()
	})
	defer stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.activeQ.len() == 0 {
		if q.closed {
			return nil, ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("pop: %w", err)
		}
		q.cond.Wait()
	}
	p := q.activeQ.pop()
	q.schedulingCycle++
	p.Attempts++
	return p, nil
}

// SchedulingCycle returns the number of pods popped so far: pass the value seen
// right after Pop to AddUnschedulableIfNotPresent.
func (q *PriorityQueue) SchedulingCycle() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.schedulingCycle
}

// AddUnschedulableIfNotPresent returns a pod whose attempt failed. A pod that some
// plugin rejected goes to unschedulablePods, unless a move request arrived since its
// attempt began (podSchedulingCycle); a pod that failed with an error, or that such
// an event may have helped, goes to backoffQ.
func (q *PriorityQueue) AddUnschedulableIfNotPresent(p *QueuedPodInfo, podSchedulingCycle int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	key := p.key()
	if _, ok := q.unschedulablePods[key]; ok {
		return fmt.Errorf("pod %s is already in unschedulablePods", key)
	}
	if _, ok := q.activeQ.get(key); ok {
		return fmt.Errorf("pod %s is already in activeQ", key)
	}
	if _, ok := q.backoffQ.get(key); ok {
		return fmt.Errorf("pod %s is already in backoffQ", key)
	}
	if p.UnschedulablePlugins.Len() == 0 {
		p.ConsecutiveErrorsCount++
	} else {
		p.UnschedulableCount++
		p.ConsecutiveErrorsCount = 0
	}
	p.Timestamp = q.clock.Now()
	p.backoffExpiration = time.Time{}
	p.setPod(p.Pod)
	if q.moveRequestCycle >= podSchedulingCycle || p.UnschedulablePlugins.Len() == 0 {
		q.moveToBackoffQ(p)
		return nil
	}
	q.unschedulablePods[key] = p
	return nil
}

// FlushBackoffQCompleted moves the pods whose backoff ended to activeQ.
func (q *PriorityQueue) FlushBackoffQCompleted() {
	q.mu.Lock()
	defer q.mu.Unlock()
	moved := false
	for {
		p := q.backoffQ.peek()
		if p == nil || q.isBackingOff(p) {
			break
		}
		q.backoffQ.pop()
		q.activeQ.addOrUpdate(p)
		moved = true
	}
	if moved {
		q.cond.Broadcast()
	}
}

// FlushUnschedulablePodsLeftover retries the pods that stayed unschedulable longer
// than the maximum.
func (q *PriorityQueue) FlushUnschedulablePodsLeftover() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	var move []*QueuedPodInfo
	for _, p := range q.unschedulablePods {
		if now.Sub(p.Timestamp) > q.maxInUnschedulable {
			move = append(move, p)
		}
	}
	q.movePods(move, EventUnschedulableTimeout)
}

// movePods moves unschedulable pods to backoffQ (if still backing off) or activeQ,
// and records the move request. The caller holds q.mu.
func (q *PriorityQueue) movePods(pods []*QueuedPodInfo, event string) {
	activated := false
	for _, p := range pods {
		delete(q.unschedulablePods, p.key())
		if q.isBackingOff(p) {
			q.moveToBackoffQ(p)
			continue
		}
		activated = q.moveToActiveQ(p) || activated
	}
	q.moveRequestCycle = q.schedulingCycle
	if len(pods) > 0 {
		q.logger.Debug("moved unschedulable pods", "event", event, "pods", len(pods))
	}
	if activated {
		q.cond.Broadcast()
	}
}

// MoveAllToActiveOrBackoffQueue moves every unschedulable pod that passes preCheck
// (all when nil) back: event may have made them schedulable.
func (q *PriorityQueue) MoveAllToActiveOrBackoffQueue(event string, preCheck func(*corev1.Pod) bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	move := make([]*QueuedPodInfo, 0, len(q.unschedulablePods))
	for _, p := range q.unschedulablePods {
		if preCheck == nil || preCheck(p.Pod) {
			move = append(move, p)
		}
	}
	q.movePods(move, event)
}

// MoveRejectedPods moves back the unschedulable pods that event may help: those
// for which mayHelp holds for one of the plugins that rejected them (a plugin's
// queueing hint for the event). mayHelp runs under the queue's lock.
func (q *PriorityQueue) MoveRejectedPods(event string, mayHelp func(plugin string, pod *corev1.Pod) bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var move []*QueuedPodInfo
	for _, p := range q.unschedulablePods {
		for plugin := range p.UnschedulablePlugins {
			if mayHelp(plugin, p.Pod) {
				move = append(move, p)
				break
			}
		}
	}
	q.movePods(move, event)
}

// AssignedPodAdded moves the unschedulable pods a newly bound pod may help: those
// with a required pod affinity term matching it, and those rejected by
// PodTopologySpread in its namespace.
func (q *PriorityQueue) AssignedPodAdded(pod *corev1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.movePods(q.podsHelpedBy(pod), EventAssignedPodAdd)
}

// AssignedPodUpdated is AssignedPodAdded for an update; an update that lowers the
// pod's requests (a scale-down) moves every unschedulable pod.
func (q *PriorityQueue) AssignedPodUpdated(oldPod, newPod *corev1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if scaledDown(oldPod, newPod) {
		move := make([]*QueuedPodInfo, 0, len(q.unschedulablePods))
		for _, p := range q.unschedulablePods {
			move = append(move, p)
		}
		q.movePods(move, EventAssignedPodUpdate)
		return
	}
	q.movePods(q.podsHelpedBy(newPod), EventAssignedPodUpdate)
}

func scaledDown(oldPod, newPod *corev1.Pod) bool {
	o, n := framework.PodRequests(oldPod), framework.PodRequests(newPod)
	if n.MilliCPU < o.MilliCPU || n.Memory < o.Memory || n.EphemeralStorage < o.EphemeralStorage {
		return true
	}
	for name, v := range o.ScalarResources {
		if n.ScalarResources[name] < v {
			return true
		}
	}
	return false
}

// podsHelpedBy lists the unschedulable pods the pod may help. The caller holds q.mu.
func (q *PriorityQueue) podsHelpedBy(pod *corev1.Pod) []*QueuedPodInfo {
	var out []*QueuedPodInfo
	set := labels.Set(pod.Labels)
	for _, p := range q.unschedulablePods {
		if p.UnschedulablePlugins.Has(podTopologySpreadName) && p.Pod.Namespace == pod.Namespace {
			out = append(out, p)
			continue
		}
		for _, t := range p.requiredAffinity {
			if (t.anyNS || t.namespaces.Has(pod.Namespace)) && t.selector.Matches(set) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// isPodUpdated reports whether anything but the status (and bookkeeping metadata) changed.
func isPodUpdated(oldPod, newPod *corev1.Pod) bool {
	strip := func(p *corev1.Pod) *corev1.Pod {
		c := p.DeepCopy()
		c.ResourceVersion = ""
		c.Generation = 0
		c.ManagedFields = nil
		c.Finalizers = nil
		c.Status = corev1.PodStatus{}
		return c
	}
	return !reflect.DeepEqual(strip(oldPod), strip(newPod))
}

// Update replaces a queued pod with its new version (and its nomination). An
// unschedulable pod whose spec or metadata changed is retried; a pod in no
// queue is added.
func (q *PriorityQueue) Update(oldPod, newPod *corev1.Pod) {
	q.nominator.update(oldPod, newPod)
	q.mu.Lock()
	defer q.mu.Unlock()
	key := newPod.Namespace + "/" + newPod.Name
	if p, ok := q.activeQ.get(key); ok {
		p.setPod(newPod)
		q.activeQ.fix(p)
		return
	}
	if p, ok := q.backoffQ.get(key); ok {
		p.setPod(newPod)
		return
	}
	if p, ok := q.gatedPods[key]; ok {
		// Only an update of the pod itself can open its gates.
		p.setPod(newPod)
		if q.moveToActiveQ(p) {
			q.cond.Broadcast()
		}
		return
	}
	if p, ok := q.unschedulablePods[key]; ok {
		p.setPod(newPod)
		if oldPod == nil || isPodUpdated(oldPod, newPod) {
			if q.isBackingOff(p) {
				q.moveToBackoffQ(p)
				return
			}
			if q.moveToActiveQ(p) {
				q.cond.Broadcast()
			}
		}
		return
	}
	if q.moveToActiveQ(newQueuedPodInfo(newPod, q.clock.Now())) {
		q.cond.Broadcast()
	}
}

// Delete removes a pod from whichever queue holds it, and its nomination.
func (q *PriorityQueue) Delete(pod *corev1.Pod) {
	q.DeleteNominatedPodIfExists(pod)
	q.mu.Lock()
	defer q.mu.Unlock()
	key := pod.Namespace + "/" + pod.Name
	if q.activeQ.delete(key) || q.backoffQ.delete(key) {
		return
	}
	delete(q.unschedulablePods, key)
	delete(q.gatedPods, key)
}

// Counts returns how many pods each part of the queue holds; gated pods count as
// unschedulable.
func (q *PriorityQueue) Counts() (active, backoff, unschedulable int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.activeQ.len(), q.backoffQ.len(), len(q.unschedulablePods) + len(q.gatedPods)
}

// Gated reports whether PreEnqueue holds the pod back.
func (q *PriorityQueue) Gated(pod *corev1.Pod) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, ok := q.gatedPods[pod.Namespace+"/"+pod.Name]
	return ok
}

// PendingPods lists the pods of activeQ, backoffQ and unschedulablePods.
func (q *PriorityQueue) PendingPods() (active, backoff, unschedulable []*corev1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, p := range q.activeQ.list() {
		active = append(active, p.Pod)
	}
	for _, p := range q.backoffQ.list() {
		backoff = append(backoff, p.Pod)
	}
	for _, p := range q.unschedulablePods {
		unschedulable = append(unschedulable, p.Pod)
	}
	for _, p := range q.gatedPods {
		unschedulable = append(unschedulable, p.Pod)
	}
	return active, backoff, unschedulable
}
