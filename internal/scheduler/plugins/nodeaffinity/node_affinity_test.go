package nodeaffinity

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

// checkStatus compares a status by code and reasons (nil means Success).
func checkStatus(t *testing.T, what string, got, want *framework.Status) {
	t.Helper()
	if got.Code() != want.Code() || !slices.Equal(got.Reasons(), want.Reasons()) {
		t.Errorf("%s: got %v %q, want %v %q", what, got.Code(), got.Reasons(), want.Code(), want.Reasons())
	}
}

func nsReq(key string, op corev1.NodeSelectorOperator, vals ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: vals}
}

// requiredPod returns a pod whose required node affinity has the given terms.
func requiredPod(terms ...corev1.NodeSelectorTerm) *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
	}}}}
}

func exprs(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: reqs}
}

func fieldsTerm(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchFields: reqs}
}

func nameIn(name string) corev1.NodeSelectorRequirement {
	return nsReq(metav1.ObjectNameField, corev1.NodeSelectorOpIn, name)
}

// TestNodeAffinity reproduces upstream's TestNodeAffinity (node_affinity_test.go).
func TestNodeAffinity(t *testing.T) {
	podReason := framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonPod)
	addedName := &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{fieldsTerm(nameIn("node2"))},
	}}
	selectorAndAffinity := func(sel map[string]string) *corev1.Pod {
		p := requiredPod(exprs(nsReq("foo", corev1.NodeSelectorOpExists)))
		p.Spec.NodeSelector = sel
		return p
	}
	tests := []struct {
		name                string
		pod                 *corev1.Pod
		labels              map[string]string
		nodeName            string
		args                Args
		runPreFilter        bool
		wantPreFilterStatus *framework.Status
		wantStatus          *framework.Status
	}{
		{name: "missing labels", pod: &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{"foo": "bar"}}}, wantStatus: podReason, runPreFilter: true},
		{name: "same labels", pod: &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{"foo": "bar"}}}, labels: map[string]string{"foo": "bar"}, runPreFilter: true},
		{name: "node labels are superset", pod: &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{"foo": "bar"}}}, labels: map[string]string{"foo": "bar", "baz": "blah"}, runPreFilter: true},
		{name: "node labels are subset", pod: &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{"foo": "bar", "baz": "blah"}}}, labels: map[string]string{"foo": "bar"}, wantStatus: podReason, runPreFilter: true},
		{name: "In matches", pod: requiredPod(exprs(nsReq("foo", corev1.NodeSelectorOpIn, "bar", "value2"))), labels: map[string]string{"foo": "bar"}, runPreFilter: true},
		{name: "Gt matches", pod: requiredPod(exprs(nsReq("kernel-version", corev1.NodeSelectorOpGt, "0204"))), labels: map[string]string{"kernel-version": "0206"}, runPreFilter: true},
		{name: "Lt does not match", pod: requiredPod(exprs(nsReq("kernel-version", corev1.NodeSelectorOpLt, "0204"))), labels: map[string]string{"kernel-version": "0206"}, wantStatus: podReason, runPreFilter: true},
		{name: "NotIn matches", pod: requiredPod(exprs(nsReq("mem-type", corev1.NodeSelectorOpNotIn, "DDR", "DDR2"))), labels: map[string]string{"mem-type": "DDR3"}, runPreFilter: true},
		{name: "Exists matches", pod: requiredPod(exprs(nsReq("GPU", corev1.NodeSelectorOpExists))), labels: map[string]string{"GPU": "NVIDIA-GRID-K1"}, runPreFilter: true},
		{name: "DoesNotExist does not match", pod: requiredPod(exprs(nsReq("GPU", corev1.NodeSelectorOpDoesNotExist))), labels: map[string]string{"GPU": "NVIDIA-GRID-K1"}, wantStatus: podReason, runPreFilter: true},
		{name: "affinity that doesn't match node's labels", pod: requiredPod(exprs(nsReq("foo", corev1.NodeSelectorOpIn, "value1", "value2"))), labels: map[string]string{"foo": "bar"}, wantStatus: podReason, runPreFilter: true},
		{name: "empty MatchExpressions matches no objects", pod: requiredPod(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{}}), labels: map[string]string{"foo": "bar"}, wantStatus: podReason, runPreFilter: true},
		{name: "no Affinity", pod: &corev1.Pod{}, labels: map[string]string{"foo": "bar"}, wantPreFilterStatus: framework.NewStatus(framework.Skip), runPreFilter: true},
		{name: "Affinity but nil NodeSelector", pod: &corev1.Pod{Spec: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}}}, labels: map[string]string{"foo": "bar"}, wantPreFilterStatus: framework.NewStatus(framework.Skip), runPreFilter: true},
		{name: "multiple matchExpressions ANDed that match", pod: requiredPod(exprs(nsReq("GPU", corev1.NodeSelectorOpExists), nsReq("GPU", corev1.NodeSelectorOpNotIn, "AMD", "INTER"))), labels: map[string]string{"GPU": "NVIDIA-GRID-K1"}, runPreFilter: true},
		{name: "multiple matchExpressions ANDed that don't match", pod: requiredPod(exprs(nsReq("GPU", corev1.NodeSelectorOpExists), nsReq("GPU", corev1.NodeSelectorOpIn, "AMD", "INTER"))), labels: map[string]string{"GPU": "NVIDIA-GRID-K1"}, wantStatus: podReason, runPreFilter: true},
		{name: "multiple NodeSelectorTerms ORed", pod: requiredPod(exprs(nsReq("foo", corev1.NodeSelectorOpIn, "bar", "value2")), exprs(nsReq("diffkey", corev1.NodeSelectorOpIn, "wrong", "value2"))), labels: map[string]string{"foo": "bar"}, runPreFilter: true},
		{name: "Affinity and NodeSelector both satisfied", pod: selectorAndAffinity(map[string]string{"foo": "bar"}), labels: map[string]string{"foo": "bar"}, runPreFilter: true},
		{name: "Affinity matches but NodeSelector doesn't", pod: selectorAndAffinity(map[string]string{"foo": "bar"}), labels: map[string]string{"foo": "barrrrrr"}, wantStatus: podReason, runPreFilter: true},
		{name: "invalid value in Affinity term", pod: requiredPod(exprs(nsReq("foo", corev1.NodeSelectorOpNotIn, "invalid value: ___@#$%^"))), labels: map[string]string{"foo": "bar"}, wantStatus: podReason, runPreFilter: true},
		{name: "matchFields In matches", pod: requiredPod(fieldsTerm(nameIn("node1"))), nodeName: "node1", runPreFilter: true},
		{name: "matchFields In doesn't match", pod: requiredPod(fieldsTerm(nameIn("node1"))), nodeName: "node2", wantStatus: podReason, runPreFilter: true},
		{name: "two terms: matchFields doesn't match, matchExpressions matches", pod: requiredPod(fieldsTerm(nameIn("node1"), nameIn("node2")), exprs(nsReq("foo", corev1.NodeSelectorOpIn, "bar"))), nodeName: "node2", labels: map[string]string{"foo": "bar"}, runPreFilter: true},
		{name: "one term: matchFields doesn't match, matchExpressions matches", pod: requiredPod(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{nameIn("node1")}, MatchExpressions: []corev1.NodeSelectorRequirement{nsReq("foo", corev1.NodeSelectorOpIn, "bar")}}), nodeName: "node2", labels: map[string]string{"foo": "bar"}, wantStatus: podReason, runPreFilter: true},
		{name: "one term: both match", pod: requiredPod(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{nameIn("node1")}, MatchExpressions: []corev1.NodeSelectorRequirement{nsReq("foo", corev1.NodeSelectorOpIn, "bar")}}), nodeName: "node1", labels: map[string]string{"foo": "bar"}, runPreFilter: true},
		{name: "two terms: neither matches", pod: requiredPod(fieldsTerm(nameIn("node1")), exprs(nsReq("foo", corev1.NodeSelectorOpIn, "not-match-to-bar"))), nodeName: "node2", labels: map[string]string{"foo": "bar"}, wantStatus: podReason, runPreFilter: true},
		{name: "two terms of node.Name affinity", pod: requiredPod(fieldsTerm(nameIn("node1")), fieldsTerm(nameIn("node2"))), nodeName: "node2", runPreFilter: true},
		{
			name: "two conflicting match field requirements", pod: requiredPod(fieldsTerm(nameIn("node1"), nameIn("node2"))), nodeName: "node2", labels: map[string]string{"foo": "bar"},
			wantPreFilterStatus: framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonConflict), wantStatus: podReason, runPreFilter: true,
		},
		{name: "matches added affinity and pod's affinity", pod: requiredPod(exprs(nsReq("zone", corev1.NodeSelectorOpIn, "foo"))), nodeName: "node2", labels: map[string]string{"zone": "foo"}, args: Args{AddedAffinity: addedName}, runPreFilter: true},
		{name: "matches added affinity but not pod's", pod: requiredPod(exprs(nsReq("zone", corev1.NodeSelectorOpIn, "bar"))), nodeName: "node2", labels: map[string]string{"zone": "foo"}, args: Args{AddedAffinity: addedName}, wantStatus: podReason, runPreFilter: true},
		{
			name: "doesn't match added affinity", pod: &corev1.Pod{}, nodeName: "node2", labels: map[string]string{"zone": "foo"},
			args: Args{AddedAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{exprs(nsReq("zone", corev1.NodeSelectorOpIn, "bar"))},
			}}},
			wantStatus: framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonEnforced), runPreFilter: true,
		},
		{name: "node selector matches without PreFilter", pod: &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{"foo": "bar"}}}, labels: map[string]string{"foo": "bar", "baz": "blah"}},
		{name: "node affinity matches without PreFilter", pod: requiredPod(exprs(nsReq("GPU", corev1.NodeSelectorOpExists), nsReq("GPU", corev1.NodeSelectorOpNotIn, "AMD", "INTER"))), labels: map[string]string{"GPU": "NVIDIA-GRID-K1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodeInfo := framework.NewNodeInfo()
			nodeInfo.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: tt.nodeName, Labels: tt.labels}})
			p, err := New(context.Background(), &tt.args, nil)
			if err != nil {
				t.Fatalf("creating plugin: %v", err)
			}
			pl := p.(*NodeAffinity)
			state := framework.NewCycleState()
			if tt.runPreFilter {
				checkStatus(t, "PreFilter", pl.PreFilter(context.Background(), state, tt.pod), tt.wantPreFilterStatus)
			}
			checkStatus(t, "Filter", pl.Filter(context.Background(), state, tt.pod, nodeInfo), tt.wantStatus)
		})
	}
}

func TestNewRejectsInvalidArgs(t *testing.T) {
	bad := &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{exprs(nsReq("zone", "Bogus", "x"))},
	}}
	if _, err := New(context.Background(), Args{AddedAffinity: bad}, nil); err == nil {
		t.Error("want an error for an invalid added affinity")
	}
	if _, err := New(context.Background(), "nope", nil); err == nil {
		t.Error("want an error for args of the wrong type")
	}
}

// TestNodeAffinityPriority reproduces upstream's TestNodeAffinityPriority.
func TestNodeAffinityPriority(t *testing.T) {
	label1 := map[string]string{"foo": "bar"}
	label2 := map[string]string{"key": "value"}
	label3 := map[string]string{"az": "az1"}
	label4 := map[string]string{"abc": "az11", "def": "az22"}
	label5 := map[string]string{"foo": "bar", "key": "value", "az": "az1"}
	pref := func(w int32, reqs ...corev1.NodeSelectorRequirement) corev1.PreferredSchedulingTerm {
		return corev1.PreferredSchedulingTerm{Weight: w, Preference: exprs(reqs...)}
	}
	affinity1 := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
		pref(2, nsReq("foo", corev1.NodeSelectorOpIn, "bar")),
	}}}
	affinity2 := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
		pref(2, nsReq("foo", corev1.NodeSelectorOpIn, "bar")),
		pref(4, nsReq("key", corev1.NodeSelectorOpIn, "value")),
		pref(5, nsReq("foo", corev1.NodeSelectorOpIn, "bar"), nsReq("key", corev1.NodeSelectorOpIn, "value"), nsReq("az", corev1.NodeSelectorOpIn, "az1")),
	}}}
	mk := func(name string, l map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
	}
	tests := []struct {
		name        string
		pod         *corev1.Pod
		nodes       []*corev1.Node
		args        Args
		runPreScore bool
		wantSkip    bool
		want        []framework.NodeScore
	}{
		{
			name: "all nodes are same priority as NodeAffinity is nil", pod: &corev1.Pod{},
			nodes:       []*corev1.Node{mk("node1", label1), mk("node2", label2), mk("node3", label3)},
			runPreScore: true, wantSkip: true,
			want: []framework.NodeScore{{Name: "node1", Score: 0}, {Name: "node2", Score: 0}, {Name: "node3", Score: 0}},
		},
		{
			name: "no node matches preferred scheduling requirements", pod: &corev1.Pod{Spec: corev1.PodSpec{Affinity: affinity1}},
			nodes:       []*corev1.Node{mk("node1", label4), mk("node2", label2), mk("node3", label3)},
			runPreScore: true,
			want:        []framework.NodeScore{{Name: "node1", Score: 0}, {Name: "node2", Score: 0}, {Name: "node3", Score: 0}},
		},
		{
			name: "only node1 matches the preferred scheduling requirements of pod", pod: &corev1.Pod{Spec: corev1.PodSpec{Affinity: affinity1}},
			nodes:       []*corev1.Node{mk("node1", label1), mk("node2", label2), mk("node3", label3)},
			runPreScore: true,
			want:        []framework.NodeScore{{Name: "node1", Score: framework.MaxNodeScore}, {Name: "node2", Score: 0}, {Name: "node3", Score: 0}},
		},
		{
			name: "all nodes match with different priorities", pod: &corev1.Pod{Spec: corev1.PodSpec{Affinity: affinity2}},
			nodes:       []*corev1.Node{mk("node1", label1), mk("node5", label5), mk("node2", label2)},
			runPreScore: true,
			want:        []framework.NodeScore{{Name: "node1", Score: 18}, {Name: "node5", Score: framework.MaxNodeScore}, {Name: "node2", Score: 36}},
		},
		{
			name: "added affinity", pod: &corev1.Pod{},
			nodes:       []*corev1.Node{mk("node1", label1), mk("node2", label2)},
			args:        Args{AddedAffinity: affinity1.NodeAffinity},
			runPreScore: true,
			want:        []framework.NodeScore{{Name: "node1", Score: framework.MaxNodeScore}, {Name: "node2", Score: 0}},
		},
		{
			name: "added affinity and pod has default affinity", pod: &corev1.Pod{Spec: corev1.PodSpec{Affinity: affinity1}},
			nodes: []*corev1.Node{mk("node1", label1), mk("node2", label2), mk("node3", label5)},
			args: Args{AddedAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
				pref(3, nsReq("key", corev1.NodeSelectorOpIn, "value")),
			}}},
			runPreScore: true,
			want:        []framework.NodeScore{{Name: "node1", Score: 40}, {Name: "node2", Score: 60}, {Name: "node3", Score: framework.MaxNodeScore}},
		},
		{
			name: "priorities correct even if PreScore is not called", pod: &corev1.Pod{Spec: corev1.PodSpec{Affinity: affinity2}},
			nodes: []*corev1.Node{mk("node1", label1), mk("node5", label5), mk("node2", label2)},
			want:  []framework.NodeScore{{Name: "node1", Score: 18}, {Name: "node5", Score: framework.MaxNodeScore}, {Name: "node2", Score: 36}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			p, err := New(ctx, tt.args, nil)
			if err != nil {
				t.Fatal(err)
			}
			pl := p.(*NodeAffinity)
			state := framework.NewCycleState()
			infos := make([]*framework.NodeInfo, len(tt.nodes))
			for i, n := range tt.nodes {
				infos[i] = framework.NewNodeInfo()
				infos[i].SetNode(n)
			}
			if tt.runPreScore {
				st := pl.PreScore(ctx, state, tt.pod, infos)
				if st.IsSkip() != tt.wantSkip || (!st.IsSkip() && !st.IsSuccess()) {
					t.Fatalf("PreScore = %v, want skip=%v", st.Code(), tt.wantSkip)
				}
			}
			var got []framework.NodeScore
			for _, ni := range infos {
				score, st := pl.Score(ctx, state, tt.pod, ni)
				if !st.IsSuccess() {
					t.Fatalf("Score: %v", st.Message())
				}
				got = append(got, framework.NodeScore{Name: ni.Node().Name, Score: score})
			}
			if st := pl.ScoreExtensions().NormalizeScore(ctx, state, tt.pod, got); !st.IsSuccess() {
				t.Fatalf("NormalizeScore: %v", st.Message())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("scores = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDefaultNormalizeScoreReverse(t *testing.T) {
	scores := []framework.NodeScore{{Score: 0}, {Score: 5}, {Score: 10}}
	framework.DefaultNormalizeScore(100, true, scores)
	if got := []int64{scores[0].Score, scores[1].Score, scores[2].Score}; !slices.Equal(got, []int64{100, 50, 0}) {
		t.Errorf("reverse = %v", got)
	}
	zero := []framework.NodeScore{{Score: 0}, {Score: 0}}
	framework.DefaultNormalizeScore(100, true, zero)
	if zero[0].Score != 100 || zero[1].Score != 100 {
		t.Errorf("reverse of zeros = %v", zero)
	}
}

// BenchmarkFilter filters a pod with a node selector and required affinity
// against 1000 nodes, as the scheduler's parallel filter would. In "mixed"
// 85% of the nodes are rejected (each rejection allocates its Status); in
// "all-fit" every node passes.
func BenchmarkFilter(b *testing.B) {
	ctx := context.Background()
	nodes := make([]*framework.NodeInfo, 1000)
	for i := range nodes {
		nodes[i] = framework.NewNodeInfo()
		nodes[i].SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("node-%d", i),
			Labels: map[string]string{
				"kubernetes.io/hostname":           fmt.Sprintf("node-%d", i),
				"topology.kubernetes.io/zone":      fmt.Sprintf("zone-%d", i%10),
				"node.kubernetes.io/instance-type": []string{"small", "large"}[i%2],
				"disk":                             "ssd",
			},
		}})
	}
	for _, bc := range []struct {
		name  string
		zones []string
	}{
		{"mixed", []string{"zone-1", "zone-2", "zone-3"}},
		{"all-fit", []string{"zone-0", "zone-1", "zone-2", "zone-3", "zone-4", "zone-5", "zone-6", "zone-7", "zone-8", "zone-9"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			pod := requiredPod(exprs(
				nsReq("topology.kubernetes.io/zone", corev1.NodeSelectorOpIn, bc.zones...),
				nsReq("node.kubernetes.io/instance-type", corev1.NodeSelectorOpIn, "small", "large"),
			))
			pod.Spec.NodeSelector = map[string]string{"disk": "ssd"}
			if bc.name == "mixed" {
				pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[1] =
					nsReq("node.kubernetes.io/instance-type", corev1.NodeSelectorOpNotIn, "small")
			}
			p, _ := New(ctx, nil, nil)
			pl := p.(*NodeAffinity)
			state := framework.NewCycleState()
			if st := pl.PreFilter(ctx, state, pod); !st.IsSuccess() {
				b.Fatal(st.Message())
			}
			b.ReportAllocs()
			for b.Loop() {
				for _, ni := range nodes {
					pl.Filter(ctx, state, pod, ni)
				}
			}
		})
	}
}
