package eviction

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func pod(name string, phase corev1.PodPhase, ready bool) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app": "a"}},
		Status: corev1.PodStatus{Phase: phase, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
}

func pdb(name string, allowed int32) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Generation: 1},
		Spec:   policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}},
		Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: allowed, CurrentHealthy: 2, DesiredHealthy: 1}}
}

func newEvictions(t *testing.T, objs ...runtime.Object) (*Evictions, *fake.Clientset) {
	t.Helper()
	c := fake.NewClientset()
	for _, o := range objs {
		if err := c.Tracker().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return &Evictions{Client: c, Now: func() time.Time { return now }, Backoff: wait.Backoff{Steps: 2, Duration: time.Millisecond}}, c
}

func body(name string, opts *metav1.DeleteOptions) *policyv1.Eviction {
	return &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name}, DeleteOptions: opts}
}

func TestTerminalPodGoesWithoutBudget(t *testing.T) {
	e, c := newEvictions(t, pod("done", corev1.PodSucceeded, false), pdb("b", 0))
	out, err := e.Create(context.Background(), "ns", "done", body("done", nil))
	if err != nil {
		t.Fatal(err)
	}
	if st := out.(*metav1.Status); st.Status != metav1.StatusSuccess {
		t.Fatalf("status %+v", st)
	}
	if _, err := c.CoreV1().Pods("ns").Get(context.Background(), "done", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pod still there: %v", err)
	}
}

func TestBudgetTakenAndPodMarked(t *testing.T) {
	e, c := newEvictions(t, pod("p", corev1.PodRunning, true), pdb("b", 1))
	var marked *corev1.Pod
	c.PrependReactor("delete", "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
		p, err := c.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), "ns", "p")
		if err == nil {
			marked = p.(*corev1.Pod)
		}
		return false, nil, nil
	})
	if _, err := e.Create(context.Background(), "ns", "p", body("p", nil)); err != nil {
		t.Fatal(err)
	}
	got, err := c.PolicyV1().PodDisruptionBudgets("ns").Get(context.Background(), "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.DisruptionsAllowed != 0 || !got.Status.DisruptedPods["p"].Time.Equal(e.Now()) {
		t.Fatalf("budget status %+v", got.Status)
	}
	if marked == nil {
		t.Fatal("pod not seen before its deletion")
	}
	var cond *corev1.PodCondition
	for i := range marked.Status.Conditions {
		if marked.Status.Conditions[i].Type == corev1.DisruptionTarget {
			cond = &marked.Status.Conditions[i]
		}
	}
	if cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != ReasonEvictionByEvictionAPI || cond.Message != "Eviction API: evicting" {
		t.Fatalf("DisruptionTarget condition %+v", cond)
	}
	// The pod is gone: a second eviction finds nothing.
	_, err = e.Create(context.Background(), "ns", "p", body("p", nil))
	if !apierrors.IsNotFound(err) {
		t.Fatalf("evicting a deleted pod: %v", err)
	}
}

func TestTwoBudgetsAreRefused(t *testing.T) {
	e, _ := newEvictions(t, pod("p", corev1.PodRunning, true), pdb("a", 1), pdb("b", 1))
	out, err := e.Create(context.Background(), "ns", "p", body("p", nil))
	if err != nil {
		t.Fatal(err)
	}
	if st := out.(*metav1.Status); st.Status != metav1.StatusFailure || st.Code != 500 {
		t.Fatalf("status %+v", st)
	}
}

func TestStaleBudgetIsStillProcessing(t *testing.T) {
	b := pdb("b", 1)
	b.Generation = 2
	e, _ := newEvictions(t, pod("p", corev1.PodRunning, true), b)
	_, err := e.Create(context.Background(), "ns", "p", body("p", nil))
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("eviction under a budget behind its spec: %v", err)
	}
}

func TestDryRunMustAgree(t *testing.T) {
	if _, err := propagateDryRun(&metav1.DeleteOptions{DryRun: []string{"All"}}, []string{"Other"}); err == nil {
		t.Fatal("different dry-run options accepted")
	}
	o, err := propagateDryRun(nil, []string{"All"})
	if err != nil || len(o.DryRun) != 1 {
		t.Fatalf("%v %+v", err, o)
	}
}

func TestSetDisruptionTargetKeepsTransitionTime(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := corev1.PodStatus{}
	if !setDisruptionTarget(&st, t0) {
		t.Fatal("no change on a pod without the condition")
	}
	if setDisruptionTarget(&st, t0.Add(time.Hour)) {
		t.Fatal("a second mark changed the condition")
	}
	if !st.Conditions[0].LastTransitionTime.Time.Equal(t0) {
		t.Fatalf("transition time moved: %v", st.Conditions[0].LastTransitionTime)
	}
}
