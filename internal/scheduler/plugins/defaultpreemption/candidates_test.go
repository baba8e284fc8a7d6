package defaultpreemption

import (
	"context"
	"math"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

func TestSelectVictimsOnNode(t *testing.T) {
	tests := []struct {
		name      string
		nodeCPU   string
		pods      []*corev1.Pod
		nominated []*corev1.Pod
		preemptor *corev1.Pod
		want      []string
		wantCode  framework.Code
		wantMsg   string
	}{{
		name:    "every lower-priority pod goes when all are needed, most important first",
		nodeCPU: "4",
		pods:    []*corev1.Pod{pod("low1", "n1", "2", 1, 0), pod("low2", "n1", "2", 2, 0)},
		// Higher priority first in the result.
		preemptor: pod("p", "", "4", 10, -1),
		want:      []string{"low2", "low1"},
	}, {
		name:    "reprieve from the highest priority down, keeping every pod that still leaves room",
		nodeCPU: "4",
		pods:    []*corev1.Pod{pod("a", "n1", "1", 5, 0), pod("b", "n1", "1", 1, 0), pod("c", "n1", "2", 3, 0)},
		// Removing all frees 4; a (5) stays (3 free), c (3) would leave 1: victim; b (1) stays.
		preemptor: pod("p", "", "2", 10, -1),
		want:      []string{"c"},
	}, {
		name:    "among equal priorities the earlier started is reprieved first",
		nodeCPU: "2",
		pods:    []*corev1.Pod{pod("late", "n1", "1", 1, 20), pod("early", "n1", "1", 1, 10)},
		// A pod that has not started counts as started now: latest of all.
		preemptor: pod("p", "", "1", 10, -1),
		want:      []string{"late"},
	}, {
		name:      "pods of equal or higher priority are never victims",
		nodeCPU:   "2",
		pods:      []*corev1.Pod{pod("same", "n1", "1", 10, 0), pod("higher", "n1", "1", 20, 0)},
		preemptor: pod("p", "", "1", 10, -1),
		wantCode:  framework.UnschedulableAndUnresolvable,
		wantMsg:   "No preemption victims found for incoming pod",
	}, {
		name:      "a node where even evicting every lower-priority pod is not enough gives the filter's reason",
		nodeCPU:   "4",
		pods:      []*corev1.Pod{pod("higher", "n1", "3", 20, 0), pod("low", "n1", "1", 1, 0)},
		preemptor: pod("p", "", "2", 10, -1),
		wantCode:  framework.Unschedulable,
		wantMsg:   "Insufficient cpu",
	}, {
		name:    "a nominated pod of higher priority keeps its room: more victims",
		nodeCPU: "4",
		pods:    []*corev1.Pod{pod("a", "n1", "1", 1, 0), pod("b", "n1", "1", 2, 0)},
		// 2 cpu nominated at priority 20: only 2 left for the preemptor and the pods.
		nominated: []*corev1.Pod{pod("nom", "", "2", 20, -1)},
		preemptor: pod("p", "", "2", 10, -1),
		want:      []string{"b", "a"},
	}, {
		name:    "a nominated pod of lower priority does not count",
		nodeCPU: "4",
		pods:    []*corev1.Pod{pod("a", "n1", "2", 1, 0), pod("b", "n1", "2", 2, 0)},
		// Nominated at priority 5 < 10: ignored, so one victim is enough.
		nominated: []*corev1.Pod{pod("nom", "", "2", 5, -1)},
		preemptor: pod("p", "", "2", 10, -1),
		want:      []string{"a"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newTestHandle(t, []*corev1.Node{node("n1", tc.nodeCPU)}, tc.pods)
			h.nominated = map[string][]*corev1.Pod{"n1": tc.nominated}
			ni, err := h.snap.Get("n1")
			if err != nil {
				t.Fatal(err)
			}
			before := len(ni.Pods)
			victims, st := selectVictimsOnNode(context.Background(), h, h.preFilter(t, tc.preemptor), tc.preemptor, ni.Clone())
			if st.Code() != tc.wantCode || (tc.wantMsg != "" && st.Message() != tc.wantMsg) {
				t.Fatalf("status %v %q, want %v %q", st.Code(), st.Message(), tc.wantCode, tc.wantMsg)
			}
			if got := names(victims); !slices.Equal(got, tc.want) {
				t.Errorf("victims %v, want %v", got, tc.want)
			}
			if len(ni.Pods) != before {
				t.Errorf("the snapshot's node changed: %d pods, had %d", len(ni.Pods), before)
			}
		})
	}
}

func TestPickOneNodeForPreemption(t *testing.T) {
	cand := func(name string, victims ...*corev1.Pod) *Candidate { return &Candidate{Name: name, Victims: victims} }
	tests := []struct {
		name       string
		candidates []*Candidate
		want       string
	}{{
		name:       "a node without victims wins at once",
		candidates: []*Candidate{cand("a", pod("x", "a", "1", 1, 0)), cand("b")},
		want:       "b",
	}, {
		name: "fewest PDB violations first",
		candidates: []*Candidate{
			{Name: "a", Victims: []*corev1.Pod{pod("x", "a", "1", 1, 0)}, NumPDBViolations: 1},
			{Name: "b", Victims: []*corev1.Pod{pod("y", "b", "1", 5, 0)}},
		},
		want: "b",
	}, {
		name: "lowest highest-victim priority",
		candidates: []*Candidate{
			cand("a", pod("a1", "a", "1", 5, 0)),
			cand("b", pod("b1", "b", "1", 4, 0), pod("b2", "b", "1", 4, 0), pod("b3", "b", "1", 3, 0)),
		},
		want: "b",
	}, {
		name: "then smallest sum of priorities",
		candidates: []*Candidate{
			cand("a", pod("a1", "a", "1", 5, 0), pod("a2", "a", "1", 4, 0)),
			cand("b", pod("b1", "b", "1", 5, 0), pod("b2", "b", "1", 3, 0)),
		},
		want: "b",
	}, {
		name: "sums are of shifted priorities: two victims of -1 cost more than one of 0",
		candidates: []*Candidate{
			cand("a", pod("a1", "a", "1", 0, 0), pod("a2", "a", "1", -5, 0), pod("a3", "a", "1", -5, 0)),
			cand("b", pod("b1", "b", "1", 0, 0), pod("b2", "b", "1", -1, 0)),
		},
		want: "b",
	}, {
		name: "then fewest victims",
		candidates: []*Candidate{
			cand("a", pod("a1", "a", "1", 5, 0), pod("a2", "a", "1", math.MinInt32, 0)),
			cand("b", pod("b1", "b", "1", 5, 0)),
		},
		// A victim of the lowest priority adds 0 to the shifted sum: equal sums.
		want: "b",
	}, {
		name: "then latest start of the highest-priority victims",
		candidates: []*Candidate{
			cand("a", pod("a1", "a", "1", 5, 100), pod("a2", "a", "1", 5, 10), pod("a3", "a", "1", 1, 500)),
			cand("b", pod("b1", "b", "1", 5, 50), pod("b2", "b", "1", 5, 60), pod("b3", "b", "1", 1, 0)),
		},
		// Earliest among priority 5: a 10, b 50; b's started later.
		want: "b",
	}, {
		name: "a full tie goes to the first candidate",
		candidates: []*Candidate{
			cand("a", pod("a1", "a", "1", 5, 10)),
			cand("b", pod("b1", "b", "1", 5, 10)),
		},
		want: "a",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := pickOneNodeForPreemption(tc.candidates); got.Name != tc.want {
				t.Errorf("picked %s, want %s", got.Name, tc.want)
			}
		})
	}
	if pickOneNodeForPreemption(nil) != nil {
		t.Error("no candidates picked one")
	}
}

func TestNumCandidates(t *testing.T) {
	pl := &DefaultPreemption{percentage: DefaultMinCandidateNodesPercentage, absolute: DefaultMinCandidateNodesAbsolute}
	for _, tc := range []struct{ nodes, want int }{{3, 3}, {100, 100}, {500, 100}, {5000, 500}} {
		if got := pl.numCandidates(tc.nodes); got != tc.want {
			t.Errorf("%d nodes: %d candidates, want %d", tc.nodes, got, tc.want)
		}
	}
}
