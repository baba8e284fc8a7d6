package kubelet

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

const rejectedForPorts = "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"

// hostPortPod is a pod whose one container asks for hostPort 21017, as the conformance test's.
func hostPortPod(name string, policy v1.RestartPolicy) *v1.Pod {
	c := containerNamed("c", "img")
	c.Ports = []v1.ContainerPort{{Name: "conflict", ContainerPort: 21017, HostPort: 21017}}
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{RestartPolicy: policy, Containers: []v1.Container{c}}}
}

// restart replaces the kubelet with a new one over the same runtime and API, its informers
// holding what the old one's did, and seeds its admitted pods as Run does.
func (h *harness) restart() {
	h.t.Helper()
	k, err := New(h.k.cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := k.nodeInformer.GetIndexer().Add(h.k.node()); err != nil {
		h.t.Fatal(err)
	}
	for _, obj := range h.k.podInformer.GetStore().List() {
		if err := k.podInformer.GetIndexer().Add(obj); err != nil {
			h.t.Fatal(err)
		}
	}
	h.k, h.workers = k, map[types.UID]*podWorker{}
	if err := k.seedAdmitted(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) requireRejectedForPorts(p *v1.Pod) {
	h.t.Helper()
	if p.Status.Phase != v1.PodFailed || p.Status.Reason != "NodePorts" || p.Status.Message != rejectedForPorts {
		h.t.Fatalf("pod %s: %s %q %q, want rejected for its host port", p.Name, p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
	if h.container(p, "c") != nil {
		h.t.Fatalf("rejected pod %s has a container", p.Name)
	}
}

func (h *harness) requireStarted(p *v1.Pod) {
	h.t.Helper()
	if p.Status.Phase == v1.PodFailed || h.container(p, "c") == nil {
		h.t.Fatalf("pod %s did not start: %s %q %q", p.Name, p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
}

// A second pod with the same host port is rejected while the first runs (and while it is
// being deleted with its containers still running); once the first's containers are gone, a
// new one is admitted.
func TestAdmissionRejectsAHostPortInUse(t *testing.T) {
	h := newHarness(t)
	first := h.sync(h.add(hostPortPod("first", "")))
	h.requireStarted(first)

	second := h.sync(h.add(hostPortPod("second", "")))
	h.requireRejectedForPorts(second)
	ev := strings.Join(h.events(), "\n")
	if !strings.Contains(ev, "Warning NodePorts Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports") {
		t.Errorf("events:\n%s", ev)
	}
	if again := h.sync(second); again.Status.Phase != v1.PodFailed || h.container(again, "c") != nil {
		t.Error("a rejected pod stays failed and does not run")
	}

	// Being deleted, its containers not stopped yet: the port is still taken.
	now, grace := metav1.NewTime(h.clock.Now()), int64(5)
	first.DeletionTimestamp, first.DeletionGracePeriodSeconds = &now, &grace
	h.setPod(first)
	h.requireRejectedForPorts(h.sync(h.add(hostPortPod("third", ""))))

	// The deletion's sync stops the containers and deletes the object.
	h.sync(first)
	if _, err := h.client.CoreV1().Pods("default").Get(context.Background(), "first", metav1.GetOptions{}); err == nil {
		t.Fatal("first pod not deleted")
	}
	h.requireStarted(h.sync(h.add(hostPortPod("fourth", ""))))
}

// A pod that ended (Succeeded) with its containers stopped no longer holds its host port.
func TestAdmissionIgnoresEndedPods(t *testing.T) {
	h := newHarness(t)
	done := h.sync(h.add(hostPortPod("done", v1.RestartPolicyNever)))
	h.requireStarted(done)
	h.requireRejectedForPorts(h.sync(h.add(hostPortPod("early", ""))))
	h.exit(h.container(done, "c"), 0)
	if done = h.sync(done); done.Status.Phase != v1.PodSucceeded {
		t.Fatalf("phase %s", done.Status.Phase)
	}
	h.requireStarted(h.sync(h.add(hostPortPod("late", ""))))
}

// After a restart, the pods the previous kubelet ran count before their own workers sync; a
// pod that ended and stopped does not.
func TestAdmissionAfterRestart(t *testing.T) {
	h := newHarness(t)
	running := h.sync(h.add(hostPortPod("running", "")))
	h.requireStarted(running)
	ended := hostPortPod("ended", v1.RestartPolicyNever)
	ended.Spec.Containers[0].Ports[0].HostPort = 21018
	ended = h.sync(h.add(ended))
	h.exit(h.container(ended, "c"), 1)
	if ended = h.sync(ended); ended.Status.Phase != v1.PodFailed {
		t.Fatalf("phase %s", ended.Status.Phase)
	}

	h.restart()
	h.requireRejectedForPorts(h.sync(h.add(hostPortPod("conflicting", ""))))
	free := hostPortPod("free", "")
	free.Spec.Containers[0].Ports[0].HostPort = 21018
	h.requireStarted(h.sync(h.add(free)))
	// The running pod's own worker admits it again without a check.
	if p := h.sync(running); p.Status.Phase == v1.PodFailed {
		t.Fatalf("running pod after restart: %s %q", p.Status.Phase, p.Status.Message)
	}
}

// A node whose status (allocatable) is not posted yet admits nothing and rejects nothing: the
// sync is retried.
func TestAdmissionWaitsForTheNodeStatus(t *testing.T) {
	h := newHarness(t)
	node := h.k.node().DeepCopy()
	node.Status.Allocatable = nil
	if err := h.k.nodeInformer.GetIndexer().Update(node); err != nil {
		t.Fatal(err)
	}
	pod := h.add(hostPortPod("p", ""))
	w := &podWorker{uid: pod.UID, waiting: map[string]waitingReason{}}
	if _, err := h.k.syncPod(context.Background(), w); err == nil || !strings.Contains(err.Error(), "not registered with its status yet") {
		t.Fatalf("sync: %v", err)
	}
	if p, _ := h.client.CoreV1().Pods("default").Get(context.Background(), "p", metav1.GetOptions{}); p.Status.Phase != "" || w.admitted {
		t.Fatalf("pod judged without the node's status: %s", p.Status.Phase)
	}
}

// Through the API with the kubelet running: the second pod with a host port in use fails with
// upstream's reason and a Warning event while the first runs; after the first's deletion, a
// new pod with that port runs. Of two such pods created at once, exactly one is admitted.
func TestAdmissionOfHostPortsThroughTheAPI(t *testing.T) {
	c := newCluster(t)
	c.start()
	failedForPorts := func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed && p.Status.Reason == "NodePorts" && p.Status.Message == rejectedForPorts
	}
	isRunning := func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning }
	first := c.waitPod(c.createPod(hostPortPod("first", "")), "Running", isRunning)
	second := c.waitPod(c.createPod(hostPortPod("second", "")), "rejected for its host port", failedForPorts)
	if c.fakeContainer(string(second.UID), "c") != nil {
		t.Error("the rejected pod has a container")
	}
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return strings.Contains(c.eventReasons(second)["NodePorts"], "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"), nil
	})
	if err != nil {
		t.Errorf("events of the rejected pod: %v", c.eventReasons(second))
	}

	if err := c.client.CoreV1().Pods("default").Delete(context.Background(), first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.client.CoreV1().Pods("default").Get(ctx, first.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatal("the first pod was never deleted")
	}
	c.waitPod(c.createPod(hostPortPod("third", "")), "Running", isRunning)

	// Two at once, on another port than the third's.
	x, y := hostPortPod("x", ""), hostPortPod("y", "")
	x.Spec.Containers[0].Ports[0].HostPort, y.Spec.Containers[0].Ports[0].HostPort = 21030, 21030
	x, y = c.createPod(x), c.createPod(y)
	settled := func(p *v1.Pod) bool { return isRunning(p) || p.Status.Phase == v1.PodFailed }
	x, y = c.waitPod(x, "settled", settled), c.waitPod(y, "settled", settled)
	if isRunning(x) == isRunning(y) || !(failedForPorts(x) || failedForPorts(y)) {
		t.Errorf("x %s %q, y %s %q: want one running and one rejected", x.Status.Phase, x.Status.Reason, y.Status.Phase, y.Status.Reason)
	}
}
