package podtopologyspread

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

// zoneNodes are upstream's node-a, node-b (zone1) and node-x, node-y (zone2).
func zoneNodes() []*corev1.Node {
	return []*corev1.Node{
		makeNode().Name("node-a").Label("zone", "zone1").Label("node", "node-a").Obj(),
		makeNode().Name("node-b").Label("zone", "zone1").Label("node", "node-b").Obj(),
		makeNode().Name("node-x").Label("zone", "zone2").Label("node", "node-x").Obj(),
		makeNode().Name("node-y").Label("zone", "zone2").Label("node", "node-y").Obj(),
	}
}

// fooPods returns pods labelled foo="" named p-<node letter><n> placed as counts says.
func fooPods(counts map[string]int) []*corev1.Pod {
	var out []*corev1.Pod
	for _, node := range []string{"node-a", "node-b", "node-c", "node-x", "node-y"} {
		for i := 1; i <= counts[node]; i++ {
			out = append(out, makePod().Name(fmt.Sprintf("p-%s%d", node[len(node)-1:], i)).Node(node).Label("foo", "").Obj())
		}
	}
	return out
}

// sortedPaths orders two critical paths with equal counts by topology value,
// as upstream's test comparer does.
func sortedPaths(p criticalPaths) criticalPaths {
	if p[0].MatchNum == p[1].MatchNum && p[0].TopologyValue > p[1].TopologyValue {
		p[0].TopologyValue, p[1].TopologyValue = p[1].TopologyValue, p[0].TopologyValue
	}
	return p
}

func paths(v0 string, n0 int, v1 string, n1 int) criticalPaths {
	var p criticalPaths
	p[0].TopologyValue, p[0].MatchNum = v0, n0
	p[1].TopologyValue, p[1].MatchNum = v1, n1
	return p
}

// TestPreFilterState reproduces cases of upstream's TestPreFilterState: the
// per-domain counts, critical paths and parsed constraints.
func TestPreFilterState(t *testing.T) {
	tests := []struct {
		name        string
		pod         *corev1.Pod
		nodes       []*corev1.Node
		existing    []*corev1.Pod
		wantSkip    bool
		wantCounts  []map[string]int
		wantPaths   []criticalPaths
		wantConstrs []constraint
	}{
		{
			name:       "clean cluster with one spreadConstraint",
			pod:        makePod().Name("p").Label("foo", "").SpreadConstraint(5, "zone", corev1.DoNotSchedule, &metav1.LabelSelector{MatchLabels: map[string]string{"foo": "bar"}}, nil, nil, nil, nil).Obj(),
			nodes:      zoneNodes(),
			wantCounts: []map[string]int{{"zone1": 0, "zone2": 0}},
			wantPaths:  []criticalPaths{paths("zone1", 0, "zone2", 0)},
			wantConstrs: []constraint{{MaxSkew: 5, TopologyKey: "zone", MinDomains: 1,
				NodeAffinityPolicy: corev1.NodeInclusionPolicyHonor, NodeTaintsPolicy: corev1.NodeInclusionPolicyIgnore}},
		},
		{
			name:       "normal case with one spreadConstraint",
			pod:        makePod().Name("p").Label("foo", "").SpreadConstraint(1, "zone", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(),
			nodes:      zoneNodes(),
			existing:   fooPods(map[string]int{"node-a": 2, "node-b": 1, "node-y": 2}),
			wantCounts: []map[string]int{{"zone1": 3, "zone2": 2}},
			wantPaths:  []criticalPaths{paths("zone2", 2, "zone1", 3)},
		},
		{
			name:       "normal case with null label selector",
			pod:        makePod().Name("p").Label("foo", "").SpreadConstraint(1, "zone", corev1.DoNotSchedule, nil, nil, nil, nil, nil).Obj(),
			nodes:      zoneNodes(),
			existing:   fooPods(map[string]int{"node-a": 2, "node-b": 1, "node-y": 2}),
			wantCounts: []map[string]int{{"zone1": 0, "zone2": 0}},
			wantPaths:  []criticalPaths{paths("zone2", 0, "zone1", 0)},
		},
		{
			name: "normal case with one spreadConstraint, on a 3-zone cluster",
			pod:  makePod().Name("p").Label("foo", "").SpreadConstraint(1, "zone", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(),
			nodes: append(zoneNodes(),
				makeNode().Name("node-o").Label("zone", "zone3").Label("node", "node-o").Obj(),
				makeNode().Name("node-p").Label("zone", "zone3").Label("node", "node-p").Obj()),
			existing:   fooPods(map[string]int{"node-a": 2, "node-b": 1, "node-y": 2}),
			wantCounts: []map[string]int{{"zone1": 3, "zone2": 2, "zone3": 0}},
			wantPaths:  []criticalPaths{paths("zone3", 0, "zone2", 2)},
		},
		{
			name:  "namespace mismatch doesn't count",
			pod:   makePod().Name("p").Label("foo", "").SpreadConstraint(1, "zone", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(),
			nodes: zoneNodes(),
			existing: []*corev1.Pod{
				makePod().Name("p-a1").Node("node-a").Label("foo", "").Obj(),
				makePod().Name("p-a2").Namespace("ns1").Node("node-a").Label("foo", "").Obj(),
				makePod().Name("p-b1").Node("node-b").Label("foo", "").Obj(),
				makePod().Name("p-y1").Namespace("ns2").Node("node-y").Label("foo", "").Obj(),
				makePod().Name("p-y2").Node("node-y").Label("foo", "").Obj(),
			},
			wantCounts: []map[string]int{{"zone1": 2, "zone2": 1}},
			wantPaths:  []criticalPaths{paths("zone2", 1, "zone1", 2)},
		},
		{
			name: "normal case with two spreadConstraints",
			pod: makePod().Name("p").Label("foo", "").
				SpreadConstraint(1, "zone", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).
				SpreadConstraint(1, "node", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(),
			nodes:      zoneNodes(),
			existing:   fooPods(map[string]int{"node-a": 2, "node-b": 1, "node-y": 4}),
			wantCounts: []map[string]int{{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-x": 0, "node-y": 4}},
			wantPaths:  []criticalPaths{paths("zone1", 3, "zone2", 4), paths("node-x", 0, "node-b", 1)},
		},
		{
			name: "soft spreadConstraints should be bypassed",
			pod: makePod().Name("p").Label("foo", "").
				SpreadConstraint(1, "zone", corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).
				SpreadConstraint(1, "zone", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).
				SpreadConstraint(1, "node", corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).
				SpreadConstraint(1, "node", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(),
			nodes:      []*corev1.Node{zoneNodes()[0], zoneNodes()[1], zoneNodes()[3]},
			existing:   fooPods(map[string]int{"node-a": 2, "node-b": 1, "node-y": 4}),
			wantCounts: []map[string]int{{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-y": 4}},
			wantPaths:  []criticalPaths{paths("zone1", 3, "zone2", 4), paths("node-b", 1, "node-a", 2)},
		},
		{
			name: "two spreadConstraints, and with podAffinity",
			pod: makePod().Name("p").Label("foo", "").NodeAffinityNotIn("node", "node-x").
				SpreadConstraint(1, "zone", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).
				SpreadConstraint(1, "node", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(),
			nodes:      zoneNodes(),
			existing:   fooPods(map[string]int{"node-a": 2, "node-b": 1, "node-y": 4}),
			wantCounts: []map[string]int{{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-y": 4}},
			wantPaths:  []criticalPaths{paths("zone1", 3, "zone2", 4), paths("node-b", 1, "node-a", 2)},
		},
		{
			name: "NodeAffinityPolicy ignored with labelSelectors",
			pod: makePod().Name("p").Label("foo", "").NodeSelector(map[string]string{"foo": ""}).
				SpreadConstraint(1, "node", corev1.DoNotSchedule, barSelector, nil, &ignorePolicy, nil, nil).Obj(),
			nodes: []*corev1.Node{
				makeNode().Name("node-a").Label("node", "node-a").Label("foo", "").Obj(),
				makeNode().Name("node-b").Label("node", "node-b").Label("foo", "").Obj(),
				makeNode().Name("node-c").Label("node", "node-c").Label("bar", "").Obj(),
			},
			existing: []*corev1.Pod{
				makePod().Name("p-a").Node("node-a").Label("bar", "").Obj(),
				makePod().Name("p-b").Node("node-b").Label("bar", "").Obj(),
				makePod().Name("p-c").Node("node-b").Label("bar", "").Obj(),
				makePod().Name("p-d").Node("node-c").Obj(),
			},
			wantCounts: []map[string]int{{"node-a": 1, "node-b": 2, "node-c": 0}},
			wantPaths:  []criticalPaths{paths("node-c", 0, "node-a", 1)},
			wantConstrs: []constraint{{MaxSkew: 1, TopologyKey: "node", MinDomains: 1,
				NodeAffinityPolicy: corev1.NodeInclusionPolicyIgnore, NodeTaintsPolicy: corev1.NodeInclusionPolicyIgnore}},
		},
		{
			name: "NodeAffinityPolicy honored with nodeAffinity",
			pod: makePod().Name("p").Label("foo", "").NodeAffinityIn("foo", "").
				SpreadConstraint(1, "node", corev1.DoNotSchedule, barSelector, nil, nil, nil, nil).Obj(),
			nodes: []*corev1.Node{
				makeNode().Name("node-a").Label("node", "node-a").Label("foo", "").Obj(),
				makeNode().Name("node-b").Label("node", "node-b").Label("foo", "").Obj(),
				makeNode().Name("node-c").Label("node", "node-c").Label("bar", "").Obj(),
			},
			existing: []*corev1.Pod{
				makePod().Name("p-a").Node("node-a").Label("bar", "").Obj(),
				makePod().Name("p-c").Node("node-b").Label("bar", "").Obj(),
				makePod().Name("p-d").Node("node-b").Label("bar", "").Obj(),
				makePod().Name("p-e").Node("node-c").Obj(),
			},
			wantCounts: []map[string]int{{"node-a": 1, "node-b": 2}},
			wantPaths:  []criticalPaths{paths("node-a", 1, "node-b", 2)},
		},
		{
			name: "NodeTaintsPolicy honored",
			pod: makePod().Name("p").Label("foo", "").
				SpreadConstraint(1, "node", corev1.DoNotSchedule, barSelector, nil, nil, &honorPolicy, nil).Obj(),
			nodes: []*corev1.Node{
				makeNode().Name("node-a").Label("node", "node-a").Obj(),
				makeNode().Name("node-b").Label("node", "node-b").Obj(),
				makeNode().Name("node-c").Label("node", "node-c").Taints(taints).Label("bar", "").Obj(),
			},
			existing: []*corev1.Pod{
				makePod().Name("p-a").Node("node-a").Label("bar", "").Obj(),
				makePod().Name("p-b").Node("node-b").Label("bar", "").Obj(),
				makePod().Name("p-c").Node("node-b").Label("bar", "").Obj(),
				makePod().Name("p-d").Node("node-c").Obj(),
			},
			wantCounts: []map[string]int{{"node-a": 1, "node-b": 2}},
			wantPaths:  []criticalPaths{paths("node-a", 1, "node-b", 2)},
		},
		{
			name: "NodeTaintsPolicy honored with tolerated taints",
			pod: makePod().Name("p").Label("foo", "").Toleration(corev1.TaintNodeUnschedulable).
				SpreadConstraint(1, "node", corev1.DoNotSchedule, barSelector, nil, nil, &honorPolicy, nil).Obj(),
			nodes: []*corev1.Node{
				makeNode().Name("node-a").Label("node", "node-a").Obj(),
				makeNode().Name("node-b").Label("node", "node-b").Obj(),
				makeNode().Name("node-c").Label("node", "node-c").Taints(taints).Label("bar", "").Obj(),
			},
			existing: []*corev1.Pod{
				makePod().Name("p-a").Node("node-a").Label("bar", "").Obj(),
				makePod().Name("p-b").Node("node-b").Label("bar", "").Obj(),
				makePod().Name("p-c").Node("node-b").Label("bar", "").Obj(),
				makePod().Name("p-d").Node("node-c").Obj(),
			},
			wantCounts: []map[string]int{{"node-a": 1, "node-b": 2, "node-c": 0}},
			wantPaths:  []criticalPaths{paths("node-c", 0, "node-a", 1)},
		},
		{
			name: "two node inclusion Constraints, zone: ignore/ignore, node: honor/honor",
			pod: makePod().Name("p").Label("foo", "").NodeSelector(map[string]string{"foo": ""}).
				SpreadConstraint(1, "zone", corev1.DoNotSchedule, fooSelector, nil, &ignorePolicy, nil, nil).
				SpreadConstraint(1, "node", corev1.DoNotSchedule, fooSelector, nil, nil, &honorPolicy, nil).Obj(),
			nodes: []*corev1.Node{
				makeNode().Name("node-a").Label("zone", "zone1").Label("node", "node-a").Obj(),
				makeNode().Name("node-b").Label("zone", "zone1").Label("node", "node-b").Label("foo", "").Taints(taints).Obj(),
				makeNode().Name("node-x").Label("zone", "zone2").Label("node", "node-x").Label("foo", "").Obj(),
				makeNode().Name("node-y").Label("zone", "zone2").Label("node", "node-y").Label("foo", "").Obj(),
			},
			existing:   fooPods(map[string]int{"node-a": 2, "node-x": 2, "node-y": 1}),
			wantCounts: []map[string]int{{"zone1": 2, "zone2": 3}, {"node-x": 2, "node-y": 1}},
			wantPaths:  []criticalPaths{paths("zone1", 2, "zone2", 3), paths("node-y", 1, "node-x", 2)},
		},
		{
			name: "matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
			pod: makePod().Name("p").Label("foo", "").Label("bar", "a").
				SpreadConstraint(1, "zone", corev1.DoNotSchedule, fooSelector, nil, nil, nil, []string{"bar"}).Obj(),
			nodes: zoneNodes(),
			existing: []*corev1.Pod{
				makePod().Name("p-a1").Node("node-a").Label("foo", "").Obj(),
				makePod().Name("p-a2").Node("node-a").Label("foo", "").Label("bar", "a").Obj(),
				makePod().Name("p-b1").Node("node-b").Label("foo", "").Obj(),
				makePod().Name("p-y1").Node("node-y").Label("foo", "").Label("bar", "a").Obj(),
				makePod().Name("p-y2").Node("node-y").Label("bar", "").Obj(),
			},
			wantCounts: []map[string]int{{"zone1": 1, "zone2": 1}},
			wantPaths:  []criticalPaths{paths("zone2", 1, "zone1", 1)},
		},
		{
			name: "matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
			pod: makePod().Name("p").Label("foo", "a").
				SpreadConstraint(1, "zone", corev1.DoNotSchedule, &metav1.LabelSelector{}, nil, nil, nil, []string{"foo"}).Obj(),
			nodes: zoneNodes(),
			existing: []*corev1.Pod{
				makePod().Name("p-a1").Node("node-a").Label("foo", "a").Obj(),
				makePod().Name("p-a2").Node("node-a").Label("foo", "a").Obj(),
				makePod().Name("p-b1").Node("node-b").Label("foo", "a").Obj(),
				makePod().Name("p-y1").Node("node-y").Label("foo", "a").Obj(),
				makePod().Name("p-y2").Node("node-y").Label("foo", "a").Obj(),
			},
			wantCounts: []map[string]int{{"zone1": 3, "zone2": 2}},
			wantPaths:  []criticalPaths{paths("zone2", 2, "zone1", 3)},
		},
		{
			name: "key in matchLabelKeys is ignored when LabelSelector is nil",
			pod: makePod().Name("p").Label("foo", "").
				SpreadConstraint(1, "zone", corev1.DoNotSchedule, nil, nil, nil, nil, []string{"bar"}).Obj(),
			nodes:      zoneNodes(),
			existing:   fooPods(map[string]int{"node-a": 2, "node-b": 1, "node-y": 2}),
			wantCounts: []map[string]int{{"zone1": 0, "zone2": 0}},
			wantPaths:  []criticalPaths{paths("zone2", 0, "zone1", 0)},
		},
		{
			name: "two spreadConstraints with the same topologyKey",
			pod: makePod().Name("p").Label("foo", "").Label("bar", "").
				SpreadConstraint(1, "zone", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).
				SpreadConstraint(1, "zone", corev1.DoNotSchedule, barSelector, nil, nil, nil, nil).Obj(),
			nodes: zoneNodes(),
			existing: []*corev1.Pod{
				makePod().Name("p-a1").Node("node-a").Label("foo", "").Label("bar", "").Obj(),
				makePod().Name("p-b1").Node("node-b").Label("foo", "").Obj(),
				makePod().Name("p-x1").Node("node-x").Label("bar", "").Obj(),
				makePod().Name("p-y1").Node("node-y").Label("foo", "").Label("bar", "").Obj(),
				makePod().Name("p-y2").Node("node-y").Label("bar", "").Obj(),
			},
			wantCounts: []map[string]int{{"zone1": 2, "zone2": 1}, {"zone1": 1, "zone2": 3}},
			wantPaths:  []criticalPaths{paths("zone2", 1, "zone1", 2), paths("zone1", 1, "zone2", 3)},
		},
		{
			name:     "skip if not specified",
			pod:      makePod().Name("p").Label("foo", "").Obj(),
			nodes:    zoneNodes()[:1],
			wantSkip: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := newPlugin(t, newSnapshot(tt.existing, tt.nodes))
			cs := framework.NewCycleState()
			st := pl.PreFilter(t.Context(), cs, tt.pod)
			if tt.wantSkip {
				if !st.IsSkip() {
					t.Fatalf("PreFilter = %v, want Skip", st.Code())
				}
				return
			}
			if !st.IsSuccess() {
				t.Fatalf("PreFilter: %v", st.Message())
			}
			got, err := getPreFilterState(cs)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.TpValueToMatchNum) != len(tt.wantCounts) {
				t.Fatalf("got %d constraints, want %d", len(got.TpValueToMatchNum), len(tt.wantCounts))
			}
			for i := range tt.wantCounts {
				if !maps.Equal(got.TpValueToMatchNum[i], tt.wantCounts[i]) {
					t.Errorf("TpValueToMatchNum[%d] = %v, want %v", i, got.TpValueToMatchNum[i], tt.wantCounts[i])
				}
				if g, w := sortedPaths(got.CriticalPaths[i]), sortedPaths(tt.wantPaths[i]); g != w {
					t.Errorf("CriticalPaths[%d] = %+v, want %+v", i, g, w)
				}
			}
			for i, w := range tt.wantConstrs {
				g := got.Constraints[i]
				g.Selector = nil
				if g != w {
					t.Errorf("Constraints[%d] = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

// TestSingleConstraint reproduces upstream's TestSingleConstraint.
func TestSingleConstraint(t *testing.T) {
	U, UU, S := framework.Unschedulable, framework.UnschedulableAndUnresolvable, framework.Success
	threeNodes := []*corev1.Node{
		makeNode().Name("node-a").Label("node", "node-a").Obj(),
		makeNode().Name("node-b").Label("node", "node-b").Obj(),
		makeNode().Name("node-c").Label("node", "node-c").Obj(),
	}
	fooNodes := func(last *corev1.Node) []*corev1.Node {
		return []*corev1.Node{
			makeNode().Name("node-a").Label("node", "node-a").Label("foo", "").Obj(),
			makeNode().Name("node-b").Label("node", "node-b").Label("foo", "").Obj(),
			makeNode().Name("node-x").Label("node", "node-x").Label("foo", "").Obj(),
			last,
		}
	}
	abyPods := []*corev1.Pod{
		makePod().Name("p-b1").Node("node-a").Label("foo", "").Obj(),
		makePod().Name("p-b2").Node("node-b").Label("foo", "").Obj(),
		makePod().Name("p-y1").Node("node-y").Label("foo", "").Obj(),
	}
	tests := []struct {
		name     string
		pod      *corev1.Pod
		nodes    []*corev1.Node
		existing []*corev1.Pod
		want     map[string]framework.Code
	}{
		{
			name:  "no existing pods",
			pod:   makePod().Name("p").Label("foo", "").SpreadConstraint(1, "zone", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(),
			nodes: zoneNodes(),
			want:  map[string]framework.Code{"node-a": S, "node-b": S, "node-x": S, "node-y": S},
		},
		{
			name:  "no existing pods, incoming pod doesn't match itself",
			pod:   makePod().Name("p").Label("foo", "").SpreadConstraint(1, "zone", corev1.DoNotSchedule, barSelector, nil, nil, nil, nil).Obj(),
			nodes: zoneNodes(),
			want:  map[string]framework.Code{"node-a": S, "node-b": S, "node-x": S, "node-y": S},
		},
		{
			name:  "existing pods in a different namespace do not count",
			pod:   makePod().Name("p").Label("foo", "").SpreadConstraint(1, "zone", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(),
			nodes: zoneNodes(),
			existing: []*corev1.Pod{
				makePod().Name("p-a1").Namespace("ns1").Node("node-a").Label("foo", "").Obj(),
				makePod().Name("p-b1").Namespace("ns2").Node("node-a").Label("foo", "").Obj(),
				makePod().Name("p-x1").Node("node-x").Label("foo", "").Obj(),
				makePod().Name("p-y1").Node("node-y").Label("foo", "").Obj(),
			},
			want: map[string]framework.Code{"node-a": S, "node-b": S, "node-x": U, "node-y": U},
		},
		{
			name:     "existing pods do not match null selector",
			pod:      makePod().Name("p").Label("foo", "").SpreadConstraint(1, "zone", corev1.DoNotSchedule, nil, nil, nil, nil, nil).Obj(),
			nodes:    zoneNodes(),
			existing: fooPods(map[string]int{"node-x": 1, "node-y": 1}),
			want:     map[string]framework.Code{"node-a": S, "node-b": S, "node-x": S, "node-y": S},
		},
		{
			name:     "pods spread across zones as 3/3, all nodes fit",
			pod:      makePod().Name("p").Label("foo", "").SpreadConstraint(1, "zone", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(),
			nodes:    zoneNodes(),
			existing: fooPods(map[string]int{"node-a": 2, "node-b": 1, "node-y": 3}),
			want:     map[string]framework.Code{"node-a": S, "node-b": S, "node-x": S, "node-y": S},
		},
		{
			name: "pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
			pod:  makePod().Name("p").Label("foo", "").SpreadConstraint(1, "zone", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(),
			nodes: []*corev1.Node{
				makeNode().Name("node-a").Label("zone", "zone1").Label("node", "node-a").Obj(),
				makeNode().Name("node-b").Label("zon", "zone1").Label("node", "node-b").Obj(),
				makeNode().Name("node-x").Label("zone", "zone2").Label("node", "node-x").Obj(),
				makeNode().Name("node-y").Label("zone", "zone2").Label("node", "node-y").Obj(),
			},
			existing: fooPods(map[string]int{"node-a": 1, "node-b": 1, "node-x": 1, "node-y": 1}),
			want:     map[string]framework.Code{"node-a": S, "node-b": UU, "node-x": U, "node-y": U},
		},
		{
			name:  "pod cannot be scheduled as all nodes don't have label 'rack'",
			pod:   makePod().Name("p").Label("foo", "").SpreadConstraint(1, "rack", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(),
			nodes: []*corev1.Node{zoneNodes()[0], zoneNodes()[2]},
			want:  map[string]framework.Code{"node-a": UU, "node-x": UU},
		},
		{
			name:     "pods spread across nodes as 2/1/0/3, only node-x fits",
			pod:      makePod().Name("p").Label("foo", "").SpreadConstraint(1, "node", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(),
			nodes:    zoneNodes(),
			existing: fooPods(map[string]int{"node-a": 2, "node-b": 1, "node-y": 3}),
			want:     map[string]framework.Code{"node-a": U, "node-b": U, "node-x": S, "node-y": U},
		},
		{
			name:     "pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
			pod:      makePod().Name("p").Label("foo", "").SpreadConstraint(2, "node", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(),
			nodes:    zoneNodes(),
			existing: fooPods(map[string]int{"node-a": 2, "node-b": 1, "node-y": 3}),
			want:     map[string]framework.Code{"node-a": U, "node-b": S, "node-x": S, "node-y": U},
		},
		{
			name:     "pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
			pod:      makePod().Name("p").Label("bar", "").SpreadConstraint(1, "node", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(),
			nodes:    zoneNodes(),
			existing: fooPods(map[string]int{"node-a": 2, "node-b": 1, "node-y": 3}),
			want:     map[string]framework.Code{"node-a": U, "node-b": S, "node-x": S, "node-y": U},
		},
		{
			// only node-a and node-y are considered, so pods spread as 2/~1~/~0~/3;
			// node-b and node-x still fit because NodeAffinity is not run here.
			name: "incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
			pod: makePod().Name("p").Label("foo", "").NodeAffinityIn("node", "node-a", "node-y").
				SpreadConstraint(1, "node", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(),
			nodes:    zoneNodes(),
			existing: fooPods(map[string]int{"node-a": 2, "node-b": 1, "node-y": 3}),
			want:     map[string]framework.Code{"node-a": S, "node-b": S, "node-x": S, "node-y": U},
		},
		{
			name: "terminating Pods should be excluded",
			pod:  makePod().Name("p").Label("foo", "").SpreadConstraint(1, "node", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(),
			nodes: []*corev1.Node{
				makeNode().Name("node-a").Label("node", "node-a").Obj(),
				makeNode().Name("node-b").Label("node", "node-b").Obj(),
			},
			existing: []*corev1.Pod{
				makePod().Name("p-a").Node("node-a").Label("foo", "").Terminating().Obj(),
				makePod().Name("p-b").Node("node-b").Label("foo", "").Obj(),
			},
			want: map[string]framework.Code{"node-a": S, "node-b": U},
		},
		{
			name: "incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence node-a fits",
			pod: makePod().Name("p").Label("foo", "").NodeAffinityNotIn("node", "node-b").
				SpreadConstraint(1, "zone", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(),
			nodes:    zoneNodes(),
			existing: fooPods(map[string]int{"node-b": 2, "node-y": 1}),
			want:     map[string]framework.Code{"node-a": S, "node-b": S, "node-x": U, "node-y": U},
		},
		{
			name:     "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains < minDomains, then the third node fits",
			pod:      makePod().Name("p").Label("foo", "").SpreadConstraint(2, "node", corev1.DoNotSchedule, fooSelector, ptrTo[int32](4), nil, nil, nil).Obj(),
			nodes:    threeNodes,
			existing: fooPods(map[string]int{"node-a": 2, "node-b": 2, "node-c": 1}),
			want:     map[string]framework.Code{"node-a": U, "node-b": U, "node-c": S},
		},
		{
			name:     "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains > minDomains, then the all nodes fit",
			pod:      makePod().Name("p").Label("foo", "").SpreadConstraint(2, "node", corev1.DoNotSchedule, fooSelector, ptrTo[int32](2), nil, nil, nil).Obj(),
			nodes:    threeNodes,
			existing: fooPods(map[string]int{"node-a": 2, "node-b": 2, "node-c": 1}),
			want:     map[string]framework.Code{"node-a": S, "node-b": S, "node-c": S},
		},
		{
			name:  "pods spread across zone as 2/1, maxSkew is 2 and the number of domains < minDomains, then the third and fourth nodes fit",
			pod:   makePod().Name("p").Label("foo", "").SpreadConstraint(2, "zone", corev1.DoNotSchedule, fooSelector, ptrTo[int32](3), nil, nil, nil).Obj(),
			nodes: zoneNodes(),
			existing: []*corev1.Pod{
				makePod().Name("p-b1").Node("node-a").Label("foo", "").Obj(),
				makePod().Name("p-b2").Node("node-b").Label("foo", "").Obj(),
				makePod().Name("p-y1").Node("node-y").Label("foo", "").Obj(),
			},
			want: map[string]framework.Code{"node-a": U, "node-b": U, "node-x": S, "node-y": S},
		},
		{
			name:  "pods spread across zone as 2/1, maxSkew is 2 and the number of domains > minDomains, then the all nodes fit",
			pod:   makePod().Name("p").Label("foo", "").SpreadConstraint(2, "zone", corev1.DoNotSchedule, fooSelector, ptrTo[int32](1), nil, nil, nil).Obj(),
			nodes: zoneNodes(),
			existing: []*corev1.Pod{
				makePod().Name("p-b1").Node("node-a").Label("foo", "").Obj(),
				makePod().Name("p-b2").Node("node-b").Label("foo", "").Obj(),
				makePod().Name("p-y1").Node("node-y").Label("foo", "").Obj(),
			},
			want: map[string]framework.Code{"node-a": S, "node-b": S, "node-x": S, "node-y": S},
		},
		{
			// pods spread across node as 1/1/0/~0~; node-y fits because NodeAffinity is not run here
			name: "NodeAffinityPolicy honored with labelSelectors",
			pod: makePod().Name("p").Label("foo", "").NodeSelector(map[string]string{"foo": ""}).
				SpreadConstraint(1, "node", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(),
			nodes:    fooNodes(makeNode().Name("node-y").Label("node", "node-y").Obj()),
			existing: abyPods,
			want:     map[string]framework.Code{"node-a": U, "node-b": U, "node-x": S, "node-y": S},
		},
		{
			name: "NodeAffinityPolicy ignored with labelSelectors",
			pod: makePod().Name("p").Label("foo", "").NodeSelector(map[string]string{"foo": ""}).
				SpreadConstraint(1, "node", corev1.DoNotSchedule, fooSelector, nil, &ignorePolicy, nil, nil).Obj(),
			nodes:    fooNodes(makeNode().Name("node-y").Label("node", "node-y").Obj()),
			existing: abyPods,
			want:     map[string]framework.Code{"node-a": U, "node-b": U, "node-x": S, "node-y": U},
		},
		{
			name: "NodeAffinityPolicy honored with nodeAffinity",
			pod: makePod().Name("p").Label("foo", "").NodeAffinityIn("foo", "").
				SpreadConstraint(1, "node", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(),
			nodes:    fooNodes(makeNode().Name("node-y").Label("node", "node-y").Obj()),
			existing: abyPods,
			want:     map[string]framework.Code{"node-a": U, "node-b": U, "node-x": S, "node-y": S},
		},
		{
			name: "NodeAffinityPolicy ignored with nodeAffinity",
			pod: makePod().Name("p").Label("foo", "").NodeAffinityIn("foo", "").
				SpreadConstraint(1, "node", corev1.DoNotSchedule, fooSelector, nil, &ignorePolicy, nil, nil).Obj(),
			nodes:    fooNodes(makeNode().Name("node-y").Label("node", "node-y").Obj()),
			existing: abyPods,
			want:     map[string]framework.Code{"node-a": U, "node-b": U, "node-x": S, "node-y": U},
		},
		{
			name: "NodeTaintsPolicy honored",
			pod: makePod().Name("p").Label("foo", "").
				SpreadConstraint(1, "node", corev1.DoNotSchedule, fooSelector, nil, nil, &honorPolicy, nil).Obj(),
			nodes:    fooNodes(makeNode().Name("node-y").Label("node", "node-y").Taints(taints).Obj()),
			existing: abyPods,
			want:     map[string]framework.Code{"node-a": U, "node-b": U, "node-x": S, "node-y": S},
		},
		{
			name: "NodeTaintsPolicy ignored",
			pod: makePod().Name("p").Label("foo", "").
				SpreadConstraint(1, "node", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(),
			nodes:    fooNodes(makeNode().Name("node-y").Label("node", "node-y").Taints(taints).Obj()),
			existing: abyPods,
			want:     map[string]framework.Code{"node-a": U, "node-b": U, "node-x": S, "node-y": U},
		},
	}
	runFilterCases(t, tests)
}

type filterCase = struct {
	name     string
	pod      *corev1.Pod
	nodes    []*corev1.Node
	existing []*corev1.Pod
	want     map[string]framework.Code
}

func runFilterCases(t *testing.T, tests []filterCase) {
	t.Helper()
	reasons := map[framework.Code][]string{
		framework.Unschedulable:                {ErrReasonConstraintsNotMatch},
		framework.UnschedulableAndUnresolvable: {ErrReasonNodeLabelNotMatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := newSnapshot(tt.existing, tt.nodes)
			pl := newPlugin(t, snap)
			state := framework.NewCycleState()
			if st := pl.PreFilter(t.Context(), state, tt.pod); !st.IsSuccess() {
				t.Fatalf("PreFilter: %v %v", st.Code(), st.Message())
			}
			for _, n := range tt.nodes {
				ni, _ := snap.Get(n.Name)
				got := pl.Filter(t.Context(), state, tt.pod, ni)
				var want *framework.Status
				if c := tt.want[n.Name]; c != framework.Success {
					want = framework.NewStatus(c, reasons[c]...)
				}
				checkStatus(t, n.Name, got, want)
			}
		})
	}
}

// TestMultipleConstraints reproduces upstream's TestMultipleConstraints.
func TestMultipleConstraints(t *testing.T) {
	U, UU, S := framework.Unschedulable, framework.UnschedulableAndUnresolvable, framework.Success
	zoneAndNode := func(zoneSel, nodeSel *metav1.LabelSelector) *podWrapper {
		return makePod().Name("p").Label("foo", "").
			SpreadConstraint(1, "zone", corev1.DoNotSchedule, zoneSel, nil, nil, nil, nil).
			SpreadConstraint(1, "node", corev1.DoNotSchedule, nodeSel, nil, nil, nil, nil)
	}
	fooNodes := func(y *corev1.Node) []*corev1.Node {
		return []*corev1.Node{
			makeNode().Name("node-a").Label("zone", "zone1").Label("node", "node-a").Label("foo", "").Obj(),
			makeNode().Name("node-b").Label("zone", "zone1").Label("node", "node-b").Label("foo", "").Obj(),
			makeNode().Name("node-x").Label("zone", "zone2").Label("node", "node-x").Label("foo", "").Obj(),
			y,
		}
	}
	aby := fooPods(map[string]int{"node-a": 1, "node-b": 1, "node-y": 1})
	tests := []filterCase{
		{
			name:     "two Constraints on zone and node, spreads = [3/3, 2/1/0/3]",
			pod:      zoneAndNode(fooSelector, fooSelector).Obj(),
			nodes:    zoneNodes(),
			existing: fooPods(map[string]int{"node-a": 2, "node-b": 1, "node-y": 3}),
			want:     map[string]framework.Code{"node-a": U, "node-b": U, "node-x": S, "node-y": U},
		},
		{
			name:     "two Constraints on zone and node, spreads = [3/4, 2/1/0/4]",
			pod:      zoneAndNode(fooSelector, fooSelector).Obj(),
			nodes:    zoneNodes(),
			existing: fooPods(map[string]int{"node-a": 2, "node-b": 1, "node-y": 4}),
			want:     map[string]framework.Code{"node-a": U, "node-b": U, "node-x": U, "node-y": U},
		},
		{
			name:  "Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]",
			pod:   zoneAndNode(fooSelector, barSelector).Label("bar", "").Obj(),
			nodes: zoneNodes(),
			existing: []*corev1.Pod{
				makePod().Name("p-a1").Node("node-a").Label("foo", "").Obj(),
				makePod().Name("p-y1").Node("node-y").Label("bar", "").Obj(),
			},
			want: map[string]framework.Code{"node-a": U, "node-b": U, "node-x": S, "node-y": U},
		},
		{
			name:  "Constraints hold different labelSelectors, spreads = [1/0, 0/0/1/1]",
			pod:   zoneAndNode(fooSelector, barSelector).Label("bar", "").Obj(),
			nodes: zoneNodes(),
			existing: []*corev1.Pod{
				makePod().Name("p-a1").Node("node-a").Label("foo", "").Obj(),
				makePod().Name("p-x1").Node("node-x").Label("bar", "").Obj(),
				makePod().Name("p-y1").Node("node-y").Label("bar", "").Obj(),
			},
			want: map[string]framework.Code{"node-a": U, "node-b": U, "node-x": U, "node-y": U},
		},
		{
			name:  "Constraints hold different labelSelectors, spreads = [2/3, 1/0/0/1]",
			pod:   zoneAndNode(fooSelector, barSelector).Label("bar", "").Obj(),
			nodes: zoneNodes(),
			existing: []*corev1.Pod{
				makePod().Name("p-a1").Node("node-a").Label("foo", "").Obj(),
				makePod().Name("p-a2").Node("node-a").Label("foo", "").Label("bar", "").Obj(),
				makePod().Name("p-y1").Node("node-y").Label("foo", "").Obj(),
				makePod().Name("p-y2").Node("node-y").Label("foo", "").Label("bar", "").Obj(),
				makePod().Name("p-y3").Node("node-y").Label("foo", "").Obj(),
			},
			want: map[string]framework.Code{"node-a": U, "node-b": S, "node-x": U, "node-y": U},
		},
		{
			name: "Constraints hold different labelSelectors but pod doesn't match itself on 'zone' constraint",
			pod: makePod().Name("p").Label("bar", "").
				SpreadConstraint(1, "zone", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).
				SpreadConstraint(1, "node", corev1.DoNotSchedule, barSelector, nil, nil, nil, nil).Obj(),
			nodes: zoneNodes(),
			existing: []*corev1.Pod{
				makePod().Name("p-a1").Node("node-a").Label("foo", "").Obj(),
				makePod().Name("p-x1").Node("node-x").Label("bar", "").Obj(),
				makePod().Name("p-y1").Node("node-y").Label("bar", "").Obj(),
			},
			want: map[string]framework.Code{"node-a": S, "node-b": S, "node-x": U, "node-y": U},
		},
		{
			name: "two Constraints on zone and node, absence of label 'node' on node-x, spreads = [1/1, 1/0/0/1]",
			pod:  zoneAndNode(fooSelector, fooSelector).Obj(),
			nodes: []*corev1.Node{
				makeNode().Name("node-a").Label("zone", "zone1").Label("node", "node-a").Obj(),
				makeNode().Name("node-b").Label("zone", "zone1").Label("node", "node-b").Obj(),
				makeNode().Name("node-x").Label("zone", "zone2").Obj(),
				makeNode().Name("node-y").Label("zone", "zone2").Label("node", "node-y").Obj(),
			},
			existing: fooPods(map[string]int{"node-a": 1, "node-y": 1}),
			want:     map[string]framework.Code{"node-a": U, "node-b": S, "node-x": UU, "node-y": U},
		},
		{
			name: "two node inclusion Constraints, zone: honor/ignore, node: ignore/ignore",
			pod: makePod().Name("p").Label("foo", "").NodeSelector(map[string]string{"foo": ""}).
				SpreadConstraint(1, "zone", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).
				SpreadConstraint(1, "node", corev1.DoNotSchedule, fooSelector, nil, &ignorePolicy, nil, nil).Obj(),
			nodes:    fooNodes(makeNode().Name("node-y").Label("zone", "zone2").Label("node", "node-y").Obj()),
			existing: aby,
			want:     map[string]framework.Code{"node-a": U, "node-b": U, "node-x": S, "node-y": U},
		},
		{
			name: "two node inclusion Constraints, zone: honor/honor, node: honor/ignore",
			pod: makePod().Name("p").Label("foo", "").
				SpreadConstraint(1, "zone", corev1.DoNotSchedule, fooSelector, nil, nil, &honorPolicy, nil).
				SpreadConstraint(1, "node", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(),
			nodes:    fooNodes(makeNode().Name("node-y").Label("zone", "zone2").Label("node", "node-y").Taints(taints).Obj()),
			existing: aby,
			want:     map[string]framework.Code{"node-a": U, "node-b": U, "node-x": S, "node-y": U},
		},
		{
			name: "two node inclusion Constraints, zone: honor/ignore, node: honor/ignore",
			pod: makePod().Name("p").Label("foo", "").NodeSelector(map[string]string{"foo": ""}).
				SpreadConstraint(1, "zone", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).
				SpreadConstraint(1, "node", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(),
			nodes: []*corev1.Node{
				makeNode().Name("node-a").Label("zone", "zone1").Label("node", "node-a").Label("foo", "").Obj(),
				makeNode().Name("node-b").Label("zone", "zone1").Label("node", "node-b").Obj(),
				makeNode().Name("node-x").Label("zone", "zone2").Label("node", "node-x").Label("foo", "").Obj(),
				makeNode().Name("node-y").Label("zone", "zone2").Label("node", "node-y").Label("foo", "").Taints(taints).Obj(),
			},
			existing: aby,
			want:     map[string]framework.Code{"node-a": U, "node-b": S, "node-x": S, "node-y": U},
		},
		{
			name: "two node inclusion Constraints, zone: honor/honor, node: ignore/ignore",
			pod: makePod().Name("p").Label("foo", "").NodeSelector(map[string]string{"foo": ""}).
				SpreadConstraint(1, "zone", corev1.DoNotSchedule, fooSelector, nil, nil, &honorPolicy, nil).
				SpreadConstraint(1, "node", corev1.DoNotSchedule, fooSelector, nil, &ignorePolicy, nil, nil).Obj(),
			nodes: []*corev1.Node{
				makeNode().Name("node-a").Label("zone", "zone1").Label("node", "node-a").Label("foo", "").Obj(),
				makeNode().Name("node-b").Label("zone", "zone1").Label("node", "node-b").Obj(),
				makeNode().Name("node-x").Label("zone", "zone2").Label("node", "node-x").Label("foo", "").Obj(),
				makeNode().Name("node-y").Label("zone", "zone2").Label("node", "node-y").Label("foo", "").Taints(taints).Obj(),
			},
			existing: aby,
			want:     map[string]framework.Code{"node-a": U, "node-b": U, "node-x": S, "node-y": U},
		},
		{
			name: "two Constraints on zone, spreads = [3/3, 2/1]",
			pod: makePod().Name("p").Label("foo", "").Label("bar", "").
				SpreadConstraint(1, "zone", corev1.DoNotSchedule, barSelector, nil, nil, nil, nil).
				SpreadConstraint(1, "zone", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(),
			nodes: zoneNodes(),
			existing: []*corev1.Pod{
				makePod().Name("p-a1").Node("node-a").Label("foo", "").Label("bar", "").Obj(),
				makePod().Name("p-a2").Node("node-a").Label("foo", "").Obj(),
				makePod().Name("p-b1").Node("node-b").Label("foo", "").Label("bar", "").Obj(),
				makePod().Name("p-y1").Node("node-y").Label("foo", "").Obj(),
				makePod().Name("p-y2").Node("node-y").Label("foo", "").Label("bar", "").Obj(),
				makePod().Name("p-y3").Node("node-y").Label("foo", "").Obj(),
			},
			want: map[string]framework.Code{"node-a": U, "node-b": U, "node-x": S, "node-y": S},
		},
		{
			name: "two Constraints on zone, spreads = [3/4, 2/1]",
			pod: makePod().Name("p").Label("foo", "").Label("bar", "").
				SpreadConstraint(1, "zone", corev1.DoNotSchedule, barSelector, nil, nil, nil, nil).
				SpreadConstraint(1, "zone", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(),
			nodes: zoneNodes(),
			existing: []*corev1.Pod{
				makePod().Name("p-a1").Node("node-a").Label("foo", "").Label("bar", "").Obj(),
				makePod().Name("p-a2").Node("node-a").Label("foo", "").Obj(),
				makePod().Name("p-b1").Node("node-b").Label("foo", "").Label("bar", "").Obj(),
				makePod().Name("p-y1").Node("node-y").Label("foo", "").Obj(),
				makePod().Name("p-y2").Node("node-y").Label("foo", "").Label("bar", "").Obj(),
				makePod().Name("p-y3").Node("node-y").Label("foo", "").Obj(),
				makePod().Name("p-y4").Node("node-y").Label("foo", "").Obj(),
			},
			want: map[string]framework.Code{"node-a": U, "node-b": U, "node-x": U, "node-y": U},
		},
	}
	runFilterCases(t, tests)
}

// TestPreFilterDisabled: Filter without PreFilter is an error, as upstream.
func TestPreFilterDisabled(t *testing.T) {
	ni := framework.NewNodeInfo()
	ni.SetNode(&corev1.Node{})
	pl := newPlugin(t, newSnapshot(nil, nil))
	st := pl.Filter(t.Context(), framework.NewCycleState(), &corev1.Pod{}, ni)
	if st.Code() != framework.Error || !errors.Is(st.AsError(), framework.ErrNotFound) {
		t.Errorf("Filter = %v %v, want an Error wrapping ErrNotFound", st.Code(), st.AsError())
	}
	want := `reading "PreFilterPodTopologySpread" from cycleState: not found in cycle state`
	if st.Message() != want {
		t.Errorf("message = %q, want %q", st.Message(), want)
	}
}

func TestNewNeedsSnapshot(t *testing.T) {
	if _, err := New(t.Context(), nil, handle{}); err == nil {
		t.Error("want an error without a snapshot lister")
	}
	if _, err := New(t.Context(), struct{}{}, handle{snap: newSnapshot(nil, nil)}); err == nil {
		t.Error("want an error for args")
	}
}

func TestCloneIsIndependent(t *testing.T) {
	s := &preFilterState{
		Constraints:       []constraint{{TopologyKey: "zone"}},
		CriticalPaths:     []criticalPaths{paths("a", 1, "b", 2)},
		TpValueToMatchNum: []map[string]int{{"a": 1, "b": 2}},
	}
	c := s.Clone().(*preFilterState)
	c.TpValueToMatchNum[0]["a"] = 5
	c.CriticalPaths[0].update("a", 5)
	if s.TpValueToMatchNum[0]["a"] != 1 || s.CriticalPaths[0][0].MatchNum != 1 {
		t.Error("Clone shares mutable state with the original")
	}
}

// BenchmarkFilter filters against 1000 nodes in 10 zones with 10 pods per
// node, for a zone and a hostname constraint.
func BenchmarkFilter(b *testing.B) {
	for _, key := range []string{corev1.LabelTopologyZone, corev1.LabelHostname} {
		b.Run(key, func(b *testing.B) {
			var nodes []*corev1.Node
			var pods []*corev1.Pod
			for i := range 1000 {
				name := fmt.Sprintf("node-%d", i)
				nodes = append(nodes, makeNode().Name(name).Label(corev1.LabelHostname, name).Label(corev1.LabelTopologyZone, fmt.Sprintf("zone-%d", i%10)).Obj())
				for j := range 10 {
					p := makePod().Name(fmt.Sprintf("p-%d-%d", i, j)).Node(name).Label("app", fmt.Sprintf("app-%d", j%3))
					if (i+j)%7 == 0 {
						p.Label("foo", "")
					}
					pods = append(pods, p.Obj())
				}
			}
			snap := newSnapshot(pods, nodes)
			pl := newPlugin(b, snap)
			pod := makePod().Name("p").Label("foo", "").SpreadConstraint(1, key, corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj()
			state := framework.NewCycleState()
			if st := pl.PreFilter(b.Context(), state, pod); !st.IsSuccess() {
				b.Fatal(st.Message())
			}
			infos, _ := snap.List()
			b.ReportAllocs()
			for b.Loop() {
				for _, ni := range infos {
					pl.Filter(b.Context(), state, pod, ni)
				}
			}
		})
	}
}

// BenchmarkPreFilter measures the per-cycle counting over the same cluster.
func BenchmarkPreFilter(b *testing.B) {
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for i := range 1000 {
		name := fmt.Sprintf("node-%d", i)
		nodes = append(nodes, makeNode().Name(name).Label(corev1.LabelHostname, name).Label(corev1.LabelTopologyZone, fmt.Sprintf("zone-%d", i%10)).Obj())
		for j := range 10 {
			pods = append(pods, makePod().Name(fmt.Sprintf("p-%d-%d", i, j)).Node(name).Label("foo", "").Obj())
		}
	}
	pl := newPlugin(b, newSnapshot(pods, nodes))
	pod := makePod().Name("p").Label("foo", "").
		SpreadConstraint(1, corev1.LabelTopologyZone, corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).
		SpreadConstraint(1, corev1.LabelHostname, corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj()
	b.ReportAllocs()
	for b.Loop() {
		pl.PreFilter(b.Context(), framework.NewCycleState(), pod)
	}
}

// TestFilterConcurrent counts over 1000 nodes (PreFilter runs in parallel)
// and filters from several goroutines, checking against a sequential pass
// and against counts made by hand (run with -race).
func TestFilterConcurrent(t *testing.T) {
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for i := range 1000 {
		name := fmt.Sprintf("node-%d", i)
		nodes = append(nodes, makeNode().Name(name).Label(corev1.LabelHostname, name).Label(corev1.LabelTopologyZone, fmt.Sprintf("zone-%d", i%10)).Obj())
		for j := range i % 4 {
			pods = append(pods, makePod().Name(fmt.Sprintf("p-%d-%d", i, j)).Node(name).Label("foo", "").Obj())
		}
	}
	snap := newSnapshot(pods, nodes)
	pl := newPlugin(t, snap)
	pod := makePod().Name("p").Label("foo", "").
		SpreadConstraint(1, corev1.LabelTopologyZone, corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).
		SpreadConstraint(2, corev1.LabelHostname, corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj()
	state := framework.NewCycleState()
	if st := pl.PreFilter(t.Context(), state, pod); !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	s, _ := getPreFilterState(state)
	// Zone z holds the nodes i%10==z, each with i%4 matching pods.
	for z := range 10 {
		want := 0
		for i := z; i < 1000; i += 10 {
			want += i % 4
		}
		if got := s.TpValueToMatchNum[0][fmt.Sprintf("zone-%d", z)]; got != want {
			t.Errorf("zone-%d: %d pods, want %d", z, got, want)
		}
	}
	infos, _ := snap.List()
	want := make([]framework.Code, len(infos))
	for i, ni := range infos {
		want[i] = pl.Filter(t.Context(), state, pod, ni).Code()
	}
	got := make([]framework.Code, len(infos))
	parallelize(t.Context(), len(infos), func(i int) {
		got[i] = pl.Filter(t.Context(), state, pod, infos[i]).Code()
	})
	if !slices.Equal(got, want) {
		t.Error("parallel Filter results differ from sequential ones")
	}
	// Even zones hold 100 matching pods and odd ones 200, so odd nodes break
	// the zone constraint; on even nodes (0 or 2 pods) the hostname constraint
	// (minimum 0, maxSkew 2, the pod matches itself) leaves those with 0 pods.
	for i, c := range want {
		if (c == framework.Success) != (i%4 == 0) {
			t.Errorf("node-%d: %v", i, c)
		}
	}
}
