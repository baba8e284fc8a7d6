package kubelet

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// podWorker serialises the syncs of one pod UID: triggers coalesce in a one-slot channel, and
// one goroutine runs the syncs. The fields below wake are owned by that goroutine.
type podWorker struct {
	uid  types.UID
	wake chan struct{}

	// waiting holds, per container name, why it is not running when the runtime alone
	// cannot tell (image pull errors, back-off, config errors).
	waiting map[string]waitingReason
	// startTime is when the kubelet first saw the pod.
	startTime time.Time
	// failures counts consecutive failed syncs (their retries back off).
	failures int
	// admitted is set once the pod passed (or failed) the kubelet's admission (admit.go).
	admitted bool
}

// waitingReason is a container's waiting reason and message.
type waitingReason struct{ reason, message string }

// A failed sync is retried after retryDelay, doubling per consecutive failure up to
// maxRetryDelay.
const (
	retryDelay    = time.Second
	maxRetryDelay = 30 * time.Second
)

// trigger asks the pod's worker to sync it, starting the worker if needed.
func (k *Kubelet) trigger(uid types.UID) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.runCtx == nil || k.stopped || k.runCtx.Err() != nil {
		return
	}
	w := k.workers[uid]
	if w == nil {
		w = &podWorker{uid: uid, wake: make(chan struct{}, 1), waiting: map[string]waitingReason{}}
		k.workers[uid] = w
		k.workersWG.Add(1)
		go k.runWorker(k.runCtx, w)
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// triggerAfter syncs the pod again after d. A pod has at most one pending timer, the
// earliest asked for; Run stops the pending timers when it returns.
func (k *Kubelet) triggerAfter(uid types.UID, d time.Duration) {
	d = max(d, 0) + 10*time.Millisecond
	at := k.clock.Now().Add(d)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return
	}
	if t, ok := k.timers[uid]; ok {
		if !t.at.After(at) {
			return
		}
		t.timer.Stop()
	}
	entry := &podTimer{at: at}
	entry.timer = k.clock.AfterFunc(d, func() {
		k.mu.Lock()
		if k.timers[uid] == entry {
			delete(k.timers, uid)
		}
		k.mu.Unlock()
		k.trigger(uid)
	})
	k.timers[uid] = entry
}

// podTimer is a pending delayed sync.
type podTimer struct {
	at    time.Time
	timer clock.Timer
}

// runWorker runs the syncs of one pod until ctx is done or the pod is gone from both the API
// and the runtime.
func (k *Kubelet) runWorker(ctx context.Context, w *podWorker) {
	defer k.workersWG.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		}
		done, err := k.syncPod(ctx, w)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			delay := min(retryDelay<<min(w.failures, 5), maxRetryDelay)
			w.failures++
			k.log.Warn("sync pod failed", "uid", w.uid, "retry", delay, "err", err)
			k.triggerAfter(w.uid, delay)
			continue
		}
		w.failures = 0
		if done {
			k.mu.Lock()
			if len(w.wake) == 0 {
				delete(k.workers, w.uid)
				delete(k.written, w.uid)
				delete(k.observed, w.uid)
				delete(k.admitted, w.uid)
				k.mu.Unlock()
				return
			}
			k.mu.Unlock()
		}
	}
}

// podFullName is name_namespace(uid), as upstream formats a pod in messages.
func podFullName(pod *v1.Pod) string {
	return pod.Name + "_" + pod.Namespace + "(" + string(pod.UID) + ")"
}
