package kubelet

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
)

func TestNewerPod(t *testing.T) {
	k := &Kubelet{written: map[types.UID]*v1.Pod{}}
	pod := func(uid, rv string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), ResourceVersion: rv}}
	}
	k.noteWritten(pod("a", "10"))
	for _, tc := range []struct {
		informer *v1.Pod
		wantRV   string
	}{
		{pod("a", "9"), "10"},  // the informer has not seen the write yet
		{pod("a", "10"), "10"}, // it has
		{pod("a", "11"), "11"}, // and a later change
		{pod("b", "1"), "1"},   // another pod
		{pod("a", "x"), "x"},   // not comparable: the informer's
	} {
		if got := k.newerPod(tc.informer); got.ResourceVersion != tc.wantRV {
			t.Errorf("newerPod(%s@%s) = %s, want %s", tc.informer.UID, tc.informer.ResourceVersion, got.ResourceVersion, tc.wantRV)
		}
	}
}

// A sync that runs before the informer has seen the kubelet's own status write computes the
// status against the written pod: no second write, no conflict.
func TestSyncAfterOwnWriteBeforeTheInformerSeesIt(t *testing.T) {
	h := newHarness(t)
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1.PodSpec{Containers: []v1.Container{containerNamed("app", "img:1")}}})
	pod.ResourceVersion = "1"
	h.setPod(pod)
	rv := int64(100)
	h.client.PrependReactor("update", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.UpdateAction)
		if u.GetSubresource() != "status" {
			return false, nil, nil
		}
		p := u.GetObject().(*v1.Pod).DeepCopy()
		rv++
		p.ResourceVersion = fmt.Sprint(rv)
		return true, p, nil
	})
	w := &podWorker{uid: pod.UID, waiting: map[string]waitingReason{}}
	if _, err := h.k.syncPod(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	writes := func() int {
		n := 0
		for _, a := range h.client.Actions() {
			if a.GetVerb() == "update" && a.GetSubresource() == "status" {
				n++
			}
		}
		return n
	}
	if writes() != 1 {
		t.Fatalf("%d status writes by the first sync, want 1", writes())
	}
	// The informer still has the pod as created.
	if _, err := h.k.syncPod(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	if n := writes(); n != 1 {
		t.Errorf("%d status writes after a second sync with nothing changed, want 1", n)
	}
}

// learningProbes answers like the real prober: nothing for a pod its Update has not seen, and
// started and ready for containers without probes once it has.
type learningProbes struct {
	*fakeProbes
	seen map[types.UID]bool
}

func (l *learningProbes) Update(pod *v1.Pod, _ *v1.PodStatus) { l.seen[pod.UID] = true }
func (l *learningProbes) Ready(uid types.UID, _ string) bool  { return l.seen[uid] }
func (l *learningProbes) Started(uid types.UID, _ string) bool {
	return l.seen[uid]
}

// A container without probes is reported running, started and ready in one status write.
func TestFirstRunningStatusIsReady(t *testing.T) {
	h := newHarness(t)
	h.k.cfg.Probes = &learningProbes{fakeProbes: h.probes, seen: map[types.UID]bool{}}
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1.PodSpec{Containers: []v1.Container{containerNamed("app", "img:1")}}})
	w := &podWorker{uid: pod.UID, waiting: map[string]waitingReason{}}
	if _, err := h.k.syncPod(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	var writes []*v1.Pod
	for _, a := range h.client.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			writes = append(writes, a.(k8stesting.UpdateAction).GetObject().(*v1.Pod))
		}
	}
	if len(writes) != 1 {
		t.Fatalf("%d status writes, want 1", len(writes))
	}
	st := writes[0].Status
	if st.Phase != v1.PodRunning || len(st.ContainerStatuses) != 1 || !st.ContainerStatuses[0].Ready || !podCondition(writes[0], v1.PodReady) {
		t.Errorf("first status: phase %s, containers %+v, conditions %+v; want Running and Ready", st.Phase, st.ContainerStatuses, st.Conditions)
	}
}

// The watch's echo of the kubelet's own status write triggers no sync (a failing sync, which
// writes its status, would otherwise be retried at once instead of after its back-off); any
// later version of the pod does.
func TestOwnStatusWriteEchoTriggersNoSync(t *testing.T) {
	h := newHarness(t)
	pod := h.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1.PodSpec{Containers: []v1.Container{containerNamed("app", "img:1")}}})
	ctx, cancel := context.WithCancel(context.Background())
	h.k.mu.Lock()
	h.k.runCtx = ctx
	h.k.mu.Unlock()
	t.Cleanup(func() {
		cancel()
		h.k.workersWG.Wait()
	})
	hasWorker := func() bool {
		h.k.mu.Lock()
		defer h.k.mu.Unlock()
		return h.k.workers[pod.UID] != nil
	}
	written := pod.DeepCopy()
	written.ResourceVersion = "10"
	h.k.noteWritten(written)
	h.k.podUpdated(written.DeepCopy())
	if hasWorker() {
		t.Fatal("the echo of the kubelet's own status write triggered a sync")
	}
	later := pod.DeepCopy()
	later.ResourceVersion = "11"
	h.k.podUpdated(later)
	if !hasWorker() {
		t.Fatal("a later version of the pod triggered no sync")
	}
}
