package affinitymatch

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func req(key string, op corev1.NodeSelectorOperator, vals ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: vals}
}

func node(name string, lbls map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
}

func TestNodeSelectorMatch(t *testing.T) {
	tests := []struct {
		name  string
		terms []corev1.NodeSelectorTerm
		node  *corev1.Node
		want  bool
	}{
		{"In matches", []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("foo", corev1.NodeSelectorOpIn, "bar", "value2")}}}, node("n", map[string]string{"foo": "bar"}), true},
		{"In misses", []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("foo", corev1.NodeSelectorOpIn, "value1", "value2")}}}, node("n", map[string]string{"foo": "bar"}), false},
		{"NotIn matches", []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("mem-type", corev1.NodeSelectorOpNotIn, "DDR", "DDR2")}}}, node("n", map[string]string{"mem-type": "DDR3"}), true},
		{"NotIn matches a missing label", []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("mem-type", corev1.NodeSelectorOpNotIn, "DDR")}}}, node("n", nil), true},
		{"Exists", []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("GPU", corev1.NodeSelectorOpExists)}}}, node("n", map[string]string{"GPU": "NVIDIA-GRID-K1"}), true},
		{"DoesNotExist", []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("GPU", corev1.NodeSelectorOpDoesNotExist)}}}, node("n", map[string]string{"GPU": "x"}), false},
		{"Gt", []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("kernel-version", corev1.NodeSelectorOpGt, "0204")}}}, node("n", map[string]string{"kernel-version": "0206"}), true},
		{"Gt non-numeric label", []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("kernel-version", corev1.NodeSelectorOpGt, "1")}}}, node("n", map[string]string{"kernel-version": "x"}), false},
		{"Lt", []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("cores", corev1.NodeSelectorOpLt, "8")}}}, node("n", map[string]string{"cores": "4"}), true},
		{"Lt with two values is invalid", []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("cores", corev1.NodeSelectorOpLt, "8", "9")}}}, node("n", map[string]string{"cores": "4"}), false},
		{"expressions ANDed", []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("GPU", corev1.NodeSelectorOpExists), req("GPU", corev1.NodeSelectorOpIn, "AMD", "INTER")}}}, node("n", map[string]string{"GPU": "NVIDIA-GRID-K1"}), false},
		{"terms ORed", []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{req("diffkey", corev1.NodeSelectorOpIn, "wrong")}},
			{MatchExpressions: []corev1.NodeSelectorRequirement{req("foo", corev1.NodeSelectorOpIn, "bar")}},
		}, node("n", map[string]string{"foo": "bar"}), true},
		{"empty term matches nothing", []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{}}}, node("n", map[string]string{"foo": "bar"}), false},
		{"invalid value matches nothing", []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("foo", corev1.NodeSelectorOpNotIn, "invalid value: ___@#$%^")}}}, node("n", map[string]string{"foo": "bar"}), false},
		{"invalid term does not hide a valid one", []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{req("foo", "BadOp", "x")}},
			{MatchExpressions: []corev1.NodeSelectorRequirement{req("foo", corev1.NodeSelectorOpIn, "bar")}},
		}, node("n", map[string]string{"foo": "bar"}), true},
		{"matchFields In", []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{req(metav1.ObjectNameField, corev1.NodeSelectorOpIn, "node1")}}}, node("node1", nil), true},
		{"matchFields In misses", []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{req(metav1.ObjectNameField, corev1.NodeSelectorOpIn, "node1")}}}, node("node2", nil), false},
		{"matchFields NotIn", []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{req(metav1.ObjectNameField, corev1.NodeSelectorOpNotIn, "node1")}}}, node("node2", nil), true},
		{"matchFields conflicting", []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			req(metav1.ObjectNameField, corev1.NodeSelectorOpIn, "node1"), req(metav1.ObjectNameField, corev1.NodeSelectorOpIn, "node2"),
		}}}, node("node2", nil), false},
		{"matchFields two values invalid", []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{req(metav1.ObjectNameField, corev1.NodeSelectorOpIn, "node1", "node2")}}}, node("node1", nil), false},
		{"matchFields Exists unsupported", []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{req(metav1.ObjectNameField, corev1.NodeSelectorOpExists)}}}, node("node1", nil), false},
		{"matchFields ignored for a nameless node", []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{req(metav1.ObjectNameField, corev1.NodeSelectorOpIn, "node1")}}}, node("", nil), true},
		{"matchFields unknown key reads empty", []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{req("spec.unschedulable", corev1.NodeSelectorOpIn, "")}}}, node("node1", nil), true},
		{"fields and expressions ANDed", []corev1.NodeSelectorTerm{{
			MatchFields:      []corev1.NodeSelectorRequirement{req(metav1.ObjectNameField, corev1.NodeSelectorOpIn, "node1")},
			MatchExpressions: []corev1.NodeSelectorRequirement{req("foo", corev1.NodeSelectorOpIn, "bar")},
		}}, node("node2", map[string]string{"foo": "bar"}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel := NewLazyNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: tt.terms})
			if got := sel.Match(tt.node); got != tt.want {
				t.Errorf("Match() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNewNodeSelectorReportsErrors(t *testing.T) {
	_, err := NewNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
		{MatchExpressions: []corev1.NodeSelectorRequirement{req("foo", "BadOp", "x")}},
		{MatchFields: []corev1.NodeSelectorRequirement{req(metav1.ObjectNameField, corev1.NodeSelectorOpIn, "a", "b")}},
	}})
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{`nodeSelectorTerms[0].matchExpressions[0].operator: Unsupported value: "BadOp"`, `nodeSelectorTerms[1].matchFields[0].values: Invalid value`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if _, err := NewNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("foo", corev1.NodeSelectorOpExists)}}}}); err != nil {
		t.Errorf("unexpected error: %v", err)
	}
}

func TestRequiredNodeAffinity(t *testing.T) {
	affinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("foo", corev1.NodeSelectorOpExists)}}},
	}}}
	tests := []struct {
		name string
		pod  *corev1.Pod
		node *corev1.Node
		want bool
	}{
		{"nothing required", &corev1.Pod{}, node("n", nil), true},
		{"selector superset", &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{"foo": "bar"}}}, node("n", map[string]string{"foo": "bar", "baz": "blah"}), true},
		{"selector subset", &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{"foo": "bar", "baz": "blah"}}}, node("n", map[string]string{"foo": "bar"}), false},
		{"both satisfied", &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{"foo": "bar"}, Affinity: affinity}}, node("n", map[string]string{"foo": "bar"}), true},
		{"affinity satisfied, selector not", &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{"foo": "bar"}, Affinity: affinity}}, node("n", map[string]string{"foo": "barrrrrr"}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := GetRequiredNodeAffinity(tt.pod).Match(tt.node); got != tt.want {
				t.Errorf("Match() = %v, want %v", got, tt.want)
			}
		})
	}
	if !GetRequiredNodeAffinity(&corev1.Pod{}).IsEmpty() {
		t.Error("IsEmpty() = false for a pod without requirements")
	}
}

func TestPreferredSchedulingTermsScore(t *testing.T) {
	terms := []corev1.PreferredSchedulingTerm{
		{Weight: 2, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{req("foo", corev1.NodeSelectorOpIn, "bar")}}},
		{Weight: 4, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{req("key", corev1.NodeSelectorOpIn, "value")}}},
		{Weight: 5, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
			req("foo", corev1.NodeSelectorOpIn, "bar"), req("key", corev1.NodeSelectorOpIn, "value"), req("az", corev1.NodeSelectorOpIn, "az1"),
		}}},
		{Weight: 0, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{req("foo", corev1.NodeSelectorOpIn, "bar")}}},
		{Weight: 7},
	}
	p, err := NewPreferredSchedulingTerms(terms)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		labels map[string]string
		want   int64
	}{
		{map[string]string{"foo": "bar"}, 2},
		{map[string]string{"key": "value"}, 4},
		{map[string]string{"foo": "bar", "key": "value", "az": "az1"}, 11},
		{nil, 0},
	} {
		if got := p.Score(node("n", tc.labels)); got != tc.want {
			t.Errorf("Score(%v) = %d, want %d", tc.labels, got, tc.want)
		}
	}
	if _, err := NewPreferredSchedulingTerms([]corev1.PreferredSchedulingTerm{{Weight: 1, Preference: corev1.NodeSelectorTerm{
		MatchExpressions: []corev1.NodeSelectorRequirement{req("foo", corev1.NodeSelectorOpGt, "x")},
	}}}); err == nil {
		t.Error("want an error for a non-integer Gt value")
	}
}
