package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/why"
)

// TestWhyCommand runs `kubette why pod/big` (text and --output json) against a
// real API server holding two 2-cpu Nodes and a pod asking for 8 cpu.
func TestWhyCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	for _, name := range []string{"node-a", "node-b"} {
		n, err := env.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create node: %v", err)
		}
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("110")}
		if _, err := env.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update node status: %v", err)
		}
	}
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "big"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}}}}},
	}
	if _, err := env.Client.CoreV1().Pods("team").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := newWhy()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs(append(args, "--kubeconfig", env.Kubeconfig))
		if err := cmd.ExecuteContext(ctx); err != nil {
			t.Fatalf("why %v: %v", args, err)
		}
		return out.String()
	}
	text := run("po/big", "-n", "team")
	for _, want := range []string{
		"pod team/big: pending: 0/2 nodes fit: 2 Insufficient cpu",
		"node-a: NodeResourcesFit: Insufficient cpu (requests 8, allocatable 2, in use 0)",
		"node-b: NodeResourcesFit: Insufficient cpu (requests 8, allocatable 2, in use 0)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text output lacks %q:\n%s", want, text)
		}
	}
	var r why.Report
	if err := json.Unmarshal([]byte(run("pod/big", "-n", "team", "--output", "json")), &r); err != nil {
		t.Fatalf("json output: %v", err)
	}
	if len(r.Pods) != 1 || r.Pods[0].Scheduling == nil || len(r.Pods[0].Scheduling.Nodes) != 2 ||
		r.Pods[0].Scheduling.Nodes[0].Rejections[0].Reason != "Insufficient cpu" {
		t.Errorf("json report %+v", r)
	}
	cmd := newWhy()
	cmd.SetArgs([]string{"node/x", "--kubeconfig", env.Kubeconfig})
	cmd.SetOut(&bytes.Buffer{})
	if err := cmd.ExecuteContext(ctx); err == nil {
		t.Error("why node/x succeeded")
	}
}
