package deployment_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/deployment"
	"github.com/kubette/kubette/internal/controller/replicaset"
	"github.com/kubette/kubette/internal/testenv"
)

// cluster is a real API server with the Deployment and ReplicaSet
// controllers and a fake kubelet, all in one test namespace.
type cluster struct {
	t          *testing.T
	ctx        context.Context
	client     kubernetes.Interface
	ns         string
	kubeconfig string
	kubelet    *fakeKubelet
	informers  informers.SharedInformerFactory
}

// startCluster starts everything; it all stops (and is waited for) when the
// test ends.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	env := testenv.Start(t, testenv.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	c := &cluster{t: t, ctx: ctx, client: env.Client, ns: "deploy-test", kubeconfig: env.Kubeconfig}
	if _, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace: %v", err)
	}

	deps, starter, err := controller.NewDeps(env.Config, "deployment-controller")
	if err != nil {
		t.Fatal(err)
	}
	dc, err := deployment.New(deps)
	if err != nil {
		t.Fatal(err)
	}
	starter.Start(ctx)
	wg.Go(func() { dc.Run(ctx, 2) })

	c.informers = informers.NewSharedInformerFactoryWithOptions(env.Client, 0, informers.WithNamespace(c.ns))
	rsDeps, rsStarter, err := controller.NewDeps(env.Config, "replicaset-controller")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := replicaset.New(rsDeps)
	if err != nil {
		t.Fatal(err)
	}
	rsStarter.Start(ctx)
	wg.Go(func() { rc.Run(ctx, 2) })
	c.kubelet = newFakeKubelet(env.Client, c.informers)
	c.informers.Start(ctx.Done())
	c.informers.WaitForCacheSync(ctx.Done())
	wg.Go(func() { c.kubelet.run(ctx) })
	wg.Go(func() {
		<-ctx.Done()
		c.informers.Shutdown()
	})
	return c
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// fakeKubelet marks every pod Running and Ready, except pods whose first
// container runs an image it was told to hold back.
type fakeKubelet struct {
	client    kubernetes.Interface
	podLister corelisters.PodLister
	queue     workqueue.TypedRateLimitingInterface[string]

	mu   sync.Mutex
	hold map[string]bool
}

func newFakeKubelet(client kubernetes.Interface, inf informers.SharedInformerFactory) *fakeKubelet {
	k := &fakeKubelet{
		client:    client,
		podLister: inf.Core().V1().Pods().Lister(),
		queue:     workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		hold:      map[string]bool{},
	}
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	_, _ = inf.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) },
	})
	return k
}

// holdImage keeps pods of image from becoming ready (or lets them, with false).
func (k *fakeKubelet) holdImage(image string, hold bool) {
	k.mu.Lock()
	k.hold[image] = hold
	k.mu.Unlock()
	pods, _ := k.podLister.List(labels.Everything())
	for _, p := range pods {
		k.queue.Add(p.Namespace + "/" + p.Name)
	}
}

func (k *fakeKubelet) held(image string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.hold[image]
}

func (k *fakeKubelet) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		k.queue.ShutDown()
	}()
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

func (k *fakeKubelet) sync(ctx context.Context, key string) error {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	pod, err := k.podLister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || pod.DeletionTimestamp != nil || podReady(pod) || len(pod.Spec.Containers) == 0 || k.held(pod.Spec.Containers[0].Image) {
		return err
	}
	pod = pod.DeepCopy()
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.StartTime = &now
	pod.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	_, err = k.client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// eventually polls cond every 50 ms until it returns nil, failing the test
// after timeout with cond's last error.
func (c *cluster) eventually(timeout time.Duration, what string, cond func() error) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for {
		if err = cond(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *cluster) getDeployment(name string) *appsv1.Deployment {
	c.t.Helper()
	d, err := c.client.AppsV1().Deployments(c.ns).Get(c.ctx, name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatalf("get deployment %s: %v", name, err)
	}
	return d
}

// updateDeployment changes a Deployment with retries on conflict.
func (c *cluster) updateDeployment(name string, change func(d *appsv1.Deployment)) {
	c.t.Helper()
	for attempt := 0; ; attempt++ {
		d := c.getDeployment(name)
		change(d)
		_, err := c.client.AppsV1().Deployments(c.ns).Update(c.ctx, d, metav1.UpdateOptions{})
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) || attempt == 50 {
			c.t.Fatalf("update deployment %s: %v", name, err)
		}
	}
}

// rolloutDone is kubectl rollout status's test (kubectl/pkg/polymorphichelpers/rollout_status.go).
func rolloutDone(d *appsv1.Deployment) error {
	if d.Generation > d.Status.ObservedGeneration {
		return fmt.Errorf("waiting for the deployment spec update to be observed (generation %d, observed %d)", d.Generation, d.Status.ObservedGeneration)
	}
	for _, cond := range d.Status.Conditions {
		if cond.Type == appsv1.DeploymentProgressing && cond.Reason == "ProgressDeadlineExceeded" {
			return errors.New("deployment exceeded its progress deadline")
		}
	}
	want := ptr.Deref(d.Spec.Replicas, 1)
	switch s := d.Status; {
	case s.UpdatedReplicas < want:
		return fmt.Errorf("%d out of %d new replicas have been updated", s.UpdatedReplicas, want)
	case s.Replicas > s.UpdatedReplicas:
		return fmt.Errorf("%d old replicas are pending termination", s.Replicas-s.UpdatedReplicas)
	case s.AvailableReplicas < s.UpdatedReplicas:
		return fmt.Errorf("%d of %d updated replicas are available", s.AvailableReplicas, s.UpdatedReplicas)
	}
	return nil
}

// waitRolledOut waits until rollout status would report success.
func (c *cluster) waitRolledOut(name string) *appsv1.Deployment {
	c.t.Helper()
	var d *appsv1.Deployment
	c.eventually(60*time.Second, "rollout of "+name, func() error {
		d = c.getDeployment(name)
		return rolloutDone(d)
	})
	return d
}

// replicaSets lists the ReplicaSets d controls, oldest first.
func (c *cluster) replicaSets(d *appsv1.Deployment) []appsv1.ReplicaSet {
	c.t.Helper()
	list, err := c.client.AppsV1().ReplicaSets(c.ns).List(c.ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(d.Spec.Selector.MatchLabels).String()})
	if err != nil {
		c.t.Fatal(err)
	}
	var out []appsv1.ReplicaSet
	for _, rs := range list.Items {
		if ref := metav1.GetControllerOf(&rs); ref != nil && ref.UID == d.UID {
			out = append(out, rs)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return revisionOf(&out[i]) < revisionOf(&out[j])
	})
	return out
}

func revisionOf(rs *appsv1.ReplicaSet) string {
	return fmt.Sprintf("%010s", rs.Annotations["deployment.kubernetes.io/revision"])
}

// sizes is "name=spec/status" of each ReplicaSet, for messages.
func sizes(rss []appsv1.ReplicaSet) string {
	s := ""
	for _, rs := range rss {
		s += fmt.Sprintf("%s=%d/%d ", rs.Name, ptr.Deref(rs.Spec.Replicas, 1), rs.Status.Replicas)
	}
	return s
}

// newDeployment is a RollingUpdate Deployment of image with app=name pods.
func newDeployment(name, image string, replicas int32, maxSurge, maxUnavailable int) *appsv1.Deployment {
	lbls := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge:       ptrIntstr(maxSurge),
					MaxUnavailable: ptrIntstr(maxUnavailable),
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
			},
		},
	}
}

func (c *cluster) create(d *appsv1.Deployment) *appsv1.Deployment {
	c.t.Helper()
	out, err := c.client.AppsV1().Deployments(c.ns).Create(c.ctx, d, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("create deployment: %v", err)
	}
	return out
}
