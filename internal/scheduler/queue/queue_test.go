package queue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

func newTestQueue() (*PriorityQueue, *clocktesting.FakeClock) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	return New(Options{Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}), clk
}

func testPod(name string, priority int32) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name)},
		Spec:       corev1.PodSpec{Priority: &priority, Containers: []corev1.Container{{Name: "c"}}},
	}
}

func pop(t *testing.T, q *PriorityQueue) *QueuedPodInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := q.Pop(ctx)
	if err != nil {
		t.Fatalf("pop: %v", err)
	}
	return p
}

func names(pods []*corev1.Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return fmt.Sprint(out)
}

func checkQueues(t *testing.T, q *PriorityQueue, active, backoff, unschedulable string) {
	t.Helper()
	a, b, u := q.PendingPods()
	if names(a) != active || names(b) != backoff || names(u) != unschedulable {
		t.Fatalf("active %s backoff %s unschedulable %s; want %s %s %s", names(a), names(b), names(u), active, backoff, unschedulable)
	}
}

func TestActiveQOrder(t *testing.T) {
	q, clk := newTestQueue()
	for _, p := range []*corev1.Pod{testPod("low1", 0), testPod("high", 10), testPod("low2", 0), testPod("mid", 5), testPod("low3", 0)} {
		q.Add(p)
		clk.Step(time.Millisecond)
	}
	var got []string
	for range 5 {
		got = append(got, pop(t, q).Pod.Name)
	}
	if fmt.Sprint(got) != "[high mid low1 low2 low3]" {
		t.Fatalf("order %v", got)
	}
	if q.SchedulingCycle() != 5 {
		t.Fatalf("cycle %d", q.SchedulingCycle())
	}
}

func TestPopBlocks(t *testing.T) {
	q, _ := newTestQueue()
	got := make(chan string)
	go func() {
		p, err := q.Pop(context.Background())
		if err != nil {
			got <- err.Error()
			return
		}
		got <- p.Pod.Name
	}()
	select {
	case g := <-got:
		t.Fatalf("pop returned %q on an empty queue", g)
	case <-time.After(50 * time.Millisecond):
	}
	q.Add(testPod("a", 0))
	if g := <-got; g != "a" {
		t.Fatalf("got %q", g)
	}

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() {
		_, err := q.Pop(ctx)
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("pop after cancel: %v", err)
	}

	go func() {
		_, err := q.Pop(context.Background())
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	q.Close()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("pop after close: %v", err)
	}
}

func TestBackoffDoublesUpToMax(t *testing.T) {
	q, clk := newTestQueue()
	q.Add(testPod("a", 0))
	var waits []time.Duration
	for range 6 {
		p := pop(t, q)
		cycle := q.SchedulingCycle()
		// An error (no rejecting plugin): backoffQ.
		if err := q.AddUnschedulableIfNotPresent(p, cycle); err != nil {
			t.Fatal(err)
		}
		checkQueues(t, q, "[]", "[a]", "[]")
		start := clk.Now()
		for {
			clk.Step(100 * time.Millisecond)
			q.FlushBackoffQCompleted()
			if a, _, _ := q.Counts(); a == 1 {
				break
			}
		}
		waits = append(waits, clk.Since(start).Round(100*time.Millisecond))
	}
	if fmt.Sprint(waits) != "[1s 2s 4s 8s 10s 10s]" {
		t.Fatalf("backoffs %v", waits)
	}
}

func rejected(p *QueuedPodInfo, plugins ...string) *QueuedPodInfo {
	p.UnschedulablePlugins = sets.New(plugins...)
	return p
}

func TestUnschedulableMovedOnEvent(t *testing.T) {
	q, clk := newTestQueue()
	q.Add(testPod("a", 0))
	q.Add(testPod("b", 0))
	pa, pb := pop(t, q), pop(t, q)
	cycle := q.SchedulingCycle()
	for _, p := range []*QueuedPodInfo{pa, pb} {
		if err := q.AddUnschedulableIfNotPresent(rejected(p, "NodeResourcesFit"), cycle); err != nil {
			t.Fatal(err)
		}
	}
	checkQueues(t, q, "[]", "[]", "[a b]")
	if err := q.AddUnschedulableIfNotPresent(pa, cycle); err == nil {
		t.Fatal("adding twice must fail")
	}
	// No flush moves them.
	clk.Step(time.Minute)
	q.FlushBackoffQCompleted()
	q.FlushUnschedulablePodsLeftover()
	checkQueues(t, q, "[]", "[]", "[a b]")
	// A node event: backoff is over, so straight to activeQ; the precheck keeps b.
	q.MoveAllToActiveOrBackoffQueue(EventNodeAdd, func(p *corev1.Pod) bool { return p.Name == "a" })
	checkQueues(t, q, "[a]", "[]", "[b]")
	// An event right after a failure: b is still backing off.
	pa = pop(t, q)
	if err := q.AddUnschedulableIfNotPresent(rejected(pa, "NodeResourcesFit"), q.SchedulingCycle()); err != nil {
		t.Fatal(err)
	}
	q.MoveAllToActiveOrBackoffQueue(EventAssignedPodDelete, nil)
	checkQueues(t, q, "[b]", "[a]", "[]")
}

func TestMoveRequestDuringAttempt(t *testing.T) {
	q, _ := newTestQueue()
	q.Add(testPod("a", 0))
	q.Add(testPod("b", 0))
	p := pop(t, q)
	cycle := q.SchedulingCycle()
	// While a is being scheduled a node is added; nothing is unschedulable yet.
	q.MoveAllToActiveOrBackoffQueue(EventNodeAdd, nil)
	if err := q.AddUnschedulableIfNotPresent(rejected(p, "NodeResourcesFit"), cycle); err != nil {
		t.Fatal(err)
	}
	checkQueues(t, q, "[b]", "[a]", "[]")
	// An attempt that starts after the move request goes to unschedulablePods.
	pb := pop(t, q)
	if err := q.AddUnschedulableIfNotPresent(rejected(pb, "NodeResourcesFit"), q.SchedulingCycle()); err != nil {
		t.Fatal(err)
	}
	checkQueues(t, q, "[]", "[a]", "[b]")
}

func TestFlushUnschedulableLeftover(t *testing.T) {
	q, clk := newTestQueue()
	q.Add(testPod("old", 0))
	p := pop(t, q)
	if err := q.AddUnschedulableIfNotPresent(rejected(p, "X"), q.SchedulingCycle()); err != nil {
		t.Fatal(err)
	}
	clk.Step(4 * time.Minute)
	q.Add(testPod("new", 0))
	p = pop(t, q)
	if err := q.AddUnschedulableIfNotPresent(rejected(p, "X"), q.SchedulingCycle()); err != nil {
		t.Fatal(err)
	}
	clk.Step(61 * time.Second)
	q.FlushUnschedulablePodsLeftover()
	checkQueues(t, q, "[old]", "[]", "[new]")
}

func TestRunFlushes(t *testing.T) {
	q, clk := newTestQueue()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { q.Run(ctx); close(done) }()
	q.Add(testPod("a", 0))
	p := pop(t, q)
	if err := q.AddUnschedulableIfNotPresent(p, q.SchedulingCycle()); err != nil {
		t.Fatal(err)
	}
	for clk.Waiters() < 2 {
		time.Sleep(time.Millisecond)
	}
	clk.Step(1100 * time.Millisecond)
	if got := pop(t, q); got.Pod.Name != "a" || got.Attempts != 2 {
		t.Fatalf("got %s after %d attempts", got.Pod.Name, got.Attempts)
	}
	cancel()
	<-done
	if _, err := q.Pop(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("queue not closed by Run: %v", err)
	}
}

func TestUpdateAndDelete(t *testing.T) {
	q, _ := newTestQueue()
	a := testPod("a", 0)
	q.Add(a)
	p := pop(t, q)
	if err := q.AddUnschedulableIfNotPresent(rejected(p, "X"), q.SchedulingCycle()); err != nil {
		t.Fatal(err)
	}
	// A status-only change (our own condition patch) keeps it unschedulable.
	withStatus := a.DeepCopy()
	withStatus.ResourceVersion = "2"
	withStatus.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse}}
	q.Update(a, withStatus)
	checkQueues(t, q, "[]", "[]", "[a]")
	// A label change retries it (after its backoff).
	labelled := withStatus.DeepCopy()
	labelled.Labels = map[string]string{"x": "y"}
	q.Update(withStatus, labelled)
	checkQueues(t, q, "[]", "[a]", "[]")
	// Updating a queued pod replaces it; a higher priority moves it ahead.
	q.Add(testPod("b", 0))
	c := testPod("c", 0)
	q.Add(c)
	cHigh := testPod("c", 100)
	q.Update(c, cHigh)
	if got := pop(t, q); got.Pod.Name != "c" || *got.Pod.Spec.Priority != 100 {
		t.Fatalf("got %s", got.Pod.Name)
	}
	// An update of a pod in no queue adds it.
	q.Update(nil, testPod("d", 0))
	checkQueues(t, q, "[b d]", "[a]", "[]")
	for _, n := range []string{"a", "b", "d"} {
		q.Delete(testPod(n, 0))
	}
	checkQueues(t, q, "[]", "[]", "[]")
}

func TestAssignedPodEvents(t *testing.T) {
	q, clk := newTestQueue()
	affine := testPod("affine", 0)
	affine.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, TopologyKey: "zone",
		}},
	}}
	for _, p := range []*corev1.Pod{affine, testPod("spread", 0), testPod("fit", 0)} {
		q.Add(p)
	}
	cycle := int64(0)
	for range 3 {
		p := pop(t, q)
		cycle = q.SchedulingCycle()
		plugin := map[string]string{"affine": "InterPodAffinity", "spread": "PodTopologySpread", "fit": "NodeResourcesFit"}[p.Pod.Name]
		if err := q.AddUnschedulableIfNotPresent(rejected(p, plugin), cycle); err != nil {
			t.Fatal(err)
		}
	}
	clk.Step(time.Minute)
	web := testPod("web", 0)
	web.Labels = map[string]string{"app": "web"}
	web.Namespace = "other"
	q.AssignedPodAdded(web)
	checkQueues(t, q, "[]", "[]", "[affine fit spread]")
	db := testPod("db", 0)
	db.Labels = map[string]string{"app": "db"}
	q.AssignedPodAdded(db)
	checkQueues(t, q, "[affine spread]", "[]", "[fit]")

	// A bound pod that shrinks frees room for anyone.
	big := testPod("big", 0)
	big.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	small := big.DeepCopy()
	small.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	q.AssignedPodUpdated(small, big)
	checkQueues(t, q, "[affine spread]", "[]", "[fit]")
	q.AssignedPodUpdated(big, small)
	checkQueues(t, q, "[affine fit spread]", "[]", "[]")
}

func TestNominator(t *testing.T) {
	q := New(Options{})
	pod := func(name, nominated string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
		p.Status.NominatedNodeName = nominated
		return p
	}
	names := func(node string) []string {
		var out []string
		for _, p := range q.NominatedPodsForNode(node) {
			out = append(out, p.Name)
		}
		return out
	}
	// Added with a status nomination.
	q.Add(pod("a", "n1"))
	if got := names("n1"); len(got) != 1 || got[0] != "a" {
		t.Fatalf("n1: %v", got)
	}
	// Preemption nominates b in memory before its status is written; an update
	// without the status keeps it, the status then confirms it.
	b := pod("b", "")
	q.Add(b)
	q.AddNominatedPod(b, &framework.NominatingInfo{NominatedNodeName: "n2", NominatingMode: framework.ModeOverride})
	b2 := pod("b", "")
	b2.Labels = map[string]string{"x": "y"}
	q.Update(b, b2)
	if q.NominatedNodeName(b2) != "n2" {
		t.Fatalf("in-memory nomination lost on update: %q", q.NominatedNodeName(b2))
	}
	b3 := pod("b", "n2")
	q.Update(b2, b3)
	if got := names("n2"); len(got) != 1 || got[0] != "b" {
		t.Fatalf("n2: %v", got)
	}
	// A status that clears the nomination clears it; so does ModeOverride "".
	q.Update(pod("a", "n1"), pod("a", ""))
	if got := names("n1"); len(got) != 0 {
		t.Fatalf("n1 after clearing: %v", got)
	}
	q.AddNominatedPod(b3, &framework.NominatingInfo{NominatingMode: framework.ModeOverride})
	if got := names("n2"); len(got) != 0 {
		t.Fatalf("n2 after override to none: %v", got)
	}
	// ModeNoop (nil) falls back to the status; delete forgets.
	q.AddNominatedPod(b3, nil)
	if q.NominatedNodeName(b3) != "n2" {
		t.Fatal("noop did not use the status")
	}
	q.Delete(b3)
	if got := names("n2"); len(got) != 0 {
		t.Fatalf("n2 after delete: %v", got)
	}
	// A bound pod is never nominated.
	bound := pod("c", "n3")
	bound.Spec.NodeName = "n3"
	q.AddNominatedPod(bound, nil)
	if got := names("n3"); len(got) != 0 {
		t.Fatalf("bound pod nominated: %v", got)
	}
}

func TestGatedPodsWaitForTheirOwnUpdate(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	q := New(Options{Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		PreEnqueue: func(p *corev1.Pod) bool { return len(p.Spec.SchedulingGates) == 0 }})
	gated := testPod("gated", 100) // the highest priority: it would be popped first
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
	q.Add(gated)
	q.Add(testPod("free", 0))
	checkQueues(t, q, "[free]", "[]", "[gated]")
	if !q.Gated(gated) {
		t.Fatal("the gated pod is not reported gated")
	}
	if p := pop(t, q); p.Pod.Name != "free" {
		t.Fatalf("popped %s, want free", p.Pod.Name)
	}
	// Cluster events and the leftover flush leave gated pods alone.
	q.MoveAllToActiveOrBackoffQueue(EventNodeAdd, nil)
	clk.Step(2 * DefaultPodMaxInUnschedulablePodsDuration)
	q.FlushUnschedulablePodsLeftover()
	checkQueues(t, q, "[]", "[]", "[gated]")
	// An update that keeps a gate keeps it gated.
	still := gated.DeepCopy()
	still.Labels = map[string]string{"x": "y"}
	q.Update(gated, still)
	checkQueues(t, q, "[]", "[]", "[gated]")
	// Removing the last gate lets it in, with no backoff.
	open := still.DeepCopy()
	open.Spec.SchedulingGates = nil
	q.Update(still, open)
	if q.Gated(open) {
		t.Fatal("still gated after its gates went")
	}
	if p := pop(t, q); p.Pod.Name != "gated" || len(p.Pod.Spec.SchedulingGates) != 0 {
		t.Fatalf("popped %s with gates %v", p.Pod.Name, p.Pod.Spec.SchedulingGates)
	}
	// A gated pod deleted before its gates open is gone from the queue.
	g2 := testPod("g2", 0)
	g2.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
	q.Add(g2)
	q.Delete(g2)
	checkQueues(t, q, "[]", "[]", "[]")
}

func TestMoveRejectedPods(t *testing.T) {
	q, clk := newTestQueue()
	for _, n := range []string{"vol", "vol-other", "fit", "both"} {
		q.Add(testPod(n, 0))
	}
	cycle := int64(0)
	for range 4 {
		p := pop(t, q)
		cycle = q.SchedulingCycle()
		plugins := map[string][]string{"vol": {"VolumeBinding"}, "vol-other": {"VolumeBinding"},
			"fit": {"NodeResourcesFit"}, "both": {"NodeResourcesFit", "VolumeBinding"}}[p.Pod.Name]
		if err := q.AddUnschedulableIfNotPresent(rejected(p, plugins...), cycle); err != nil {
			t.Fatal(err)
		}
	}
	clk.Step(time.Minute)
	checkQueues(t, q, "[]", "[]", "[both fit vol vol-other]")
	// Only pods VolumeBinding rejected, and only those its hint says the event helps.
	var asked []string
	q.MoveRejectedPods("PersistentVolumeClaimAdd", func(plugin string, pod *corev1.Pod) bool {
		if plugin != "VolumeBinding" {
			return false
		}
		asked = append(asked, pod.Name)
		return pod.Name != "vol-other"
	})
	checkQueues(t, q, "[both vol]", "[]", "[fit vol-other]")
	sort.Strings(asked)
	if strings.Join(asked, " ") != "both vol vol-other" {
		t.Errorf("hint asked for %v", asked)
	}
}
