package kubelet

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, client, image := realCluster(ctx, t)
	startReal(t, c, client)

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

// realCluster connects to the runtime the environment names (or skips the test).
func realCluster(ctx context.Context, t *testing.T) (*cluster, *cri.Client, string) {
	endpoint, image := os.Getenv("KUBETTE_TEST_CRI_ENDPOINT"), os.Getenv("KUBETTE_TEST_IMAGE")
	if endpoint == "" || image == "" {
		t.Skip("KUBETTE_TEST_CRI_ENDPOINT and KUBETTE_TEST_IMAGE are not set")
	}
	client, err := cri.Dial(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	c := newCluster(t)
	c.root = t.TempDir()
	return c, client, image
}

// startReal runs a kubelet over the real runtime until the returned stop (or the test end).
func startReal(t *testing.T, c *cluster, client *cri.Client) (stop func()) {
	k, err := New(Config{
		NodeName: testNode, Client: c.client, Runtime: client, Images: client,
		RootDir: c.root + "/kubelet", LogDir: c.root + "/logs", RelistPeriod: 200 * time.Millisecond,
		BackoffInitial: time.Second, BackoffMax: 4 * time.Second, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// TestRealRuntimeRestartsAndAdoption: a crashing container goes to CrashLoopBackOff and is
// restarted; a second kubelet adopts a running container without restarting it; deletion
// cleans up both pods.
func TestRealRuntimeRestartsAndAdoption(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, client, image := realCluster(ctx, t)
	stop := startReal(t, c, client)
	grace := int64(1)
	crash := c.createPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "crash"}, Spec: v1.PodSpec{
		HostNetwork: true, TerminationGracePeriodSeconds: &grace,
		Containers: []v1.Container{{Name: "c", Image: image, ImagePullPolicy: v1.PullNever, Command: []string{"sh", "-c", "exit 1"}}},
	}})
	keep := c.createPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "keep"}, Spec: v1.PodSpec{
		HostNetwork: true, TerminationGracePeriodSeconds: &grace,
		Containers: []v1.Container{{Name: "c", Image: image, ImagePullPolicy: v1.PullNever, Command: []string{"sleep", "1000"}}},
	}})
	c.waitPod(crash, "in CrashLoopBackOff after restarts", func(p *v1.Pod) bool {
		if len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		cs := p.Status.ContainerStatuses[0]
		return cs.RestartCount >= 2 && cs.State.Waiting != nil && cs.State.Waiting.Reason == reasonCrashLoopBackOff &&
			cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.ExitCode == 1
	})
	before := c.waitPod(keep, "Running", running)
	stop()

	startReal(t, c, client)
	time.Sleep(2 * time.Second) // a few relists and syncs of the new kubelet
	after := c.waitPod(keep, "Running", running)
	if after.Status.ContainerStatuses[0].ContainerID != before.Status.ContainerStatuses[0].ContainerID ||
		after.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("adoption restarted the container: before %+v after %+v", before.Status.ContainerStatuses[0], after.Status.ContainerStatuses[0])
	}
	c.waitPod(crash, "restarted by the new kubelet too", func(p *v1.Pod) bool {
		return p.Status.ContainerStatuses[0].RestartCount >= 3
	})
	for _, name := range []string{"crash", "keep"} {
		if err := c.client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*v1.Pod{crash, keep} {
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := c.client.CoreV1().Pods("default").Get(ctx, p.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}); err != nil {
			t.Fatalf("pod %s never deleted", p.Name)
		}
		left, err := client.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{labelPodUID: string(p.UID)}})
		if err != nil || len(left) != 0 {
			t.Errorf("containers of %s left: %d %v", p.Name, len(left), err)
		}
	}
}

// TestRealRuntimePodNetwork runs a pod in its own network namespace when
// KUBETTE_TEST_POD_CIDR is also set (the runtime is handed that pod CIDR): the pod's IP in the
// status is the sandbox's, inside the CIDR.
func TestRealRuntimePodNetwork(t *testing.T) {
	cidr := os.Getenv("KUBETTE_TEST_POD_CIDR")
	if cidr == "" {
		t.Skip("KUBETTE_TEST_POD_CIDR is not set")
	}
	_, ipnet, err := net.ParseCIDR(cidr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, client, image := realCluster(ctx, t)
	if err := client.UpdateRuntimeConfig(ctx, &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: cidr}}); err != nil {
		t.Fatal(err)
	}
	startReal(t, c, client)
	grace := int64(1)
	pod := c.createPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "net"}, Spec: v1.PodSpec{
		TerminationGracePeriodSeconds: &grace,
		Containers: []v1.Container{{Name: "c", Image: image, ImagePullPolicy: v1.PullNever, Command: []string{"sh", "-c", "echo ip=$(POD_IP); exec sleep 1000"},
			Env: []v1.EnvVar{{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}}},
	}})
	p := c.waitPod(pod, "Running", running)
	ip := net.ParseIP(p.Status.PodIP)
	if ip == nil || !ipnet.Contains(ip) || len(p.Status.PodIPs) != 1 || !podCondition(p, v1.PodReadyToStartContainers) {
		t.Errorf("pod IPs %q %v not in %s", p.Status.PodIP, p.Status.PodIPs, cidr)
	}
	logPath := filepath.Join(c.root, "logs", "default_net_"+string(pod.UID), "c", "0.log")
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), "ip="+p.Status.PodIP+"\n"), nil
	}); err != nil {
		b, _ := os.ReadFile(logPath)
		t.Errorf("the container's POD_IP: log %q", b)
	}
	if err := c.client.CoreV1().Pods("default").Delete(ctx, "net", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.client.CoreV1().Pods("default").Get(ctx, "net", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatal("pod never deleted")
	}
}
