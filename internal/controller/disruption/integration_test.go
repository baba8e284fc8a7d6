package disruption_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controllermanager"
	"github.com/kubette/kubette/internal/eviction"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

const ns = "default"

// start runs the disruption controller as its ServiceAccount (under the default RBAC
// policy, as `kubette up` runs it) against a fresh control plane.
func start(t *testing.T) kubernetes.Interface {
	t.Helper()
	env := testenv.Start(t, testenv.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- controllermanager.Run(ctx, controller.ManagerOptions{
			Config: env.Config, ControllerConfig: env.ServiceAccountConfig, Enabled: []string{"disruption"},
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller manager: %v", err)
		}
	})
	return env.Client
}

// replicaSet creates a ReplicaSet of n replicas (no controller runs it) and n running,
// ready pods it controls.
func replicaSet(t *testing.T, c kubernetes.Interface, name string, n int32, ready bool) *appsv1.ReplicaSet {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": name}
	rs, err := c.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(n), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i), Labels: labels,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
		running(t, c, pod, ready)
	}
	return rs
}

// running creates the pod and marks it Running (and Ready when ready is set).
func running(t *testing.T, c kubernetes.Interface, pod *corev1.Pod, ready bool) {
	t.Helper()
	ctx := context.Background()
	p, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func budget(t *testing.T, c kubernetes.Interface, name string, spec policyv1.PodDisruptionBudgetSpec) {
	t.Helper()
	if _, err := c.PolicyV1().PodDisruptionBudgets(ns).Create(context.Background(), &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitStatus waits for the budget's status to show the counts (expected, healthy,
// desired, allowed) for its current generation.
func waitStatus(t *testing.T, c kubernetes.Interface, name string, expected, healthy, desired, allowed int32) *policyv1.PodDisruptionBudget {
	t.Helper()
	var pdb *policyv1.PodDisruptionBudget
	poll.Until(t, "budget "+name+" status", func() error {
		var err error
		pdb, err = c.PolicyV1().PodDisruptionBudgets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s := pdb.Status
		if s.ObservedGeneration != pdb.Generation || s.ExpectedPods != expected || s.CurrentHealthy != healthy ||
			s.DesiredHealthy != desired || s.DisruptionsAllowed != allowed {
			return fmt.Errorf("status %+v (generation %d)", s, pdb.Generation)
		}
		return nil
	})
	return pdb
}

func evict(c kubernetes.Interface, pod string, opts *metav1.DeleteOptions) error {
	return c.PolicyV1().Evictions(ns).Evict(context.Background(), &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns}, DeleteOptions: opts,
	})
}

func TestBudgetStatusAndEviction(t *testing.T) {
	c := start(t)
	ctx := context.Background()
	replicaSet(t, c, "web", 3, true)
	budget(t, c, "web", policyv1.PodDisruptionBudgetSpec{
		MinAvailable: ptr.To(intstr.FromInt32(2)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
	})
	pdb := waitStatus(t, c, "web", 3, 3, 2, 1)
	cond := apimeta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != policyv1.SufficientPodsReason {
		t.Fatalf("DisruptionAllowed condition %+v", cond)
	}

	// A dry run takes nothing and deletes nothing.
	if err := evict(c, "web-0", &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("dry-run eviction: %v", err)
	}
	if p, err := c.CoreV1().Pods(ns).Get(ctx, "web-0", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil || len(p.Status.Conditions) != 1 {
		t.Fatalf("pod after a dry-run eviction: %v %+v", err, p)
	}
	if pdb, _ := c.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{}); pdb.Status.DisruptionsAllowed != 1 || len(pdb.Status.DisruptedPods) != 0 {
		t.Fatalf("budget after a dry-run eviction: %+v", pdb.Status)
	}

	// The one disruption allowed goes to the first eviction.
	if err := evict(c, "web-0", nil); err != nil {
		t.Fatalf("eviction: %v", err)
	}
	if _, err := c.CoreV1().Pods(ns).Get(ctx, "web-0", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("evicted pod: %v", err)
	}
	// The second is refused with upstream's 429 until the budget has room again.
	err := evict(c, "web-1", nil)
	var st apierrors.APIStatus
	if !apierrors.IsTooManyRequests(err) || !errors.As(err, &st) {
		t.Fatalf("second eviction: %v", err)
	}
	s := st.Status()
	if s.Message != eviction.TooManyRequestsMessage || s.Details == nil || len(s.Details.Causes) != 1 ||
		s.Details.Causes[0].Type != policyv1.DisruptionBudgetCause {
		t.Fatalf("429 status %+v", s)
	}
	pdb = waitStatus(t, c, "web", 2, 2, 2, 0)
	cond = apimeta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != policyv1.InsufficientPodsReason {
		t.Fatalf("DisruptionAllowed condition %+v", cond)
	}
	if len(pdb.Status.DisruptedPods) != 0 {
		t.Fatalf("disruptedPods keeps a deleted pod: %v", pdb.Status.DisruptedPods)
	}

	// A policy/v1beta1 body is accepted too (and refused the same way).
	err = c.PolicyV1beta1().Evictions(ns).Evict(ctx, &policyv1beta1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: ns}})
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("v1beta1 eviction: %v", err)
	}
	// A name that is not the pod's is a bad request.
	err = c.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name("web-1").SubResource("eviction").
		Body([]byte(`{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"other"}}`)).Do(ctx).Error()
	if !apierrors.IsBadRequest(err) {
		t.Fatalf("eviction of another name: %v", err)
	}
}

// A pod that is not ready goes without taking from a budget that is met
// (IfHealthyBudget), and with AlwaysAllow even when it is not.
func TestUnhealthyPodEvictionPolicy(t *testing.T) {
	c := start(t)
	ctx := context.Background()
	replicaSet(t, c, "met", 2, true)
	running(t, c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "met-unready", Labels: map[string]string{"app": "met"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, false)
	budget(t, c, "met", policyv1.PodDisruptionBudgetSpec{
		MinAvailable: ptr.To(intstr.FromInt32(2)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "met"}},
	})
	waitStatus(t, c, "met", 3, 2, 2, 0)
	if err := evict(c, "met-0", nil); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("eviction of a ready pod under a full budget: %v", err)
	}
	if err := evict(c, "met-unready", nil); err != nil {
		t.Fatalf("eviction of an unready pod under a met budget: %v", err)
	}

	replicaSet(t, c, "short", 2, false)
	budget(t, c, "short", policyv1.PodDisruptionBudgetSpec{
		MaxUnavailable: ptr.To(intstr.FromInt32(0)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "short"}},
	})
	waitStatus(t, c, "short", 2, 0, 2, 0)
	if err := evict(c, "short-0", nil); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("IfHealthyBudget eviction of an unready pod under an unmet budget: %v", err)
	}
	pdb, err := c.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "short", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pdb.Spec.UnhealthyPodEvictionPolicy = ptr.To(policyv1.AlwaysAllow)
	if _, err := c.PolicyV1().PodDisruptionBudgets(ns).Update(ctx, pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, "short", 2, 0, 2, 0)
	if err := evict(c, "short-0", nil); err != nil {
		t.Fatalf("AlwaysAllow eviction of an unready pod: %v", err)
	}
}

// The budget's percentage counts the Deployment's replicas, not the pods that exist;
// an unmanaged pod under maxUnavailable fails nothing but is reported.
func TestExpectedPodsFromTheDeployment(t *testing.T) {
	c := start(t)
	ctx := context.Background()
	labels := map[string]string{"app": "dep"}
	d, err := c.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "dep"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](4), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := c.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "dep-1", OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: d.Spec.Template},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		running(t, c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("dep-1-%d", i), Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
			Spec: d.Spec.Template.Spec}, true)
	}
	budget(t, c, "dep", policyv1.PodDisruptionBudgetSpec{
		MinAvailable: ptr.To(intstr.FromString("50%")), Selector: &metav1.LabelSelector{MatchLabels: labels},
	})
	// 4 expected (the Deployment's replicas), 2 healthy, 50% of 4 = 2 desired.
	waitStatus(t, c, "dep", 4, 2, 2, 0)

	// A pod whose controller is of no known kind (and has no scale) fails the sync safe.
	running(t, c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "odd", Labels: labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "u", Controller: ptr.To(true)}}},
		Spec: d.Spec.Template.Spec}, true)
	poll.Until(t, "the budget's sync to fail safe", func() error {
		pdb, err := c.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "dep", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cond := apimeta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
		if cond == nil || cond.Reason != policyv1.SyncFailedReason || pdb.Status.DisruptionsAllowed != 0 {
			return fmt.Errorf("condition %+v", cond)
		}
		return nil
	})
}

func TestBudgetValidation(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c := env.Client
	ctx := context.Background()
	for name, spec := range map[string]policyv1.PodDisruptionBudgetSpec{
		"both":    {MinAvailable: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(1))},
		"percent": {MaxUnavailable: ptr.To(intstr.FromString("101%"))},
		"policy":  {MinAvailable: ptr.To(intstr.FromInt32(1)), UnhealthyPodEvictionPolicy: ptr.To(policyv1.UnhealthyPodEvictionPolicyType("Sometimes"))},
	} {
		_, err := c.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The status is the controller's: a create's is dropped.
	pdb, err := c.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "ok"}, Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromString("50%"))},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 5},
	}, metav1.CreateOptions{})
	if err != nil || pdb.Status.DisruptionsAllowed != 0 || pdb.Generation != 1 {
		t.Fatalf("create: %v %+v", err, pdb)
	}
	pdb.Status.DisruptionsAllowed = -1
	if _, err := c.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("negative disruptionsAllowed: %v", err)
	}
}
