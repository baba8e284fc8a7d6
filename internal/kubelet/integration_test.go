package kubelet

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"

	"github.com/kubette/kubette/internal/testenv"
)

const testNode = "node-a"

// cluster is an API server, a registered node and a fake CRI runtime.
type cluster struct {
	t       *testing.T
	env     *testenv.Env
	client  kubernetes.Interface
	runtime *critest.FakeRuntimeService
	images  *critest.FakeImageService
	root    string
}

func newCluster(t *testing.T) *cluster {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}
	node, err := env.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.9.8.7"}}
	node.Status.Capacity = v1.ResourceList{v1.ResourceCPU: mustQ("2"), v1.ResourceMemory: mustQ("4Gi"), v1.ResourcePods: mustQ("110")}
	node.Status.Allocatable = node.Status.Capacity
	if _, err := env.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return &cluster{t: t, env: env, client: env.Client, runtime: critest.NewFakeRuntimeService(), images: critest.NewFakeImageService(), root: t.TempDir()}
}

// start runs a kubelet until the returned stop is called (or the test ends).
func (c *cluster) start() (stop func()) {
	k, err := New(Config{
		NodeName: testNode, Client: c.client, Runtime: c.runtime, Images: c.images,
		RootDir: c.root + "/kubelet", LogDir: c.root + "/logs",
		Logger:       testLogger(c.t),
		RelistPeriod: 100 * time.Millisecond, ResyncPeriod: time.Second,
		BackoffInitial: 500 * time.Millisecond, BackoffMax: 4 * time.Second,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				c.t.Errorf("Run: %v", err)
			}
		})
	}
	c.t.Cleanup(stop)
	return stop
}

func (c *cluster) createPod(pod *v1.Pod) *v1.Pod {
	pod.Spec.NodeName = testNode
	if pod.Namespace == "" {
		pod.Namespace = "default"
	}
	p, err := c.client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return p
}

// waitPod polls the pod until cond holds.
func (c *cluster) waitPod(pod *v1.Pod, what string, cond func(*v1.Pod) bool) *v1.Pod {
	c.t.Helper()
	var last *v1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := c.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		return cond(p), nil
	})
	if err != nil {
		c.t.Fatalf("pod %s never %s; last status: %+v", pod.Name, what, last.Status)
	}
	return last
}

// fakeContainer finds the fake runtime's newest container of a pod by name.
func (c *cluster) fakeContainer(uid, name string) *critest.FakeContainer {
	c.runtime.Lock()
	defer c.runtime.Unlock()
	var best *critest.FakeContainer
	for _, fc := range c.runtime.Containers {
		if fc.Labels[labelPodUID] == uid && fc.Metadata.Name == name && (best == nil || fc.Metadata.Attempt > best.Metadata.Attempt) {
			best = fc
		}
	}
	return best
}

// exit makes the fake container with this ID exit with code.
func (c *cluster) exit(id string, code int32) {
	c.runtime.Lock()
	defer c.runtime.Unlock()
	fc := c.runtime.Containers[id]
	fc.State = runtimeapi.ContainerState_CONTAINER_EXITED
	fc.ExitCode = code
	fc.FinishedAt = time.Now().UnixNano()
	if code != 0 {
		fc.Reason = "Error"
	} else {
		fc.Reason = "Completed"
	}
}

func (c *cluster) calls(name string) int {
	n := 0
	for _, call := range c.runtime.GetCalls() {
		if call == name {
			n++
		}
	}
	return n
}

func (c *cluster) eventReasons(pod *v1.Pod) map[string]string {
	evs, err := c.client.CoreV1().Events(pod.Namespace).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(pod.UID)).String(),
	})
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range evs.Items {
		if e.Source.Component != "kubelet" || e.Source.Host != testNode {
			c.t.Errorf("event %s from %+v", e.Reason, e.Source)
		}
		out[e.Reason] += e.Message + "\n"
	}
	return out
}

func mustQ(s string) resourceQuantity { return parseQ(s) }

func simplePod(name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "main", Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent,
			Command: []string{"sh", "-c", "echo $(GREETING)"},
			Env:     []v1.EnvVar{{Name: "GREETING", Value: "hi"}, {Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
		}}},
	}
}

func running(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready
}

func TestPodRunsWithStatusAndEvents(t *testing.T) {
	c := newCluster(t)
	c.start()
	pod := c.createPod(simplePod("web"))
	p := c.waitPod(pod, "Running and ready", running)

	cs := p.Status.ContainerStatuses[0]
	fc := c.fakeContainer(string(pod.UID), "main")
	if fc == nil {
		t.Fatal("no container in the runtime")
	}
	if cs.ContainerID != "kubette://"+fc.Id || cs.State.Running == nil || cs.RestartCount != 0 || cs.Image != "busybox:1.36" ||
		cs.ImageID != "busybox:1.36" || cs.Started == nil || !*cs.Started {
		t.Errorf("container status = %+v", cs)
	}
	if p.Status.PodIP != critest.FakePodSandboxIPs[0] || p.Status.HostIP != "10.9.8.7" || len(p.Status.HostIPs) != 1 ||
		p.Status.QOSClass != v1.PodQOSBestEffort || p.Status.StartTime == nil {
		t.Errorf("pod status = %+v", p.Status)
	}
	want := map[v1.PodConditionType]v1.ConditionStatus{
		v1.PodReadyToStartContainers: v1.ConditionTrue, v1.PodInitialized: v1.ConditionTrue,
		v1.ContainersReady: v1.ConditionTrue, v1.PodReady: v1.ConditionTrue, v1.PodScheduled: v1.ConditionTrue,
	}
	for _, cond := range p.Status.Conditions {
		if w, ok := want[cond.Type]; ok && w == cond.Status {
			delete(want, cond.Type)
		}
	}
	if len(want) > 0 {
		t.Errorf("conditions %+v miss %v", p.Status.Conditions, want)
	}

	// What the runtime got.
	c.runtime.Lock()
	var sb *critest.FakePodSandbox
	for _, s := range c.runtime.Sandboxes {
		sb = s
	}
	c.runtime.Unlock()
	if sb.Labels[labelPodUID] != string(pod.UID) || sb.Labels["app"] != "web" || sb.Metadata.Name != "web" {
		t.Errorf("sandbox labels %v metadata %v", sb.Labels, sb.Metadata)
	}
	if fc.Annotations[annotationRestartCount] != "0" || fc.Labels[labelContainerName] != "main" || fc.Annotations[annotationHash] == "" {
		t.Errorf("container labels %v annotations %v", fc.Labels, fc.Annotations)
	}

	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		ev := c.eventReasons(pod)
		return ev["Pulling"] != "" && ev["Pulled"] != "" && ev["Created"] != "" && ev["Started"] != "", nil
	})
	ev := c.eventReasons(pod)
	if err != nil {
		t.Fatalf("events: %v", ev)
	}
	// A steady pod's status is not written again (times compare at the API's precision).
	rv := c.waitPod(pod, "Running", running).ResourceVersion
	time.Sleep(2500 * time.Millisecond) // resyncs every second
	if again := c.waitPod(pod, "Running", running); again.ResourceVersion != rv {
		t.Errorf("status rewritten without a change: %+v", again.Status)
	}
	if !strings.Contains(ev["Pulling"], `Pulling image "busybox:1.36"`) || !strings.Contains(ev["Pulled"], `Successfully pulled image "busybox:1.36" in `) ||
		!strings.Contains(ev["Created"], "Created container: main") || !strings.Contains(ev["Started"], "Started container main") {
		t.Errorf("events: %v", ev)
	}
}

func TestCrashLoopBackOffGrows(t *testing.T) {
	c := newCluster(t)
	c.start()
	pod := simplePod("crash")
	pod.Spec.RestartPolicy = v1.RestartPolicyAlways
	pod = c.createPod(pod)

	// Watch every status the kubelet writes.
	w, err := c.client.CoreV1().Pods("default").Watch(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", "crash").String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	var messages []string
	go func() {
		for e := range w.ResultChan() {
			p, ok := e.Object.(*v1.Pod)
			if !ok || len(p.Status.ContainerStatuses) == 0 {
				continue
			}
			if wt := p.Status.ContainerStatuses[0].State.Waiting; wt != nil && wt.Reason == reasonCrashLoopBackOff {
				mu.Lock()
				messages = append(messages, wt.Message)
				mu.Unlock()
			}
		}
	}()
	// Five crashes: the first restart is immediate, then the back-off is 500ms, 1s, 2s, 4s.
	for restart := int32(0); restart < 5; restart++ {
		p := c.waitPod(pod, fmt.Sprintf("running with restartCount %d", restart), func(p *v1.Pod) bool {
			return running(p) && p.Status.ContainerStatuses[0].RestartCount == restart
		})
		c.exit(strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "kubette://"), 1)
	}
	c.waitPod(pod, "restarted 5 times", func(p *v1.Pod) bool { return running(p) && p.Status.ContainerStatuses[0].RestartCount == 5 })
	// A sync that comes late under load may miss a short back-off window (the container then
	// restarts at once and the delay still doubles), so the test asks for a growing delay,
	// not for every step of it.
	mu.Lock()
	var delays []time.Duration
	suffix := " restarting failed container=main pod=crash_default(" + string(pod.UID) + ")"
	for _, m := range messages {
		d, ok := strings.CutSuffix(strings.TrimPrefix(m, "back-off "), suffix)
		dur, err := time.ParseDuration(d)
		if !ok || err != nil {
			t.Errorf("CrashLoopBackOff message %q", m)
			continue
		}
		if len(delays) == 0 || delays[len(delays)-1] != dur {
			delays = append(delays, dur)
		}
	}
	mu.Unlock()
	if len(delays) < 2 {
		t.Errorf("back-off delays seen: %v, want at least two", delays)
	}
	for i, d := range delays {
		if d < 500*time.Millisecond || d > 4*time.Second || (i > 0 && d <= delays[i-1]) {
			t.Errorf("back-off delays %v do not grow from 500ms to at most 4s", delays)
			break
		}
	}
	p, _ := c.client.CoreV1().Pods("default").Get(context.Background(), "crash", metav1.GetOptions{})
	last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated
	if last == nil || last.ExitCode != 1 || last.Reason != "Error" {
		t.Errorf("lastTerminationState = %+v", p.Status.ContainerStatuses[0].LastTerminationState)
	}
	if ev := c.eventReasons(pod); !strings.Contains(ev["BackOff"], "Back-off restarting failed container main in pod crash_default(") {
		t.Errorf("BackOff events: %q", ev["BackOff"])
	}
}

func TestGracefulDeletion(t *testing.T) {
	c := newCluster(t)
	c.start()
	pod := c.createPod(simplePod("del"))
	c.waitPod(pod, "Running", running)
	grace := int64(3)
	if err := c.client.CoreV1().Pods("default").Delete(context.Background(), "del", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.client.CoreV1().Pods("default").Get(ctx, "del", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatal("the pod object was never deleted")
	}
	if c.calls("StopContainer") == 0 || c.calls("StopPodSandbox") == 0 || c.calls("RemovePodSandbox") == 0 {
		t.Errorf("runtime calls: %v", c.runtime.GetCalls())
	}
	c.runtime.Lock()
	left := len(c.runtime.Containers) + len(c.runtime.Sandboxes)
	c.runtime.Unlock()
	if left != 0 {
		t.Errorf("%d runtime objects left", left)
	}
	if ev := c.eventReasons(pod); !strings.Contains(ev["Killing"], "Stopping container main") {
		t.Errorf("Killing events: %q", ev["Killing"])
	}
}

func TestForceDeletionAndOrphans(t *testing.T) {
	c := newCluster(t)
	// An orphan a previous kubelet left: a pod the API never had.
	ctx := context.Background()
	orphan := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ghost", Namespace: "default", UID: "ghost-uid"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
	sbID, err := c.runtime.RunPodSandbox(ctx, sandboxConfig(orphan, 0, c.root, nil, "h"), "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := containerConfig(orphan, &orphan.Spec.Containers[0], 0, "img", nil, nil, 0)
	cid, err := c.runtime.CreateContainer(ctx, sbID, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.runtime.StartContainer(ctx, cid); err != nil {
		t.Fatal(err)
	}
	c.start()
	pod := c.createPod(simplePod("forced"))
	c.waitPod(pod, "Running", running)
	if err := c.client.CoreV1().Pods("default").Delete(ctx, "forced", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		c.runtime.Lock()
		defer c.runtime.Unlock()
		return len(c.runtime.Containers)+len(c.runtime.Sandboxes) == 0, nil
	})
	if err != nil {
		c.runtime.Lock()
		t.Fatalf("runtime still holds %d containers, %d sandboxes", len(c.runtime.Containers), len(c.runtime.Sandboxes))
	}
}

func TestAdoptionWithoutRestart(t *testing.T) {
	c := newCluster(t)
	stop := c.start()
	pod := c.createPod(simplePod("adopt"))
	p := c.waitPod(pod, "Running", running)
	// Restart once so the restart count is worth keeping.
	c.exit(strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "kubette://"), 2)
	p = c.waitPod(pod, "restarted", func(p *v1.Pod) bool { return running(p) && p.Status.ContainerStatuses[0].RestartCount == 1 })
	stop()
	creates, sandboxes := c.calls("CreateContainer"), c.calls("RunPodSandbox")

	statusCalls := c.calls("ContainerStatus")
	c.start()
	// Let the new kubelet sync the pod a few times.
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return c.calls("ContainerStatus") > statusCalls+3, nil
	}); err != nil {
		t.Fatal("the new kubelet never synced the pod")
	}
	q := c.waitPod(pod, "Running", running)
	if q.Status.ContainerStatuses[0].ContainerID != p.Status.ContainerStatuses[0].ContainerID || q.Status.ContainerStatuses[0].RestartCount != 1 {
		t.Errorf("after adoption: %+v, before: %+v", q.Status.ContainerStatuses[0], p.Status.ContainerStatuses[0])
	}
	if c.calls("CreateContainer") != creates || c.calls("RunPodSandbox") != sandboxes || c.calls("StopContainer") != 0 {
		t.Errorf("the new kubelet touched running containers: %v", c.runtime.GetCalls())
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func testLogger(t *testing.T) *slog.Logger { return slog.New(slog.NewTextHandler(testWriter{t}, nil)) }
