package kubelet

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubette/kubette/internal/kubelet/cri"
)

// TestRealRuntime drives a real CRI runtime (kubette runtime, containerd) when
// KUBETTE_TEST_CRI_ENDPOINT (unix:///...) and KUBETTE_TEST_IMAGE (an image present in it,
// with sh, echo and sleep) are set: host-network pods run, log, fail with a termination
// message and are deleted.
func TestRealRuntime(t *testing.T) {
	endpoint, image := os.Getenv("KUBETTE_TEST_CRI_ENDPOINT"), os.Getenv("KUBETTE_TEST_IMAGE")
	if endpoint == "" || image == "" {
		t.Skip("KUBETTE_TEST_CRI_ENDPOINT and KUBETTE_TEST_IMAGE are not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := cri.Dial(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c := newCluster(t)
	c.root = t.TempDir()
	k, err := New(Config{
		NodeName: testNode, Client: c.client, Runtime: client, Images: client,
		RootDir: c.root + "/kubelet", LogDir: c.root + "/logs", RelistPeriod: 200 * time.Millisecond,
		Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(runCtx) }()
	defer func() { stop(); <-done }()

	grace := int64(1) // sh as PID 1 ignores SIGTERM: killed after a second
	pod := c.createPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "real"}, Spec: v1.PodSpec{
		HostNetwork: true, RestartPolicy: v1.RestartPolicyNever, TerminationGracePeriodSeconds: &grace,
		Containers: []v1.Container{
			{Name: "sleeper", Image: image, ImagePullPolicy: v1.PullNever, Command: []string{"sh", "-c", "echo hello $(WHO); exec sleep 1000"},
				Env: []v1.EnvVar{{Name: "WHO", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
			{Name: "failer", Image: image, ImagePullPolicy: v1.PullNever, Command: []string{"sh", "-c", "echo bye > /dev/termination-log; exit 3"}},
		},
	}})
	p := c.waitPod(pod, "with sleeper running and failer terminated", func(p *v1.Pod) bool {
		if len(p.Status.ContainerStatuses) != 2 {
			return false
		}
		return p.Status.ContainerStatuses[0].State.Running != nil && p.Status.ContainerStatuses[1].State.Terminated != nil
	})
	term := p.Status.ContainerStatuses[1].State.Terminated
	if term.ExitCode != 3 || term.Message != "bye\n" || term.Reason != "Error" {
		t.Errorf("failer terminated %+v", term)
	}
	logPath := filepath.Join(c.root, "logs", "default_real_"+string(pod.UID), "sleeper", "0.log")
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), "hello real"), nil
	}); err != nil {
		b, _ := os.ReadFile(logPath)
		t.Errorf("log %s: %q", logPath, b)
	}
	if err := c.client.CoreV1().Pods("default").Delete(ctx, "real", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.client.CoreV1().Pods("default").Get(ctx, "real", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatal("pod never deleted")
	}
	// The kubelet deletes the object only after removing the containers and the sandbox.
	sel := map[string]string{labelPodUID: string(pod.UID)}
	left, err := client.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil || len(left) != 0 {
		t.Errorf("containers left: %v %v", left, err)
	}
	sbs, err := client.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil || len(sbs) != 0 {
		t.Errorf("sandboxes left: %v %v", sbs, err)
	}
	if _, err := os.Stat(filepath.Dir(filepath.Dir(logPath))); !os.IsNotExist(err) {
		t.Errorf("pod log directory left: %v", err)
	}
}
