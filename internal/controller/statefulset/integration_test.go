package statefulset_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/kubelettest"
	"github.com/kubette/kubette/internal/controller/statefulset"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

const ns = "default"

type cluster struct {
	t       *testing.T
	ctx     context.Context
	c       kubernetes.Interface
	kubelet *kubelettest.Kubelet
	// kubeconfig is the admin kubeconfig, for kubectl.
	kubeconfig string
}

// start runs the StatefulSet controller and a stand-in scheduler and kubelet (binding
// every pod to node n1) against a fresh control plane.
func start(t *testing.T) *cluster {
	t.Helper()
	env := testenv.Start(t, testenv.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	if _, err := env.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deps, starter, err := controller.NewDeps(env.Config, "statefulset-test")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := statefulset.New(deps)
	if err != nil {
		t.Fatal(err)
	}
	starter.Start(ctx)
	wg.Go(func() { sc.Run(ctx, 2) })
	k := kubelettest.New(env.Client, "n1")
	wg.Go(func() { k.Run(ctx) })
	return &cluster{t: t, ctx: ctx, c: env.Client, kubelet: k, kubeconfig: env.Kubeconfig}
}

func newSet(name, image string, n int32) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(n),
			ServiceName: name,
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}},
			},
		},
	}
}

func (c *cluster) create(s *appsv1.StatefulSet) *appsv1.StatefulSet {
	c.t.Helper()
	got, err := c.c.AppsV1().StatefulSets(ns).Create(c.ctx, s, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return got
}

func (c *cluster) update(name string, change func(*appsv1.StatefulSet)) {
	c.t.Helper()
	poll.Until(c.t, "update "+name, func() error {
		s, err := c.c.AppsV1().StatefulSets(ns).Get(c.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(s)
		_, err = c.c.AppsV1().StatefulSets(ns).Update(c.ctx, s, metav1.UpdateOptions{})
		return err
	})
}

func (c *cluster) pods(name string) map[string]corev1.Pod {
	c.t.Helper()
	list, err := c.c.CoreV1().Pods(ns).List(c.ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]corev1.Pod{}
	for _, p := range list.Items {
		out[p.Name] = p
	}
	return out
}

// describe lists pods as name:image:state (R ready, P not ready, T terminating).
func describe(pods map[string]corev1.Pod) string {
	var out []string
	for name, p := range pods {
		state := "P"
		switch {
		case p.DeletionTimestamp != nil:
			state = "T"
		case kubelettest.Ready(&p):
			state = "R"
		}
		out = append(out, name+":"+p.Spec.Containers[0].Image+":"+state)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// want waits until the set's pods are described by want.
func (c *cluster) want(name, want string) map[string]corev1.Pod {
	c.t.Helper()
	var pods map[string]corev1.Pod
	poll.Until(c.t, name+" pods "+want, func() error {
		pods = c.pods(name)
		if got := describe(pods); got != want {
			return fmt.Errorf("pods %s", got)
		}
		return nil
	})
	return pods
}

func (c *cluster) status(name string, ok func(appsv1.StatefulSetStatus) bool) appsv1.StatefulSetStatus {
	c.t.Helper()
	var s appsv1.StatefulSetStatus
	poll.Until(c.t, "status of "+name, func() error {
		set, err := c.c.AppsV1().StatefulSets(ns).Get(c.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s = set.Status
		if s.ObservedGeneration != set.Generation || !ok(s) {
			return fmt.Errorf("generation %d, status %+v", set.Generation, s)
		}
		return nil
	})
	return s
}

func rolledOut(n int32) func(appsv1.StatefulSetStatus) bool {
	return func(s appsv1.StatefulSetStatus) bool {
		return s.Replicas == n && s.ReadyReplicas == n && s.AvailableReplicas == n && s.UpdatedReplicas == n &&
			s.CurrentReplicas == n && s.CurrentRevision == s.UpdateRevision
	}
}

// TestOrderedReady creates pods one at a time in ordinal order, each after the one
// before is ready, and removes them from the highest ordinal down.
func TestOrderedReady(t *testing.T) {
	c := start(t)
	c.kubelet.Hold("web:1", true)
	set := c.create(newSet("web", "web:1", 3))
	c.want("web", "web-0:web:1:P")
	// While web-0 is not ready no other pod is made.
	c.status("web", func(s appsv1.StatefulSetStatus) bool { return s.Replicas == 1 && s.ReadyReplicas == 0 })
	if got := describe(c.pods("web")); got != "web-0:web:1:P" {
		t.Fatalf("pods %s while web-0 is not ready", got)
	}
	c.kubelet.Hold("web:1", false)
	pods := c.want("web", "web-0:web:1:R web-1:web:1:R web-2:web:1:R")
	s := c.status("web", rolledOut(3))
	for i := range 3 {
		p := pods[fmt.Sprintf("web-%d", i)]
		if p.Spec.Hostname != p.Name || p.Spec.Subdomain != "web" {
			t.Errorf("%s: hostname %q subdomain %q", p.Name, p.Spec.Hostname, p.Spec.Subdomain)
		}
		if p.Labels[appsv1.StatefulSetPodNameLabel] != p.Name || p.Labels[appsv1.PodIndexLabel] != fmt.Sprint(i) || p.Labels[appsv1.ControllerRevisionHashLabelKey] != s.UpdateRevision {
			t.Errorf("%s: labels %v", p.Name, p.Labels)
		}
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != set.UID {
			t.Errorf("%s: owner %+v", p.Name, p.OwnerReferences)
		}
	}
	if !strings.HasPrefix(s.UpdateRevision, "web-") || s.CollisionCount == nil {
		t.Errorf("status %+v", s)
	}

	// Scale down: web-2 goes first and web-1 stays until it is gone.
	c.kubelet.Terminate(false)
	c.update("web", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](1) })
	c.want("web", "web-0:web:1:R web-1:web:1:R web-2:web:1:T")
	c.kubelet.Terminate(true)
	c.want("web", "web-0:web:1:R")
	c.status("web", rolledOut(1))
}

// TestParallel creates every pod at once.
func TestParallel(t *testing.T) {
	c := start(t)
	c.kubelet.Hold("web:1", true)
	set := newSet("web", "web:1", 3)
	set.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	c.create(set)
	c.want("web", "web-0:web:1:P web-1:web:1:P web-2:web:1:P")
	c.kubelet.Hold("web:1", false)
	c.want("web", "web-0:web:1:R web-1:web:1:R web-2:web:1:R")
	c.kubelet.Terminate(false)
	c.update("web", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](1) })
	c.want("web", "web-0:web:1:R web-1:web:1:T web-2:web:1:T")
}

// TestRollingUpdate replaces pods from the highest ordinal down, one at a time, then
// makes the update revision current; going back to the first template reuses its
// revision.
func TestRollingUpdate(t *testing.T) {
	c := start(t)
	c.create(newSet("web", "web:1", 3))
	c.want("web", "web-0:web:1:R web-1:web:1:R web-2:web:1:R")
	first := c.status("web", rolledOut(3)).CurrentRevision
	c.kubelet.Hold("web:2", true)
	c.update("web", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "web:2" })
	c.want("web", "web-0:web:1:R web-1:web:1:R web-2:web:2:P")
	s := c.status("web", func(s appsv1.StatefulSetStatus) bool { return s.UpdatedReplicas == 1 })
	if s.CurrentRevision != first || s.UpdateRevision == first || s.CurrentReplicas != 2 {
		t.Errorf("mid-rollout status %+v", s)
	}
	c.kubelet.Hold("web:2", false)
	c.want("web", "web-0:web:2:R web-1:web:2:R web-2:web:2:R")
	second := c.status("web", rolledOut(3)).CurrentRevision
	if second == first {
		t.Fatalf("revision did not change")
	}

	c.update("web", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "web:1" })
	c.want("web", "web-0:web:1:R web-1:web:1:R web-2:web:1:R")
	if got := c.status("web", rolledOut(3)).CurrentRevision; got != first {
		t.Errorf("after going back: revision %s, want %s", got, first)
	}
	rev, err := c.c.AppsV1().ControllerRevisions(ns).Get(c.ctx, first, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rev.Revision != 3 {
		t.Errorf("revision number %d, want 3", rev.Revision)
	}
}

// TestPartition updates only the ordinals at or above the partition.
func TestPartition(t *testing.T) {
	c := start(t)
	set := newSet("web", "web:1", 3)
	set.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](2)}}
	c.create(set)
	c.want("web", "web-0:web:1:R web-1:web:1:R web-2:web:1:R")
	c.update("web", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "web:2" })
	c.want("web", "web-0:web:1:R web-1:web:1:R web-2:web:2:R")
	s := c.status("web", func(s appsv1.StatefulSetStatus) bool { return s.UpdatedReplicas == 1 && s.ReadyReplicas == 3 })
	if s.CurrentReplicas != 2 || s.CurrentRevision == s.UpdateRevision {
		t.Errorf("status %+v", s)
	}
	// A deleted pod below the partition comes back at the current revision.
	if err := c.c.CoreV1().Pods(ns).Delete(c.ctx, "web-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.want("web", "web-0:web:1:R web-1:web:1:R web-2:web:2:R")
	c.update("web", func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](0) })
	c.want("web", "web-0:web:2:R web-1:web:2:R web-2:web:2:R")
	c.status("web", rolledOut(3))
}

// TestMaxUnavailable replaces two pods at a time.
func TestMaxUnavailable(t *testing.T) {
	c := start(t)
	set := newSet("web", "web:1", 4)
	set.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	set.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(2))}}
	c.create(set)
	c.want("web", "web-0:web:1:R web-1:web:1:R web-2:web:1:R web-3:web:1:R")
	c.kubelet.Hold("web:2", true)
	c.update("web", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "web:2" })
	c.want("web", "web-0:web:1:R web-1:web:1:R web-2:web:2:P web-3:web:2:P")
	c.kubelet.Hold("web:2", false)
	c.want("web", "web-0:web:2:R web-1:web:2:R web-2:web:2:R web-3:web:2:R")
}

// TestOnDelete updates a pod only when it is deleted.
func TestOnDelete(t *testing.T) {
	c := start(t)
	set := newSet("web", "web:1", 2)
	set.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	c.create(set)
	c.want("web", "web-0:web:1:R web-1:web:1:R")
	c.update("web", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "web:2" })
	c.status("web", func(s appsv1.StatefulSetStatus) bool { return s.UpdatedReplicas == 0 && s.CurrentReplicas == 2 })
	if err := c.c.CoreV1().Pods(ns).Delete(c.ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.want("web", "web-0:web:1:R web-1:web:2:R")
	c.status("web", func(s appsv1.StatefulSetStatus) bool { return s.UpdatedReplicas == 1 && s.CurrentReplicas == 1 })
}

// TestFailedPodRecreated replaces a failed pod under the same name.
func TestFailedPodRecreated(t *testing.T) {
	c := start(t)
	c.create(newSet("web", "web:1", 1))
	p := c.want("web", "web-0:web:1:R")["web-0"]
	p.Status.Phase = corev1.PodFailed
	if _, err := c.c.CoreV1().Pods(ns).UpdateStatus(c.ctx, &p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "web-0 recreated", func() error {
		q, err := c.c.CoreV1().Pods(ns).Get(c.ctx, "web-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if q.UID == p.UID || !kubelettest.Ready(q) {
			return fmt.Errorf("web-0 not replaced yet")
		}
		return nil
	})
}

// TestScale scales through the scale subresource, as kubectl scale does.
func TestScale(t *testing.T) {
	c := start(t)
	c.create(newSet("web", "web:1", 1))
	c.want("web", "web-0:web:1:R")
	sc, err := c.c.AppsV1().StatefulSets(ns).GetScale(c.ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Spec.Replicas != 1 || sc.Status.Selector != "app=web" {
		t.Errorf("scale %+v", sc)
	}
	sc.Spec.Replicas = 2
	if _, err := c.c.AppsV1().StatefulSets(ns).UpdateScale(c.ctx, "web", sc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.want("web", "web-0:web:1:R web-1:web:1:R")
}

// TestClaimTemplates makes each ordinal's claim from the template (named
// TEMPLATE-SET-ORDINAL, labelled with the set's selector) before its pod, and gives the
// pod a volume naming its own claim.
func TestClaimTemplates(t *testing.T) {
	c := start(t)
	set := newSet("db", "db:1", 1)
	set.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}}
	c.create(set)
	// The claim of each ordinal is made before its pod, and the pod mounts it.
	var claim *corev1.PersistentVolumeClaim
	poll.Until(t, "the claim data-db-0", func() error {
		var err error
		claim, err = c.c.CoreV1().PersistentVolumeClaims(ns).Get(c.ctx, "data-db-0", metav1.GetOptions{})
		return err
	})
	for k, v := range set.Spec.Selector.MatchLabels {
		if claim.Labels[k] != v {
			t.Errorf("claim labels %v lack the set's selector %s=%s", claim.Labels, k, v)
		}
	}
	if q := claim.Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "1Gi" {
		t.Errorf("claim requests %s, want the template's 1Gi", q.String())
	}
	var pod *corev1.Pod
	poll.Until(t, "the pod db-0", func() error {
		var err error
		pod, err = c.c.CoreV1().Pods(ns).Get(c.ctx, "db-0", metav1.GetOptions{})
		return err
	})
	mounted := false
	for _, v := range pod.Spec.Volumes {
		if v.Name == "data" && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "data-db-0" {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("pod db-0 volumes %+v: no volume data from claim data-db-0", pod.Spec.Volumes)
	}
}

// TestMinReadySeconds makes web-1 only once web-0 has been ready for minReadySeconds,
// and counts a pod available only then.
func TestMinReadySeconds(t *testing.T) {
	c := start(t)
	set := newSet("web", "web:1", 2)
	set.Spec.MinReadySeconds = 2
	c.create(set)
	pods := c.want("web", "web-0:web:1:R web-1:web:1:R")
	c.status("web", func(s appsv1.StatefulSetStatus) bool { return s.AvailableReplicas == 2 })
	var readyAt metav1.Time
	for _, cond := range pods["web-0"].Status.Conditions {
		if cond.Type == corev1.PodReady {
			readyAt = cond.LastTransitionTime
		}
	}
	// Times are in whole seconds: web-1 was made at least minReadySeconds-1 s later.
	if created := pods["web-1"].CreationTimestamp; created.Time.Before(readyAt.Add(1e9)) {
		t.Errorf("web-1 created at %v, web-0 ready at %v: minReadySeconds not waited for", created, readyAt)
	}
}
