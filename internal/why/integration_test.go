package why

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/testenv"
)

// TestIntegrationPendingOnRealAPIServer: three 2-cpu Nodes created directly (no
// kubelet, no scheduler) and a pod asking for 8 cpu: why names all three nodes
// with Insufficient cpu.
func TestIntegrationPendingOnRealAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	for _, name := range []string{"node-1", "node-2", "node-3"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
		created, err := env.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create node %s: %v", name, err)
		}
		res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("110")}
		created.Status.Capacity, created.Status.Allocatable = res, res
		created.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
		if _, err := env.Client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update node %s status: %v", name, err)
		}
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "big"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}}}}},
	}
	if _, err := env.Client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	r, err := Explain(ctx, env.Client, KindPod, "default", "big")
	if err != nil {
		t.Fatalf("Explain: %v", err)
	}
	text := Text(r)
	t.Log("\n" + text)
	for _, name := range []string{"node-1", "node-2", "node-3"} {
		if want := name + ": NodeResourcesFit: Insufficient cpu (requests 8, allocatable 2, in use 0)"; !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if !strings.HasPrefix(r.Summary, "pending: 0/3 nodes fit: 3 Insufficient cpu") {
		t.Errorf("summary %q", r.Summary)
	}
}
