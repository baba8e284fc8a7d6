package noderesources

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

type scoreCase struct {
	name         string
	requestedPod *corev1.Pod
	nodes        []*corev1.Node
	existingPods []*corev1.Pod
	expected     []framework.NodeScore
	args         any
}

// runScoreCases scores every node with and without PreScore having run.
func runScoreCases(t *testing.T, newPlugin func(context.Context, any, framework.Handle) (framework.Plugin, error), tests []scoreCase) {
	t.Helper()
	ctx := context.Background()
	for _, tc := range tests {
		for _, runPreScore := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/prescore=%v", tc.name, runPreScore), func(t *testing.T) {
				p, err := newPlugin(ctx, tc.args, nil)
				if err != nil {
					t.Fatal(err)
				}
				infos := snapshot(tc.existingPods, tc.nodes)
				state := framework.NewCycleState()
				if runPreScore {
					if st := p.(framework.PreScorePlugin).PreScore(ctx, state, tc.requestedPod, infos); !st.IsSuccess() {
						t.Fatalf("PreScore: %v %q", st.Code(), st.Message())
					}
				}
				var got []framework.NodeScore
				for _, ni := range infos {
					score, st := p.(framework.ScorePlugin).Score(ctx, state, tc.requestedPod, ni)
					if !st.IsSuccess() {
						t.Fatalf("Score: %v %q", st.Code(), st.Message())
					}
					got = append(got, framework.NodeScore{Name: ni.Node().Name, Score: score})
				}
				if !reflect.DeepEqual(got, tc.expected) {
					t.Errorf("scores = %v, want %v", got, tc.expected)
				}
			})
		}
	}
}

func fitArgsFor(t ScoringStrategyType, resources ...ResourceSpec) FitArgs {
	return FitArgs{ScoringStrategy: &ScoringStrategy{Type: t, Resources: resources}}
}

type rl = map[corev1.ResourceName]string

const extendedRes = "intel.com/foo"

func extendedResourceSet() []ResourceSpec {
	return []ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}, {Name: extendedRes, Weight: 1}}
}

// Upstream's TestLeastAllocatedScoringStrategy (the argument-validation cases are in TestArgs).
func TestLeastAllocated(t *testing.T) {
	n := makeCapacityNode
	tests := []scoreCase{
		{
			name:         "nothing scheduled, nothing requested",
			requestedPod: makePod(""),
			nodes:        []*corev1.Node{n("node1", rl{"cpu": "4000", "memory": "10000"}), n("node2", rl{"cpu": "4000", "memory": "10000"})},
			expected:     []framework.NodeScore{{Name: "node1", Score: 100}, {Name: "node2", Score: 100}},
		},
		{
			// node1: cpu (4000-3000)/4000 = 25, memory (10000-5000)/10000 = 50 -> 37
			name:         "nothing scheduled, resources requested, differently sized nodes",
			requestedPod: makePod("", rl{"cpu": "1000", "memory": "2000"}, rl{"cpu": "2000", "memory": "3000"}),
			nodes:        []*corev1.Node{n("node1", rl{"cpu": "4000", "memory": "10000"}), n("node2", rl{"cpu": "6000", "memory": "10000"})},
			expected:     []framework.NodeScore{{Name: "node1", Score: 37}, {Name: "node2", Score: 50}},
		},
		{
			name:         "no resources requested, pods scheduled",
			requestedPod: makePod(""),
			nodes:        []*corev1.Node{n("node1", rl{"cpu": "4000", "memory": "10000"}), n("node2", rl{"cpu": "4000", "memory": "10000"})},
			existingPods: []*corev1.Pod{makePod("node1"), makePod("node1"), makePod("node2"), makePod("node2")},
			expected:     []framework.NodeScore{{Name: "node1", Score: 100}, {Name: "node2", Score: 100}},
		},
		{
			name:         "no resources requested, pods scheduled with resources",
			requestedPod: makePod(""),
			nodes:        []*corev1.Node{n("node1", rl{"cpu": "10000", "memory": "20000"}), n("node2", rl{"cpu": "10000", "memory": "20000"})},
			existingPods: []*corev1.Pod{
				makePod("node1", rl{"cpu": "3000", "memory": "0"}), makePod("node1", rl{"cpu": "3000", "memory": "0"}),
				makePod("node2", rl{"cpu": "3000", "memory": "0"}), makePod("node2", rl{"cpu": "3000", "memory": "5000"}),
			},
			expected: []framework.NodeScore{{Name: "node1", Score: 70}, {Name: "node2", Score: 57}},
		},
		{
			name:         "resources requested, pods scheduled with resources",
			requestedPod: makePod("", rl{"cpu": "1000", "memory": "2000"}, rl{"cpu": "2000", "memory": "3000"}),
			nodes:        []*corev1.Node{n("node1", rl{"cpu": "10000", "memory": "20000"}), n("node2", rl{"cpu": "10000", "memory": "20000"})},
			existingPods: []*corev1.Pod{makePod("node1", rl{"cpu": "3000", "memory": "0"}), makePod("node2", rl{"cpu": "3000", "memory": "5000"})},
			expected:     []framework.NodeScore{{Name: "node1", Score: 57}, {Name: "node2", Score: 45}},
		},
		{
			name:         "resources requested, pods scheduled with resources, differently sized nodes",
			requestedPod: makePod("", rl{"cpu": "1000", "memory": "2000"}, rl{"cpu": "2000", "memory": "3000"}),
			nodes:        []*corev1.Node{n("node1", rl{"cpu": "10000", "memory": "20000"}), n("node2", rl{"cpu": "10000", "memory": "50000"})},
			existingPods: []*corev1.Pod{makePod("node1", rl{"cpu": "3000", "memory": "0"}), makePod("node2", rl{"cpu": "3000", "memory": "5000"})},
			expected:     []framework.NodeScore{{Name: "node1", Score: 57}, {Name: "node2", Score: 60}},
		},
		{
			name:         "requested resources exceed node capacity",
			requestedPod: makePod("", rl{"cpu": "3000", "memory": "0"}),
			nodes:        []*corev1.Node{n("node1", rl{"cpu": "4000", "memory": "10000"}), n("node2", rl{"cpu": "4000", "memory": "10000"})},
			existingPods: []*corev1.Pod{makePod("node1", rl{"cpu": "3000", "memory": "0"}), makePod("node2", rl{"cpu": "3000", "memory": "5000"})},
			expected:     []framework.NodeScore{{Name: "node1", Score: 50}, {Name: "node2", Score: 25}},
		},
		{
			name:         "zero node resources, pods scheduled with resources",
			requestedPod: makePod(""),
			nodes:        []*corev1.Node{n("node1", nil), n("node2", nil)},
			existingPods: []*corev1.Pod{makePod("node1", rl{"cpu": "3000", "memory": "0"}), makePod("node2", rl{"cpu": "3000", "memory": "5000"})},
			expected:     []framework.NodeScore{{Name: "node1", Score: 0}, {Name: "node2", Score: 0}},
		},
		{
			// node1: (25 * 1 + 50 * 2) / (1 + 2) = 41
			name:         "nothing scheduled, resources requested with different weight on CPU and memory, differently sized nodes",
			requestedPod: makePod("node1", rl{"cpu": "1000", "memory": "2000"}, rl{"cpu": "2000", "memory": "3000"}),
			nodes:        []*corev1.Node{n("node1", rl{"cpu": "4000", "memory": "10000"}), n("node2", rl{"cpu": "6000", "memory": "10000"})},
			expected:     []framework.NodeScore{{Name: "node1", Score: 41}, {Name: "node2", Score: 50}},
			args:         fitArgsFor(LeastAllocated, ResourceSpec{Name: "memory", Weight: 2}, ResourceSpec{Name: "cpu", Weight: 1}),
		},
		{
			name:         "bypass extended resource if the pod does not request",
			requestedPod: makePod("node1", rl{"cpu": "1000", "memory": "2000"}, rl{"cpu": "2000", "memory": "3000"}),
			nodes:        []*corev1.Node{n("node1", rl{"cpu": "6000", "memory": "10000"}), n("node2", rl{"cpu": "6000", "memory": "10000", extendedRes: "4"})},
			expected:     []framework.NodeScore{{Name: "node1", Score: 50}, {Name: "node2", Score: 50}},
			args:         fitArgsFor(LeastAllocated, extendedResourceSet()...),
		},
		{
			// node1: (50 + 50 + (4-2)/4) / 3 = 50; node2: (50 + 50 + (10-2)/10) / 3 = 60
			name:         "honor extended resource if the pod requests",
			requestedPod: makePod("node1", rl{"cpu": "3000", "memory": "5000", extendedRes: "2"}),
			nodes:        []*corev1.Node{n("node1", rl{"cpu": "6000", "memory": "10000", extendedRes: "4"}), n("node2", rl{"cpu": "6000", "memory": "10000", extendedRes: "10"})},
			expected:     []framework.NodeScore{{Name: "node1", Score: 50}, {Name: "node2", Score: 60}},
			args:         fitArgsFor(LeastAllocated, extendedResourceSet()...),
		},
		{
			name:         "if the node doesn't have a resource",
			requestedPod: makePod("node1", rl{"cpu": "3000", "memory": "4000"}),
			nodes:        []*corev1.Node{n("node1", rl{"cpu": "6000", "memory": "10000"}), n("node2", rl{"cpu": "6000", "memory": "10000", extendedRes: "4"})},
			expected:     []framework.NodeScore{{Name: "node1", Score: 55}, {Name: "node2", Score: 55}},
			args: fitArgsFor(LeastAllocated, ResourceSpec{Name: extendedRes, Weight: 2},
				ResourceSpec{Name: "cpu", Weight: 1}, ResourceSpec{Name: "memory", Weight: 1}),
		},
		// Beyond upstream's table: a container without requests counts 100m and 200Mi.
		{
			// node1: cpu (1000m-100m)/1000m = 90, memory (1000Mi-200Mi)/1000Mi = 80 -> 85
			name:         "non-zero defaults for a pod without requests",
			requestedPod: &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}},
			nodes:        []*corev1.Node{n("node1", rl{"cpu": "1", "memory": "1000Mi"})},
			expected:     []framework.NodeScore{{Name: "node1", Score: 85}},
		},
	}
	runScoreCases(t, NewFit, tests)
}

// Upstream's TestMostAllocatedScoringStrategy (the argument-validation cases are in TestArgs).
func TestMostAllocated(t *testing.T) {
	n := makeCapacityNode
	args := fitArgsFor(MostAllocated)
	tests := []scoreCase{
		{
			name:         "nothing scheduled, nothing requested",
			requestedPod: makePod(""),
			nodes:        []*corev1.Node{n("node1", rl{"cpu": "4000", "memory": "10000"}), n("node2", rl{"cpu": "4000", "memory": "10000"})},
			expected:     []framework.NodeScore{{Name: "node1", Score: 0}, {Name: "node2", Score: 0}},
		},
		{
			name:         "nothing scheduled, resources requested, differently sized nodes",
			requestedPod: makePod("", rl{"cpu": "1000", "memory": "2000"}, rl{"cpu": "2000", "memory": "3000"}),
			nodes:        []*corev1.Node{n("node1", rl{"cpu": "4000", "memory": "10000"}), n("node2", rl{"cpu": "6000", "memory": "10000"})},
			expected:     []framework.NodeScore{{Name: "node1", Score: 62}, {Name: "node2", Score: 50}},
		},
		{
			name:         "no resources requested, pods scheduled with resources",
			requestedPod: makePod(""),
			nodes:        []*corev1.Node{n("node1", rl{"cpu": "10000", "memory": "20000"}), n("node2", rl{"cpu": "10000", "memory": "20000"})},
			existingPods: []*corev1.Pod{
				makePod("node1", rl{"cpu": "3000", "memory": "0"}), makePod("node1", rl{"cpu": "3000", "memory": "0"}),
				makePod("node2", rl{"cpu": "3000", "memory": "0"}), makePod("node2", rl{"cpu": "3000", "memory": "5000"}),
			},
			expected: []framework.NodeScore{{Name: "node1", Score: 30}, {Name: "node2", Score: 42}},
		},
		{
			name:         "resources requested, pods scheduled with resources",
			requestedPod: makePod("", rl{"cpu": "1000", "memory": "2000"}, rl{"cpu": "2000", "memory": "3000"}),
			nodes:        []*corev1.Node{n("node1", rl{"cpu": "10000", "memory": "20000"}), n("node2", rl{"cpu": "10000", "memory": "20000"})},
			existingPods: []*corev1.Pod{makePod("node1", rl{"cpu": "3000", "memory": "0"}), makePod("node2", rl{"cpu": "3000", "memory": "5000"})},
			expected:     []framework.NodeScore{{Name: "node1", Score: 42}, {Name: "node2", Score: 55}},
		},
		{
			name:         "resources requested equal node capacity",
			requestedPod: makePod("", rl{"cpu": "2000", "memory": "4000"}, rl{"cpu": "3000", "memory": "5000"}),
			nodes:        []*corev1.Node{n("node1", rl{"cpu": "5000", "memory": "10000"}), n("node2", rl{"cpu": "10000", "memory": "9000"})},
			expected:     []framework.NodeScore{{Name: "node1", Score: 95}, {Name: "node2", Score: 75}},
		},
		{
			name:         "nothing scheduled, resources requested, differently sized nodes, weighted",
			requestedPod: makePod("", rl{"cpu": "1000", "memory": "2000"}, rl{"cpu": "2000", "memory": "3000"}),
			nodes:        []*corev1.Node{n("node1", rl{"cpu": "4000", "memory": "10000"}), n("node2", rl{"cpu": "6000", "memory": "10000"})},
			expected:     []framework.NodeScore{{Name: "node1", Score: 58}, {Name: "node2", Score: 50}},
			args:         fitArgsFor(MostAllocated, ResourceSpec{Name: "memory", Weight: 2}, ResourceSpec{Name: "cpu", Weight: 1}),
		},
		{
			name:         "no resources requested, pods scheduled, nonzero request for resource",
			requestedPod: &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "container"}}}},
			nodes:        []*corev1.Node{n("node1", rl{"cpu": "250m", "memory": "1000Mi"}), n("node2", rl{"cpu": "250m", "memory": "1000Mi"})},
			existingPods: []*corev1.Pod{
				{Spec: corev1.PodSpec{NodeName: "node1", Containers: []corev1.Container{{Name: "container"}}}},
				{Spec: corev1.PodSpec{NodeName: "node1", Containers: []corev1.Container{{Name: "container"}}}},
			},
			expected: []framework.NodeScore{{Name: "node1", Score: 80}, {Name: "node2", Score: 30}},
		},
		{
			name:         "bypass extended resource if the pod does not request",
			requestedPod: makePod("", rl{"cpu": "1000", "memory": "2000"}, rl{"cpu": "2000", "memory": "3000"}),
			nodes:        []*corev1.Node{n("node1", rl{"cpu": "6000", "memory": "10000"}), n("node2", rl{"cpu": "6000", "memory": "10000", extendedRes: "4"})},
			expected:     []framework.NodeScore{{Name: "node1", Score: 50}, {Name: "node2", Score: 50}},
			args:         fitArgsFor(MostAllocated, extendedResourceSet()...),
		},
		{
			name:         "honor extended resource if the pod request",
			requestedPod: makePod("node1", rl{"cpu": "3000", "memory": "5000", extendedRes: "2"}),
			nodes:        []*corev1.Node{n("node1", rl{"cpu": "6000", "memory": "10000", extendedRes: "4"}), n("node2", rl{"cpu": "6000", "memory": "10000", extendedRes: "10"})},
			expected:     []framework.NodeScore{{Name: "node1", Score: 50}, {Name: "node2", Score: 40}},
			args:         fitArgsFor(MostAllocated, extendedResourceSet()...),
		},
		{
			name:         "if the node doesn't have a resource",
			requestedPod: makePod("node1", rl{"cpu": "3000", "memory": "4000"}),
			nodes:        []*corev1.Node{n("node1", rl{"cpu": "6000", "memory": "10000"}), n("node2", rl{"cpu": "6000", "memory": "10000", extendedRes: "4"})},
			expected:     []framework.NodeScore{{Name: "node1", Score: 45}, {Name: "node2", Score: 45}},
			args: fitArgsFor(MostAllocated, ResourceSpec{Name: extendedRes, Weight: 2},
				ResourceSpec{Name: "cpu", Weight: 1}, ResourceSpec{Name: "memory", Weight: 1}),
		},
	}
	for i := range tests {
		if tests[i].args == nil {
			tests[i].args = args
		}
	}
	runScoreCases(t, NewFit, tests)
}

// Upstream's TestFitScore: one pod on two nodes under each strategy.
func TestFitScore(t *testing.T) {
	n := makeCapacityNode
	nodes := []*corev1.Node{n("node1", rl{"cpu": "4000", "memory": "10000"}), n("node2", rl{"cpu": "6000", "memory": "10000"})}
	existing := []*corev1.Pod{makePod("node1", rl{"cpu": "2000", "memory": "4000"}), makePod("node2", rl{"cpu": "1000", "memory": "2000"})}
	rtcr := func(shape ...UtilizationShapePoint) FitArgs {
		a := fitArgsFor(RequestedToCapacityRatio)
		a.ScoringStrategy.RequestedToCapacityRatio = &RequestedToCapacityRatioParam{Shape: shape}
		return a
	}
	tests := []scoreCase{
		{
			name:         "test case for ScoringStrategy RequestedToCapacityRatio case1",
			requestedPod: makePod("", rl{"cpu": "3000", "memory": "5000"}),
			expected:     []framework.NodeScore{{Name: "node1", Score: 10}, {Name: "node2", Score: 32}},
			args:         rtcr(UtilizationShapePoint{Utilization: 0, Score: 10}, UtilizationShapePoint{Utilization: 100, Score: 0}),
		},
		{
			name:         "test case for ScoringStrategy RequestedToCapacityRatio case2",
			requestedPod: makePod("", rl{"cpu": "3000", "memory": "5000"}),
			expected:     []framework.NodeScore{{Name: "node1", Score: 95}, {Name: "node2", Score: 68}},
			args:         rtcr(UtilizationShapePoint{Utilization: 0, Score: 0}, UtilizationShapePoint{Utilization: 100, Score: 10}),
		},
		{
			name:         "test case for ScoringStrategy MostAllocated",
			requestedPod: makePod("", rl{"cpu": "1000", "memory": "2000"}),
			expected:     []framework.NodeScore{{Name: "node1", Score: 67}, {Name: "node2", Score: 36}},
			args:         fitArgsFor(MostAllocated),
		},
		{
			name:         "test case for ScoringStrategy LeastAllocated",
			requestedPod: makePod("", rl{"cpu": "1000", "memory": "2000"}),
			expected:     []framework.NodeScore{{Name: "node1", Score: 32}, {Name: "node2", Score: 63}},
			args:         fitArgsFor(LeastAllocated),
		},
		// Beyond upstream's table: the default RequestedToCapacityRatio shape is case1's.
		{
			name:         "RequestedToCapacityRatio default shape",
			requestedPod: makePod("", rl{"cpu": "3000", "memory": "5000"}),
			expected:     []framework.NodeScore{{Name: "node1", Score: 10}, {Name: "node2", Score: 32}},
			args:         fitArgsFor(RequestedToCapacityRatio),
		},
	}
	for i := range tests {
		tests[i].nodes, tests[i].existingPods = nodes, existing
	}
	runScoreCases(t, NewFit, tests)
}

// Upstream's TestNodeResourcesBalancedAllocation (current upstream: the score
// rewards the change in balance the pod brings; the DRA cases are left out).
func TestBalancedAllocation(t *testing.T) {
	threeResources := BalancedAllocationArgs{Resources: []ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}, {Name: "nvidia.com/gpu", Weight: 1}}}
	tests := []scoreCase{
		{
			// node1: cpu 0 -> 75%, memory 0 -> 50%: 100 -> 87, score 68; node2: 50%/50%: 100 -> 100, score 75
			name:         "nothing scheduled, resources requested, differently sized nodes",
			requestedPod: makePod("", cpuAndMemory("1000m", "2000"), cpuAndMemory("2000m", "3000")),
			nodes:        []*corev1.Node{makeNode("node1", 4000, 10000, nil), makeNode("node2", 6000, 10000, nil)},
			expected:     []framework.NodeScore{{Name: "node1", Score: 68}, {Name: "node2", Score: 75}},
		},
		{
			name:         "resources requested, pods scheduled with resources",
			requestedPod: makePod("", cpuAndMemory("1000m", "2000"), cpuAndMemory("2000m", "3000")),
			nodes:        []*corev1.Node{makeNode("node1", 10000, 20000, nil), makeNode("node2", 10000, 20000, nil)},
			existingPods: []*corev1.Pod{
				makePod("node1", cpuOnly("1000m"), cpuOnly("2000m")),
				makePod("node2", cpuAndMemory("1000m", "2000"), cpuAndMemory("2000m", "3000")),
			},
			expected: []framework.NodeScore{{Name: "node1", Score: 73}, {Name: "node2", Score: 74}},
		},
		{
			name:         "resources requested, pods scheduled with resources, differently sized nodes",
			requestedPod: makePod("", cpuAndMemory("1000m", "2000"), cpuAndMemory("2000m", "3000")),
			nodes:        []*corev1.Node{makeNode("node1", 10000, 20000, nil), makeNode("node2", 10000, 50000, nil)},
			existingPods: []*corev1.Pod{
				makePod("node1", cpuOnly("1000m"), cpuOnly("2000m")),
				makePod("node2", cpuAndMemory("1000m", "2000"), cpuAndMemory("2000m", "3000")),
			},
			expected: []framework.NodeScore{{Name: "node1", Score: 73}, {Name: "node2", Score: 70}},
		},
		{
			name:         "resources requested, pods scheduled with resources, nodes to reach min/max score",
			requestedPod: makePod("", rl{"memory": "2000"}, rl{"memory": "3000"}),
			nodes:        []*corev1.Node{makeNode("node1", 3000, 5000, nil), makeNode("node2", 3000, 5000, nil)},
			existingPods: []*corev1.Pod{makePod("node1", cpuOnly("1000m"), cpuOnly("2000m"))},
			expected:     []framework.NodeScore{{Name: "node1", Score: 100}, {Name: "node2", Score: 50}},
		},
		{
			name:         "requested resources at node capacity",
			requestedPod: makePod("", cpuOnly("1000m"), cpuOnly("2000m")),
			nodes:        []*corev1.Node{makeNode("node1", 6000, 10000, nil), makeNode("node2", 6000, 10000, nil)},
			existingPods: []*corev1.Pod{
				makePod("node1", cpuOnly("1000m"), cpuOnly("2000m")),
				makePod("node2", cpuAndMemory("1000m", "2000"), cpuAndMemory("2000m", "3000")),
			},
			expected: []framework.NodeScore{{Name: "node1", Score: 62}, {Name: "node2", Score: 62}},
		},
		{
			name:         "scalar resource is included in the score computation if pod requests the scalar resource",
			requestedPod: makePod("", cpuAndMemoryAndGPU("0", "0", "1")),
			nodes:        []*corev1.Node{makeNode("node1", 3500, 40000, gpu(8)), makeNode("node2", 3500, 40000, gpu(8))},
			existingPods: []*corev1.Pod{
				makePod("node1", cpuAndMemory("1000m", "2000"), cpuAndMemoryAndGPU("2000m", "3000", "3")),
				makePod("node2", cpuAndMemory("1000m", "2000"), cpuAndMemory("2000m", "3000")),
			},
			expected: []framework.NodeScore{{Name: "node1", Score: 75}, {Name: "node2", Score: 76}},
			args:     threeResources,
		},
		{
			name:         "scalar resource is not included in the score computation if pod doesn't request the scalar resource",
			requestedPod: makePod("", cpuAndMemory("1000m", "2000"), cpuAndMemory("2000m", "3000")),
			nodes:        []*corev1.Node{makeNode("node1", 3500, 40000, gpu(8)), makeNode("node2", 3500, 40000, nil)},
			expected:     []framework.NodeScore{{Name: "node1", Score: 56}, {Name: "node2", Score: 56}},
			args:         &threeResources,
		},
	}
	runScoreCases(t, NewBalancedAllocation, tests)
}

func TestBalancedAllocationSkipsBestEffort(t *testing.T) {
	ctx := context.Background()
	p, err := NewBalancedAllocation(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	pod := makePod("")
	infos := snapshot(nil, []*corev1.Node{makeNode("node1", 4000, 10000, nil)})
	if st := p.(framework.PreScorePlugin).PreScore(ctx, framework.NewCycleState(), pod, infos); !st.IsSkip() {
		t.Fatalf("PreScore = %v, want Skip", st.Code())
	}
	// Without PreScore, Score gives a best-effort pod 0 everywhere.
	if score, st := p.(framework.ScorePlugin).Score(ctx, framework.NewCycleState(), pod, infos[0]); score != 0 || !st.IsSuccess() {
		t.Fatalf("Score = %d, %v; want 0, success", score, st.Code())
	}
}

func TestBalancedResourceScore(t *testing.T) {
	tests := []struct {
		requested, allocatable []int64
		want                   int64
	}{
		{[]int64{3000, 5000}, []int64{4000, 10000}, 87},              // |0.75-0.5|/2 = 0.125
		{[]int64{0, 0}, []int64{0, 0}, 100},                          // nothing allocatable: std 0
		{[]int64{8000, 0}, []int64{4000, 10000}, 50},                 // fraction capped at 1
		{[]int64{3000, 5000, 3}, []int64{3500, 40000, 8}, 69},        // three resources: population std
		{[]int64{1, 2, 3, 4}, []int64{0, 0, 0, 0}, 100},              // all skipped
		{[]int64{5, 5, 5, 5, 5, 5, 5, 5, 5, 5}, make10(10), 100},     // more than the stack buffer
		{[]int64{10, 0, 10, 0, 10, 0, 10, 0, 10, 0}, make10(10), 50}, // std 0.5
	}
	for _, tc := range tests {
		if got := balancedResourceScore(tc.requested, tc.allocatable); got != tc.want {
			t.Errorf("balancedResourceScore(%v, %v) = %d, want %d", tc.requested, tc.allocatable, got, tc.want)
		}
	}
}

func make10(v int64) []int64 {
	out := make([]int64, 10)
	for i := range out {
		out[i] = v
	}
	return out
}

// BenchmarkScore measures Score after PreScore for LeastAllocated and BalancedAllocation.
func BenchmarkScore(b *testing.B) {
	ctx := context.Background()
	pod := makePod("", rl{"cpu": "500m", "memory": "1Gi"})
	infos := snapshot([]*corev1.Pod{makePod("n", rl{"cpu": "1", "memory": "2Gi"})}, []*corev1.Node{makeCapacityNode("n", rl{"cpu": "4", "memory": "8Gi"})})
	for _, tc := range []struct {
		name string
		new  func(context.Context, any, framework.Handle) (framework.Plugin, error)
	}{{"LeastAllocated", NewFit}, {"BalancedAllocation", NewBalancedAllocation}} {
		b.Run(tc.name, func(b *testing.B) {
			p, _ := tc.new(ctx, nil, nil)
			state := framework.NewCycleState()
			p.(framework.PreScorePlugin).PreScore(ctx, state, pod, infos)
			pl := p.(framework.ScorePlugin)
			b.ReportAllocs()
			for b.Loop() {
				if _, st := pl.Score(ctx, state, pod, infos[0]); !st.IsSuccess() {
					b.Fatal(st.Message())
				}
			}
		})
	}
}
