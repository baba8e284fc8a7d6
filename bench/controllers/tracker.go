package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// podInfo is what the tracker remembers of one pod.
type podInfo struct {
	ready       bool
	terminating bool
}

// snapshot is the tracker's view of the run's objects, as its informers saw
// them. Conditions passed to await read it under the tracker's lock.
type snapshot struct {
	// pods maps namespace/name to the pod's state; terminating pods included.
	pods map[string]podInfo
	// ready and terminating count the pods of pods that are Running+Ready and
	// that carry a deletionTimestamp.
	ready, terminating int
	// deployment is the latest Deployment seen (nil before the first or after
	// its deletion); it points into the informer's cache and must not be changed.
	deployment *appsv1.Deployment
	// replicaSets maps the name of each ReplicaSet of the run to its latest state.
	replicaSets map[string]*appsv1.ReplicaSet
}

// active is the number of pods that exist and are not being deleted.
func (s *snapshot) active() int { return len(s.pods) - s.terminating }

// waiter is one pending await: the condition and where to send the time of the
// event that first made it true.
type waiter struct {
	cond func(*snapshot) bool
	at   chan time.Time
}

// tracker follows the run's pods, Deployment and ReplicaSets through informer
// event handlers. Handlers only update the snapshot, check pending waiters and
// append to the timeline; they never block.
type tracker struct {
	deploymentName string
	// origin is the zero of the timeline, set once the Deployment create returned.
	origin time.Time

	mu       sync.Mutex
	snap     snapshot
	waiters  []*waiter
	timeline []timelineEntry
	// podEvents records, per pod event, when it arrived and what it changed,
	// for the per-interval histogram of --timeline.
	podEvents []podEvent
}

// podEventKind tells what a pod event changed.
type podEventKind int

const (
	podAdded podEventKind = iota
	podReady
	podGone
)

// podEvent is one pod event the tracker counted.
type podEvent struct {
	at   time.Time
	kind podEventKind
}

// timelineEntry is one Deployment or ReplicaSet change, for --timeline.
type timelineEntry struct {
	at   time.Time
	text string
}

func newTracker(deploymentName string) *tracker {
	return &tracker{
		deploymentName: deploymentName,
		snap:           snapshot{pods: map[string]podInfo{}, replicaSets: map[string]*appsv1.ReplicaSet{}},
	}
}

// setOrigin sets the zero of the timeline.
func (t *tracker) setOrigin(at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.origin = at
}

// changed checks the pending waiters after a change at time at; t.mu is held.
func (t *tracker) changed(at time.Time) {
	kept := t.waiters[:0]
	for _, w := range t.waiters {
		if w.cond(&t.snap) {
			w.at <- at // buffered: never blocks
			continue
		}
		kept = append(kept, w)
	}
	clear(t.waiters[len(kept):])
	t.waiters = kept
}

// expect registers cond and returns its waiter; wait on it later. When cond
// already holds, the waiter is satisfied at once with the current time.
// Register every condition of a phase before the action that starts it, so
// that each records the event that made it true, not when it was asked.
func (t *tracker) expect(cond func(*snapshot) bool) *waiter {
	w := &waiter{cond: cond, at: make(chan time.Time, 1)}
	t.mu.Lock()
	defer t.mu.Unlock()
	if cond(&t.snap) {
		w.at <- time.Now()
		return w
	}
	t.waiters = append(t.waiters, w)
	return w
}

// wait returns the time of the informer event that made w's condition true,
// or an error naming what once deadline passed or ctx ended.
func (t *tracker) wait(ctx context.Context, w *waiter, deadline time.Time, what string) (time.Time, error) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	var err error
	select {
	case at := <-w.at:
		return at, nil
	case <-timer.C:
		err = fmt.Errorf("%s: not reached in time", what)
	case <-ctx.Done():
		err = fmt.Errorf("%s: %w", what, ctx.Err())
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.waiters = slices.DeleteFunc(t.waiters, func(x *waiter) bool { return x == w })
	select {
	case at := <-w.at: // made true just now
		return at, nil
	default:
	}
	return time.Time{}, err
}

// view calls f with the current snapshot under the lock.
func (t *tracker) view(f func(*snapshot)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(&t.snap)
}

// podHandler returns the handler of the pod informer; each change of a pod is
// also passed to onChange (the fake kubelet's enqueue), which must not block.
func (t *tracker) podHandler(onChange func(key string, pod *corev1.Pod)) cache.ResourceEventHandler {
	set := func(pod *corev1.Pod) {
		now := time.Now()
		key, err := cache.MetaNamespaceKeyFunc(pod)
		if err != nil {
			return
		}
		info := podInfo{ready: runningAndReady(pod), terminating: pod.DeletionTimestamp != nil}
		t.mu.Lock()
		old, existed := t.snap.pods[key]
		t.snap.pods[key] = info
		t.count(old, existed, -1)
		t.count(info, true, 1)
		if !existed {
			t.podEvents = append(t.podEvents, podEvent{now, podAdded})
		}
		if info.ready && (!existed || !old.ready) {
			t.podEvents = append(t.podEvents, podEvent{now, podReady})
		}
		t.changed(now)
		t.mu.Unlock()
		onChange(key, pod)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { set(obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { set(obj.(*corev1.Pod)) },
		DeleteFunc: func(obj any) {
			now := time.Now()
			key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
			if err != nil {
				return
			}
			t.mu.Lock()
			defer t.mu.Unlock()
			old, existed := t.snap.pods[key]
			if !existed {
				return
			}
			delete(t.snap.pods, key)
			t.count(old, true, -1)
			t.podEvents = append(t.podEvents, podEvent{now, podGone})
			t.changed(now)
		},
	}
}

// count adds sign to the ready and terminating counters info contributes to;
// t.mu is held.
func (t *tracker) count(info podInfo, exists bool, sign int) {
	if !exists {
		return
	}
	if info.ready {
		t.snap.ready += sign
	}
	if info.terminating {
		t.snap.terminating += sign
	}
}

// deploymentHandler returns the handler of the Deployment informer.
func (t *tracker) deploymentHandler() cache.ResourceEventHandler {
	set := func(d *appsv1.Deployment) {
		if d.Name != t.deploymentName {
			return
		}
		now := time.Now()
		t.mu.Lock()
		defer t.mu.Unlock()
		prev := t.snap.deployment
		t.snap.deployment = d
		if prev == nil || prev.Generation != d.Generation || !statusEqual(prev.Status, d.Status) {
			s := d.Status
			t.timeline = append(t.timeline, timelineEntry{now, fmt.Sprintf(
				"deployment  gen %d observed %d  spec %d  replicas %d updated %d ready %d available %d",
				d.Generation, s.ObservedGeneration, replicasOf(d.Spec.Replicas), s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas)})
		}
		t.changed(now)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { set(obj.(*appsv1.Deployment)) },
		UpdateFunc: func(_, obj any) { set(obj.(*appsv1.Deployment)) },
		DeleteFunc: func(obj any) {
			d, ok := obj.(*appsv1.Deployment)
			if !ok {
				tomb, ok := obj.(cache.DeletedFinalStateUnknown)
				if !ok {
					return
				}
				if d, ok = tomb.Obj.(*appsv1.Deployment); !ok {
					return
				}
			}
			if d.Name != t.deploymentName {
				return
			}
			now := time.Now()
			t.mu.Lock()
			defer t.mu.Unlock()
			t.snap.deployment = nil
			t.timeline = append(t.timeline, timelineEntry{now, "deployment  deleted"})
			t.changed(now)
		},
	}
}

// replicaSetHandler returns the handler of the ReplicaSet informer.
func (t *tracker) replicaSetHandler() cache.ResourceEventHandler {
	set := func(rs *appsv1.ReplicaSet) {
		now := time.Now()
		t.mu.Lock()
		defer t.mu.Unlock()
		prev := t.snap.replicaSets[rs.Name]
		t.snap.replicaSets[rs.Name] = rs
		if prev == nil || prev.Generation != rs.Generation || prev.Status.Replicas != rs.Status.Replicas ||
			prev.Status.ReadyReplicas != rs.Status.ReadyReplicas || prev.Status.AvailableReplicas != rs.Status.AvailableReplicas ||
			prev.Status.ObservedGeneration != rs.Status.ObservedGeneration {
			s := rs.Status
			t.timeline = append(t.timeline, timelineEntry{now, fmt.Sprintf(
				"replicaset  gen %d observed %d  spec %d  replicas %d ready %d available %d",
				rs.Generation, s.ObservedGeneration, replicasOf(rs.Spec.Replicas), s.Replicas, s.ReadyReplicas, s.AvailableReplicas)})
		}
		t.changed(now)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { set(obj.(*appsv1.ReplicaSet)) },
		UpdateFunc: func(_, obj any) { set(obj.(*appsv1.ReplicaSet)) },
		DeleteFunc: func(obj any) {
			key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
			if err != nil {
				return
			}
			_, name, _ := cache.SplitMetaNamespaceKey(key)
			now := time.Now()
			t.mu.Lock()
			defer t.mu.Unlock()
			delete(t.snap.replicaSets, name)
			t.timeline = append(t.timeline, timelineEntry{now, "replicaset  deleted " + name})
			t.changed(now)
		},
	}
}

// statusEqual compares the counts and generation of two Deployment statuses.
func statusEqual(a, b appsv1.DeploymentStatus) bool {
	return a.ObservedGeneration == b.ObservedGeneration && a.Replicas == b.Replicas &&
		a.UpdatedReplicas == b.UpdatedReplicas && a.ReadyReplicas == b.ReadyReplicas &&
		a.AvailableReplicas == b.AvailableReplicas && a.UnavailableReplicas == b.UnavailableReplicas
}

// replicasOf dereferences a replica count; the API server defaults nil to 1.
func replicasOf(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// runningAndReady reports whether pod is in phase Running with condition Ready True.
func runningAndReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// deploymentAvailable is the bench's "available" condition: the status
// describes the current generation and reports n available replicas.
func deploymentAvailable(n int32) func(*snapshot) bool {
	return func(s *snapshot) bool {
		d := s.deployment
		return d != nil && d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == n
	}
}

// rolloutComplete is the condition `kubectl rollout status` waits for (its
// DeploymentStatusViewer): the status observed the current generation, every
// replica is updated, no old replica is left and every updated one is
// available. A Progressing condition with reason ProgressDeadlineExceeded
// counts as not complete (kubectl fails then).
func rolloutComplete(n int32) func(*snapshot) bool {
	return func(s *snapshot) bool {
		d := s.deployment
		if d == nil || d.Generation > d.Status.ObservedGeneration {
			return false
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
				return false
			}
		}
		st := d.Status
		return replicasOf(d.Spec.Replicas) == n && st.UpdatedReplicas >= n &&
			st.Replicas <= st.UpdatedReplicas && st.AvailableReplicas >= st.UpdatedReplicas
	}
}

// deploymentScaledTo reports the Deployment's spec and status at n replicas,
// for the current generation.
func deploymentScaledTo(n int32) func(*snapshot) bool {
	return func(s *snapshot) bool {
		d := s.deployment
		return d != nil && replicasOf(d.Spec.Replicas) == n && d.Status.ObservedGeneration == d.Generation && d.Status.Replicas == n
	}
}
