package scheduler

import (
	"fmt"
	"testing"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

func statuses(counts ...any) framework.NodeToStatus {
	out := framework.NodeToStatus{}
	n := 0
	for i := 0; i < len(counts); i += 2 {
		reasons := counts[i+1].([]string)
		for range counts[i].(int) {
			out[fmt.Sprintf("node-%d", n)] = framework.NewStatus(framework.Unschedulable, reasons...)
			n++
		}
	}
	return out
}

func TestFitErrorMessage(t *testing.T) {
	taint := "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }"
	for _, tc := range []struct {
		name string
		err  FitError
		want string
	}{{
		// The PostFilter message gets upstream's " %v." too: preemption's own
		// message ends in a period, so the whole ends in "..", as kubectl shows.
		// Sorted as upstream sorts the "count reason" strings: the brief's example
		// order ("3 Insufficient cpu, 2 node(s) ...") is not what upstream prints.
		name: "filter reasons counted and sorted, with preemption",
		err: FitError{NumAllNodes: 5, Diagnosis: Diagnosis{
			NodeToStatus:  statuses(3, []string{"Insufficient cpu"}, 2, []string{taint}),
			PostFilterMsg: "preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling.",
		}},
		want: "0/5 nodes are available: 2 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 3 Insufficient cpu. preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling..",
	}, {
		name: "no PostFilter ran",
		err: FitError{NumAllNodes: 5, Diagnosis: Diagnosis{
			NodeToStatus: statuses(3, []string{"Insufficient cpu"}, 2, []string{taint}),
		}},
		want: "0/5 nodes are available: 2 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 3 Insufficient cpu.",
	}, {
		name: "several reasons on one node count once each",
		err: FitError{NumAllNodes: 3, Diagnosis: Diagnosis{
			NodeToStatus: statuses(2, []string{"Insufficient cpu", "Insufficient memory"}, 1, []string{"Insufficient memory"}),
		}},
		want: "0/3 nodes are available: 2 Insufficient cpu, 3 Insufficient memory.",
	}, {
		name: "sorted as strings, as upstream (10 before 2)",
		err: FitError{NumAllNodes: 12, Diagnosis: Diagnosis{
			NodeToStatus: statuses(2, []string{"node(s) didn't match Pod's node affinity/selector"}, 10, []string{"Too many pods"}),
		}},
		want: "0/12 nodes are available: 10 Too many pods, 2 node(s) didn't match Pod's node affinity/selector.",
	}, {
		name: "PreFilter rejection replaces the filter reasons",
		err: FitError{NumAllNodes: 4, Diagnosis: Diagnosis{
			NodeToStatus:      framework.NodeToStatus{},
			AbsentNodesStatus: framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) didn't satisfy plugin(s) [NodeAffinity]"),
			PreFilterMsg:      "node(s) didn't satisfy plugin(s) [NodeAffinity]",
		}},
		want: "0/4 nodes are available: node(s) didn't satisfy plugin(s) [NodeAffinity].",
	}, {
		name: "PreFilter rejection then PostFilter",
		err: FitError{NumAllNodes: 2, Diagnosis: Diagnosis{
			PreFilterMsg:  "pod has unbound immediate PersistentVolumeClaims",
			PostFilterMsg: "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
		}},
		want: "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling..",
	}, {
		name: "nodes not in the map get the absent status",
		err: FitError{NumAllNodes: 5, Diagnosis: Diagnosis{
			NodeToStatus:      statuses(1, []string{"Insufficient cpu"}),
			AbsentNodesStatus: framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) didn't satisfy plugin(s) [NodeAffinity]"),
		}},
		want: "0/5 nodes are available: 1 Insufficient cpu, 4 node(s) didn't satisfy plugin(s) [NodeAffinity].",
	}, {
		name: "one node",
		err: FitError{NumAllNodes: 1, Diagnosis: Diagnosis{
			NodeToStatus: statuses(1, []string{"node(s) didn't have free ports for the requested pod ports"}),
		}},
		want: "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports.",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
