package kubelet

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The PLEG triggers no sync for the sandbox and container a sync started and read back, and
// still triggers one for every change the kubelet did not make.
func TestRelistSkipsWhatTheWorkerObserved(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1.PodSpec{Containers: []v1.Container{containerNamed("app", "img:1")}}})
	// Workers that are not running: a trigger shows as a pending wake.
	worker := func(uid types.UID) *podWorker {
		w := &podWorker{uid: uid, wake: make(chan struct{}, 1), waiting: map[string]waitingReason{}}
		h.k.workers[uid] = w
		return w
	}
	w := worker(pod.UID)
	h.k.runCtx = ctx
	triggered := func(w *podWorker) bool {
		select {
		case <-w.wake:
			return true
		default:
			return false
		}
	}
	p := &pleg{k: h.k}
	relist := func() {
		t.Helper()
		if err := p.relist(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.k.syncPod(ctx, w); err != nil {
		t.Fatal(err)
	}
	c := h.container(pod, "app")
	if c == nil || c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("container after the first sync: %+v", c)
	}
	relist()
	if triggered(w) {
		t.Error("the relist after the sync that started the pod triggered a sync")
	}

	h.exit(c, 1) // not the kubelet's doing
	relist()
	if !triggered(w) {
		t.Fatal("a container's exit triggered no sync")
	}
	relist()
	if triggered(w) {
		t.Error("an unchanged runtime triggered a sync")
	}
	if _, err := h.k.syncPod(ctx, w); err != nil { // restarts it (restartPolicy Always)
		t.Fatal(err)
	}
	if n := h.container(pod, "app"); n == nil || n.Id == c.Id || n.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("no new instance after the exit: %+v", n)
	}
	relist()
	if triggered(w) {
		t.Error("the relist after the sync that restarted the container triggered a sync")
	}

	// A pod no sync has read (an orphan): triggered.
	other := worker("uid-other")
	if _, err := h.rt.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "gone", Namespace: "default", Uid: "uid-other"},
		Labels:   map[string]string{labelPodUID: "uid-other"},
	}, ""); err != nil {
		t.Fatal(err)
	}
	relist()
	if !triggered(other) || triggered(w) {
		t.Error("a sandbox of a pod no sync read: want a sync of that pod only")
	}

	// The pod's objects vanish behind the kubelet's back: triggered.
	h.rt.Lock()
	for id, fc := range h.rt.Containers {
		if fc.Labels[labelPodUID] == string(pod.UID) {
			delete(h.rt.Containers, id)
		}
	}
	for id, s := range h.rt.Sandboxes {
		if s.Labels[labelPodUID] == string(pod.UID) {
			delete(h.rt.Sandboxes, id)
		}
	}
	h.rt.Unlock()
	relist()
	if !triggered(w) {
		t.Error("the pod's runtime objects disappeared without a sync")
	}
}

// exitsOnStart is a runtime whose containers end (exit 1) as soon as they start, before the
// sync that started them reads the runtime back: a crash loop's `exit 1` on a fast node.
type exitsOnStart struct {
	RuntimeService
	h *harness
}

func (e exitsOnStart) StartContainer(ctx context.Context, id string) error {
	if err := e.RuntimeService.StartContainer(ctx, id); err != nil {
		return err
	}
	e.h.rt.Lock()
	c := e.h.rt.Containers[id]
	e.h.rt.Unlock()
	e.h.exit(c, 1)
	return nil
}

// TestRelistTriggersForAnExitTheSyncOnlyReported: the sync that starts a container reads it
// back already exited; it reports that but does not restart it, so the relist must still
// trigger the sync that does (CI saw crash loops restarted only by the periodic resync).
func TestRelistTriggersForAnExitTheSyncOnlyReported(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.k.cfg.Runtime = exitsOnStart{RuntimeService: h.rt, h: h}
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "crash"}, Spec: v1.PodSpec{Containers: []v1.Container{containerNamed("app", "img:1")}}})
	w := &podWorker{uid: pod.UID, wake: make(chan struct{}, 1), waiting: map[string]waitingReason{}}
	h.k.workers[pod.UID] = w
	h.k.runCtx = ctx
	if _, err := h.k.syncPod(ctx, w); err != nil {
		t.Fatal(err)
	}
	if c := h.container(pod, "app"); c == nil || c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Fatalf("container after the first sync: %+v", c)
	}
	if err := (&pleg{k: h.k}).relist(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.wake:
	default:
		t.Fatal("the relist triggered no sync for a container that exited during the sync that started it")
	}
}
