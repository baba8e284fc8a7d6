package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/trace"
)

// TestTraceCapacityFlag checks that up and apiserver take --trace-capacity and that 0
// turns tracing off (a negative capacity for the API server).
func TestTraceCapacityFlag(t *testing.T) {
	for _, cmd := range []*cobra.Command{newUp(), newAPIServer()} {
		if f := cmd.Flags().Lookup("trace-capacity"); f == nil || f.DefValue != "10000" {
			t.Errorf("%s: --trace-capacity %+v, want one defaulting to 10000", cmd.Name(), f)
		}
	}
	for _, c := range []struct {
		args []string
		want int
	}{
		{nil, trace.DefaultCapacity},
		{[]string{"--trace-capacity=500"}, 500},
		{[]string{"--trace-capacity=0"}, -1},
		{[]string{"--trace-capacity=-3"}, -1},
	} {
		f := &controlPlaneFlags{}
		cmd := &cobra.Command{Use: "x"}
		f.register(cmd)
		if err := cmd.ParseFlags(c.args); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.config()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.TraceCapacity != c.want {
			t.Errorf("%v: TraceCapacity %d, want %d", c.args, cfg.TraceCapacity, c.want)
		}
	}
}

// TestTraceCommand runs `kubette trace` against a real API server holding a
// Deployment created as kubectl would.
func TestTraceCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	env := testenv.Start(t, testenv.Options{})
	labels := map[string]string{"app": "web"}
	kubectl := rest.CopyConfig(env.Config)
	kubectl.UserAgent = "kubectl/v1.32.0 (linux/amd64) kubernetes/test"
	if _, err := kubernetes.NewForConfigOrDie(kubectl).AppsV1().Deployments("default").Create(context.Background(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "busybox:local"}}},
			},
		},
	}, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
		t.Fatal(err)
	}
	trace := func(args ...string) (string, error) {
		cmd := newTrace()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append([]string{"--kubeconfig", env.Kubeconfig}, args...))
		err := cmd.ExecuteContext(context.Background())
		return out.String(), err
	}
	for format, want := range map[string]string{
		"mermaid": "sequenceDiagram\n",
		"text":    "kubectl → API server: POST /apis/apps/v1/namespaces/default/deployments → 201",
		"svg":     "<svg ",
	} {
		out, err := trace("deployment/web", "--format", format)
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("--format %s: %v\n%s", format, err, out)
		}
	}
	if _, err := trace("deployment/web", "--format", "png"); err == nil || !strings.Contains(err.Error(), `--format: format "png"`) {
		t.Errorf("--format png: %v", err)
	}
}
