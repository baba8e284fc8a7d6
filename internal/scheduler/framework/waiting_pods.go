package framework

import (
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// MaxPermitTimeout caps the wait a Permit plugin may ask for, as upstream.
const MaxPermitTimeout = 15 * time.Minute

// WaitingPods is the set of pods held by Permit plugins, by UID. It is safe for
// concurrent use: the scheduling goroutine adds, binding goroutines wait and
// remove, plugins allow and reject from anywhere.
type WaitingPods struct {
	mu   sync.RWMutex
	pods map[types.UID]*waitingPod
}

// NewWaitingPods returns an empty set.
func NewWaitingPods() *WaitingPods {
	return &WaitingPods{pods: map[types.UID]*waitingPod{}}
}

// Add parks pod for the plugins in timeouts; each plugin that neither allows
// nor rejects the pod within its timeout rejects it. It returns the waiting pod.
func (w *WaitingPods) Add(pod *corev1.Pod, timeouts map[string]time.Duration) WaitingPod {
	wp := &waitingPod{pod: pod, pending: make(map[string]*time.Timer, len(timeouts)), done: make(chan *Status, 1)}
	wp.mu.Lock()
	for plugin, d := range timeouts {
		d = min(d, MaxPermitTimeout)
		wp.pending[plugin] = time.AfterFunc(d, func() {
			wp.Reject(plugin, fmt.Sprintf("rejected due to timeout after waiting %v at plugin %v", d, plugin))
		})
	}
	wp.mu.Unlock()
	w.mu.Lock()
	w.pods[pod.UID] = wp
	w.mu.Unlock()
	return wp
}

// Get returns the waiting pod with the UID, or nil.
func (w *WaitingPods) Get(uid types.UID) WaitingPod {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if wp, ok := w.pods[uid]; ok {
		return wp
	}
	return nil
}

// Remove forgets the pod (its timers are stopped).
func (w *WaitingPods) Remove(uid types.UID) {
	w.mu.Lock()
	wp, ok := w.pods[uid]
	delete(w.pods, uid)
	w.mu.Unlock()
	if ok {
		wp.stopTimers()
	}
}

// Iterate calls fn for every waiting pod (a copy of the set: fn may allow,
// reject or remove pods).
func (w *WaitingPods) Iterate(fn func(WaitingPod)) {
	w.mu.RLock()
	list := make([]*waitingPod, 0, len(w.pods))
	for _, wp := range w.pods {
		list = append(list, wp)
	}
	w.mu.RUnlock()
	for _, wp := range list {
		fn(wp)
	}
}

// Wait blocks until the pod with the UID is allowed (nil) or rejected (an
// Unschedulable status naming the rejecting plugin), or done is closed; then
// it removes the pod. A pod that is not waiting returns nil at once.
func (w *WaitingPods) Wait(uid types.UID, done <-chan struct{}) *Status {
	w.mu.RLock()
	wp, ok := w.pods[uid]
	w.mu.RUnlock()
	if !ok {
		return nil
	}
	defer w.Remove(uid)
	select {
	case s := <-wp.done:
		return s
	case <-done:
		return AsStatus(fmt.Errorf("waiting on permit for pod %s/%s: scheduler stopping", wp.pod.Namespace, wp.pod.Name))
	}
}

// waitingPod is one pod held by Permit plugins.
type waitingPod struct {
	pod *corev1.Pod
	mu  sync.Mutex
	// pending holds the timeout timer of each plugin that has not allowed the pod.
	pending map[string]*time.Timer
	// done receives the one outcome (buffered: senders never block).
	done    chan *Status
	decided bool
}

var _ WaitingPod = (*waitingPod)(nil)

// GetPod returns the waiting pod.
func (wp *waitingPod) GetPod() *corev1.Pod { return wp.pod }

// GetPendingPlugins lists the plugins that have not allowed the pod, sorted.
func (wp *waitingPod) GetPendingPlugins() []string {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	out := make([]string, 0, len(wp.pending))
	for p := range wp.pending {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Allow records the plugin's approval; the last one lets the pod bind.
func (wp *waitingPod) Allow(pluginName string) {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	if t, ok := wp.pending[pluginName]; ok {
		t.Stop()
		delete(wp.pending, pluginName)
	}
	if len(wp.pending) != 0 || wp.decided {
		return
	}
	wp.decided = true
	wp.done <- nil
}

// Reject fails the pod's binding with an Unschedulable status.
func (wp *waitingPod) Reject(pluginName, msg string) {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	for _, t := range wp.pending {
		t.Stop()
	}
	if wp.decided {
		return
	}
	wp.decided = true
	wp.done <- NewStatus(Unschedulable, msg).WithPlugin(pluginName)
}

func (wp *waitingPod) stopTimers() {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	for _, t := range wp.pending {
		t.Stop()
	}
}
