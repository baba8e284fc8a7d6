package eviction_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controllermanager"
	"github.com/kubette/kubette/internal/sim"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// TestKubectlDrainHonoursBudget drains a simulated node with the real kubectl: pods
// are evicted, not deleted, so a PodDisruptionBudget holds the drain back (kubectl
// reports upstream's message and retries) until the budget allows the rest;
// `--dry-run=server` evicts nothing and ends.
func TestKubectlDrainHonoursBudget(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	if testing.Short() {
		t.Skip("runs kubectl")
	}
	env := testenv.Start(t, testenv.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	s, err := sim.New(env.Config, sim.Options{Nodes: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	simDone := make(chan error, 1)
	go func() { simDone <- s.Run(ctx) }()
	cmDone := make(chan error, 1)
	go func() {
		cmDone <- controllermanager.Run(ctx, controller.ManagerOptions{
			Config: env.Config, ControllerConfig: env.ServiceAccountConfig, Enabled: []string{"disruption"},
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-simDone
		<-cmDone
	})
	<-s.Ready()
	node := s.NodeNames()[0]
	c := env.Client
	const ns = "default"
	labels := map[string]string{"app": "web"}
	rs, err := c.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Labels: labels,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)), Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the budget to allow one disruption", func() error {
		pdb, err := c.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pdb.Status.CurrentHealthy != 3 || pdb.Status.DisruptionsAllowed != 1 {
			return fmt.Errorf("status %+v", pdb.Status)
		}
		return nil
	})
	run := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", env.Kubeconfig}, args...)...).CombinedOutput()
		return string(out), err
	}
	pods := func() int {
		list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}

	out, err := run("drain", node, "--dry-run=server")
	if err != nil {
		t.Fatalf("drain --dry-run=server: %v\n%s", err, out)
	}
	if !strings.Contains(out, "evicting pod default/web-") || pods() != 3 {
		t.Fatalf("drain --dry-run=server evicted (%d pods left):\n%s", pods(), out)
	}
	if n, err := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err != nil || n.Spec.Unschedulable {
		t.Fatalf("dry run cordoned the node: %v", err)
	}
	_, _ = run("uncordon", node)

	// The budget lets one pod go; kubectl retries the others on the 429 until its timeout.
	out, err = run("drain", node, "--timeout=15s")
	if err == nil {
		t.Fatalf("drain under a budget of 2 of 3 succeeded:\n%s", out)
	}
	if !strings.Contains(out, "Cannot evict pod as it would violate the pod's disruption budget.") {
		t.Fatalf("drain output lacks the budget's message:\n%s", out)
	}
	poll.Until(t, "one pod evicted", func() error {
		if n := pods(); n != 2 {
			return fmt.Errorf("%d pods", n)
		}
		return nil
	})

	// With room in the budget the drain completes.
	pdb, err := c.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pdb.Spec.MinAvailable = ptr.To(intstr.FromInt32(0))
	if _, err := c.PolicyV1().PodDisruptionBudgets(ns).Update(ctx, pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err = run("drain", node, "--timeout=60s")
	if err != nil {
		t.Fatalf("drain with room in the budget: %v\n%s", err, out)
	}
	if n := pods(); n != 0 {
		t.Fatalf("%d pods left after the drain:\n%s", n, out)
	}
	out, err = run("get", "pdb")
	if err != nil || !strings.Contains(out, "MIN AVAILABLE   MAX UNAVAILABLE   ALLOWED DISRUPTIONS") || !strings.Contains(out, "web    0               N/A") {
		t.Fatalf("kubectl get pdb: %v\n%s", err, out)
	}
}
