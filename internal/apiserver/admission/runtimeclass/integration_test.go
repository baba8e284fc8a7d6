package runtimeclass_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// TestRuntimeClassThroughTheAPI serves RuntimeClasses (discovery, create, update with
// the handler fixed, patch, delete, deletecollection) and admits pods against them:
// a missing class is a 403 with upstream's message, a class's overhead and
// scheduling go into the pod, an overhead without a class is refused.
func TestRuntimeClassThroughTheAPI(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client

	resources, err := c.Discovery().ServerResourcesForGroupVersion("node.k8s.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range resources.APIResources {
		if r.Name == "runtimeclasses" {
			found = true
			if r.Namespaced || r.Kind != "RuntimeClass" {
				t.Fatalf("discovery: %+v", r)
			}
		}
	}
	if !found {
		t.Fatalf("no runtimeclasses in discovery: %+v", resources.APIResources)
	}

	rcs := c.NodeV1().RuntimeClasses()
	overhead := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("1Mi")}
	heavy, err := rcs.Create(ctx, &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "heavy", Labels: map[string]string{"test": "rc"}}, Handler: "runc",
		Overhead: &nodev1.Overhead{PodFixed: overhead},
		Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"runtime": "heavy"},
			Tolerations: []corev1.Toleration{{Key: "runtime", Operator: corev1.TolerationOpEqual, Value: "heavy", Effect: corev1.TaintEffectNoSchedule}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rcs.Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Handler: "Not_A_Label"}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("bad handler: %v, want 422", err)
	}
	heavy.Handler = "crun"
	if _, err := rcs.Update(ctx, heavy, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "handler: Invalid value: \"crun\": field is immutable") {
		t.Fatalf("handler change: %v, want 422", err)
	}
	if _, err := rcs.Patch(ctx, "heavy", types.MergePatchType, []byte(`{"metadata":{"annotations":{"patched":"true"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	pods := c.CoreV1().Pods("default")
	pod := func(name string, class *string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{RuntimeClassName: class,
			NodeSelector: map[string]string{"zone": "a"},
			Containers:   []corev1.Container{{Name: "c", Image: "busybox"}}}}
	}
	name := func(s string) *string { return &s }
	_, err = pods.Create(ctx, pod("lost", name("nope")), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || err.Error() != `pods "lost" is forbidden: pod rejected: RuntimeClass "nope" not found` {
		t.Fatalf("missing class: %v", err)
	}
	p, err := pods.Create(ctx, pod("heavy", name("heavy")), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cpu := p.Spec.Overhead[corev1.ResourceCPU]; cpu.String() != "10m" || len(p.Spec.Overhead) != 2 {
		t.Fatalf("overhead %v", p.Spec.Overhead)
	}
	if p.Spec.NodeSelector["runtime"] != "heavy" || p.Spec.NodeSelector["zone"] != "a" {
		t.Fatalf("node selector %v", p.Spec.NodeSelector)
	}
	// The class's toleration beside DefaultTolerationSeconds' two, which come before it.
	if n := len(p.Spec.Tolerations); n != 3 || p.Spec.Tolerations[2].Key != "runtime" {
		t.Fatalf("tolerations %+v", p.Spec.Tolerations)
	}
	conflict := pod("conflict", name("heavy"))
	conflict.Spec.NodeSelector["runtime"] = "light"
	if _, err := pods.Create(ctx, conflict, metav1.CreateOptions{}); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "conflict: runtimeClass.scheduling.nodeSelector[runtime] = heavy; pod.spec.nodeSelector[runtime] = light") {
		t.Fatalf("selector conflict: %v", err)
	}
	bare := pod("bare", nil)
	bare.Spec.Overhead = overhead
	if _, err := pods.Create(ctx, bare, metav1.CreateOptions{}); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead") {
		t.Fatalf("overhead without a class: %v", err)
	}

	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		out, err := exec.Command(kubectl, "--kubeconfig", env.Kubeconfig, "get", "runtimeclass", "heavy").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "NAME    HANDLER   AGE") || !strings.Contains(string(out), "heavy   runc") {
			t.Fatalf("kubectl get runtimeclass: %v\n%s", err, out)
		}
	}

	if _, err := rcs.Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "light", Labels: map[string]string{"test": "rc"}}, Handler: "light"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rcs.Delete(ctx, "heavy", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A deleted class admits no more pods (the plugin's cache may lag the delete).
	poll.Until(t, "a pod of the deleted class to be refused", func() error {
		_, err := pods.Create(ctx, pod("late", name("heavy")), metav1.CreateOptions{})
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), `pod rejected: RuntimeClass "heavy" not found`) {
			return nil
		}
		if err == nil {
			_ = pods.Delete(ctx, "late", metav1.DeleteOptions{})
		}
		return fmt.Errorf("create: %v", err)
	})
	if err := rcs.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "test=rc"}); err != nil {
		t.Fatal(err)
	}
	list, err := rcs.List(ctx, metav1.ListOptions{LabelSelector: "test=rc"})
	if err != nil || len(list.Items) != 0 {
		t.Fatalf("after deletecollection: %v, %v", list, err)
	}
}
