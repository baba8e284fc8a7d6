// Package kubelettest is a stand-in for the scheduler and the kubelets in the
// integration tests of the workload controllers (DaemonSets, StatefulSets): it binds
// each pending pod to the node its metadata.name node affinity names (or to a default
// node), marks bound pods Running and Ready unless their image is held back, and ends
// the pods marked for deletion unless told to keep them terminating. Only tests
// import it.
package kubelettest

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Kubelet drives pods as a scheduler and kubelets would.
type Kubelet struct {
	client      kubernetes.Interface
	defaultNode string
	pods        corelisters.PodLister
	synced      cache.InformerSynced
	queue       workqueue.TypedRateLimitingInterface[string]

	mu        sync.Mutex
	held      map[string]bool // images whose pods do not become ready
	terminate bool            // whether pods marked for deletion are ended
	start     func(ctx context.Context)
}

// New builds a Kubelet on its own informers of client; pods without a node affinity
// term on metadata.name are bound to defaultNode.
func New(client kubernetes.Interface, defaultNode string) *Kubelet {
	inf := informers.NewSharedInformerFactory(client, 0)
	podInf := inf.Core().V1().Pods()
	k := &Kubelet{
		client: client, defaultNode: defaultNode,
		pods: podInf.Lister(), synced: podInf.Informer().HasSynced,
		queue:     workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		held:      map[string]bool{},
		terminate: true,
	}
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	_, _ = podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }})
	k.start = func(ctx context.Context) { inf.Start(ctx.Done()) }
	return k
}

// Hold keeps the pods of image from becoming ready (hold true) or lets them.
func (k *Kubelet) Hold(image string, hold bool) {
	k.mu.Lock()
	k.held[image] = hold
	k.mu.Unlock()
	k.requeueAll()
}

// Terminate sets whether pods marked for deletion are ended (true by default).
func (k *Kubelet) Terminate(on bool) {
	k.mu.Lock()
	k.terminate = on
	k.mu.Unlock()
	k.requeueAll()
}

func (k *Kubelet) requeueAll() {
	pods, _ := k.pods.List(labels.Everything())
	for _, p := range pods {
		k.queue.Add(p.Namespace + "/" + p.Name)
	}
}

// Run drives pods until ctx is done.
func (k *Kubelet) Run(ctx context.Context) {
	k.start(ctx)
	go func() {
		<-ctx.Done()
		k.queue.ShutDown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), k.synced) {
		return
	}
	for {
		key, quit := k.queue.Get()
		if quit {
			return
		}
		if err := k.sync(ctx, key); err != nil && ctx.Err() == nil {
			k.queue.AddRateLimited(key)
		} else {
			k.queue.Forget(key)
		}
		k.queue.Done(key)
	}
}

// Ready reports whether the pod's Ready condition is True.
func Ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// target is the node a pending pod is for.
func (k *Kubelet) target(p *corev1.Pod) string {
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, f := range t.MatchFields {
				if f.Key == metav1.ObjectNameField && len(f.Values) == 1 {
					return f.Values[0]
				}
			}
		}
	}
	return k.defaultNode
}

func (k *Kubelet) sync(ctx context.Context, key string) error {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	pod, err := k.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	k.mu.Lock()
	terminate, held := k.terminate, len(pod.Spec.Containers) > 0 && k.held[pod.Spec.Containers[0].Image]
	k.mu.Unlock()
	switch {
	case pod.DeletionTimestamp != nil:
		if !terminate {
			return nil
		}
		err = k.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	case pod.Spec.NodeName == "":
		err = k.client.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: k.target(pod)},
		}, metav1.CreateOptions{})
	case held || Ready(pod) || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
		return nil
	default:
		pod = pod.DeepCopy()
		now := metav1.Now()
		pod.Status.Phase = corev1.PodRunning
		pod.Status.StartTime = &now
		pod.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
		_, err = k.client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	}
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) && pod.DeletionTimestamp != nil {
		return nil
	}
	return err
}
