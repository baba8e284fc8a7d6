package podtopologyspread

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

func nodeInfos(snap *snapshot, nodes []*corev1.Node) []*framework.NodeInfo {
	out := make([]*framework.NodeInfo, len(nodes))
	for i, n := range nodes {
		out[i], _ = snap.Get(n.Name)
	}
	return out
}

func TestPreScoreSkip(t *testing.T) {
	nodes := []*corev1.Node{
		makeNode().Name("node-a").Label(corev1.LabelHostname, "node-a").Obj(),
		makeNode().Name("node-b").Label(corev1.LabelHostname, "node-b").Obj(),
	}
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		nodes []*corev1.Node
	}{
		{"the pod doesn't have soft topology spread constraints", makePod().Name("p").Namespace("default").Obj(), nodes},
		{"only hard constraints", makePod().Name("p").SpreadConstraint(1, "zone", corev1.DoNotSchedule, fooSelector, nil, nil, nil, nil).Obj(), nodes},
		{"no nodes", makePod().Name("p").SpreadConstraint(1, "zone", corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).Obj(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := newSnapshot(nil, tc.nodes)
			pl := newPlugin(t, snap)
			if st := pl.PreScore(t.Context(), framework.NewCycleState(), tc.pod, nodeInfos(snap, tc.nodes)); !st.IsSkip() {
				t.Errorf("PreScore = %v, want Skip", st.Code())
			}
		})
	}
}

// TestPreScoreStateEmptyNodes reproduces cases of upstream's test of the same name.
func TestPreScoreStateEmptyNodes(t *testing.T) {
	tests := []struct {
		name        string
		pod         *corev1.Pod
		nodes       []*corev1.Node
		wantIgnored []string
		wantCounts  []map[string]int64
		wantWeights []float64
	}{
		{
			name: "normal case",
			pod: makePod().Name("p").Label("foo", "").
				SpreadConstraint(1, "zone", corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).
				SpreadConstraint(1, corev1.LabelHostname, corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).Obj(),
			nodes: []*corev1.Node{
				makeNode().Name("node-a").Label("zone", "zone1").Label(corev1.LabelHostname, "node-a").Obj(),
				makeNode().Name("node-b").Label("zone", "zone1").Label(corev1.LabelHostname, "node-b").Obj(),
				makeNode().Name("node-x").Label("zone", "zone2").Label(corev1.LabelHostname, "node-x").Obj(),
			},
			wantCounts:  []map[string]int64{{"zone1": 0, "zone2": 0}, {}},
			wantWeights: []float64{topologyNormalizingWeight(2), topologyNormalizingWeight(3)},
		},
		{
			name: "node-x doesn't have label zone",
			pod: makePod().Name("p").Label("foo", "").
				SpreadConstraint(1, "zone", corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).
				SpreadConstraint(1, corev1.LabelHostname, corev1.ScheduleAnyway, barSelector, nil, nil, nil, nil).Obj(),
			nodes: []*corev1.Node{
				makeNode().Name("node-a").Label("zone", "zone1").Label(corev1.LabelHostname, "node-a").Obj(),
				makeNode().Name("node-b").Label("zone", "zone1").Label(corev1.LabelHostname, "node-b").Obj(),
				makeNode().Name("node-x").Label(corev1.LabelHostname, "node-x").Obj(),
			},
			wantIgnored: []string{"node-x"},
			wantCounts:  []map[string]int64{{"zone1": 0}, {}},
			wantWeights: []float64{topologyNormalizingWeight(1), topologyNormalizingWeight(2)},
		},
		{
			name: "NodeTaintsPolicy honored",
			pod: makePod().Name("p").Label("foo", "").
				SpreadConstraint(1, "zone", corev1.ScheduleAnyway, barSelector, nil, nil, &honorPolicy, nil).Obj(),
			nodes: []*corev1.Node{
				makeNode().Name("node-a").Label("zone", "zone1").Label("foo", "").Label(corev1.LabelHostname, "node-a").Obj(),
				makeNode().Name("node-b").Label("zone", "zone1").Label("foo", "").Label(corev1.LabelHostname, "node-b").Obj(),
				makeNode().Name("node-x").Label("zone", "zone2").Label(corev1.LabelHostname, "node-x").Taints(taints).Obj(),
			},
			wantCounts:  []map[string]int64{{"zone1": 0, "zone2": 0}},
			wantWeights: []float64{topologyNormalizingWeight(2)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := newSnapshot(nil, tt.nodes)
			pl := newPlugin(t, snap)
			cs := framework.NewCycleState()
			if st := pl.PreScore(t.Context(), cs, tt.pod, nodeInfos(snap, tt.nodes)); !st.IsSuccess() {
				t.Fatal(st.Message())
			}
			got, err := getPreScoreState(cs)
			if err != nil {
				t.Fatal(err)
			}
			if ignored := slices.Sorted(maps.Keys(got.IgnoredNodes)); !slices.Equal(ignored, tt.wantIgnored) {
				t.Errorf("IgnoredNodes = %v, want %v", ignored, tt.wantIgnored)
			}
			for i, want := range tt.wantCounts {
				counts := map[string]int64{}
				for k, v := range got.TopologyValueToPodCounts[i] {
					counts[k] = *v
				}
				if !maps.Equal(counts, want) {
					t.Errorf("TopologyValueToPodCounts[%d] = %v, want %v", i, counts, want)
				}
			}
			if !slices.Equal(got.TopologyNormalizingWeight, tt.wantWeights) {
				t.Errorf("TopologyNormalizingWeight = %v, want %v", got.TopologyNormalizingWeight, tt.wantWeights)
			}
		})
	}
}

// TestPodTopologySpreadScore reproduces upstream's TestPodTopologySpreadScore
// (without the cases for default constraints, which kubette does not have).
func TestPodTopologySpreadScore(t *testing.T) {
	hostNodes := func(names ...string) []*corev1.Node {
		var out []*corev1.Node
		for _, n := range names {
			out = append(out, makeNode().Name(n).Label(corev1.LabelHostname, n).Obj())
		}
		return out
	}
	zoneHostNodes := func(spec ...string) []*corev1.Node { // "node-a/zone1"
		var out []*corev1.Node
		for _, s := range spec {
			var name, zone string
			fmt.Sscanf(s, "%6s/%s", &name, &zone)
			out = append(out, makeNode().Name(name).Label("zone", zone).Label(corev1.LabelHostname, name).Obj())
		}
		return out
	}
	pods4321 := fooPods(map[string]int{"node-a": 4, "node-b": 3, "node-c": 2})
	pods4321 = append(pods4321, makePod().Name("p-d1").Node("node-d").Label("foo", "").Obj())
	pods2103 := fooPods(map[string]int{"node-a": 2, "node-b": 1})
	for i := 1; i <= 3; i++ {
		pods2103 = append(pods2103, makePod().Name(fmt.Sprintf("p-d%d", i)).Node("node-d").Label("foo", "").Obj())
	}
	pods4213 := fooPods(map[string]int{"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3})
	policyNodes := func(c *corev1.Node) []*corev1.Node {
		return []*corev1.Node{
			makeNode().Name("node-a").Label("node", "node-a").Label("foo", "").Obj(),
			makeNode().Name("node-b").Label("node", "node-b").Label("foo", "").Obj(),
			c,
		}
	}
	policyPods := fooPods(map[string]int{"node-a": 2, "node-b": 1, "node-c": 1})
	taintNodes := []*corev1.Node{
		makeNode().Name("node-a").Label("node", "node-a").Obj(),
		makeNode().Name("node-b").Label("node", "node-b").Obj(),
		makeNode().Name("node-c").Label("node", "node-c").Taints(taints).Obj(),
	}
	type ns = framework.NodeScore
	tests := []struct {
		name        string
		pod         *corev1.Pod
		existing    []*corev1.Pod
		nodes       []*corev1.Node
		failedNodes []*corev1.Node
		want        []framework.NodeScore
	}{
		{
			name:  "one constraint on node, no existing pods",
			pod:   makePod().Name("p").Label("foo", "").SpreadConstraint(1, corev1.LabelHostname, corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).Obj(),
			nodes: hostNodes("node-a", "node-b"),
			want:  []ns{{Name: "node-a", Score: 100}, {Name: "node-b", Score: 100}},
		},
		{
			name:        "one constraint on node, only one node is candidate",
			pod:         makePod().Name("p").Label("foo", "").SpreadConstraint(1, corev1.LabelHostname, corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).Obj(),
			existing:    fooPods(map[string]int{"node-a": 2, "node-b": 1}),
			nodes:       hostNodes("node-a"),
			failedNodes: hostNodes("node-b"),
			want:        []ns{{Name: "node-a", Score: 100}},
		},
		{
			name:     "one constraint on node, all nodes have the same number of matching pods",
			pod:      makePod().Name("p").Label("foo", "").SpreadConstraint(1, corev1.LabelHostname, corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).Obj(),
			existing: fooPods(map[string]int{"node-a": 1, "node-b": 1}),
			nodes:    hostNodes("node-a", "node-b"),
			want:     []ns{{Name: "node-a", Score: 100}, {Name: "node-b", Score: 100}},
		},
		{
			name:     "one constraint on node, all 4 nodes are candidates",
			pod:      makePod().Name("p").Label("foo", "").SpreadConstraint(1, corev1.LabelHostname, corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).Obj(),
			existing: pods2103,
			nodes:    hostNodes("node-a", "node-b", "node-c", "node-d"),
			want:     []ns{{Name: "node-a", Score: 20}, {Name: "node-b", Score: 60}, {Name: "node-c", Score: 100}, {Name: "node-d", Score: 0}},
		},
		{
			name:     "one constraint on node, null selector",
			pod:      makePod().Name("p").Label("foo", "").SpreadConstraint(1, corev1.LabelHostname, corev1.ScheduleAnyway, nil, nil, nil, nil, nil).Obj(),
			existing: pods2103,
			nodes:    hostNodes("node-a", "node-b", "node-c", "node-d"),
			want:     []ns{{Name: "node-a", Score: 100}, {Name: "node-b", Score: 100}, {Name: "node-c", Score: 100}, {Name: "node-d", Score: 100}},
		},
		{
			name:     "one constraint on node, all 4 nodes are candidates, maxSkew=2",
			pod:      makePod().Name("p").Label("foo", "").SpreadConstraint(2, corev1.LabelHostname, corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).Obj(),
			existing: pods2103,
			nodes:    hostNodes("node-a", "node-b", "node-c", "node-d"),
			want:     []ns{{Name: "node-a", Score: 33}, {Name: "node-b", Score: 66}, {Name: "node-c", Score: 100}, {Name: "node-d", Score: 16}},
		},
		{
			name:     "one constraint on node, all 4 nodes are candidates, maxSkew=3",
			pod:      makePod().Name("p").Label("foo", "").SpreadConstraint(3, corev1.LabelHostname, corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).Obj(),
			existing: pods4321,
			nodes:    hostNodes("node-a", "node-b", "node-c", "node-d"),
			want:     []ns{{Name: "node-a", Score: 44}, {Name: "node-b", Score: 66}, {Name: "node-c", Score: 77}, {Name: "node-d", Score: 100}},
		},
		{
			name:        "one constraint on node, 3 out of 4 nodes are candidates",
			pod:         makePod().Name("p").Label("foo", "").SpreadConstraint(1, corev1.LabelHostname, corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).Obj(),
			existing:    pods4213,
			nodes:       hostNodes("node-a", "node-b", "node-x"),
			failedNodes: hostNodes("node-y"),
			want:        []ns{{Name: "node-a", Score: 33}, {Name: "node-b", Score: 83}, {Name: "node-x", Score: 100}},
		},
		{
			name:     "one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match topology key",
			pod:      makePod().Name("p").Label("foo", "").SpreadConstraint(1, corev1.LabelHostname, corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).Obj(),
			existing: pods4213,
			nodes: []*corev1.Node{
				makeNode().Name("node-a").Label(corev1.LabelHostname, "node-a").Obj(),
				makeNode().Name("node-b").Label("n", "node-b").Obj(),
				makeNode().Name("node-x").Label(corev1.LabelHostname, "node-x").Obj(),
			},
			failedNodes: hostNodes("node-y"),
			want:        []ns{{Name: "node-a", Score: 16}, {Name: "node-b", Score: 0}, {Name: "node-x", Score: 100}},
		},
		{
			name:        "one constraint on zone, 3 out of 4 nodes are candidates",
			pod:         makePod().Name("p").Label("foo", "").SpreadConstraint(1, "zone", corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).Obj(),
			existing:    pods4213,
			nodes:       zoneHostNodes("node-a/zone1", "node-b/zone1", "node-x/zone2"),
			failedNodes: zoneHostNodes("node-y/zone2"),
			want:        []ns{{Name: "node-a", Score: 75}, {Name: "node-b", Score: 75}, {Name: "node-x", Score: 100}},
		},
		{
			name: "two Constraints on zone and node, 2 out of 4 nodes are candidates",
			pod: makePod().Name("p").Label("foo", "").
				SpreadConstraint(1, "zone", corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).
				SpreadConstraint(1, corev1.LabelHostname, corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).Obj(),
			existing:    fooPods(map[string]int{"node-a": 2, "node-b": 1, "node-x": 2, "node-y": 4}),
			nodes:       zoneHostNodes("node-a/zone1", "node-x/zone2"),
			failedNodes: zoneHostNodes("node-b/zone1", "node-y/zone2"),
			want:        []ns{{Name: "node-a", Score: 100}, {Name: "node-x", Score: 63}},
		},
		{
			name: "two Constraints on zone, 2 out of 4 nodes are candidates",
			pod: makePod().Name("p").Label("foo", "").Label("bar", "").
				SpreadConstraint(1, "zone", corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).
				SpreadConstraint(1, "zone", corev1.ScheduleAnyway, barSelector, nil, nil, nil, nil).Obj(),
			existing: []*corev1.Pod{
				makePod().Name("p-a1").Node("node-a").Label("foo", "").Label("bar", "").Obj(),
				makePod().Name("p-a2").Node("node-a").Label("foo", "").Obj(),
				makePod().Name("p-b1").Node("node-b").Label("foo", "").Label("bar", "").Obj(),
				makePod().Name("p-y1").Node("node-y").Label("foo", "").Obj(),
				makePod().Name("p-y2").Node("node-y").Label("foo", "").Label("bar", "").Obj(),
				makePod().Name("p-y3").Node("node-y").Label("foo", "").Obj(),
			},
			nodes: []*corev1.Node{
				makeNode().Name("node-a").Label("zone", "zone1").Obj(),
				makeNode().Name("node-x").Label("zone", "zone2").Obj(),
			},
			failedNodes: []*corev1.Node{
				makeNode().Name("node-b").Label("zone", "zone1").Obj(),
				makeNode().Name("node-y").Label("zone", "zone2").Obj(),
			},
			want: []ns{{Name: "node-a", Score: 85}, {Name: "node-x", Score: 100}},
		},
		{
			name: "two Constraints on zone and node, with different labelSelectors",
			pod: makePod().Name("p").Label("foo", "").Label("bar", "").
				SpreadConstraint(1, "zone", corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).
				SpreadConstraint(1, corev1.LabelHostname, corev1.ScheduleAnyway, barSelector, nil, nil, nil, nil).Obj(),
			existing: []*corev1.Pod{
				makePod().Name("p-a1").Node("node-a").Label("foo", "").Obj(),
				makePod().Name("p-b1").Node("node-b").Label("foo", "").Label("bar", "").Obj(),
				makePod().Name("p-y1").Node("node-y").Label("foo", "").Obj(),
				makePod().Name("p-y2").Node("node-y").Label("bar", "").Obj(),
			},
			nodes: zoneHostNodes("node-a/zone1", "node-b/zone1", "node-x/zone2", "node-y/zone2"),
			want:  []ns{{Name: "node-a", Score: 60}, {Name: "node-b", Score: 20}, {Name: "node-x", Score: 100}, {Name: "node-y", Score: 60}},
		},
		{
			name: "two Constraints on zone and node, with different labelSelectors, some nodes have 0 pods",
			pod: makePod().Name("p").Label("foo", "").Label("bar", "").
				SpreadConstraint(1, "zone", corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).
				SpreadConstraint(1, corev1.LabelHostname, corev1.ScheduleAnyway, barSelector, nil, nil, nil, nil).Obj(),
			existing: []*corev1.Pod{
				makePod().Name("p-b1").Node("node-b").Label("bar", "").Obj(),
				makePod().Name("p-x1").Node("node-x").Label("foo", "").Obj(),
				makePod().Name("p-y1").Node("node-y").Label("foo", "").Label("bar", "").Obj(),
			},
			nodes: zoneHostNodes("node-a/zone1", "node-b/zone1", "node-x/zone2", "node-y/zone2"),
			want:  []ns{{Name: "node-a", Score: 100}, {Name: "node-b", Score: 60}, {Name: "node-x", Score: 40}, {Name: "node-y", Score: 0}},
		},
		{
			name: "two Constraints on zone and node, with different labelSelectors, 3 out of 4 nodes are candidates",
			pod: makePod().Name("p").Label("foo", "").Label("bar", "").
				SpreadConstraint(1, "zone", corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).
				SpreadConstraint(1, corev1.LabelHostname, corev1.ScheduleAnyway, barSelector, nil, nil, nil, nil).Obj(),
			existing: []*corev1.Pod{
				makePod().Name("p-a1").Node("node-a").Label("foo", "").Obj(),
				makePod().Name("p-b1").Node("node-b").Label("foo", "").Label("bar", "").Obj(),
				makePod().Name("p-y1").Node("node-y").Label("foo", "").Obj(),
				makePod().Name("p-y2").Node("node-y").Label("bar", "").Obj(),
			},
			nodes:       zoneHostNodes("node-a/zone1", "node-b/zone1", "node-x/zone2"),
			failedNodes: zoneHostNodes("node-y/zone2"),
			want:        []ns{{Name: "node-a", Score: 50}, {Name: "node-b", Score: 25}, {Name: "node-x", Score: 100}},
		},
		{
			name: "existing pods in a different namespace do not count",
			pod:  makePod().Name("p").Label("foo", "").SpreadConstraint(1, corev1.LabelHostname, corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).Obj(),
			existing: []*corev1.Pod{
				makePod().Name("p-a1").Namespace("ns1").Node("node-a").Label("foo", "").Obj(),
				makePod().Name("p-a2").Node("node-a").Label("foo", "").Obj(),
				makePod().Name("p-b1").Node("node-b").Label("foo", "").Obj(),
				makePod().Name("p-b2").Node("node-b").Label("foo", "").Obj(),
			},
			nodes: hostNodes("node-a", "node-b"),
			want:  []ns{{Name: "node-a", Score: 100}, {Name: "node-b", Score: 33}},
		},
		{
			name: "terminating Pods should be excluded",
			pod:  makePod().Name("p").Label("foo", "").SpreadConstraint(1, corev1.LabelHostname, corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).Obj(),
			existing: []*corev1.Pod{
				makePod().Name("p-a").Node("node-a").Label("foo", "").Terminating().Obj(),
				makePod().Name("p-b").Node("node-b").Label("foo", "").Obj(),
			},
			nodes: hostNodes("node-a", "node-b"),
			want:  []ns{{Name: "node-a", Score: 100}, {Name: "node-b", Score: 0}},
		},
		{
			name:     "minDomains has no effect when ScheduleAnyway",
			pod:      makePod().Name("p").Label("foo", "").SpreadConstraint(2, "node", corev1.ScheduleAnyway, fooSelector, ptrTo[int32](10), nil, nil, nil).Obj(),
			existing: fooPods(map[string]int{"node-a": 2, "node-b": 2, "node-c": 1}),
			nodes: []*corev1.Node{
				makeNode().Name("node-a").Label("node", "node-a").Obj(),
				makeNode().Name("node-b").Label("node", "node-b").Obj(),
				makeNode().Name("node-c").Label("node", "node-c").Obj(),
			},
			want: []ns{{Name: "node-a", Score: 75}, {Name: "node-b", Score: 75}, {Name: "node-c", Score: 100}},
		},
		{
			name: "NodeAffinityPolicy honoed with labelSelectors",
			pod: makePod().Name("p").Label("foo", "").NodeSelector(map[string]string{"foo": ""}).
				SpreadConstraint(1, "node", corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).Obj(),
			existing: policyPods,
			nodes:    policyNodes(makeNode().Name("node-c").Label("node", "node-c").Obj()),
			want:     []ns{{Name: "node-a", Score: 0}, {Name: "node-b", Score: 33}, {Name: "node-c", Score: 100}},
		},
		{
			name: "NodeAffinityPolicy ignored with labelSelectors",
			pod: makePod().Name("p").Label("foo", "").NodeSelector(map[string]string{"foo": ""}).
				SpreadConstraint(1, "node", corev1.ScheduleAnyway, fooSelector, nil, &ignorePolicy, nil, nil).Obj(),
			existing: policyPods,
			nodes:    policyNodes(makeNode().Name("node-c").Label("node", "node-c").Obj()),
			want:     []ns{{Name: "node-a", Score: 66}, {Name: "node-b", Score: 100}, {Name: "node-c", Score: 100}},
		},
		{
			name: "NodeAffinityPolicy honoed with nodeAffinity",
			pod: makePod().Name("p").Label("foo", "").NodeAffinityIn("foo", "").
				SpreadConstraint(1, "node", corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).Obj(),
			existing: policyPods,
			nodes:    policyNodes(makeNode().Name("node-c").Label("node", "node-c").Obj()),
			want:     []ns{{Name: "node-a", Score: 0}, {Name: "node-b", Score: 33}, {Name: "node-c", Score: 100}},
		},
		{
			name: "NodeAffinityPolicy ignored with nodeAffinity",
			pod: makePod().Name("p").Label("foo", "").NodeAffinityIn("foo", "").
				SpreadConstraint(1, "node", corev1.ScheduleAnyway, fooSelector, nil, &ignorePolicy, nil, nil).Obj(),
			existing: policyPods,
			nodes:    policyNodes(makeNode().Name("node-c").Label("node", "node-c").Obj()),
			want:     []ns{{Name: "node-a", Score: 66}, {Name: "node-b", Score: 100}, {Name: "node-c", Score: 100}},
		},
		{
			name:     "NodeTaintsPolicy honored",
			pod:      makePod().Name("p").Label("foo", "").SpreadConstraint(1, "node", corev1.ScheduleAnyway, fooSelector, nil, nil, &honorPolicy, nil).Obj(),
			existing: policyPods,
			nodes:    taintNodes,
			want:     []ns{{Name: "node-a", Score: 0}, {Name: "node-b", Score: 33}, {Name: "node-c", Score: 100}},
		},
		{
			name:     "NodeTaintsPolicy ignored",
			pod:      makePod().Name("p").Label("foo", "").SpreadConstraint(1, "node", corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).Obj(),
			existing: policyPods,
			nodes:    taintNodes,
			want:     []ns{{Name: "node-a", Score: 66}, {Name: "node-b", Score: 100}, {Name: "node-c", Score: 100}},
		},
		{
			name: "matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
			pod: makePod().Name("p").Label("foo", "").Label("bar", "").
				SpreadConstraint(1, "zone", corev1.ScheduleAnyway, &metav1.LabelSelector{}, nil, nil, nil, []string{"foo"}).
				SpreadConstraint(1, corev1.LabelHostname, corev1.ScheduleAnyway, &metav1.LabelSelector{}, nil, nil, nil, []string{"bar"}).Obj(),
			existing: []*corev1.Pod{
				makePod().Name("p-a1").Node("node-a").Label("foo", "").Obj(),
				makePod().Name("p-b1").Node("node-b").Label("foo", "").Label("bar", "").Obj(),
				makePod().Name("p-y1").Node("node-c").Label("foo", "").Obj(),
				makePod().Name("p-y2").Node("node-c").Label("bar", "").Obj(),
			},
			nodes: zoneHostNodes("node-a/zone1", "node-b/zone1", "node-c/zone2", "node-d/zone2"),
			want:  []ns{{Name: "node-a", Score: 60}, {Name: "node-b", Score: 20}, {Name: "node-c", Score: 60}, {Name: "node-d", Score: 100}},
		},
		{
			name: "matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
			pod: makePod().Name("p").Label("foo", "").Label("bar", "").Label("baz", "").
				SpreadConstraint(1, "zone", corev1.ScheduleAnyway, fooSelector, nil, nil, nil, nil).
				SpreadConstraint(1, corev1.LabelHostname, corev1.ScheduleAnyway, barSelector, nil, nil, nil, []string{"baz"}).Obj(),
			existing: []*corev1.Pod{
				makePod().Name("p-a1").Node("node-a").Label("foo", "").Obj(),
				makePod().Name("p-b1").Node("node-b").Label("foo", "").Label("bar", "").Label("baz", "").Obj(),
				makePod().Name("p-c1").Node("node-c").Label("foo", "").Obj(),
				makePod().Name("p-c2").Node("node-c").Label("bar", "").Obj(),
				makePod().Name("p-d3").Node("node-c").Label("bar", "").Label("baz", "").Obj(),
			},
			nodes: zoneHostNodes("node-a/zone1", "node-b/zone1", "node-c/zone2", "node-d/zone2"),
			want:  []ns{{Name: "node-a", Score: 60}, {Name: "node-b", Score: 20}, {Name: "node-c", Score: 60}, {Name: "node-d", Score: 100}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := newSnapshot(tt.existing, append(slices.Clone(tt.nodes), tt.failedNodes...))
			pl := newPlugin(t, snap)
			state := framework.NewCycleState()
			if st := pl.PreScore(t.Context(), state, tt.pod, nodeInfos(snap, tt.nodes)); !st.IsSuccess() {
				t.Fatalf("PreScore: %v %v", st.Code(), st.Message())
			}
			var got []framework.NodeScore
			for _, ni := range nodeInfos(snap, tt.nodes) {
				score, st := pl.Score(t.Context(), state, tt.pod, ni)
				if !st.IsSuccess() {
					t.Fatalf("Score: %v", st.Message())
				}
				got = append(got, framework.NodeScore{Name: ni.Node().Name, Score: score})
			}
			if st := pl.NormalizeScore(t.Context(), state, tt.pod, got); !st.IsSuccess() {
				t.Fatalf("NormalizeScore: %v", st.Message())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("scores = %v\nwant     %v", got, tt.want)
			}
		})
	}
}
