package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kubette/kubette/internal/scheduler/cache"
	"github.com/kubette/kubette/internal/scheduler/framework"
	"github.com/kubette/kubette/internal/scheduler/plugins"
)

func scoreAll(v int64) *fakeScore {
	return &fakeScore{name: "FakeScore", fn: func(*framework.NodeInfo) int64 { return v }}
}

func manyNodes(n int) []*corev1.Node {
	out := make([]*corev1.Node, n)
	for i := range out {
		out[i] = testNode(fmt.Sprintf("n%d", i), "4")
	}
	return out
}

func TestFilterFindsAllFeasibleNodes(t *testing.T) {
	odd := &fakeFilter{name: "Odd", fn: func(_ *corev1.Pod, ni *framework.NodeInfo) string {
		if nodeIndex(ni)%2 == 1 {
			return "node is odd"
		}
		return ""
	}}
	ts := newTestScheduler(t, Options{}, odd, scoreAll(1), &fakeBinder{})
	ts.addNodes(manyNodes(99)...)
	for range 5 {
		if err := ts.cache.UpdateSnapshot(ts.snapshot); err != nil {
			t.Fatal(err)
		}
		feasible, diag, err := ts.findNodesThatFitPod(context.Background(), framework.NewCycleState(), testPod("p", ""))
		if err != nil {
			t.Fatal(err)
		}
		if len(feasible) != 50 || len(diag.NodeToStatus) != 49 {
			t.Fatalf("%d feasible, %d rejected", len(feasible), len(diag.NodeToStatus))
		}
		for _, ni := range feasible {
			if nodeIndex(ni)%2 != 0 {
				t.Fatalf("odd node %s feasible", ni.Node().Name)
			}
		}
		if !diag.UnschedulablePlugins.Has("Odd") {
			t.Fatal("rejecting plugin not recorded")
		}
		if ts.nextStartNodeIndex != 0 {
			t.Fatalf("start index %d after a full pass", ts.nextStartNodeIndex)
		}
	}
}

func TestNumFeasibleNodesToFind(t *testing.T) {
	for _, tc := range []struct {
		nodes, percentage, want int32
	}{
		{10, 0, 10}, {99, 0, 99}, {100, 0, 100}, {200, 0, 100}, {1000, 0, 420}, {5000, 0, 500},
		{6000, 0, 300}, {20000, 0, 1000}, {1000, 10, 100}, {1000, 50, 500}, {200, 100, 200}, {50, 10, 50},
	} {
		s := &Scheduler{percentage: tc.percentage}
		if got := s.numFeasibleNodesToFind(tc.nodes); got != tc.want {
			t.Errorf("%d nodes at %d%%: %d, want %d", tc.nodes, tc.percentage, got, tc.want)
		}
	}
}

func TestPercentageOfNodesToScoreLimitsTheSearch(t *testing.T) {
	// One worker: the search is sequential, so exactly the 420 nodes from the start
	// index on are found, and the next cycle starts where this one stopped.
	all := &fakeFilter{name: "All"}
	ts := newTestScheduler(t, Options{Parallelism: 1}, all, scoreAll(1), &fakeBinder{})
	ts.addNodes(manyNodes(1000)...)
	if err := ts.cache.UpdateSnapshot(ts.snapshot); err != nil {
		t.Fatal(err)
	}
	list, _ := ts.snapshot.List()
	position := map[string]int{}
	for i, ni := range list {
		position[ni.Node().Name] = i
	}
	for cycle := range 3 {
		startAt := ts.nextStartNodeIndex
		feasible, _, err := ts.findNodesThatFitPod(context.Background(), framework.NewCycleState(), testPod("p", ""))
		if err != nil {
			t.Fatal(err)
		}
		if len(feasible) != 420 {
			t.Fatalf("cycle %d: %d feasible, want 420 (50%% - 1000/125)", cycle, len(feasible))
		}
		if want := (startAt + 420) % 1000; ts.nextStartNodeIndex != want {
			t.Fatalf("cycle %d: next start %d, want %d", cycle, ts.nextStartNodeIndex, want)
		}
		for _, ni := range feasible {
			if off := (position[ni.Node().Name] - startAt + 1000) % 1000; off >= 420 {
				t.Fatalf("cycle %d: node at offset %d examined", cycle, off)
			}
		}
	}
	if all.calls > 3*(420+31) {
		t.Fatalf("%d Filter calls: the search did not stop", all.calls)
	}

	// In parallel the result is the same and the search still stops early.
	par := &fakeFilter{name: "All"}
	ts = newTestScheduler(t, Options{Parallelism: 16, PercentageOfNodesToScore: 30}, par, scoreAll(1), &fakeBinder{})
	ts.addNodes(manyNodes(1000)...)
	_ = ts.cache.UpdateSnapshot(ts.snapshot)
	list, _ = ts.snapshot.List()
	for i, ni := range list {
		position[ni.Node().Name] = i
	}
	for cycle := range 3 {
		startAt := ts.nextStartNodeIndex
		feasible, _, _ := ts.findNodesThatFitPod(context.Background(), framework.NewCycleState(), testPod("p", ""))
		if len(feasible) != 300 {
			t.Fatalf("%d feasible at 30%%, want 300", len(feasible))
		}
		// The same window as a sequential search: the 300 nodes from the start index.
		for _, ni := range feasible {
			if off := (position[ni.Node().Name] - startAt + 1000) % 1000; off >= 300 {
				t.Fatalf("cycle %d: node at offset %d examined", cycle, off)
			}
		}
	}
	if par.calls >= 3*1000 {
		t.Fatalf("%d Filter calls: the parallel search did not stop early", par.calls)
	}

	// Without Score plugins one feasible node is enough.
	ts = newTestScheduler(t, Options{}, &fakeFilter{name: "All"}, &fakeBinder{})
	ts.addNodes(manyNodes(1000)...)
	_ = ts.cache.UpdateSnapshot(ts.snapshot)
	feasible, _, _ := ts.findNodesThatFitPod(context.Background(), framework.NewCycleState(), testPod("p", ""))
	if len(feasible) != 1 {
		t.Fatalf("%d feasible without scoring", len(feasible))
	}
}

func TestScoreWeightsAndNormalisation(t *testing.T) {
	byIndex := weighted{&fakeScore{name: "ByIndex", normalize: true, fn: nodeIndex}, 2}
	reverse := weighted{&fakeScore{name: "Reverse", fn: func(ni *framework.NodeInfo) int64 { return 100 - 30*nodeIndex(ni) }}, 1}
	ts := newTestScheduler(t, Options{}, &fakeFilter{name: "All"}, byIndex, reverse, &fakeBinder{})
	ts.addNodes(testNode("n1", "1"), testNode("n2", "1"), testNode("n3", "1"))
	_ = ts.cache.UpdateSnapshot(ts.snapshot)
	nodes, _ := ts.snapshot.List()
	scores, err := ts.prioritizeNodes(context.Background(), framework.NewCycleState(), testPod("p", ""), nodes)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, s := range scores {
		got[s.Name] = s.Score
	}
	// ByIndex normalises 1,2,3 to 33,66,100 and weighs 2; Reverse gives 70,40,10.
	want := map[string]int64{"n1": 66 + 70, "n2": 132 + 40, "n3": 200 + 10}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("scores %v, want %v", got, want)
	}
	if host := ts.selectHost(scores); host != "n3" {
		t.Fatalf("picked %s", host)
	}

	bad := &fakeScore{name: "Bad", fn: func(*framework.NodeInfo) int64 { return 150 }}
	ts2 := newTestScheduler(t, Options{}, bad, &fakeBinder{})
	ts2.addNodes(testNode("n1", "1"), testNode("n2", "1"))
	_ = ts2.cache.UpdateSnapshot(ts2.snapshot)
	nodes, _ = ts2.snapshot.List()
	_, err = ts2.prioritizeNodes(context.Background(), framework.NewCycleState(), testPod("p", ""), nodes)
	if err == nil || !strings.Contains(err.Error(), `plugin "Bad" returns an invalid score 150`) {
		t.Fatalf("err %v", err)
	}
}

func TestTieBreakingIsUniform(t *testing.T) {
	s := &Scheduler{rand: rand.New(rand.NewPCG(7, 7))}
	scores := []framework.NodeScore{{Name: "a", Score: 5}, {Name: "b", Score: 9}, {Name: "c", Score: 9}, {Name: "d", Score: 1}, {Name: "e", Score: 9}, {Name: "f", Score: 9}}
	counts := map[string]int{}
	const n = 8000
	for range n {
		counts[s.selectHost(scores)]++
	}
	if counts["a"]+counts["d"] != 0 {
		t.Fatalf("a lower score won: %v", counts)
	}
	for _, name := range []string{"b", "c", "e", "f"} {
		if c := counts[name]; c < n/4*85/100 || c > n/4*115/100 {
			t.Fatalf("tie not uniform: %v", counts)
		}
	}
}

// statusCondition reads the pod's PodScheduled condition from the fake API.
func statusCondition(t *testing.T, ts *testScheduler, name string) *corev1.PodCondition {
	t.Helper()
	p, err := ts.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func TestScheduleAssumeAndUnschedulable(t *testing.T) {
	binder := &fakeBinder{}
	ts := newTestScheduler(t, Options{PodInitialBackoff: time.Millisecond, PodMaxBackoff: time.Millisecond},
		fitFilter{}, &fakeFilter{name: "All"}, scoreAll(1), binder)
	ts.addNodes(testNode("n1", "2"), testNode("n2", "2"))
	for _, name := range []string{"a", "b", "c"} {
		ts.addPod(t, testPod(name, "2"))
	}
	ctx := context.Background()
	for range 3 {
		ts.scheduleOne(ctx)
	}
	ts.binds.Wait()
	// a and b take the two nodes (assumed: the informer never confirms here); c fits nowhere.
	if ts.cache.AssumedPodCount() != 2 || binder.boundTo("a") == binder.boundTo("b") {
		t.Fatalf("assumed %d, a on %q, b on %q", ts.cache.AssumedPodCount(), binder.boundTo("a"), binder.boundTo("b"))
	}
	want := "0/2 nodes are available: 2 Insufficient cpu."
	c := statusCondition(t, ts, "c")
	if c == nil || c.Status != corev1.ConditionFalse || c.Reason != corev1.PodReasonUnschedulable || c.Message != want {
		t.Fatalf("condition %+v", c)
	}
	evs := ts.events()
	sort.Strings(evs)
	wantEvents := []string{
		"Normal Scheduled Successfully assigned default/a to " + binder.boundTo("a"),
		"Normal Scheduled Successfully assigned default/b to " + binder.boundTo("b"),
		"Warning FailedScheduling " + want,
	}
	if fmt.Sprint(evs) != fmt.Sprint(wantEvents) {
		t.Fatalf("events %q\nwant %q", evs, wantEvents)
	}
	if _, _, u := ts.queue.Counts(); u != 1 {
		t.Fatal("c is not unschedulable")
	}
	// A node that fits is added: c is retried and lands there.
	time.Sleep(5 * time.Millisecond)
	ts.addNodes(testNode("n3", "4"))
	if a, _, _ := ts.queue.Counts(); a != 1 {
		t.Fatal("node add did not move c")
	}
	ts.scheduleOne(ctx)
	ts.binds.Wait()
	if binder.boundTo("c") != "n3" {
		t.Fatalf("c on %q", binder.boundTo("c"))
	}
	// The informer confirms the binds.
	for _, name := range []string{"a", "b", "c"} {
		old := testPod(name, "2")
		bound := old.DeepCopy()
		bound.ResourceVersion = "2"
		bound.Spec.NodeName = binder.boundTo(name)
		ts.onPodUpdate(old, bound)
	}
	if ts.cache.AssumedPodCount() != 0 || ts.cache.PodCount() != 3 {
		t.Fatalf("assumed %d pods %d", ts.cache.AssumedPodCount(), ts.cache.PodCount())
	}
}

func TestPostFilterMessageOnlyWhenRun(t *testing.T) {
	full := &fakeFilter{name: "Full", fn: func(*corev1.Pod, *framework.NodeInfo) string { return "Insufficient cpu" }}
	for _, withPostFilter := range []bool{false, true} {
		pls := []framework.Plugin{full, scoreAll(1), &fakeBinder{}}
		want := "0/3 nodes are available: 3 Insufficient cpu."
		if withPostFilter {
			pls = append(pls, fakePostFilter{})
			want += " preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.."
		}
		ts := newTestScheduler(t, Options{}, pls...)
		ts.addNodes(testNode("n1", "1"), testNode("n2", "1"), testNode("n3", "1"))
		ts.addPod(t, testPod("p", "1"))
		ts.scheduleOne(context.Background())
		if c := statusCondition(t, ts, "p"); c == nil || c.Message != want {
			t.Fatalf("postfilter=%v: condition %+v, want %q", withPostFilter, c, want)
		}
	}
}

func TestPreFilterRejection(t *testing.T) {
	pre := &fakePreFilter{status: framework.NewStatus(framework.UnschedulableAndUnresolvable, "pod wants something no node has")}
	filter := &fakeFilter{name: "All"}
	ts := newTestScheduler(t, Options{}, pre, filter, scoreAll(1), &fakeBinder{})
	ts.addNodes(testNode("n1", "1"), testNode("n2", "1"))
	ts.addPod(t, testPod("p", "1"))
	ts.scheduleOne(context.Background())
	if c := statusCondition(t, ts, "p"); c == nil || c.Message != "0/2 nodes are available: pod wants something no node has." {
		t.Fatalf("condition %+v", c)
	}
	if filter.calls != 0 {
		t.Fatal("Filter ran after a PreFilter rejection")
	}
	if _, _, u := ts.queue.Counts(); u != 1 {
		t.Fatal("pod not unschedulable")
	}
}

// skipper says Skip in PreFilter, so its Filter must not run.
type skipper struct{ fakeFilter }

func (s *skipper) PreFilter(context.Context, *framework.CycleState, *corev1.Pod) *framework.Status {
	return framework.NewStatus(framework.Skip)
}

func TestPreFilterSkip(t *testing.T) {
	sk := &skipper{fakeFilter{name: "Skipper", fn: func(*corev1.Pod, *framework.NodeInfo) string { return "never" }}}
	binder := &fakeBinder{}
	ts := newTestScheduler(t, Options{}, sk, binder)
	ts.addNodes(testNode("n1", "1"))
	ts.addPod(t, testPod("p", "1"))
	ts.scheduleOne(context.Background())
	ts.binds.Wait()
	if sk.calls != 0 || binder.boundTo("p") != "n1" {
		t.Fatalf("filter calls %d, bound to %q", sk.calls, binder.boundTo("p"))
	}
}

func TestFilterErrorAndNoNodes(t *testing.T) {
	boom := &fakeFilter{name: "Boom", code: framework.Error, fn: func(*corev1.Pod, *framework.NodeInfo) string { return "boom" }}
	ts := newTestScheduler(t, Options{}, boom, &fakeBinder{})
	ts.addPod(t, testPod("p", "1"))
	ts.scheduleOne(context.Background())
	if c := statusCondition(t, ts, "p"); c == nil || c.Reason != corev1.PodReasonUnschedulable || c.Message != "no nodes available to schedule pods" {
		t.Fatalf("condition %+v", c)
	}
	if _, b, _ := ts.queue.Counts(); b != 1 {
		t.Fatal("pod without nodes must back off")
	}
	ts.addNodes(testNode("n1", "1"))
	ts.queue.Delete(testPod("p", "1"))
	ts.queue.Add(testPod("p", "1"))
	ts.scheduleOne(context.Background())
	c := statusCondition(t, ts, "p")
	if c == nil || c.Reason != corev1.PodReasonSchedulerError || c.Message != `running "Boom" filter plugin: boom` {
		t.Fatalf("condition %+v", c)
	}
	if _, b, _ := ts.queue.Counts(); b != 1 {
		t.Fatal("pod with an error must back off")
	}
}

func TestBindFailureRequeues(t *testing.T) {
	var failures atomic.Int32
	failures.Store(1)
	binder := &fakeBinder{fail: func(*corev1.Pod) error {
		if failures.Add(-1) >= 0 {
			return errors.New("etcd is on fire")
		}
		return nil
	}}
	ts := newTestScheduler(t, Options{PodInitialBackoff: time.Millisecond, PodMaxBackoff: time.Millisecond},
		fitFilter{}, scoreAll(1), binder)
	ts.addNodes(testNode("n1", "1"))
	ts.addPod(t, testPod("a", "1"))
	ts.addPod(t, testPod("b", "1"))
	ctx := context.Background()
	ts.scheduleOne(ctx) // a: assumed, its bind fails
	ts.binds.Wait()
	if ts.cache.PodCount() != 0 {
		t.Fatal("the failed pod still holds the node")
	}
	if _, backoff, _ := ts.queue.PendingPods(); len(backoff) != 1 || backoff[0].Name != "a" {
		t.Fatalf("a not in backoffQ: %v", backoff)
	}
	c := statusCondition(t, ts, "a")
	if c == nil || c.Reason != corev1.PodReasonSchedulerError || !strings.Contains(c.Message, "etcd is on fire") {
		t.Fatalf("condition %+v", c)
	}
	if evs := ts.events(); len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning FailedScheduling running Bind plugin \"FakeBinder\": etcd is on fire") {
		t.Fatalf("events %q", evs)
	}
	ts.scheduleOne(ctx) // b takes the node
	ts.binds.Wait()
	time.Sleep(5 * time.Millisecond)
	ts.queue.FlushBackoffQCompleted()
	ts.scheduleOne(ctx) // a no longer fits
	if c := statusCondition(t, ts, "a"); c.Reason != corev1.PodReasonUnschedulable || c.Message != "0/1 nodes are available: 1 Insufficient cpu." {
		t.Fatalf("condition %+v", c)
	}
	// b is deleted: a is retried and bound.
	bound := testPod("b", "1")
	bound.Spec.NodeName = "n1"
	ts.onPodUpdate(testPod("b", "1"), bound)
	ts.onPodDelete(bound)
	time.Sleep(5 * time.Millisecond)
	ts.queue.FlushBackoffQCompleted()
	ts.scheduleOne(ctx)
	ts.binds.Wait()
	if binder.boundTo("a") != "n1" {
		t.Fatal("a not bound after b left")
	}
}

func TestEventHandlers(t *testing.T) {
	ts := newTestScheduler(t, Options{}, fitFilter{}, &fakeBinder{})
	n := testNode("n1", "2")
	ts.addNodes(n)
	// A bound pod of another scheduler counts; an unbound one is ignored.
	other := testPod("other", "1")
	other.Spec.SchedulerName = "someone-else"
	ts.onPodAdd(other)
	boundOther := other.DeepCopy()
	boundOther.Spec.NodeName = "n1"
	boundOther.ResourceVersion = "2"
	ts.onPodUpdate(other, boundOther)
	if a, _, _ := ts.queue.Counts(); a != 0 || ts.cache.PodCount() != 1 {
		t.Fatalf("active %d cached %d", a, ts.cache.PodCount())
	}
	// A pod that finishes frees its room.
	done := boundOther.DeepCopy()
	done.ResourceVersion = "3"
	done.Status.Phase = corev1.PodSucceeded
	ts.onPodUpdate(boundOther, done)
	if ts.cache.PodCount() != 0 {
		t.Fatal("terminal pod still counted")
	}
	// Terminal pods are never queued.
	ts.onPodAdd(done)
	failed := testPod("failed", "")
	failed.Status.Phase = corev1.PodFailed
	ts.onPodAdd(failed)
	if a, _, _ := ts.queue.Counts(); a != 0 || ts.cache.PodCount() != 0 {
		t.Fatal("terminal pods were taken in")
	}
	// Heartbeats do not count as node changes; a new taint does.
	hb := n.DeepCopy()
	hb.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
	hb2 := hb.DeepCopy()
	hb2.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Now().Add(time.Minute))
	if nodeSchedulingPropertiesChanged(hb, hb2) {
		t.Fatal("a heartbeat counted as a change")
	}
	hb2.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
	if !nodeSchedulingPropertiesChanged(hb, hb2) {
		t.Fatal("a taint did not count")
	}
	cordoned := hb.DeepCopy()
	cordoned.Spec.Unschedulable = true
	if nodeSchedulingPropertiesChanged(hb, cordoned) || !nodeSchedulingPropertiesChanged(cordoned, hb) {
		t.Fatal("only uncordoning helps pods")
	}
	ts.onNodeDelete(toolscacheTombstone(n))
	if ts.cache.NodeCount() != 0 {
		t.Fatal("node not removed")
	}
}

func toolscacheTombstone(n *corev1.Node) any {
	return toolscache.DeletedFinalStateUnknown{Key: n.Name, Obj: n}
}

func TestDefaultProfileBuilds(t *testing.T) {
	client := fake.NewSimpleClientset()
	h := &handle{snapshot: cache.NewEmptySnapshot(), client: client, informers: informers.NewSharedInformerFactory(client, 0)}
	reg, prof := plugins.NewInTreeRegistry(), plugins.DefaultProfile()
	p, err := newProfile(context.Background(), reg, prof, h, nil, DefaultParallelism)
	if err != nil {
		t.Fatal(err)
	}
	inProfile := map[string]bool{}
	for _, c := range prof {
		inProfile[c.Name] = true
	}
	for name := range reg {
		if !inProfile[name] {
			t.Errorf("registered plugin %s is not in the default profile", name)
		}
	}
	if len(p.bind) != 1 || p.bind[0].Name() != "DefaultBinder" {
		t.Fatalf("binders %v", p.bind)
	}
	weights := map[string]int64{}
	for _, s := range p.score {
		weights[s.Name()] = s.weight
	}
	for name, w := range map[string]int64{"TaintToleration": 3, "NodeAffinity": 2, "PodTopologySpread": 2, "InterPodAffinity": 2,
		"NodeResourcesFit": 1, "NodeResourcesBalancedAllocation": 1, "ImageLocality": 1} {
		if got, ok := weights[name]; ok && got != w {
			t.Errorf("%s weight %d, want %d", name, got, w)
		} else if !ok && reg[name] != nil {
			t.Errorf("%s is registered but does not score", name)
		}
	}
}
