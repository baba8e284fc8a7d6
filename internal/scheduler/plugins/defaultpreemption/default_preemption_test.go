package defaultpreemption

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

func newPlugin(t *testing.T, h *testHandle) *DefaultPreemption {
	t.Helper()
	pl, err := New(context.Background(), nil, h)
	if err != nil {
		t.Fatal(err)
	}
	p := pl.(*DefaultPreemption)
	p.offset = func(int) int { return 0 }
	return p
}

// filterStatuses runs Fit on every node as the scheduling cycle would have.
func filterStatuses(t *testing.T, h *testHandle, state *framework.CycleState, p *corev1.Pod) framework.NodeToStatus {
	t.Helper()
	m := framework.NodeToStatus{}
	nodes, _ := h.snap.List()
	for _, ni := range nodes {
		if st := h.RunFilterPluginsWithNominatedPods(context.Background(), state, p, ni); !st.IsSuccess() {
			m[ni.Node().Name] = st
		}
	}
	return m
}

// actions lists the clientset's writes as "verb subresource name".
func actions(h *testHandle) []string {
	var out []string
	for _, a := range h.client.Actions() {
		switch a := a.(type) {
		case clienttesting.PatchAction:
			out = append(out, "patch "+a.GetSubresource()+" "+a.GetName())
		case clienttesting.DeleteAction:
			out = append(out, "delete "+a.GetName())
		}
	}
	slices.Sort(out)
	return out
}

func TestPostFilterPreempts(t *testing.T) {
	// n1: two pods of priority 1; n2: one pod of priority 5. The preemptor
	// needs 2 cpu: one victim on each node; n1's has the lower priority.
	pods := []*corev1.Pod{
		pod("a", "n1", "2", 1, 0), pod("b", "n1", "2", 1, 10),
		pod("c", "n2", "4", 5, 0),
	}
	nominatedLow := pod("nom-low", "", "1", 3, -1)
	nominatedLow.Status.NominatedNodeName = "n1"
	nominatedHigh := pod("nom-high", "", "1", 30, -1)
	nominatedHigh.Status.NominatedNodeName = "n1"
	h := newTestHandle(t, []*corev1.Node{node("n1", "4"), node("n2", "4")}, append(pods, nominatedLow, nominatedHigh))
	h.nominated = map[string][]*corev1.Pod{"n1": {nominatedLow}}
	pl := newPlugin(t, h)
	p := pod("p", "", "2", 10, -1)
	state := h.preFilter(t, p)

	res, st := pl.PostFilter(context.Background(), state, p, filterStatuses(t, h, state, p))
	if !st.IsSuccess() {
		t.Fatalf("PostFilter: %v %q", st.Code(), st.Message())
	}
	if res.Mode() != framework.ModeOverride || res.NominatedNodeName != "n1" {
		t.Fatalf("result %+v, want n1 nominated", res.NominatingInfo)
	}
	// b started later than a: it goes; the lower-priority nomination on n1 is cleared.
	want := []string{"delete b", "patch status b", "patch status nom-low"}
	if got := actions(h); !slices.Equal(got, want) {
		t.Fatalf("actions %v, want %v", got, want)
	}
	if _, err := h.client.CoreV1().Pods("default").Get(context.Background(), "b", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("victim b still exists: %v", err)
	}
	// The status patch came first: check it on the patch action itself.
	patched := false
	for _, a := range h.client.Actions() {
		if pa, ok := a.(clienttesting.PatchAction); ok && pa.GetName() == "b" {
			if !strings.Contains(string(pa.GetPatch()), `"type":"DisruptionTarget"`) ||
				!strings.Contains(string(pa.GetPatch()), `"reason":"PreemptionByScheduler"`) ||
				!strings.Contains(string(pa.GetPatch()), `"message":"default-scheduler: preempting to accommodate a higher priority pod"`) {
				t.Errorf("victim patch %s lacks the DisruptionTarget condition", pa.GetPatch())
			}
			patched = true
		}
	}
	if !patched {
		t.Fatal("no status patch of the victim")
	}
	nl, err := h.client.CoreV1().Pods("default").Get(context.Background(), "nom-low", metav1.GetOptions{})
	if err != nil || nl.Status.NominatedNodeName != "" {
		t.Errorf("nom-low: nominatedNodeName %q (%v), want cleared", nl.Status.NominatedNodeName, err)
	}
	select {
	case ev := <-h.recorder.Events:
		if want := "Normal Preempted Preempted by pod uid-p on node n1"; ev != want {
			t.Errorf("event %q, want %q", ev, want)
		}
	default:
		t.Error("no Preempted event")
	}
}

func TestPostFilterWaitingVictimIsRejectedNotDeleted(t *testing.T) {
	h := newTestHandle(t, []*corev1.Node{node("n1", "2")}, []*corev1.Pod{pod("w", "n1", "2", 1, 0)})
	pl := newPlugin(t, h)
	wp := h.waiting.Add(pod("w", "n1", "2", 1, 0), map[string]time.Duration{"Gate": time.Hour})
	p := pod("p", "", "2", 10, -1)
	state := h.preFilter(t, p)
	res, st := pl.PostFilter(context.Background(), state, p, filterStatuses(t, h, state, p))
	if !st.IsSuccess() || res.NominatedNodeName != "n1" {
		t.Fatalf("PostFilter: %v %q %+v", st.Code(), st.Message(), res)
	}
	if got := actions(h); len(got) != 0 {
		t.Errorf("actions %v, want none", got)
	}
	if s := h.waiting.Wait(wp.GetPod().UID, nil); s.Code() != framework.Unschedulable || s.Plugin() != Name || s.Message() != "preempted" {
		t.Errorf("waiting victim got %v %q from %q, want Unschedulable preempted from %s", s.Code(), s.Message(), s.Plugin(), Name)
	}
}

func TestPostFilterMessages(t *testing.T) {
	never := corev1.PreemptNever
	terminating := pod("t", "n1", "2", 1, 0)
	terminating.DeletionTimestamp = &metav1.Time{Time: t0}
	terminating.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonPreemptionByScheduler}}
	tests := []struct {
		name       string
		pods       []*corev1.Pod
		preemptor  *corev1.Pod
		unresolved []string
		want       string
		wantClear  bool
	}{{
		name:      "only pods of higher priority",
		pods:      []*corev1.Pod{pod("h1", "n1", "2", 20, 0), pod("h2", "n2", "2", 20, 0)},
		preemptor: pod("p", "", "2", 10, -1),
		want:      "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
		wantClear: true,
	}, {
		name:       "every node unresolvable",
		pods:       []*corev1.Pod{pod("l1", "n1", "2", 1, 0), pod("l2", "n2", "2", 1, 0)},
		preemptor:  pod("p", "", "2", 10, -1),
		unresolved: []string{"n1", "n2"},
		want:       "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
		wantClear:  true,
	}, {
		name: "one unresolvable, one too small even when emptied",
		pods: []*corev1.Pod{pod("l1", "n1", "2", 1, 0), pod("h2", "n2", "1", 20, 0), pod("l2", "n2", "1", 1, 0)},
		// n2 has 2 cpu with 1 taken by a higher-priority pod.
		preemptor:  pod("p", "", "2", 10, -1),
		unresolved: []string{"n1"},
		want:       "preemption: 0/2 nodes are available: 1 Insufficient cpu, 1 Preemption is not helpful for scheduling.",
		wantClear:  true,
	}, {
		name:      "preemptionPolicy Never",
		pods:      []*corev1.Pod{pod("l1", "n1", "2", 1, 0)},
		preemptor: func() *corev1.Pod { p := pod("p", "", "2", 10, -1); p.Spec.PreemptionPolicy = &never; return p }(),
		want:      "preemption: not eligible due to preemptionPolicy=Never.",
	}, {
		name:      "a victim still terminating on the nominated node",
		pods:      []*corev1.Pod{terminating},
		preemptor: func() *corev1.Pod { p := pod("p", "", "2", 10, -1); p.Status.NominatedNodeName = "n1"; return p }(),
		want:      "preemption: not eligible due to a terminating pod on the nominated node.",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newTestHandle(t, []*corev1.Node{node("n1", "2"), node("n2", "2")}, tc.pods)
			pl := newPlugin(t, h)
			state := h.preFilter(t, tc.preemptor)
			m := filterStatuses(t, h, state, tc.preemptor)
			for _, n := range tc.unresolved {
				m[n] = framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) didn't match Pod's node affinity/selector")
			}
			res, st := pl.PostFilter(context.Background(), state, tc.preemptor, m)
			if st.Code() != framework.Unschedulable || st.Message() != tc.want {
				t.Fatalf("status %v %q, want Unschedulable %q", st.Code(), st.Message(), tc.want)
			}
			if cleared := res != nil && res.Mode() == framework.ModeOverride && res.NominatedNodeName == ""; cleared != tc.wantClear {
				t.Errorf("result %+v: clears the nomination %v, want %v", res, cleared, tc.wantClear)
			}
			if got := actions(h); len(got) != 0 {
				t.Errorf("actions %v, want none", got)
			}
		})
	}
}

func TestNewValidatesArgs(t *testing.T) {
	h := &testHandle{}
	i := func(v int32) *int32 { return &v }
	for _, a := range []Args{
		{MinCandidateNodesPercentage: i(-1)},
		{MinCandidateNodesPercentage: i(101)},
		{MinCandidateNodesAbsolute: i(-1)},
		{MinCandidateNodesPercentage: i(0), MinCandidateNodesAbsolute: i(0)},
	} {
		if _, err := New(context.Background(), a, h); err == nil {
			t.Errorf("args %+v accepted", a)
		}
	}
	if _, err := New(context.Background(), "x", h); err == nil {
		t.Error("args of the wrong type accepted")
	}
	if _, err := New(context.Background(), &Args{MinCandidateNodesAbsolute: i(5)}, h); err != nil {
		t.Error(err)
	}
}
