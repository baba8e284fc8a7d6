package kubelet

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSyncRunsTheSandboxWithTheClassHandler: a pod's RuntimeClass names the CRI runtime
// handler of its sandbox; a class the kubelet does not know, or a handler the runtime
// refuses, fails the sandbox with a FailedCreatePodSandBox event and leaves the pod
// Pending.
func TestSyncRunsTheSandboxWithTheClassHandler(t *testing.T) {
	h := newHarness(t)
	if err := h.k.rcInformer.GetIndexer().Add(&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, Handler: "runc"}); err != nil {
		t.Fatal(err)
	}
	class := func(s string) *string { return &s }
	handlerOf := func(pod *v1.Pod) (string, bool) {
		h.rt.Lock()
		defer h.rt.Unlock()
		for _, sb := range h.rt.Sandboxes {
			if sb.Metadata.Uid == string(pod.UID) {
				return sb.RuntimeHandler, true
			}
		}
		return "", false
	}

	plain := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Spec: v1.PodSpec{Containers: []v1.Container{containerNamed("c", "img:1")}}})
	h.sync(plain)
	if got, ok := handlerOf(plain); !ok || got != "" {
		t.Fatalf("pod without a class: handler %q (sandbox %v), want the default", got, ok)
	}
	fast := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, Spec: v1.PodSpec{RuntimeClassName: class("fast"), Containers: []v1.Container{containerNamed("c", "img:1")}}})
	h.sync(fast)
	if got, ok := handlerOf(fast); !ok || got != "runc" {
		t.Fatalf("pod of class fast: handler %q (sandbox %v), want runc", got, ok)
	}
	h.events()

	gone := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gone"}, Spec: v1.PodSpec{RuntimeClassName: class("gone"), Containers: []v1.Container{containerNamed("c", "img:1")}}})
	p := h.sync(gone)
	if _, ok := handlerOf(gone); ok || p.Status.Phase != v1.PodPending {
		t.Fatalf("pod of a missing class: sandbox %v, phase %s", ok, p.Status.Phase)
	}
	want := `Warning FailedCreatePodSandBox Failed to create pod sandbox: runtimeclass.node.k8s.io "gone" not found`
	if ev := strings.Join(h.events(), "\n"); !strings.Contains(ev, want) {
		t.Fatalf("no event %q in\n%s", want, ev)
	}

	if err := h.k.rcInformer.GetIndexer().Add(&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "odd"}, Handler: "odd-handler"}); err != nil {
		t.Fatal(err)
	}
	h.rt.InjectError("RunPodSandbox", status.Error(codes.Unknown, `failed to get sandbox runtime: no runtime for "odd-handler" is configured`))
	odd := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "odd"}, Spec: v1.PodSpec{RuntimeClassName: class("odd"), Containers: []v1.Container{containerNamed("c", "img:1")}}})
	p = h.sync(odd)
	if _, ok := handlerOf(odd); ok || p.Status.Phase != v1.PodPending {
		t.Fatalf("pod of an unknown handler: sandbox %v, phase %s", ok, p.Status.Phase)
	}
	want = `Warning FailedCreatePodSandBox Failed to create pod sandbox: failed to get sandbox runtime: no runtime for "odd-handler" is configured`
	if ev := strings.Join(h.events(), "\n"); !strings.Contains(ev, want) {
		t.Fatalf("no event %q in\n%s", want, ev)
	}
}
