package interpodaffinity

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

func createPodWithAffinityTerms(namespace, nodeName string, lbls map[string]string, affinity, antiAffinity []corev1.PodAffinityTerm) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Labels: lbls, Namespace: namespace},
		Spec: corev1.PodSpec{
			NodeName: nodeName,
			Affinity: &corev1.Affinity{
				PodAffinity:     &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: affinity},
				PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: antiAffinity},
			},
		},
	}
}

func selectorExprs(reqs ...metav1.LabelSelectorRequirement) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: reqs}
}

var (
	affinityFailed      = framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonAffinityRulesNotMatch)
	antiAffinityFailed  = framework.NewStatus(framework.Unschedulable, ErrReasonAntiAffinityRulesNotMatch)
	existingAntiFailed  = framework.NewStatus(framework.Unschedulable, ErrReasonExistingAntiAffinityRulesNotMatch)
	preFilterSkipStatus = framework.NewStatus(framework.Skip)
)

// TestRequiredAffinitySingleNode reproduces upstream's test of the same name.
func TestRequiredAffinitySingleNode(t *testing.T) {
	podLabel := map[string]string{"service": "securityscan"}
	existing := func() *corev1.Pod { return makePod().LabelMap(podLabel).Node("node1").Obj() }
	labels1 := map[string]string{"region": "r1", "zone": "z11"}
	podLabel2 := map[string]string{"security": "S1"}
	node1 := node("node1", labels1)
	teamIn := func(team string) *metav1.LabelSelector {
		return selectorExprs(metav1.LabelSelectorRequirement{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{team}})
	}
	serviceIn := selectorExprs(metav1.LabelSelectorRequirement{Key: "service", Operator: metav1.LabelSelectorOpIn, Values: []string{"securityscan", "value2"}})
	tests := []struct {
		name                string
		pod                 *corev1.Pod
		pods                []*corev1.Pod
		wantPreFilterStatus *framework.Status
		wantFilterStatus    *framework.Status
	}{
		{
			name:                "A pod that has no required pod affinity scheduling rules can schedule onto a node with no existing pods",
			pod:                 &corev1.Pod{},
			wantPreFilterStatus: preFilterSkipStatus,
		},
		{
			name: "satisfies with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using In operator that matches the existing pod",
			pod:  makePod().LabelMap(podLabel2).PodAffinityIn("service", "region", "securityscan", "value2").Obj(),
			pods: []*corev1.Pod{existing()},
		},
		{
			name: "satisfies the pod with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using not in operator in labelSelector that matches the existing pod",
			pod:  makePod().LabelMap(podLabel2).PodAffinityNotIn("service", "region", "securityscan3", "value3").Obj(),
			pods: []*corev1.Pod{existing()},
		},
		{
			name: "Does not satisfy the PodAffinity with labelSelector because of diff Namespace",
			pod: createPodWithAffinityTerms("", "", podLabel2, []corev1.PodAffinityTerm{
				{LabelSelector: serviceIn, Namespaces: []string{"DiffNameSpace"}},
			}, nil),
			pods:             []*corev1.Pod{makePod().Namespace("ns").Label("service", "securityscan").Node("node1").Obj()},
			wantFilterStatus: affinityFailed,
		},
		{
			name:             "Doesn't satisfy the PodAffinity because of unmatching labelSelector with the existing pod",
			pod:              makePod().LabelMap(podLabel).PodAffinityIn("service", "", "antivirusscan", "value2").Obj(),
			pods:             []*corev1.Pod{existing()},
			wantFilterStatus: affinityFailed,
		},
		{
			name: "satisfies the PodAffinity with different label Operators in multiple RequiredDuringSchedulingIgnoredDuringExecution",
			pod: createPodWithAffinityTerms("", "", podLabel2, []corev1.PodAffinityTerm{
				{LabelSelector: selectorExprs(
					metav1.LabelSelectorRequirement{Key: "service", Operator: metav1.LabelSelectorOpExists},
					metav1.LabelSelectorRequirement{Key: "wrongkey", Operator: metav1.LabelSelectorOpDoesNotExist}), TopologyKey: "region"},
				{LabelSelector: selectorExprs(
					metav1.LabelSelectorRequirement{Key: "service", Operator: metav1.LabelSelectorOpIn, Values: []string{"securityscan"}},
					metav1.LabelSelectorRequirement{Key: "service", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"WrongValue"}}), TopologyKey: "region"},
			}, nil),
			pods: []*corev1.Pod{existing()},
		},
		{
			name: "The labelSelector requirements(items of matchExpressions) are ANDed, the pod cannot schedule onto the node because one of the matchExpression item don't match.",
			pod: createPodWithAffinityTerms("", "", podLabel2, []corev1.PodAffinityTerm{
				{LabelSelector: selectorExprs(
					metav1.LabelSelectorRequirement{Key: "service", Operator: metav1.LabelSelectorOpExists},
					metav1.LabelSelectorRequirement{Key: "wrongkey", Operator: metav1.LabelSelectorOpDoesNotExist}), TopologyKey: "region"},
				{LabelSelector: selectorExprs(
					metav1.LabelSelectorRequirement{Key: "service", Operator: metav1.LabelSelectorOpIn, Values: []string{"securityscan2"}},
					metav1.LabelSelectorRequirement{Key: "service", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"WrongValue"}}), TopologyKey: "region"},
			}, nil),
			pods:             []*corev1.Pod{existing()},
			wantFilterStatus: affinityFailed,
		},
		{
			name: "satisfies the PodAffinity and PodAntiAffinity with the existing pod",
			pod: makePod().LabelMap(podLabel2).PodAffinityIn("service", "region", "securityscan", "value2").
				PodAntiAffinityIn("service", "node", "antivirusscan", "value2").Obj(),
			pods: []*corev1.Pod{existing()},
		},
		{
			name: "satisfies the PodAffinity and PodAntiAffinity and PodAntiAffinity symmetry with the existing pod",
			pod: makePod().LabelMap(podLabel2).PodAffinityIn("service", "region", "securityscan", "value2").
				PodAntiAffinityIn("service", "node", "antivirusscan", "value2").Obj(),
			pods: []*corev1.Pod{makePod().Node("node1").LabelMap(podLabel).PodAntiAffinityIn("service", "node", "antivirusscan", "value2").Obj()},
		},
		{
			name: "satisfies the PodAffinity but doesn't satisfy the PodAntiAffinity with the existing pod",
			pod: makePod().LabelMap(podLabel2).PodAffinityIn("service", "region", "securityscan", "value2").
				PodAntiAffinityIn("service", "zone", "securityscan", "value2").Obj(),
			pods:             []*corev1.Pod{existing()},
			wantFilterStatus: antiAffinityFailed,
		},
		{
			name: "satisfies the PodAffinity and PodAntiAffinity but doesn't satisfy PodAntiAffinity symmetry with the existing pod",
			pod: makePod().LabelMap(podLabel).PodAffinityIn("service", "region", "securityscan", "value2").
				PodAntiAffinityIn("service", "node", "antivirusscan", "value2").Obj(),
			pods:             []*corev1.Pod{makePod().LabelMap(podLabel).Node("node1").PodAntiAffinityIn("service", "zone", "securityscan", "value2").Obj()},
			wantFilterStatus: existingAntiFailed,
		},
		{
			name:             "pod matches its own Label in PodAffinity and that matches the existing pod Labels",
			pod:              makePod().LabelMap(podLabel).PodAffinityNotIn("service", "region", "securityscan", "value2").Obj(),
			pods:             []*corev1.Pod{makePod().Label("service", "securityscan").Node("node2").Obj()},
			wantFilterStatus: affinityFailed,
		},
		{
			name:             "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. doesn't satisfy PodAntiAffinity symmetry with the existing pod",
			pod:              makePod().LabelMap(podLabel).Obj(),
			pods:             []*corev1.Pod{makePod().Node("node1").LabelMap(podLabel).PodAntiAffinityIn("service", "zone", "securityscan", "value2").Obj()},
			wantFilterStatus: existingAntiFailed,
		},
		{
			name:                "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. satisfy PodAntiAffinity symmetry with the existing pod",
			pod:                 makePod().LabelMap(podLabel).Obj(),
			pods:                []*corev1.Pod{makePod().Node("node1").LabelMap(podLabel).PodAntiAffinityNotIn("service", "zone", "securityscan", "value2").Obj()},
			wantPreFilterStatus: preFilterSkipStatus,
		},
		{
			name:             "satisfies the PodAntiAffinity with existing pod but doesn't satisfy PodAntiAffinity symmetry with incoming pod",
			pod:              makePod().LabelMap(podLabel).PodAntiAffinityExists("service", "region").PodAntiAffinityExists("security", "region").Obj(),
			pods:             []*corev1.Pod{makePod().Node("node1").LabelMap(podLabel2).PodAntiAffinityExists("security", "zone").Obj()},
			wantFilterStatus: antiAffinityFailed,
		},
		{
			name:             "PodAntiAffinity symmetry check a1: incoming pod and existing pod partially match each other on AffinityTerms",
			pod:              makePod().LabelMap(podLabel).PodAntiAffinityExists("service", "zone").PodAntiAffinityExists("security", "zone").Obj(),
			pods:             []*corev1.Pod{makePod().Node("node1").LabelMap(podLabel2).PodAntiAffinityExists("security", "zone").Obj()},
			wantFilterStatus: antiAffinityFailed,
		},
		{
			name:             "PodAntiAffinity symmetry check a2: incoming pod and existing pod partially match each other on AffinityTerms",
			pod:              makePod().LabelMap(podLabel2).PodAntiAffinityExists("security", "zone").Obj(),
			pods:             []*corev1.Pod{makePod().Node("node1").LabelMap(podLabel).PodAntiAffinityExists("service", "zone").PodAntiAffinityExists("security", "zone").Obj()},
			wantFilterStatus: existingAntiFailed,
		},
		{
			name: "PodAntiAffinity symmetry check b1: incoming pod and existing pod partially match each other on AffinityTerms",
			pod:  makePod().LabelMap(map[string]string{"abc": "", "xyz": ""}).PodAntiAffinityExists("abc", "zone").PodAntiAffinityExists("def", "zone").Obj(),
			pods: []*corev1.Pod{makePod().Node("node1").LabelMap(map[string]string{"def": "", "xyz": ""}).
				PodAntiAffinityExists("abc", "zone").PodAntiAffinityExists("def", "zone").Obj()},
			wantFilterStatus: antiAffinityFailed,
		},
		{
			name: "PodAntiAffinity symmetry check b2: incoming pod and existing pod partially match each other on AffinityTerms",
			pod:  makePod().LabelMap(map[string]string{"def": "", "xyz": ""}).PodAntiAffinityExists("abc", "zone").PodAntiAffinityExists("def", "zone").Obj(),
			pods: []*corev1.Pod{makePod().Node("node1").LabelMap(map[string]string{"abc": "", "xyz": ""}).
				PodAntiAffinityExists("abc", "zone").PodAntiAffinityExists("def", "zone").Obj()},
			wantFilterStatus: antiAffinityFailed,
		},
		{
			name: "PodAffinity fails PreFilter with an invalid affinity label syntax",
			pod:  makePod().LabelMap(podLabel).PodAffinityIn("service", "region", "{{.bad-value.}}").PodAffinityIn("service", "node", "antivirusscan", "value2").Obj(),
			wantPreFilterStatus: framework.NewStatus(framework.UnschedulableAndUnresolvable,
				`parsing pod: requiredAffinityTerms: values[0][service]: Invalid value: "{{.bad-value.}}": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`),
		},
		{
			name: "PodAntiAffinity fails PreFilter with an invalid antiaffinity label syntax",
			pod:  makePod().LabelMap(podLabel).PodAffinityIn("service", "region", "foo").PodAffinityIn("service", "node", "{{.bad-value.}}").Obj(),
			wantPreFilterStatus: framework.NewStatus(framework.UnschedulableAndUnresolvable,
				`parsing pod: requiredAffinityTerms: values[0][service]: Invalid value: "{{.bad-value.}}": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`),
		},
		{
			name: "affinity with NamespaceSelector",
			pod: createPodWithAffinityTerms("", "", podLabel2, []corev1.PodAffinityTerm{
				{LabelSelector: serviceIn, NamespaceSelector: teamIn("team1"), TopologyKey: "region"},
			}, nil),
			pods: []*corev1.Pod{{Spec: corev1.PodSpec{NodeName: "node1"}, ObjectMeta: metav1.ObjectMeta{Namespace: "subteam1.team1", Labels: podLabel}}},
		},
		{
			name: "affinity with non-matching NamespaceSelector",
			pod: createPodWithAffinityTerms("", "", podLabel2, []corev1.PodAffinityTerm{
				{LabelSelector: serviceIn, NamespaceSelector: teamIn("team1"), TopologyKey: "region"},
			}, nil),
			pods:             []*corev1.Pod{{Spec: corev1.PodSpec{NodeName: "node1"}, ObjectMeta: metav1.ObjectMeta{Namespace: "subteam1.team2", Labels: podLabel}}},
			wantFilterStatus: affinityFailed,
		},
		{
			name: "anti-affinity with matching NamespaceSelector",
			pod: createPodWithAffinityTerms("subteam1.team1", "", podLabel2, nil, []corev1.PodAffinityTerm{
				{LabelSelector: serviceIn, NamespaceSelector: teamIn("team1"), TopologyKey: "zone"},
			}),
			pods:             []*corev1.Pod{{Spec: corev1.PodSpec{NodeName: "node1"}, ObjectMeta: metav1.ObjectMeta{Namespace: "subteam2.team1", Labels: podLabel}}},
			wantFilterStatus: antiAffinityFailed,
		},
		{
			name: "anti-affinity with matching all NamespaceSelector",
			pod: createPodWithAffinityTerms("subteam1.team1", "", podLabel2, nil, []corev1.PodAffinityTerm{
				{LabelSelector: serviceIn, NamespaceSelector: &metav1.LabelSelector{}, TopologyKey: "zone"},
			}),
			pods:             []*corev1.Pod{{Spec: corev1.PodSpec{NodeName: "node1"}, ObjectMeta: metav1.ObjectMeta{Namespace: "subteam2.team1", Labels: podLabel}}},
			wantFilterStatus: antiAffinityFailed,
		},
		{
			name: "anti-affinity with non-matching NamespaceSelector",
			pod: createPodWithAffinityTerms("subteam1.team1", "", podLabel2, nil, []corev1.PodAffinityTerm{
				{LabelSelector: serviceIn, NamespaceSelector: teamIn("team1"), TopologyKey: "zone"},
			}),
			pods: []*corev1.Pod{{Spec: corev1.PodSpec{NodeName: "node1"}, ObjectMeta: metav1.ObjectMeta{Namespace: "subteam1.team2", Labels: podLabel}}},
		},
		{
			name: "existing pod's anti-affinity with NamespaceSelector matches the incoming pod's namespace labels",
			pod:  makePod().Namespace("subteam1.team1").LabelMap(podLabel).Obj(),
			pods: []*corev1.Pod{createPodWithAffinityTerms("subteam2.team2", "node1", podLabel2, nil, []corev1.PodAffinityTerm{
				{LabelSelector: serviceIn, NamespaceSelector: teamIn("team1"), TopologyKey: "zone"},
			})},
			wantFilterStatus: existingAntiFailed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := newSnapshot(tt.pods, []*corev1.Node{node1})
			pl := newPlugin(t, nil, snap, testNamespaces())
			state := framework.NewCycleState()
			st := pl.PreFilter(t.Context(), state, tt.pod)
			checkStatus(t, "PreFilter", st, tt.wantPreFilterStatus)
			if !st.IsSuccess() {
				return
			}
			ni, _ := snap.Get("node1")
			checkStatus(t, "Filter", pl.Filter(t.Context(), state, tt.pod, ni), tt.wantFilterStatus)
		})
	}
}

// TestRequiredAffinityMultipleNodes reproduces upstream's test of the same name.
func TestRequiredAffinityMultipleNodes(t *testing.T) {
	podLabelA := map[string]string{"foo": "bar"}
	labelRgChina := map[string]string{"region": "China"}
	labelRgChinaAzAz1 := map[string]string{"region": "China", "az": "az1"}
	labelRgIndia := map[string]string{"region": "India"}
	hosts := func(spec ...map[string]string) []*corev1.Node {
		var out []*corev1.Node
		for _, l := range spec {
			out = append(out, node(l["hostname"], l))
		}
		return out
	}
	abcNodes := func() []*corev1.Node {
		return []*corev1.Node{node("nodeA", labelRgChina), node("nodeB", labelRgChinaAzAz1), node("nodeC", labelRgIndia)}
	}
	rz := func(host, region, zone string) map[string]string {
		return map[string]string{"region": region, "zone": zone, "hostname": host}
	}
	tests := []struct {
		name                string
		pod                 *corev1.Pod
		pods                []*corev1.Pod
		nodes               []*corev1.Node
		wantPreFilterStatus *framework.Status
		wantFilterStatuses  []*framework.Status
	}{
		{
			name:               "A pod can be scheduled onto all the nodes that have the same topology key & label value with one of them has an existing pod that matches the affinity rules",
			pod:                makePod().PodAffinityIn("foo", "region", "bar").Obj(),
			pods:               []*corev1.Pod{makePod().Name("p1").Node("node1").LabelMap(podLabelA).Obj()},
			nodes:              []*corev1.Node{node("node1", labelRgChina), node("node2", labelRgChinaAzAz1), node("node3", labelRgIndia)},
			wantFilterStatuses: []*framework.Status{nil, nil, affinityFailed},
		},
		{
			name: "The affinity rule is to schedule all of the pods of this collection to the same zone. The first pod of the collection should not be blocked from being scheduled onto any node, even there's no existing pod that matches the rule anywhere.",
			pod: makePod().LabelMap(map[string]string{"foo": "bar", "service": "securityscan"}).
				PodAffinityIn("foo", "zone", "bar").PodAffinityIn("service", "zone", "securityscan").Obj(),
			pods:               []*corev1.Pod{makePod().Name("p1").Node("nodeA").LabelMap(map[string]string{"foo": "bar"}).Obj()},
			nodes:              []*corev1.Node{node("nodeA", map[string]string{"zone": "az1", "hostname": "h1"}), node("nodeB", map[string]string{"zone": "az2", "hostname": "h2"})},
			wantFilterStatuses: []*framework.Status{nil, nil},
		},
		{
			name: "The first pod of the collection can only be scheduled on nodes labelled with the requested topology keys",
			pod: makePod().LabelMap(map[string]string{"foo": "bar", "service": "securityscan"}).
				PodAffinityIn("foo", "zone", "bar").PodAffinityIn("service", "zone", "securityscan").Obj(),
			pods:               []*corev1.Pod{makePod().Name("p1").Node("nodeA").LabelMap(map[string]string{"foo": "bar"}).Obj()},
			nodes:              []*corev1.Node{node("nodeA", map[string]string{"zoneLabel": "az1", "hostname": "h1"}), node("nodeB", map[string]string{"zoneLabel": "az2", "hostname": "h2"})},
			wantFilterStatuses: []*framework.Status{affinityFailed, affinityFailed},
		},
		{
			name:               "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA and nodeB.",
			pod:                makePod().PodAntiAffinityIn("foo", "region", "abc").Obj(),
			pods:               []*corev1.Pod{makePod().Node("nodeA").LabelMap(map[string]string{"foo": "abc"}).Obj()},
			nodes:              []*corev1.Node{node("nodeA", map[string]string{"region": "r1", "hostname": "nodeA"}), node("nodeB", map[string]string{"region": "r1", "hostname": "nodeB"})},
			wantFilterStatuses: []*framework.Status{antiAffinityFailed, antiAffinityFailed},
		},
		{
			name:               "This test ensures that anti-affinity matches a pod when any term of the anti-affinity rule matches a pod.",
			pod:                makePod().PodAntiAffinityIn("foo", "region", "abc").PodAntiAffinityIn("service", "zone", "securityscan").Obj(),
			pods:               []*corev1.Pod{makePod().Node("nodeA").LabelMap(map[string]string{"foo": "abc", "service": "securityscan"}).Obj()},
			nodes:              hosts(rz("nodeA", "r1", "z1"), rz("nodeB", "r1", "z2")),
			wantFilterStatuses: []*framework.Status{antiAffinityFailed, antiAffinityFailed},
		},
		{
			name:               "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA and nodeB but can be scheduled onto nodeC",
			pod:                makePod().PodAntiAffinityIn("foo", "region", "abc").Obj(),
			pods:               []*corev1.Pod{makePod().Node("nodeA").LabelMap(map[string]string{"foo": "abc"}).Obj()},
			nodes:              abcNodes(),
			wantFilterStatuses: []*framework.Status{antiAffinityFailed, antiAffinityFailed, nil},
		},
		{
			name: "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA, nodeB, but can be scheduled onto nodeC (NodeC has an existing pod that match the inter pod affinity rule but in different namespace)",
			pod:  makePod().Namespace("NS1").LabelMap(map[string]string{"foo": "123"}).PodAntiAffinityIn("foo", "region", "bar").Obj(),
			pods: []*corev1.Pod{
				makePod().Node("nodeA").Namespace("NS1").LabelMap(map[string]string{"foo": "bar"}).Obj(),
				makePod().Node("nodeC").Namespace("NS2").PodAntiAffinityIn("foo", "region", "123").Obj(),
			},
			nodes:              abcNodes(),
			wantFilterStatuses: []*framework.Status{antiAffinityFailed, antiAffinityFailed, nil},
		},
		{
			name:                "Test existing pod's anti-affinity: if an existing pod has a term with invalid topologyKey, labelSelector of the term is firstly checked, and then topologyKey of the term is also checked",
			pod:                 makePod().Label("foo", "").Obj(),
			pods:                []*corev1.Pod{makePod().Node("nodeA").PodAntiAffinityExists("foo", "invalid-node-label").Obj()},
			nodes:               hosts(rz("nodeA", "r1", "z1"), rz("nodeB", "r1", "z1")),
			wantPreFilterStatus: preFilterSkipStatus,
		},
		{
			name:               "Test incoming pod's anti-affinity: even if labelSelector matches, we still check if topologyKey matches",
			pod:                makePod().Node("nodeA").PodAntiAffinityExists("foo", "invalid-node-label").Obj(),
			pods:               []*corev1.Pod{makePod().Node("nodeA").LabelMap(map[string]string{"foo": ""}).Obj()},
			nodes:              hosts(rz("nodeA", "r1", "z1"), rz("nodeB", "r1", "z1")),
			wantFilterStatuses: []*framework.Status{nil, nil},
		},
		{
			name: "Test existing pod's anti-affinity: incoming pod wouldn't considered as a fit as it violates each existingPod's terms on all nodes",
			pod:  makePod().Label("foo", "").Label("bar", "").Obj(),
			pods: []*corev1.Pod{
				makePod().Node("nodeA").PodAntiAffinityExists("foo", "zone").Obj(),
				makePod().Node("nodeA").PodAntiAffinityExists("bar", "region").Obj(),
			},
			nodes:              hosts(rz("nodeA", "r1", "z1"), rz("nodeB", "r1", "z2")),
			wantFilterStatuses: []*framework.Status{existingAntiFailed, existingAntiFailed},
		},
		{
			name: "Test incoming pod's anti-affinity: incoming pod wouldn't considered as a fit as it at least violates one anti-affinity rule of existingPod",
			pod:  makePod().PodAntiAffinityExists("foo", "zone").PodAntiAffinityExists("bar", "region").Obj(),
			pods: []*corev1.Pod{
				makePod().Node("nodeA").LabelMap(map[string]string{"foo": ""}).Obj(),
				makePod().Node("nodeB").LabelMap(map[string]string{"bar": ""}).Obj(),
			},
			nodes:              hosts(rz("nodeA", "r1", "z1"), rz("nodeB", "r1", "z2")),
			wantFilterStatuses: []*framework.Status{antiAffinityFailed, antiAffinityFailed},
		},
		{
			name:               "Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match - case when one term has invalid topologyKey",
			pod:                makePod().Label("foo", "").Label("bar", "").Obj(),
			pods:               []*corev1.Pod{makePod().Node("nodeA").PodAntiAffinityExists("foo", "invalid-node-label").PodAntiAffinityExists("bar", "zone").Obj()},
			nodes:              hosts(rz("nodeA", "r1", "z1"), rz("nodeB", "r1", "z2")),
			wantFilterStatuses: []*framework.Status{existingAntiFailed, nil},
		},
		{
			name:               "Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match - case when one term has invalid topologyKey",
			pod:                makePod().PodAntiAffinityExists("foo", "invalid-node-label").PodAntiAffinityExists("bar", "zone").Obj(),
			pods:               []*corev1.Pod{makePod().Name("podA").Node("nodeA").LabelMap(map[string]string{"foo": "", "bar": ""}).Obj()},
			nodes:              hosts(rz("nodeA", "r1", "z1"), rz("nodeB", "r1", "z2")),
			wantFilterStatuses: []*framework.Status{antiAffinityFailed, nil},
		},
		{
			name:               "Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match - case when all terms have valid topologyKey",
			pod:                makePod().Label("foo", "").Label("bar", "").Obj(),
			pods:               []*corev1.Pod{makePod().Node("nodeA").PodAntiAffinityExists("foo", "region").PodAntiAffinityExists("bar", "zone").Obj()},
			nodes:              hosts(rz("nodeA", "r1", "z1"), rz("nodeB", "r1", "z2")),
			wantFilterStatuses: []*framework.Status{existingAntiFailed, existingAntiFailed},
		},
		{
			name:               "Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match - case when all terms have valid topologyKey",
			pod:                makePod().PodAntiAffinityExists("foo", "region").PodAntiAffinityExists("bar", "zone").Obj(),
			pods:               []*corev1.Pod{makePod().Node("nodeA").LabelMap(map[string]string{"foo": "", "bar": ""}).Obj()},
			nodes:              hosts(rz("nodeA", "r1", "z1"), rz("nodeB", "r1", "z2")),
			wantFilterStatuses: []*framework.Status{antiAffinityFailed, antiAffinityFailed},
		},
		{
			name: "Test existing pod's anti-affinity: existingPod on nodeA and nodeB has at least one anti-affinity term matches incoming pod, so incoming pod can only be scheduled to nodeC",
			pod:  makePod().Label("foo", "").Label("bar", "").Obj(),
			pods: []*corev1.Pod{
				makePod().Node("nodeA").PodAntiAffinityExists("foo", "zone").PodAntiAffinityExists("labelA", "zone").Obj(),
				makePod().Node("nodeB").PodAntiAffinityExists("bar", "zone").PodAntiAffinityExists("labelB", "zone").Obj(),
			},
			nodes:              hosts(rz("nodeA", "r1", "z1"), rz("nodeB", "r1", "z2"), rz("nodeC", "r1", "z3")),
			wantFilterStatuses: []*framework.Status{existingAntiFailed, existingAntiFailed, nil},
		},
		{
			name:               "Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all topologyKeys match",
			pod:                makePod().PodAffinityExists("foo", "region").PodAffinityExists("bar", "zone").Obj(),
			pods:               []*corev1.Pod{makePod().Name("pod1").LabelMap(map[string]string{"foo": "", "bar": ""}).Node("nodeA").Obj()},
			nodes:              hosts(rz("nodeA", "r1", "z1"), rz("nodeB", "r1", "z1")),
			wantFilterStatuses: []*framework.Status{nil, nil},
		},
		{
			name: "Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all topologyKeys match, and the match logic should be satisfied on the same pod",
			pod:  makePod().PodAffinityExists("foo", "region").PodAffinityExists("bar", "zone").Obj(),
			pods: []*corev1.Pod{
				makePod().Node("nodeA").Name("pod1").LabelMap(map[string]string{"foo": ""}).Obj(),
				makePod().Node("nodeB").Name("pod2").LabelMap(map[string]string{"bar": ""}).Obj(),
			},
			nodes:              hosts(rz("nodeA", "r1", "z1"), rz("nodeB", "r1", "z2")),
			wantFilterStatuses: []*framework.Status{affinityFailed, affinityFailed},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := newSnapshot(tt.pods, tt.nodes)
			pl := newPlugin(t, nil, snap, []runtime.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "NS1"}}})
			state := framework.NewCycleState()
			st := pl.PreFilter(t.Context(), state, tt.pod)
			checkStatus(t, "PreFilter", st, tt.wantPreFilterStatus)
			if st.IsSkip() {
				return
			}
			for i, n := range tt.nodes {
				ni, _ := snap.Get(n.Name)
				checkStatus(t, n.Name, pl.Filter(t.Context(), state, tt.pod, ni), tt.wantFilterStatuses[i])
			}
		})
	}
}

func TestPreFilterDisabled(t *testing.T) {
	ni := framework.NewNodeInfo()
	ni.SetNode(&corev1.Node{})
	pl := newPlugin(t, nil, newSnapshot(nil, nil), nil)
	st := pl.Filter(t.Context(), framework.NewCycleState(), &corev1.Pod{}, ni)
	if st.Code() != framework.Error || !errors.Is(st.AsError(), framework.ErrNotFound) {
		t.Errorf("Filter = %v %v, want an Error wrapping ErrNotFound", st.Code(), st.AsError())
	}
	if want := `error reading "PreFilterInterPodAffinity" from cycleState: not found in cycle state`; st.Message() != want {
		t.Errorf("message = %q, want %q", st.Message(), want)
	}
}

// TestGetIncomingAffinityCounts reproduces upstream's
// TestGetTPMapMatchingIncomingAffinityAntiAffinity.
func TestGetIncomingAffinityCounts(t *testing.T) {
	nodeA := node("nodeA", map[string]string{"hostname": "nodeA"})
	normalPodA := makePod().Name("normal").Label("aaa", "").Node("nodeA").Obj()
	normalPodB := makePod().Name("normal").Label("bbb", "").Node("nodeA").Obj()
	normalPodAB := makePod().Name("normal").Label("aaa", "").Label("bbb", "").Node("nodeA").Obj()
	hostA := topologyToMatchedTermCount{{key: "hostname", value: "nodeA"}: 1}
	tests := []struct {
		name         string
		existing     *corev1.Pod
		pod          *corev1.Pod
		wantAffinity topologyToMatchedTermCount
		wantAnti     topologyToMatchedTermCount
	}{
		{"incoming pod without affinity/anti-affinity causes a no-op", normalPodA, makePod().Name("aaa-normal").Obj(), topologyToMatchedTermCount{}, topologyToMatchedTermCount{}},
		{"no pod has label that violates incoming pod's affinity and anti-affinity", normalPodB,
			makePod().PodAffinityExists("aaa", "hostname").PodAntiAffinityExists("aaa", "hostname").Obj(), topologyToMatchedTermCount{}, topologyToMatchedTermCount{}},
		{"existing pod matches incoming pod's affinity and anti-affinity - single term case", normalPodA,
			makePod().PodAffinityExists("aaa", "hostname").PodAntiAffinityExists("aaa", "hostname").Obj(), hostA, hostA},
		{"existing pod matches incoming pod's affinity and anti-affinity - multiple terms case", normalPodAB,
			makePod().PodAffinityExists("aaa", "hostname").PodAffinityExists("bbb", "hostname").PodAntiAffinityExists("aaa", "hostname").Obj(),
			topologyToMatchedTermCount{{key: "hostname", value: "nodeA"}: 2}, hostA},
		{"existing pod not match incoming pod's affinity but matches anti-affinity", normalPodA,
			makePod().PodAffinityExists("aaa", "hostname").PodAffinityExists("bbb", "hostname").PodAntiAffinityExists("aaa", "hostname").PodAntiAffinityExists("bbb", "hostname").Obj(),
			topologyToMatchedTermCount{}, hostA},
		{"incoming pod's anti-affinity has more than one term - existing pod violates partial term - case 1", normalPodAB,
			makePod().PodAffinityExists("aaa", "hostname").PodAffinityExists("ccc", "hostname").PodAntiAffinityExists("aaa", "hostname").PodAntiAffinityExists("ccc", "hostname").Obj(),
			topologyToMatchedTermCount{}, hostA},
		{"incoming pod's anti-affinity has more than one term - existing pod violates partial term - case 2", normalPodB,
			makePod().PodAffinityExists("aaa", "hostname").PodAffinityExists("bbb", "hostname").PodAntiAffinityExists("aaa", "hostname").PodAntiAffinityExists("bbb", "hostname").Obj(),
			topologyToMatchedTermCount{}, hostA},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := newSnapshot([]*corev1.Pod{tt.existing}, []*corev1.Node{nodeA})
			pl := newPlugin(t, nil, snap, nil)
			state := framework.NewCycleState()
			if st := pl.PreFilter(t.Context(), state, tt.pod); st.IsSkip() {
				if len(tt.wantAffinity)+len(tt.wantAnti) != 0 {
					t.Fatal("unexpected Skip")
				}
				return
			}
			s, err := getPreFilterState(state)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(s.affinityCounts, tt.wantAffinity) || !maps.Equal(s.antiAffinityCounts, tt.wantAnti) {
				t.Errorf("affinity = %v, anti = %v; want %v, %v", s.affinityCounts, s.antiAffinityCounts, tt.wantAffinity, tt.wantAnti)
			}
		})
	}
}

func TestNewArgs(t *testing.T) {
	snap := newSnapshot(nil, nil)
	bad := int32(101)
	if _, err := New(t.Context(), Args{HardPodAffinityWeight: &bad}, handle{snap: snap}); err == nil {
		t.Error("want an error for weight 101")
	}
	if _, err := New(t.Context(), 7, handle{snap: snap}); err == nil {
		t.Error("want an error for args of the wrong type")
	}
	if _, err := New(t.Context(), nil, handle{snap: snap}); err == nil {
		t.Error("want an error without an informer factory")
	}
}

// benchCluster builds 1000 nodes in 10 zones with 10 pods each; every fifth
// pod has a required anti-affinity on its app across hostnames.
func benchCluster() *snapshot {
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for i := range 1000 {
		name := fmt.Sprintf("node-%d", i)
		nodes = append(nodes, node(name, map[string]string{
			corev1.LabelHostname: name, corev1.LabelTopologyZone: fmt.Sprintf("zone-%d", i%10), "region": "r1",
		}))
		for j := range 10 {
			p := makePod().Name(fmt.Sprintf("p-%d-%d", i, j)).Namespace("default").Node(name).Label("app", fmt.Sprintf("app-%d", (i*10+j)%50))
			if j%5 == 0 {
				p.PodAntiAffinityIn("app", corev1.LabelHostname, fmt.Sprintf("app-%d", (i*10+j)%50))
			}
			pods = append(pods, p.Obj())
		}
	}
	return newSnapshot(pods, nodes)
}

// benchPod requires a region with app-3 pods (every node passes), avoids
// hosts with app-12 pods (200 nodes fail) and is itself selected by the
// hostname anti-affinity of the app-5 pods (200 more nodes fail).
func benchPod() *corev1.Pod {
	return makePod().Name("incoming").Namespace("default").Label("app", "app-5").
		PodAffinityIn("app", "region", "app-3").
		PodAntiAffinityIn("app", corev1.LabelHostname, "app-12").Obj()
}

// BenchmarkFilter filters benchPod against the 1000-node cluster.
func BenchmarkFilter(b *testing.B) {
	snap := benchCluster()
	pl := newPlugin(b, nil, snap, nil)
	pod := benchPod()
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
}

// BenchmarkPreFilter measures the per-cycle counting over the same cluster
// (2000 running pods with required anti-affinity, parsed once through the cache).
func BenchmarkPreFilter(b *testing.B) {
	snap := benchCluster()
	pl := newPlugin(b, nil, snap, nil)
	pod := benchPod()
	b.ReportAllocs()
	for b.Loop() {
		pl.PreFilter(b.Context(), framework.NewCycleState(), pod)
	}
}

// TestFilterConcurrent runs PreFilter (parallel over 1000 nodes, filling the
// term cache) and then Filter from several goroutines, as the scheduler does,
// and checks the results against a sequential pass (run with -race).
func TestFilterConcurrent(t *testing.T) {
	snap := benchCluster()
	pl := newPlugin(t, nil, snap, nil)
	pod := benchPod()
	state := framework.NewCycleState()
	if st := pl.PreFilter(t.Context(), state, pod); !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	infos, _ := snap.List()
	want := make([]framework.Code, len(infos))
	for i, ni := range infos {
		want[i] = pl.Filter(t.Context(), state, pod, ni).Code()
	}
	rejected := 0
	for _, c := range want {
		if c != framework.Success {
			rejected++
		}
	}
	if rejected != 400 {
		t.Errorf("rejected %d nodes, want 400", rejected)
	}
	got := make([]framework.Code, len(infos))
	parallelize(t.Context(), len(infos), func(i int) {
		got[i] = pl.Filter(t.Context(), state, pod, infos[i]).Code()
	})
	if !slices.Equal(got, want) {
		t.Error("parallel Filter results differ from sequential ones")
	}
}

// TestMatchLabelKeys: kubette's API server does not merge matchLabelKeys and
// mismatchLabelKeys into the selector, so the plugin does.
func TestMatchLabelKeys(t *testing.T) {
	nodes := []*corev1.Node{node("n1", map[string]string{"hostname": "n1"}), node("n2", map[string]string{"hostname": "n2"})}
	anti := term("app", metav1.LabelSelectorOpIn, "hostname", "web")
	anti.MatchLabelKeys = []string{"rev"}
	pod := makePod().Name("web-v2").Label("app", "web").Label("rev", "v2").addAntiAffinity(anti).Obj()
	pods := []*corev1.Pod{
		makePod().Name("web-v1").Node("n1").Label("app", "web").Label("rev", "v1").Obj(),
		makePod().Name("web-v2-a").Node("n2").Label("app", "web").Label("rev", "v2").Obj(),
	}
	snap := newSnapshot(pods, nodes)
	pl := newPlugin(t, nil, snap, nil)
	state := framework.NewCycleState()
	if st := pl.PreFilter(t.Context(), state, pod); !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	n1, _ := snap.Get("n1")
	n2, _ := snap.Get("n2")
	checkStatus(t, "n1 (other revision)", pl.Filter(t.Context(), state, pod, n1), nil)
	checkStatus(t, "n2 (same revision)", pl.Filter(t.Context(), state, pod, n2), antiAffinityFailed)
}
