package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// maxMarkRetries bounds the retries of one pod's status write after errors
// other than a conflict or a missing pod.
const maxMarkRetries = 5

// fakeKubelet makes pods look started: every pod of the run that is not
// Running+Ready gets phase Running, the four standard conditions True, a pod
// IP and running container statuses through the status subresource. A pod
// with a deletionTimestamp is deleted with grace period 0, as a kubelet does
// once its containers stopped (kubette, as upstream, deletes unscheduled pods
// at once, so normally none is seen).
//
// The pod informer's handler only enqueues keys; workers write.
type fakeKubelet struct {
	client  kubernetes.Interface
	lister  corelisters.PodLister
	queue   workqueue.TypedRateLimitingInterface[string]
	workers int

	nextIP atomic.Uint32

	marked    atomic.Int64 // successful status writes
	conflicts atomic.Int64 // status writes answered 409
	finalized atomic.Int64 // terminating pods deleted with grace 0
	errs      atomic.Int64 // other failed requests
	lastMark  atomic.Int64 // UnixNano when the last successful status write returned

	errMu    sync.Mutex
	firstErr error
}

func newFakeKubelet(client kubernetes.Interface, lister corelisters.PodLister, workers int) *fakeKubelet {
	return &fakeKubelet{
		client:  client,
		lister:  lister,
		workers: workers,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "fake-kubelet"}),
	}
}

// observe is called by the pod informer's handler for each change; it queues
// pods that need a write and never blocks.
func (k *fakeKubelet) observe(key string, pod *corev1.Pod) {
	if pod.DeletionTimestamp != nil || !runningAndReady(pod) {
		k.queue.Add(key)
	}
}

// run starts the workers and returns after all of them stopped, once ctx ended.
func (k *fakeKubelet) run(ctx context.Context) {
	var wg sync.WaitGroup
	for range k.workers {
		wg.Go(func() {
			for k.processNext(ctx) {
			}
		})
	}
	<-ctx.Done()
	k.queue.ShutDown()
	wg.Wait()
}

// processNext handles one key; it returns false once the queue shut down.
func (k *fakeKubelet) processNext(ctx context.Context) bool {
	key, quit := k.queue.Get()
	if quit {
		return false
	}
	defer k.queue.Done(key)
	err := k.sync(ctx, key)
	switch {
	case err == nil, ctx.Err() != nil:
		k.queue.Forget(key)
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		// A newer version is on its way through the informer, which queues the
		// pod again if it still needs a write; a missing pod needs none.
		if apierrors.IsConflict(err) {
			k.conflicts.Add(1)
		}
		k.queue.Forget(key)
	default:
		k.errs.Add(1)
		k.errMu.Lock()
		if k.firstErr == nil {
			k.firstErr = err
		}
		k.errMu.Unlock()
		if k.queue.NumRequeues(key) < maxMarkRetries {
			k.queue.AddRateLimited(key)
		} else {
			k.queue.Forget(key)
		}
	}
	return true
}

// sync brings the pod of key to Running+Ready, or finishes its deletion.
func (k *fakeKubelet) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("invalid key %q: %w", key, err)
	}
	cached, err := k.lister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get pod %s from cache: %w", key, err)
	}
	if cached.DeletionTimestamp != nil {
		grace := int64(0)
		uid := cached.UID
		err := k.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{
			GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil {
			return fmt.Errorf("delete terminating pod %s: %w", key, err)
		}
		k.finalized.Add(1)
		return nil
	}
	if runningAndReady(cached) {
		return nil
	}
	pod := cached.DeepCopy()
	k.setRunning(pod)
	if _, err := k.client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update status of pod %s: %w", key, err)
	}
	k.marked.Add(1)
	k.lastMark.Store(time.Now().UnixNano())
	return nil
}

// setRunning sets the status a kubelet reports for a started pod whose
// containers all run and are ready.
func (k *fakeKubelet) setRunning(pod *corev1.Pod) {
	now := metav1.Now()
	n := k.nextIP.Add(1)
	ip := fmt.Sprintf("10.244.%d.%d", (n>>8)&0xff, n&0xff)
	st := &pod.Status
	st.Phase = corev1.PodRunning
	st.Conditions = nil
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	st.PodIP = ip
	st.PodIPs = []corev1.PodIP{{IP: ip}}
	st.StartTime = &now
	st.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		started := true
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name:    c.Name,
			Image:   c.Image,
			ImageID: c.Image,
			Ready:   true,
			Started: &started,
			State:   corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
}

// firstError returns the first error other than a conflict or a missing pod.
func (k *fakeKubelet) firstError() error {
	k.errMu.Lock()
	defer k.errMu.Unlock()
	return k.firstErr
}
