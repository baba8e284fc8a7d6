package kubelet

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestRealRuntimeLifecycleHooks drives lifecycle hooks through a real CRI runtime (see
// TestRealRuntime): a postStart hook writes a file the main process waits for and prints,
// and on deletion a preStop hook writes to the main process's output before it gets SIGTERM.
func TestRealRuntimeLifecycleHooks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, client, image := realCluster(ctx, t)
	startReal(t, c, client)

	grace := int64(10)
	pod := c.createPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hooks"}, Spec: v1.PodSpec{
		HostNetwork: true, RestartPolicy: v1.RestartPolicyNever, TerminationGracePeriodSeconds: &grace,
		Containers: []v1.Container{{
			Name: "main", Image: image, ImagePullPolicy: v1.PullNever,
			Command: []string{"sh", "-c", `trap "echo main got TERM; exit 0" TERM; ` +
				`while [ ! -f /tmp/poststart ]; do sleep 1; done; echo "main read: $(cat /tmp/poststart)"; ` +
				`while true; do sleep 1; done`},
			Lifecycle: &v1.Lifecycle{
				PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo written by postStart > /tmp/poststart"}}},
				PreStop:   &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo preStop ran > /proc/1/fd/1"}}},
			},
		}},
	}})
	c.waitPod(pod, "Running", running)
	logPath := filepath.Join(c.root, "logs", "default_hooks_"+string(pod.UID), "main", "0.log")
	readLog := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return strings.Contains(readLog(), "main read: written by postStart"), nil
	}); err != nil {
		t.Fatalf("the main process did not read the postStart file; log %s:\n%s", logPath, readLog())
	}
	// The log file goes with the pod: an open descriptor still reads it after that.
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := c.client.CoreV1().Pods("default").Delete(ctx, "hooks", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.client.CoreV1().Pods("default").Get(ctx, "hooks", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatal("pod never deleted")
	}
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	last := string(b)
	h, s := strings.Index(last, "preStop ran"), strings.Index(last, "main got TERM")
	if h < 0 || s < 0 || h > s {
		t.Errorf("want the preStop hook's line before the main process's SIGTERM line:\n%s", last)
	}
}
