package tainttoleration

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

func nodeWithTaints(name string, taints []corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: taints}}
}

func podWithTolerations(tolerations []corev1.Toleration) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod1"}, Spec: corev1.PodSpec{Tolerations: tolerations}}
}

func nodeInfo(node *corev1.Node) *framework.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	return ni
}

// The cases up to "Default behaviour" are upstream's TestTaintTolerationScore table.
func TestScore(t *testing.T) {
	tests := []struct {
		name   string
		pod    *corev1.Pod
		nodes  []*corev1.Node
		expect []framework.NodeScore
	}{
		{
			name: "node with taints tolerated by the pod, gets a higher score than those node with intolerable taints",
			pod:  podWithTolerations([]corev1.Toleration{{Key: "foo", Operator: corev1.TolerationOpEqual, Value: "bar", Effect: corev1.TaintEffectPreferNoSchedule}}),
			nodes: []*corev1.Node{
				nodeWithTaints("nodeA", []corev1.Taint{{Key: "foo", Value: "bar", Effect: corev1.TaintEffectPreferNoSchedule}}),
				nodeWithTaints("nodeB", []corev1.Taint{{Key: "foo", Value: "blah", Effect: corev1.TaintEffectPreferNoSchedule}}),
			},
			expect: []framework.NodeScore{{Name: "nodeA", Score: framework.MaxNodeScore}, {Name: "nodeB", Score: 0}},
		},
		{
			name: "the nodes that all of their taints are tolerated by the pod, get the same score, no matter how many tolerable taints a node has",
			pod: podWithTolerations([]corev1.Toleration{
				{Key: "cpu-type", Operator: corev1.TolerationOpEqual, Value: "arm64", Effect: corev1.TaintEffectPreferNoSchedule},
				{Key: "disk-type", Operator: corev1.TolerationOpEqual, Value: "ssd", Effect: corev1.TaintEffectPreferNoSchedule},
			}),
			nodes: []*corev1.Node{
				nodeWithTaints("nodeA", []corev1.Taint{}),
				nodeWithTaints("nodeB", []corev1.Taint{{Key: "cpu-type", Value: "arm64", Effect: corev1.TaintEffectPreferNoSchedule}}),
				nodeWithTaints("nodeC", []corev1.Taint{
					{Key: "cpu-type", Value: "arm64", Effect: corev1.TaintEffectPreferNoSchedule},
					{Key: "disk-type", Value: "ssd", Effect: corev1.TaintEffectPreferNoSchedule},
				}),
			},
			expect: []framework.NodeScore{{Name: "nodeA", Score: 100}, {Name: "nodeB", Score: 100}, {Name: "nodeC", Score: 100}},
		},
		{
			name: "the more intolerable taints a node has, the lower score it gets.",
			pod:  podWithTolerations([]corev1.Toleration{{Key: "foo", Operator: corev1.TolerationOpEqual, Value: "bar", Effect: corev1.TaintEffectPreferNoSchedule}}),
			nodes: []*corev1.Node{
				nodeWithTaints("nodeA", []corev1.Taint{}),
				nodeWithTaints("nodeB", []corev1.Taint{{Key: "cpu-type", Value: "arm64", Effect: corev1.TaintEffectPreferNoSchedule}}),
				nodeWithTaints("nodeC", []corev1.Taint{
					{Key: "cpu-type", Value: "arm64", Effect: corev1.TaintEffectPreferNoSchedule},
					{Key: "disk-type", Value: "ssd", Effect: corev1.TaintEffectPreferNoSchedule},
				}),
			},
			expect: []framework.NodeScore{{Name: "nodeA", Score: 100}, {Name: "nodeB", Score: 50}, {Name: "nodeC", Score: 0}},
		},
		{
			name: "only taints and tolerations that have effect PreferNoSchedule are checked by taints-tolerations priority function",
			pod: podWithTolerations([]corev1.Toleration{
				{Key: "cpu-type", Operator: corev1.TolerationOpEqual, Value: "arm64", Effect: corev1.TaintEffectNoSchedule},
				{Key: "disk-type", Operator: corev1.TolerationOpEqual, Value: "ssd", Effect: corev1.TaintEffectNoSchedule},
			}),
			nodes: []*corev1.Node{
				nodeWithTaints("nodeA", []corev1.Taint{}),
				nodeWithTaints("nodeB", []corev1.Taint{{Key: "cpu-type", Value: "arm64", Effect: corev1.TaintEffectNoSchedule}}),
				nodeWithTaints("nodeC", []corev1.Taint{
					{Key: "cpu-type", Value: "arm64", Effect: corev1.TaintEffectPreferNoSchedule},
					{Key: "disk-type", Value: "ssd", Effect: corev1.TaintEffectPreferNoSchedule},
				}),
			},
			expect: []framework.NodeScore{{Name: "nodeA", Score: 100}, {Name: "nodeB", Score: 100}, {Name: "nodeC", Score: 0}},
		},
		{
			name: "Default behaviour No taints and tolerations, lands on node with no taints",
			pod:  podWithTolerations([]corev1.Toleration{}),
			nodes: []*corev1.Node{
				nodeWithTaints("nodeA", []corev1.Taint{}),
				nodeWithTaints("nodeB", []corev1.Taint{{Key: "cpu-type", Value: "arm64", Effect: corev1.TaintEffectPreferNoSchedule}}),
			},
			expect: []framework.NodeScore{{Name: "nodeA", Score: 100}, {Name: "nodeB", Score: 0}},
		},
		{
			name: "a toleration with no effect counts for PreferNoSchedule",
			pod:  podWithTolerations([]corev1.Toleration{{Key: "foo", Operator: corev1.TolerationOpExists}}),
			nodes: []*corev1.Node{
				nodeWithTaints("nodeA", []corev1.Taint{{Key: "foo", Value: "x", Effect: corev1.TaintEffectPreferNoSchedule}}),
				nodeWithTaints("nodeB", []corev1.Taint{{Key: "bar", Value: "x", Effect: corev1.TaintEffectPreferNoSchedule}}),
			},
			expect: []framework.NodeScore{{Name: "nodeA", Score: 100}, {Name: "nodeB", Score: 0}},
		},
	}
	ctx := context.Background()
	for _, tc := range tests {
		for _, runPreScore := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/prescore=%v", tc.name, runPreScore), func(t *testing.T) {
				p, err := New(ctx, nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				pl := p.(*TaintToleration)
				state := framework.NewCycleState()
				var infos []*framework.NodeInfo
				for _, n := range tc.nodes {
					infos = append(infos, nodeInfo(n))
				}
				if runPreScore {
					if st := pl.PreScore(ctx, state, tc.pod, infos); !st.IsSuccess() {
						t.Fatalf("PreScore: %v", st.Message())
					}
				}
				var got []framework.NodeScore
				for _, ni := range infos {
					score, st := pl.Score(ctx, state, tc.pod, ni)
					if !st.IsSuccess() {
						t.Fatalf("Score: %v", st.Message())
					}
					got = append(got, framework.NodeScore{Name: ni.Node().Name, Score: score})
				}
				if st := pl.ScoreExtensions().NormalizeScore(ctx, state, tc.pod, got); !st.IsSuccess() {
					t.Fatalf("NormalizeScore: %v", st.Message())
				}
				if !reflect.DeepEqual(got, tc.expect) {
					t.Fatalf("scores (prescore=%v) = %v, want %v", runPreScore, got, tc.expect)
				}
			})
		}
	}
}

// The cases up to "no toleration, PreferNoSchedule taint" are upstream's TestTaintTolerationFilter table.
func TestFilter(t *testing.T) {
	const unresolvable = framework.UnschedulableAndUnresolvable
	tests := []struct {
		name       string
		args       any
		pod        *corev1.Pod
		node       *corev1.Node
		wantCode   framework.Code
		wantReason string
	}{
		{
			name:       "A pod having no tolerations can't be scheduled onto a node with nonempty taints",
			pod:        podWithTolerations([]corev1.Toleration{}),
			node:       nodeWithTaints("nodeA", []corev1.Taint{{Key: "dedicated", Value: "user1", Effect: "NoSchedule"}}),
			wantCode:   unresolvable,
			wantReason: "node(s) had untolerated taint {dedicated: user1}",
		},
		{
			name: "A pod which can be scheduled on a dedicated node assigned to user1 with effect NoSchedule",
			pod:  podWithTolerations([]corev1.Toleration{{Key: "dedicated", Value: "user1", Effect: "NoSchedule"}}),
			node: nodeWithTaints("nodeA", []corev1.Taint{{Key: "dedicated", Value: "user1", Effect: "NoSchedule"}}),
		},
		{
			name:       "A pod which can't be scheduled on a dedicated node assigned to user2 with effect NoSchedule",
			pod:        podWithTolerations([]corev1.Toleration{{Key: "dedicated", Operator: "Equal", Value: "user2", Effect: "NoSchedule"}}),
			node:       nodeWithTaints("nodeA", []corev1.Taint{{Key: "dedicated", Value: "user1", Effect: "NoSchedule"}}),
			wantCode:   unresolvable,
			wantReason: "node(s) had untolerated taint {dedicated: user1}",
		},
		{
			name: "A pod can be scheduled onto the node, with a toleration uses operator Exists that tolerates the taints on the node",
			pod:  podWithTolerations([]corev1.Toleration{{Key: "foo", Operator: "Exists", Effect: "NoSchedule"}}),
			node: nodeWithTaints("nodeA", []corev1.Taint{{Key: "foo", Value: "bar", Effect: "NoSchedule"}}),
		},
		{
			name: "A pod has multiple tolerations, node has multiple taints, all the taints are tolerated, pod can be scheduled onto the node",
			pod: podWithTolerations([]corev1.Toleration{
				{Key: "dedicated", Operator: "Equal", Value: "user2", Effect: "NoSchedule"},
				{Key: "foo", Operator: "Exists", Effect: "NoSchedule"},
			}),
			node: nodeWithTaints("nodeA", []corev1.Taint{
				{Key: "dedicated", Value: "user2", Effect: "NoSchedule"},
				{Key: "foo", Value: "bar", Effect: "NoSchedule"},
			}),
		},
		{
			name:       "A pod has a toleration that keys and values match the taint on the node, but (non-empty) effect doesn't match, can't be scheduled onto the node",
			pod:        podWithTolerations([]corev1.Toleration{{Key: "foo", Operator: "Equal", Value: "bar", Effect: "PreferNoSchedule"}}),
			node:       nodeWithTaints("nodeA", []corev1.Taint{{Key: "foo", Value: "bar", Effect: "NoSchedule"}}),
			wantCode:   unresolvable,
			wantReason: "node(s) had untolerated taint {foo: bar}",
		},
		{
			name: "The pod has a toleration that keys and values match the taint on the node, the effect of toleration is empty, and the effect of taint is NoSchedule. Pod can be scheduled onto the node",
			pod:  podWithTolerations([]corev1.Toleration{{Key: "foo", Operator: "Equal", Value: "bar"}}),
			node: nodeWithTaints("nodeA", []corev1.Taint{{Key: "foo", Value: "bar", Effect: "NoSchedule"}}),
		},
		{
			name: "The pod has a toleration that key and value don't match the taint on the node, but the effect of taint on node is PreferNoSchedule. Pod can be scheduled onto the node",
			pod:  podWithTolerations([]corev1.Toleration{{Key: "dedicated", Operator: "Equal", Value: "user2", Effect: "NoSchedule"}}),
			node: nodeWithTaints("nodeA", []corev1.Taint{{Key: "dedicated", Value: "user1", Effect: "PreferNoSchedule"}}),
		},
		{
			name: "The pod has no toleration, but the effect of taint on node is PreferNoSchedule. Pod can be scheduled onto the node",
			pod:  podWithTolerations([]corev1.Toleration{}),
			node: nodeWithTaints("nodeA", []corev1.Taint{{Key: "dedicated", Value: "user1", Effect: "PreferNoSchedule"}}),
		},
		// Beyond upstream's table.
		{
			name: "Exists with an empty key and effect tolerates every taint",
			pod:  podWithTolerations([]corev1.Toleration{{Operator: "Exists"}}),
			node: nodeWithTaints("nodeA", []corev1.Taint{{Key: "a", Value: "1", Effect: "NoSchedule"}, {Key: "b", Effect: "NoExecute"}}),
		},
		{
			name:       "NoExecute taints are filtered too; the reason names the first untolerated taint, empty value kept",
			pod:        podWithTolerations([]corev1.Toleration{{Key: "a", Operator: "Exists"}}),
			node:       nodeWithTaints("nodeA", []corev1.Taint{{Key: "a", Value: "1", Effect: "NoSchedule"}, {Key: "node.kubernetes.io/not-ready", Effect: "NoExecute"}, {Key: "c", Value: "3", Effect: "NoSchedule"}}),
			wantCode:   unresolvable,
			wantReason: "node(s) had untolerated taint {node.kubernetes.io/not-ready: }",
		},
		{
			name:       "Gt is ignored unless comparison operators are enabled",
			pod:        podWithTolerations([]corev1.Toleration{{Key: "gen", Operator: "Gt", Value: "3", Effect: "NoSchedule"}}),
			node:       nodeWithTaints("nodeA", []corev1.Taint{{Key: "gen", Value: "5", Effect: "NoSchedule"}}),
			wantCode:   unresolvable,
			wantReason: "node(s) had untolerated taint {gen: 5}",
		},
		{
			name: "Gt tolerates a larger value when enabled",
			args: Args{EnableComparisonOperators: true},
			pod:  podWithTolerations([]corev1.Toleration{{Key: "gen", Operator: "Gt", Value: "3", Effect: "NoSchedule"}}),
			node: nodeWithTaints("nodeA", []corev1.Taint{{Key: "gen", Value: "5", Effect: "NoSchedule"}}),
		},
		{
			name:       "Lt does not tolerate a larger value",
			args:       &Args{EnableComparisonOperators: true},
			pod:        podWithTolerations([]corev1.Toleration{{Key: "gen", Operator: "Lt", Value: "3", Effect: "NoSchedule"}}),
			node:       nodeWithTaints("nodeA", []corev1.Taint{{Key: "gen", Value: "5", Effect: "NoSchedule"}}),
			wantCode:   unresolvable,
			wantReason: "node(s) had untolerated taint {gen: 5}",
		},
	}
	ctx := context.Background()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(ctx, tc.args, nil)
			if err != nil {
				t.Fatal(err)
			}
			st := p.(framework.FilterPlugin).Filter(ctx, framework.NewCycleState(), tc.pod, nodeInfo(tc.node))
			if st.Code() != tc.wantCode {
				t.Fatalf("code = %v, want %v (%q)", st.Code(), tc.wantCode, st.Message())
			}
			var want []string
			if tc.wantReason != "" {
				want = []string{tc.wantReason}
			}
			if got := st.Reasons(); !reflect.DeepEqual(got, want) {
				t.Fatalf("reasons = %q, want %q", got, want)
			}
		})
	}
}

func TestNewRejectsUnknownArgs(t *testing.T) {
	if _, err := New(context.Background(), struct{}{}, nil); err == nil {
		t.Fatal("New accepted args of the wrong type")
	}
}

func benchmarkFilter(b *testing.B, pod *corev1.Pod, node *corev1.Node, wantSuccess bool) {
	ctx := context.Background()
	p, _ := New(ctx, nil, nil)
	pl := p.(framework.FilterPlugin)
	ni := nodeInfo(node)
	state := framework.NewCycleState()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if st := pl.Filter(ctx, state, pod, ni); st.IsSuccess() != wantSuccess {
			b.Fatalf("unexpected status %v", st.Code())
		}
	}
}

// BenchmarkFilter measures Filter on a node with three NoSchedule/NoExecute taints
// and a PreferNoSchedule one, against a pod with four tolerations.
func BenchmarkFilter(b *testing.B) {
	node := nodeWithTaints("n", []corev1.Taint{
		{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule},
		{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: "spot", Value: "true", Effect: corev1.TaintEffectPreferNoSchedule},
		{Key: "zone-drain", Effect: corev1.TaintEffectNoExecute},
	})
	tolerating := podWithTolerations([]corev1.Toleration{
		{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infra", Effect: corev1.TaintEffectNoSchedule},
		{Key: "gpu", Operator: corev1.TolerationOpExists},
		{Key: "zone-drain", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	})
	b.Run("tolerated", func(b *testing.B) { benchmarkFilter(b, tolerating, node, true) })
	b.Run("untolerated", func(b *testing.B) { benchmarkFilter(b, podWithTolerations(nil), node, false) })
	b.Run("untainted", func(b *testing.B) { benchmarkFilter(b, tolerating, nodeWithTaints("n", nil), true) })
}
