package interpodaffinity

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

func inSel(key string, vals ...string) *metav1.LabelSelector {
	return selectorExprs(metav1.LabelSelectorRequirement{Key: key, Operator: metav1.LabelSelectorOpIn, Values: vals})
}

func weighted(w int32, sel *metav1.LabelSelector, topologyKey string) corev1.WeightedPodAffinityTerm {
	return corev1.WeightedPodAffinityTerm{Weight: w, PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: sel, TopologyKey: topologyKey}}
}

func preferredAffinity(terms ...corev1.WeightedPodAffinityTerm) *corev1.Affinity {
	return &corev1.Affinity{PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: terms}}
}

func preferredAntiAffinity(terms ...corev1.WeightedPodAffinityTerm) *corev1.Affinity {
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: terms}}
}

func scorePod(ns string, node string, lbls map[string]string, a *corev1.Affinity) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Labels: lbls}, Spec: corev1.PodSpec{NodeName: node, Affinity: a}}
}

// runScoring runs PreScore, Score over nodes and NormalizeScore.
func runScoring(t *testing.T, args any, pod *corev1.Pod, pods []*corev1.Pod, nodes []*corev1.Node) ([]framework.NodeScore, *framework.Status) {
	t.Helper()
	snap := newSnapshot(pods, nodes)
	pl := newPlugin(t, args, snap, testNamespaces())
	state := framework.NewCycleState()
	infos, _ := snap.List()
	if st := pl.PreScore(t.Context(), state, pod, infos); !st.IsSuccess() {
		return nil, st
	}
	var got []framework.NodeScore
	for _, ni := range infos {
		score, st := pl.Score(t.Context(), state, pod, ni)
		if !st.IsSuccess() {
			t.Fatalf("Score: %v", st.Message())
		}
		got = append(got, framework.NodeScore{Name: ni.Node().Name, Score: score})
	}
	if st := pl.NormalizeScore(t.Context(), state, pod, got); !st.IsSuccess() {
		t.Fatalf("NormalizeScore: %v", st.Message())
	}
	return got, nil
}

// TestPreferredAffinity reproduces upstream's TestPreferredAffinity.
func TestPreferredAffinity(t *testing.T) {
	labelRgChina := map[string]string{"region": "China"}
	labelRgIndia := map[string]string{"region": "India"}
	labelAzAz1 := map[string]string{"az": "az1"}
	labelAzAz2 := map[string]string{"az": "az2"}
	labelRgChinaAzAz1 := map[string]string{"region": "China", "az": "az1"}
	s1 := map[string]string{"security": "S1"}
	s2 := map[string]string{"security": "S2"}

	stayWithS1InRegion := preferredAffinity(weighted(5, inSel("security", "S1"), "region"))
	stayWithS2InRegion := preferredAffinity(weighted(6, inSel("security", "S2"), "region"))
	affinity3 := preferredAffinity(
		weighted(8, selectorExprs(
			metav1.LabelSelectorRequirement{Key: "security", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"S1"}},
			metav1.LabelSelectorRequirement{Key: "security", Operator: metav1.LabelSelectorOpIn, Values: []string{"S2"}}), "region"),
		weighted(2, selectorExprs(
			metav1.LabelSelectorRequirement{Key: "security", Operator: metav1.LabelSelectorOpExists},
			metav1.LabelSelectorRequirement{Key: "wrongkey", Operator: metav1.LabelSelectorOpDoesNotExist}), "region"),
	)
	hardAffinity := &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
		{LabelSelector: inSel("security", "S1", "value2"), TopologyKey: "region"},
		{LabelSelector: selectorExprs(
			metav1.LabelSelectorRequirement{Key: "security", Operator: metav1.LabelSelectorOpExists},
			metav1.LabelSelectorRequirement{Key: "wrongkey", Operator: metav1.LabelSelectorOpDoesNotExist}), TopologyKey: "region"},
	}}}
	awayFromS1InAz := preferredAntiAffinity(weighted(5, inSel("security", "S1"), "az"))
	awayFromS2InAz := preferredAntiAffinity(weighted(5, inSel("security", "S2"), "az"))
	stayWithS1InRegionAwayFromS2InAz := &corev1.Affinity{
		PodAffinity:     preferredAffinity(weighted(8, inSel("security", "S1"), "region")).PodAffinity,
		PodAntiAffinity: preferredAntiAffinity(weighted(5, inSel("security", "S2"), "az")).PodAntiAffinity,
	}
	nsTerm := func() corev1.WeightedPodAffinityTerm {
		w := weighted(5, inSel("security", "S1"), "region")
		w.PodAffinityTerm.Namespaces = []string{"subteam2.team2"}
		w.PodAffinityTerm.NamespaceSelector = inSel("team", "team1")
		return w
	}
	affinityNamespaceSelector := preferredAffinity(nsTerm())
	antiAffinityNamespaceSelector := preferredAntiAffinity(nsTerm())
	invalidAffinityLabels := preferredAffinity(weighted(8, inSel("security", "{{.bad-value.}}"), "region"))
	invalidAntiAffinityLabels := preferredAntiAffinity(weighted(5, inSel("security", "{{.bad-value.}}"), "az"))

	const maxS = framework.MaxNodeScore
	type ns = framework.NodeScore
	tests := []struct {
		name                               string
		pod                                *corev1.Pod
		pods                               []*corev1.Pod
		nodes                              []*corev1.Node
		ignorePreferredTermsOfExistingPods bool
		want                               []framework.NodeScore
		wantStatus                         *framework.Status
	}{
		{
			name:       "all nodes are same priority as Affinity is nil",
			pod:        scorePod("", "", s1, nil),
			nodes:      []*corev1.Node{node("node1", labelRgChina), node("node2", labelRgIndia), node("node3", labelAzAz1)},
			wantStatus: framework.NewStatus(framework.Skip),
		},
		{
			name:  "Affinity: pod that matches topology key & pods in nodes will get high score comparing to others which doesn't match either pods in nodes or in topology key",
			pod:   scorePod("", "", s1, stayWithS1InRegion),
			pods:  []*corev1.Pod{scorePod("", "node1", s1, nil), scorePod("", "node2", s2, nil), scorePod("", "node3", s1, nil)},
			nodes: []*corev1.Node{node("node1", labelRgChina), node("node2", labelRgIndia), node("node3", labelAzAz1)},
			want:  []ns{{Name: "node1", Score: maxS}, {Name: "node2", Score: 0}, {Name: "node3", Score: 0}},
		},
		{
			name:  "All the nodes that have the same topology key & label value with one of them has an existing pod that match the affinity rules, have the same score",
			pod:   scorePod("", "", nil, stayWithS1InRegion),
			pods:  []*corev1.Pod{scorePod("", "node1", s1, nil)},
			nodes: []*corev1.Node{node("node1", labelRgChina), node("node2", labelRgChinaAzAz1), node("node3", labelRgIndia)},
			want:  []ns{{Name: "node1", Score: maxS}, {Name: "node2", Score: maxS}, {Name: "node3", Score: 0}},
		},
		{
			name: "Affinity: nodes in one region has more matching pods comparing to other region, so the region which has more matches will get high score",
			pod:  scorePod("", "", s1, stayWithS2InRegion),
			pods: []*corev1.Pod{
				scorePod("", "node1", s2, nil), scorePod("", "node1", s2, nil), scorePod("", "node2", s2, nil),
				scorePod("", "node3", s2, nil), scorePod("", "node4", s2, nil), scorePod("", "node5", s2, nil),
			},
			nodes: []*corev1.Node{node("node1", labelRgChina), node("node2", labelRgIndia), node("node3", labelRgChina), node("node4", labelRgChina), node("node5", labelRgIndia)},
			want:  []ns{{Name: "node1", Score: maxS}, {Name: "node2", Score: 0}, {Name: "node3", Score: maxS}, {Name: "node4", Score: maxS}, {Name: "node5", Score: 0}},
		},
		{
			name:  "Affinity: different Label operators and values for pod affinity scheduling preference, including some match failures",
			pod:   scorePod("", "", s1, affinity3),
			pods:  []*corev1.Pod{scorePod("", "node1", s1, nil), scorePod("", "node2", s2, nil), scorePod("", "node3", s1, nil)},
			nodes: []*corev1.Node{node("node1", labelRgChina), node("node2", labelRgIndia), node("node3", labelAzAz1)},
			want:  []ns{{Name: "node1", Score: 20}, {Name: "node2", Score: maxS}, {Name: "node3", Score: 0}},
		},
		{
			name:  "Affinity symmetry: considered only the preferredDuringSchedulingIgnoredDuringExecution in pod affinity symmetry",
			pod:   scorePod("", "", s2, nil),
			pods:  []*corev1.Pod{scorePod("", "node1", s1, stayWithS1InRegion), scorePod("", "node2", s2, stayWithS2InRegion)},
			nodes: []*corev1.Node{node("node1", labelRgChina), node("node2", labelRgIndia), node("node3", labelAzAz1)},
			want:  []ns{{Name: "node1", Score: 0}, {Name: "node2", Score: maxS}, {Name: "node3", Score: 0}},
		},
		{
			name:  "Affinity symmetry with namespace selector",
			pod:   scorePod("subteam1.team1", "", s1, nil),
			pods:  []*corev1.Pod{scorePod("", "node1", s1, affinityNamespaceSelector), scorePod("", "node2", s2, stayWithS2InRegion)},
			nodes: []*corev1.Node{node("node1", labelRgChina), node("node2", labelRgIndia), node("node3", labelAzAz1)},
			want:  []ns{{Name: "node1", Score: maxS}, {Name: "node2", Score: 0}, {Name: "node3", Score: 0}},
		},
		{
			name:  "AntiAffinity symmetry with namespace selector",
			pod:   scorePod("subteam1.team1", "", s1, nil),
			pods:  []*corev1.Pod{scorePod("", "node1", s1, antiAffinityNamespaceSelector), scorePod("", "node2", s2, stayWithS2InRegion)},
			nodes: []*corev1.Node{node("node1", labelRgChina), node("node2", labelRgIndia), node("node3", labelAzAz1)},
			want:  []ns{{Name: "node1", Score: 0}, {Name: "node2", Score: maxS}, {Name: "node3", Score: maxS}},
		},
		{
			name:  "Affinity symmetry: considered RequiredDuringSchedulingIgnoredDuringExecution in pod affinity symmetry",
			pod:   scorePod("", "", s1, nil),
			pods:  []*corev1.Pod{scorePod("", "node1", s1, hardAffinity), scorePod("", "node2", s2, hardAffinity)},
			nodes: []*corev1.Node{node("node1", labelRgChina), node("node2", labelRgIndia), node("node3", labelAzAz1)},
			want:  []ns{{Name: "node1", Score: maxS}, {Name: "node2", Score: maxS}, {Name: "node3", Score: 0}},
		},
		{
			name:  "Anti Affinity: pod that does not match existing pods in node will get high score",
			pod:   scorePod("", "", s1, awayFromS1InAz),
			pods:  []*corev1.Pod{scorePod("", "node1", s1, nil), scorePod("", "node2", s2, nil)},
			nodes: []*corev1.Node{node("node1", labelAzAz1), node("node2", labelRgChina)},
			want:  []ns{{Name: "node1", Score: 0}, {Name: "node2", Score: maxS}},
		},
		{
			name:  "Anti Affinity: pod that does not match topology key & match the pods in nodes will get higher score comparing to others",
			pod:   scorePod("", "", s1, awayFromS1InAz),
			pods:  []*corev1.Pod{scorePod("", "node1", s1, nil), scorePod("", "node2", s1, nil)},
			nodes: []*corev1.Node{node("node1", labelAzAz1), node("node2", labelRgChina)},
			want:  []ns{{Name: "node1", Score: 0}, {Name: "node2", Score: maxS}},
		},
		{
			name:  "Anti Affinity: one node has more matching pods comparing to other node, so the node which has more unmatches will get high score",
			pod:   scorePod("", "", s1, awayFromS1InAz),
			pods:  []*corev1.Pod{scorePod("", "node1", s1, nil), scorePod("", "node1", s1, nil), scorePod("", "node2", s2, nil)},
			nodes: []*corev1.Node{node("node1", labelAzAz1), node("node2", labelRgIndia)},
			want:  []ns{{Name: "node1", Score: 0}, {Name: "node2", Score: maxS}},
		},
		{
			name:  "Anti Affinity symmetry: the existing pods in node which has anti affinity match will get high score",
			pod:   scorePod("", "", s2, nil),
			pods:  []*corev1.Pod{scorePod("", "node1", s1, awayFromS2InAz), scorePod("", "node2", s2, awayFromS1InAz)},
			nodes: []*corev1.Node{node("node1", labelAzAz1), node("node2", labelAzAz2)},
			want:  []ns{{Name: "node1", Score: 0}, {Name: "node2", Score: maxS}},
		},
		{
			name:  "Affinity and Anti Affinity: considered only preferredDuringSchedulingIgnoredDuringExecution in both pod affinity & anti affinity",
			pod:   scorePod("", "", s1, stayWithS1InRegionAwayFromS2InAz),
			pods:  []*corev1.Pod{scorePod("", "node1", s1, nil), scorePod("", "node2", s1, nil)},
			nodes: []*corev1.Node{node("node1", labelRgChina), node("node2", labelAzAz1)},
			want:  []ns{{Name: "node1", Score: maxS}, {Name: "node2", Score: 0}},
		},
		{
			name: "Affinity and Anti Affinity: considering both affinity and anti-affinity, the pod to schedule and existing pods have the same labels",
			pod:  scorePod("", "", s1, stayWithS1InRegionAwayFromS2InAz),
			pods: []*corev1.Pod{
				scorePod("", "node1", s1, nil), scorePod("", "node1", s1, nil), scorePod("", "node2", s1, nil),
				scorePod("", "node3", s1, nil), scorePod("", "node3", s1, nil), scorePod("", "node4", s1, nil), scorePod("", "node5", s1, nil),
			},
			nodes: []*corev1.Node{node("node1", labelRgChinaAzAz1), node("node2", labelRgIndia), node("node3", labelRgChina), node("node4", labelRgChina), node("node5", labelRgIndia)},
			want:  []ns{{Name: "node1", Score: maxS}, {Name: "node2", Score: 0}, {Name: "node3", Score: maxS}, {Name: "node4", Score: maxS}, {Name: "node5", Score: 0}},
		},
		{
			name: "Affinity and Anti Affinity and symmetry: considered only preferredDuringSchedulingIgnoredDuringExecution in both pod affinity & anti affinity & symmetry",
			pod:  scorePod("", "", s1, stayWithS1InRegionAwayFromS2InAz),
			pods: []*corev1.Pod{
				scorePod("", "node1", s1, nil), scorePod("", "node2", s2, nil),
				scorePod("", "node3", nil, stayWithS1InRegionAwayFromS2InAz), scorePod("", "node4", nil, awayFromS1InAz),
			},
			nodes: []*corev1.Node{node("node1", labelRgChina), node("node2", labelAzAz1), node("node3", labelRgIndia), node("node4", labelAzAz2)},
			want:  []ns{{Name: "node1", Score: maxS}, {Name: "node2", Score: 0}, {Name: "node3", Score: maxS}, {Name: "node4", Score: 0}},
		},
		{
			name:  "Avoid panic when partial nodes in a topology don't have pods with affinity",
			pod:   scorePod("", "", s1, nil),
			pods:  []*corev1.Pod{scorePod("", "node1", s1, nil), scorePod("", "node2", nil, stayWithS1InRegionAwayFromS2InAz)},
			nodes: []*corev1.Node{node("node1", labelRgChina), node("node2", labelRgChina)},
			want:  []ns{{Name: "node1", Score: 0}, {Name: "node2", Score: 0}},
		},
		{
			name:       "invalid Affinity fails PreScore",
			pod:        scorePod("", "", nil, invalidAffinityLabels),
			nodes:      []*corev1.Node{node("node1", labelRgChina), node("node2", labelRgChina)},
			wantStatus: framework.NewStatus(framework.Error, `Invalid value: "{{.bad-value.}}"`),
		},
		{
			name:       "invalid AntiAffinity fails PreScore",
			pod:        scorePod("", "", nil, invalidAntiAffinityLabels),
			nodes:      []*corev1.Node{node("node1", labelRgChina), node("node2", labelRgChina)},
			wantStatus: framework.NewStatus(framework.Error, `Invalid value: "{{.bad-value.}}"`),
		},
		{
			name: "Affinity with pods matching NamespaceSelector",
			pod:  scorePod("subteam1.team1", "", s1, affinityNamespaceSelector),
			pods: []*corev1.Pod{
				scorePod("subteam1.team1", "node1", s1, nil), scorePod("subteam1.team1", "node1", s1, nil),
				scorePod("subteam1.team2", "node1", s1, nil), scorePod("subteam2.team1", "node2", s1, nil),
			},
			nodes: []*corev1.Node{node("node1", labelRgChina), node("node2", labelRgIndia)},
			want:  []ns{{Name: "node1", Score: maxS}, {Name: "node2", Score: 0}},
		},
		{
			name: "Affinity with pods matching both NamespaceSelector and Namespaces fields",
			pod:  scorePod("subteam1.team1", "", s1, affinityNamespaceSelector),
			pods: []*corev1.Pod{
				scorePod("subteam1.team1", "node1", s1, nil), scorePod("subteam1.team1", "node1", s1, nil),
				scorePod("subteam2.team2", "node1", s1, nil), scorePod("subteam2.team1", "node2", s1, nil),
			},
			nodes: []*corev1.Node{node("node1", labelRgChina), node("node2", labelRgIndia)},
			want:  []ns{{Name: "node1", Score: maxS}, {Name: "node2", Score: 0}},
		},
		{
			name: "AntiAffinity with pods matching NamespaceSelector",
			pod:  scorePod("subteam1.team1", "", s1, antiAffinityNamespaceSelector),
			pods: []*corev1.Pod{
				scorePod("subteam1.team1", "node1", s1, nil), scorePod("subteam1.team1", "node1", s1, nil),
				scorePod("subteam1.team2", "node1", s1, nil), scorePod("subteam2.team1", "node2", s1, nil),
			},
			nodes: []*corev1.Node{node("node1", labelRgChina), node("node2", labelRgIndia)},
			want:  []ns{{Name: "node1", Score: 0}, {Name: "node2", Score: maxS}},
		},
		{
			name: "AntiAffinity with pods matching both NamespaceSelector and Namespaces fields",
			pod:  scorePod("subteam1.team1", "", s1, antiAffinityNamespaceSelector),
			pods: []*corev1.Pod{
				scorePod("subteam1.team1", "node1", s1, nil), scorePod("subteam1.team1", "node1", s1, nil),
				scorePod("subteam2.team2", "node1", s1, nil), scorePod("subteam2.team1", "node2", s1, nil),
			},
			nodes: []*corev1.Node{node("node1", labelRgChina), node("node2", labelRgIndia)},
			want:  []ns{{Name: "node1", Score: 0}, {Name: "node2", Score: maxS}},
		},
		{
			name:                               "Ignore preferred terms of existing pods",
			pod:                                scorePod("", "", s2, nil),
			pods:                               []*corev1.Pod{scorePod("", "node1", s1, stayWithS1InRegionAwayFromS2InAz), scorePod("", "node2", s2, stayWithS2InRegion)},
			nodes:                              []*corev1.Node{node("node1", labelRgChina), node("node2", labelRgIndia)},
			ignorePreferredTermsOfExistingPods: true,
			wantStatus:                         framework.NewStatus(framework.Skip),
		},
		{
			name:  "Do not ignore preferred terms of existing pods",
			pod:   scorePod("", "", s2, nil),
			pods:  []*corev1.Pod{scorePod("", "node1", s1, stayWithS1InRegionAwayFromS2InAz), scorePod("", "node2", s2, stayWithS2InRegion)},
			nodes: []*corev1.Node{node("node1", labelRgChina), node("node2", labelRgIndia)},
			want:  []ns{{Name: "node1", Score: 0}, {Name: "node2", Score: maxS}},
		},
		{
			name:       "No nodes to score",
			pod:        scorePod("", "", s2, nil),
			wantStatus: framework.NewStatus(framework.Skip),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			one := int32(1)
			args := Args{HardPodAffinityWeight: &one, IgnorePreferredTermsOfExistingPods: tt.ignorePreferredTermsOfExistingPods}
			got, st := runScoring(t, args, tt.pod, tt.pods, tt.nodes)
			if st != nil || tt.wantStatus != nil {
				if st.Code() != tt.wantStatus.Code() || !strings.Contains(st.Message(), tt.wantStatus.Message()) {
					t.Fatalf("PreScore = %v %q, want %v containing %q", st.Code(), st.Message(), tt.wantStatus.Code(), tt.wantStatus.Message())
				}
				return
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("scores = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPreferredAffinityWithHardPodAffinitySymmetricWeight reproduces upstream's test of the same name.
func TestPreferredAffinityWithHardPodAffinitySymmetricWeight(t *testing.T) {
	serviceS1 := map[string]string{"service": "S1"}
	labelRgChina := map[string]string{"region": "China"}
	labelRgIndia := map[string]string{"region": "India"}
	labelAzAz1 := map[string]string{"az": "az1"}
	hardPodAffinity := &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		LabelSelector:     inSel("service", "S1"),
		Namespaces:        []string{"", "subteam2.team2"},
		NamespaceSelector: inSel("team", "team1"),
		TopologyKey:       "region",
	}}}}
	nodes := func() []*corev1.Node {
		return []*corev1.Node{node("node1", labelRgChina), node("node2", labelRgIndia), node("node3", labelAzAz1)}
	}
	existing := func() []*corev1.Pod {
		return []*corev1.Pod{scorePod("", "node1", nil, hardPodAffinity), scorePod("", "node2", nil, hardPodAffinity)}
	}
	type ns = framework.NodeScore
	high := []ns{{Name: "node1", Score: framework.MaxNodeScore}, {Name: "node2", Score: framework.MaxNodeScore}, {Name: "node3", Score: 0}}
	tests := []struct {
		name     string
		pod      *corev1.Pod
		weight   int32
		want     []framework.NodeScore
		wantSkip bool
	}{
		{name: "with default weight", pod: scorePod("", "", serviceS1, nil), weight: DefaultHardPodAffinityWeight, want: high},
		{name: "with zero weight", pod: scorePod("", "", serviceS1, nil), weight: 0, wantSkip: true},
		{name: "with no matching namespace", pod: scorePod("subteam1.team2", "", serviceS1, nil), weight: DefaultHardPodAffinityWeight, wantSkip: true},
		{name: "with matching NamespaceSelector", pod: scorePod("subteam1.team1", "", serviceS1, nil), weight: DefaultHardPodAffinityWeight, want: high},
		{name: "with matching Namespaces", pod: scorePod("subteam2.team2", "", serviceS1, nil), weight: DefaultHardPodAffinityWeight, want: high},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.weight
			got, st := runScoring(t, &Args{HardPodAffinityWeight: &w}, tt.pod, existing(), nodes())
			if tt.wantSkip {
				if !st.IsSkip() {
					t.Fatalf("PreScore = %v, want Skip", st.Code())
				}
				return
			}
			if st != nil {
				t.Fatalf("PreScore: %v %v", st.Code(), st.Message())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("scores = %v, want %v", got, tt.want)
			}
		})
	}
}
