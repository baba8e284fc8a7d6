package affinitymatch

import (
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func pod(ns string, lbls map[string]string, a *corev1.Affinity) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Labels: lbls}, Spec: corev1.PodSpec{Affinity: a}}
}

func selectorIn(key string, vals ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOpIn, Values: vals}}}
}

func TestTermMatches(t *testing.T) {
	owner := pod("ns1", nil, nil)
	teamSel := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "team1"}}
	tests := []struct {
		name     string
		term     corev1.PodAffinityTerm
		target   *corev1.Pod
		nsLabels labels.Set
		want     bool
	}{
		{"own namespace by default", corev1.PodAffinityTerm{LabelSelector: selectorIn("app", "web")}, pod("ns1", map[string]string{"app": "web"}, nil), nil, true},
		{"other namespace by default", corev1.PodAffinityTerm{LabelSelector: selectorIn("app", "web")}, pod("ns2", map[string]string{"app": "web"}, nil), nil, false},
		{"listed namespace", corev1.PodAffinityTerm{LabelSelector: selectorIn("app", "web"), Namespaces: []string{"ns2"}}, pod("ns2", map[string]string{"app": "web"}, nil), nil, true},
		{"listed namespaces exclude own", corev1.PodAffinityTerm{LabelSelector: selectorIn("app", "web"), Namespaces: []string{"ns2"}}, pod("ns1", map[string]string{"app": "web"}, nil), nil, false},
		{"namespace selector matches", corev1.PodAffinityTerm{LabelSelector: selectorIn("app", "web"), NamespaceSelector: teamSel}, pod("x", map[string]string{"app": "web"}, nil), labels.Set{"team": "team1"}, true},
		{"namespace selector misses", corev1.PodAffinityTerm{LabelSelector: selectorIn("app", "web"), NamespaceSelector: teamSel}, pod("x", map[string]string{"app": "web"}, nil), labels.Set{"team": "team2"}, false},
		{"empty namespace selector selects all", corev1.PodAffinityTerm{LabelSelector: selectorIn("app", "web"), NamespaceSelector: &metav1.LabelSelector{}}, pod("x", map[string]string{"app": "web"}, nil), nil, true},
		{"nil label selector matches nothing", corev1.PodAffinityTerm{}, pod("ns1", map[string]string{"app": "web"}, nil), nil, false},
		{"empty label selector matches all", corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{}}, pod("ns1", nil, nil), nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			term, err := newTerm(owner, &tt.term)
			if err != nil {
				t.Fatal(err)
			}
			if got := term.Matches(tt.target, tt.nsLabels); got != tt.want {
				t.Errorf("Matches() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParsePodTermsLabelKeys(t *testing.T) {
	owner := pod("ns1", map[string]string{"app": "web", "rev": "v2"}, &corev1.Affinity{
		PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: selectorIn("app", "web"), MatchLabelKeys: []string{"rev", "absent"}, TopologyKey: "zone",
		}}},
		PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: selectorIn("app", "web"), MismatchLabelKeys: []string{"rev"}, TopologyKey: "zone",
		}, {
			MatchLabelKeys: []string{"rev"}, TopologyKey: "zone", // nil selector: keys are not applied
		}}},
	})
	terms, err := ParsePodTerms(owner)
	if err != nil {
		t.Fatal(err)
	}
	v1 := pod("ns1", map[string]string{"app": "web", "rev": "v1"}, nil)
	v2 := pod("ns1", map[string]string{"app": "web", "rev": "v2"}, nil)
	if terms.RequiredAffinity[0].Matches(v1, nil) || !terms.RequiredAffinity[0].Matches(v2, nil) {
		t.Error("matchLabelKeys not applied")
	}
	if !terms.RequiredAntiAffinity[0].Matches(v1, nil) || terms.RequiredAntiAffinity[0].Matches(v2, nil) {
		t.Error("mismatchLabelKeys not applied")
	}
	if terms.RequiredAntiAffinity[1].Matches(v2, nil) {
		t.Error("a nil label selector must match nothing even with matchLabelKeys")
	}
}

func TestParsePodTermsErrors(t *testing.T) {
	bad := selectorIn("service", "{{.bad-value.}}")
	p := pod("ns1", nil, &corev1.Affinity{
		PodAffinity: &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: bad, TopologyKey: "region"}},
		},
		PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: selectorIn("a", "b"), TopologyKey: "zone"}},
		},
	})
	terms, err := ParsePodTerms(p)
	want := `requiredAffinityTerms: values[0][service]: Invalid value: "{{.bad-value.}}": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v\nwant   %s", err, want)
	}
	if len(terms.RequiredAffinity) != 0 || len(terms.RequiredAntiAffinity) != 1 {
		t.Errorf("want the valid group kept and the invalid one empty, got %+v", terms)
	}
}

func TestTermCache(t *testing.T) {
	c := NewTermCache()
	useCache(t, c) // the pods it creates are unreachable once it returns
	deadline := time.Now().Add(5 * time.Second)
	for c.Len() > 0 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := c.Len(); n != 0 {
		t.Errorf("entries of collected pods were not dropped: Len() = %d", n)
	}
}

// useCache checks hits and misses on two pod objects that die with it.
func useCache(t *testing.T, c *TermCache) {
	t.Helper()
	p := pod("ns1", nil, &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: selectorIn("a", "b"), TopologyKey: "zone"}},
	}})
	first := c.Get(p)
	if len(first.RequiredAntiAffinity) != 1 {
		t.Fatalf("terms not parsed: %+v", first)
	}
	if c.Get(p) != first {
		t.Error("second Get did not hit the cache")
	}
	if c.Get(p.DeepCopy()) == first {
		t.Error("a different object must get its own entry")
	}
	if c.Len() != 2 {
		t.Errorf("Len() = %d, want 2", c.Len())
	}
}
