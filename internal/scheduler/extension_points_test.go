package scheduler

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/scheduler/framework"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// calls records plugin calls in order, shared by the fakes of one test.
type calls struct {
	mu   sync.Mutex
	list []string
}

func (c *calls) add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = append(c.list, s)
}

func (c *calls) get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.list)
}

// fakeReserve records Reserve and Unreserve; status is what Reserve returns.
type fakeReserve struct {
	name   string
	status *framework.Status
	calls  *calls
}

func (f *fakeReserve) Name() string { return f.name }

func (f *fakeReserve) Reserve(_ context.Context, _ *framework.CycleState, pod *corev1.Pod, node string) *framework.Status {
	f.calls.add(f.name + ".Reserve " + pod.Name + " " + node)
	return f.status
}

func (f *fakeReserve) Unreserve(_ context.Context, _ *framework.CycleState, pod *corev1.Pod, node string) {
	f.calls.add(f.name + ".Unreserve " + pod.Name + " " + node)
}

// fakePermit returns status and timeout.
type fakePermit struct {
	status  *framework.Status
	timeout time.Duration
}

func (f *fakePermit) Name() string { return "FakePermit" }

func (f *fakePermit) Permit(context.Context, *framework.CycleState, *corev1.Pod, string) (*framework.Status, time.Duration) {
	return f.status, f.timeout
}

// fakeBindHooks is a PreBind and PostBind plugin; preBind is what PreBind returns.
type fakeBindHooks struct {
	preBind *framework.Status
	calls   *calls
}

func (f *fakeBindHooks) Name() string { return "FakeBindHooks" }

func (f *fakeBindHooks) PreBind(_ context.Context, _ *framework.CycleState, pod *corev1.Pod, _ string) *framework.Status {
	f.calls.add("PreBind " + pod.Name)
	return f.preBind
}

func (f *fakeBindHooks) PostBind(_ context.Context, _ *framework.CycleState, pod *corev1.Pod, _ string) {
	f.calls.add("PostBind " + pod.Name)
}

// pendingIn says where the pod waits in the queue: "active", "backoff",
// "unschedulable" or "".
func pendingIn(ts *testScheduler, name string) string {
	active, backoff, unsched := ts.queue.PendingPods()
	for where, list := range map[string][]*corev1.Pod{"active": active, "backoff": backoff, "unschedulable": unsched} {
		for _, p := range list {
			if p.Name == name {
				return where
			}
		}
	}
	return ""
}

func TestReserveFailureUnreservesEveryPluginAndRequeues(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     *framework.Status
		wantReason string
		wantMsg    string
		wantQueue  string
	}{{
		name:       "rejection",
		status:     framework.NewStatus(framework.Unschedulable, "no slot left"),
		wantReason: corev1.PodReasonUnschedulable,
		wantMsg:    "0/1 nodes are available: 1 no slot left.",
		wantQueue:  "unschedulable",
	}, {
		name:       "error",
		status:     framework.AsStatus(errors.New("state store down")),
		wantReason: corev1.PodReasonSchedulerError,
		wantMsg:    `running Reserve plugin "R2": state store down`,
		wantQueue:  "backoff",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := &calls{}
			binder := &fakeBinder{}
			ts := newTestScheduler(t, Options{}, fitFilter{},
				&fakeReserve{name: "R1", calls: c}, &fakeReserve{name: "R2", status: tc.status, calls: c}, binder)
			ts.addNodes(testNode("n1", "1"))
			ts.addPod(t, testPod("a", "1"))
			ts.scheduleOne(context.Background())
			ts.binds.Wait()
			want := []string{"R1.Reserve a n1", "R2.Reserve a n1", "R2.Unreserve a n1", "R1.Unreserve a n1"}
			if got := c.get(); !slices.Equal(got, want) {
				t.Errorf("calls %v, want %v", got, want)
			}
			if ts.cache.PodCount() != 0 || binder.boundTo("a") != "" {
				t.Errorf("pod still assumed (%d) or bound (%q)", ts.cache.PodCount(), binder.boundTo("a"))
			}
			if got := pendingIn(ts, "a"); got != tc.wantQueue {
				t.Errorf("pod in %q, want %q", got, tc.wantQueue)
			}
			if cond := statusCondition(t, ts, "a"); cond == nil || cond.Reason != tc.wantReason || cond.Message != tc.wantMsg {
				t.Errorf("condition %+v, want %s %q", cond, tc.wantReason, tc.wantMsg)
			}
		})
	}
}

func TestPermitRejectionAndErrorUnreserve(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    *framework.Status
		wantMsg   string
		wantQueue string
	}{
		{"rejection", framework.NewStatus(framework.Unschedulable, "denied"), "0/1 nodes are available: 1 denied.", "unschedulable"},
		{"error", framework.AsStatus(errors.New("boom")), `running Permit plugin "FakePermit": boom`, "backoff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &calls{}
			binder := &fakeBinder{}
			ts := newTestScheduler(t, Options{}, fitFilter{}, &fakeReserve{name: "R", calls: c}, &fakePermit{status: tc.status}, binder)
			ts.addNodes(testNode("n1", "1"))
			ts.addPod(t, testPod("a", "1"))
			ts.scheduleOne(context.Background())
			ts.binds.Wait()
			if got, want := c.get(), []string{"R.Reserve a n1", "R.Unreserve a n1"}; !slices.Equal(got, want) {
				t.Errorf("calls %v, want %v", got, want)
			}
			if ts.cache.PodCount() != 0 || binder.boundTo("a") != "" {
				t.Error("pod still assumed or bound")
			}
			if got := pendingIn(ts, "a"); got != tc.wantQueue {
				t.Errorf("pod in %q, want %q", got, tc.wantQueue)
			}
			if cond := statusCondition(t, ts, "a"); cond == nil || cond.Message != tc.wantMsg {
				t.Errorf("condition %+v, want %q", cond, tc.wantMsg)
			}
		})
	}
}

func TestPermitWaitThenAllowBinds(t *testing.T) {
	c := &calls{}
	binder := &fakeBinder{}
	ts := newTestScheduler(t, Options{}, fitFilter{}, &fakeReserve{name: "R", calls: c},
		&fakePermit{status: framework.NewStatus(framework.Wait), timeout: time.Hour}, &fakeBindHooks{calls: c}, binder)
	ts.addNodes(testNode("n1", "1"))
	ts.addPod(t, testPod("a", "1"))
	ts.scheduleOne(context.Background())
	h := &handle{profile: ts.profile}
	var wp framework.WaitingPod
	poll.Until(t, "the pod waits on permit", poll.True(func() bool { wp = h.GetWaitingPod("uid-a"); return wp != nil }))
	if got := wp.GetPendingPlugins(); !slices.Equal(got, []string{"FakePermit"}) {
		t.Errorf("pending plugins %v", got)
	}
	if binder.boundTo("a") != "" || ts.cache.PodCount() != 1 {
		t.Fatal("bound before permission, or not assumed while waiting")
	}
	wp.Allow("FakePermit")
	ts.binds.Wait()
	if binder.boundTo("a") != "n1" {
		t.Fatal("not bound after Allow")
	}
	if got, want := c.get(), []string{"R.Reserve a n1", "PreBind a", "PostBind a"}; !slices.Equal(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
	if h.GetWaitingPod("uid-a") != nil {
		t.Error("still among the waiting pods")
	}
}

func TestPermitTimeoutRejectsAndUnreserves(t *testing.T) {
	c := &calls{}
	binder := &fakeBinder{}
	ts := newTestScheduler(t, Options{}, fitFilter{}, &fakeReserve{name: "R", calls: c},
		&fakePermit{status: framework.NewStatus(framework.Wait), timeout: 10 * time.Millisecond}, &fakeBindHooks{calls: c}, binder)
	ts.addNodes(testNode("n1", "1"))
	ts.addPod(t, testPod("a", "1"))
	ts.scheduleOne(context.Background())
	ts.binds.Wait() // the binding goroutine returns once the timeout rejected the pod
	if got, want := c.get(), []string{"R.Reserve a n1", "R.Unreserve a n1"}; !slices.Equal(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
	if binder.boundTo("a") != "" || ts.cache.PodCount() != 0 {
		t.Fatal("bound or still assumed after the timeout")
	}
	if pendingIn(ts, "a") == "" {
		t.Error("not requeued")
	}
	want := "0/1 nodes are available: 1 rejected due to timeout after waiting 10ms at plugin FakePermit."
	if cond := statusCondition(t, ts, "a"); cond == nil || cond.Reason != corev1.PodReasonUnschedulable || cond.Message != want {
		t.Errorf("condition %+v, want %q", cond, want)
	}
}

func TestPreBindFailureUnreservesAndRequeues(t *testing.T) {
	c := &calls{}
	binder := &fakeBinder{}
	ts := newTestScheduler(t, Options{}, fitFilter{}, &fakeReserve{name: "R", calls: c},
		&fakeBindHooks{preBind: framework.AsStatus(errors.New("volume not ready")), calls: c}, binder)
	ts.addNodes(testNode("n1", "1"))
	ts.addPod(t, testPod("a", "1"))
	ts.scheduleOne(context.Background())
	ts.binds.Wait()
	if got, want := c.get(), []string{"R.Reserve a n1", "PreBind a", "R.Unreserve a n1"}; !slices.Equal(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
	if binder.boundTo("a") != "" || ts.cache.PodCount() != 0 {
		t.Fatal("bound or still assumed after PreBind failed")
	}
	if got := pendingIn(ts, "a"); got != "backoff" {
		t.Errorf("pod in %q, want backoff", got)
	}
	if cond := statusCondition(t, ts, "a"); cond == nil || cond.Reason != corev1.PodReasonSchedulerError || !strings.Contains(cond.Message, "volume not ready") {
		t.Errorf("condition %+v", cond)
	}
}

func TestWaitingPodRejectedByHandle(t *testing.T) {
	binder := &fakeBinder{}
	ts := newTestScheduler(t, Options{}, fitFilter{}, &fakePermit{status: framework.NewStatus(framework.Wait), timeout: time.Hour}, binder)
	ts.addNodes(testNode("n1", "1"))
	ts.addPod(t, testPod("a", "1"))
	ts.scheduleOne(context.Background())
	h := &handle{profile: ts.profile}
	poll.Until(t, "the pod waits on permit", poll.True(func() bool { return h.GetWaitingPod("uid-a") != nil }))
	n := 0
	h.IterateOverWaitingPods(func(framework.WaitingPod) { n++ })
	if n != 1 || !h.RejectWaitingPod("uid-a") {
		t.Fatalf("%d waiting pods; reject failed", n)
	}
	ts.binds.Wait()
	if binder.boundTo("a") != "" || ts.cache.PodCount() != 0 || pendingIn(ts, "a") == "" {
		t.Fatal("rejected pod bound, assumed or not requeued")
	}
}

func TestNominatedPodsKeepTheirRoom(t *testing.T) {
	ts := newTestScheduler(t, Options{}, fitFilter{}, scoreAll(1), &fakeBinder{})
	ts.addNodes(testNode("n1", "2"))
	prio := func(p *corev1.Pod, v int32) *corev1.Pod { p.Spec.Priority = &v; return p }
	nominated := prio(testPod("nom", "2"), 10)
	nominated.Status.NominatedNodeName = "n1"
	ts.queue.AddNominatedPod(nominated, nil)
	if got := ts.queue.NominatedPodsForNode("n1"); len(got) != 1 {
		t.Fatalf("nominated pods %v", got)
	}
	state := framework.NewCycleState()
	if err := ts.cache.UpdateSnapshot(ts.snapshot); err != nil {
		t.Fatal(err)
	}
	ni, err := ts.snapshot.Get("n1")
	if err != nil {
		t.Fatal(err)
	}
	if st := ts.profile.runFilterWithNominatedPods(context.Background(), state, prio(testPod("low", "1"), 5), ni); st.Code() != framework.Unschedulable {
		t.Errorf("lower priority pod: %v, want Unschedulable (the room is nominated)", st.Code())
	}
	if st := ts.profile.runFilterWithNominatedPods(context.Background(), state, prio(testPod("high", "1"), 20), ni); !st.IsSuccess() {
		t.Errorf("higher priority pod: %v %q, want to fit", st.Code(), st.Message())
	}
	if st := ts.profile.runFilterWithNominatedPods(context.Background(), state, nominated, ni); !st.IsSuccess() {
		t.Errorf("the nominated pod itself: %v, want to fit", st.Code())
	}
	// Once assumed (or deleted) the nomination is gone.
	ts.queue.Delete(nominated)
	if got := ts.queue.NominatedPodsForNode("n1"); len(got) != 0 {
		t.Errorf("nomination left after delete: %v", got)
	}
}

func TestPostFilterNominationIsWritten(t *testing.T) {
	ts := newTestScheduler(t, Options{}, fitFilter{}, nominateFirst{}, &fakeBinder{})
	ts.addNodes(testNode("n1", "1"))
	ts.onPodAdd(func() *corev1.Pod { p := testPod("x", "1"); p.Spec.NodeName = "n1"; return p }())
	ts.addPod(t, testPod("a", "1"))
	ts.scheduleOne(context.Background())
	got, err := ts.client.CoreV1().Pods("default").Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.NominatedNodeName != "n1" {
		t.Errorf("status.nominatedNodeName %q, want n1", got.Status.NominatedNodeName)
	}
	if nn := ts.queue.NominatedNodeName(got); nn != "n1" {
		t.Errorf("queue nomination %q, want n1", nn)
	}
}

// nominateFirst is a PostFilter that nominates n1 and succeeds.
type nominateFirst struct{}

func (nominateFirst) Name() string { return "NominateFirst" }

func (nominateFirst) PostFilter(context.Context, *framework.CycleState, *corev1.Pod, framework.NodeToStatus) (*framework.PostFilterResult, *framework.Status) {
	return framework.NewPostFilterResultWithNominatedNode("n1"), nil
}

func TestDeletedWaitingPodIsRejected(t *testing.T) {
	binder := &fakeBinder{}
	ts := newTestScheduler(t, Options{}, fitFilter{}, &fakePermit{status: framework.NewStatus(framework.Wait), timeout: time.Hour}, binder)
	ts.addNodes(testNode("n1", "1"))
	a := testPod("a", "1")
	ts.addPod(t, a)
	ts.scheduleOne(context.Background())
	h := &handle{profile: ts.profile}
	poll.Until(t, "the pod waits on permit", poll.True(func() bool { return h.GetWaitingPod("uid-a") != nil }))
	if err := ts.podInformer.GetIndexer().Delete(a); err != nil {
		t.Fatal(err)
	}
	ts.onPodDelete(a)
	ts.binds.Wait() // returns only once the waiting pod was rejected
	if binder.boundTo("a") != "" || ts.cache.PodCount() != 0 || pendingIn(ts, "a") != "" {
		t.Fatal("deleted pod bound, assumed or requeued")
	}
}
