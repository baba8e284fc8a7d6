package affinitymatch

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validSelectorOperators are the node selector operators for matchExpressions.
var validSelectorOperators = []string{
	string(corev1.NodeSelectorOpIn),
	string(corev1.NodeSelectorOpNotIn),
	string(corev1.NodeSelectorOpExists),
	string(corev1.NodeSelectorOpDoesNotExist),
	string(corev1.NodeSelectorOpGt),
	string(corev1.NodeSelectorOpLt),
}

// validFieldSelectorOperators are the node selector operators for matchFields.
var validFieldSelectorOperators = []string{
	string(corev1.NodeSelectorOpIn),
	string(corev1.NodeSelectorOpNotIn),
}

// NodeSelector is a parsed corev1.NodeSelector. Its terms are ORed and the
// requirements of one term ANDed; a term with neither matchExpressions nor
// matchFields matches no node. A term that failed to parse matches no node
// either (upstream's "lazy error" node selector: errors only matter when no
// other term matches, and the scheduler ignores them).
type NodeSelector struct {
	terms []nodeSelectorTerm
}

// nodeSelectorTerm is one parsed corev1.NodeSelectorTerm.
type nodeSelectorTerm struct {
	// labels is nil when the term has no matchExpressions.
	labels labels.Selector
	// fields is nil when the term has no matchFields.
	fields []fieldRequirement
	// errs are the parse errors; a term with errors matches nothing.
	errs []error
}

// fieldRequirement is one matchFields requirement: the node field named key
// must (In) or must not (NotIn) equal value. Nodes only expose metadata.name;
// any other key reads as the empty string, as with upstream's fields.Set.
type fieldRequirement struct {
	key   string
	value string
	in    bool
}

// NewNodeSelector parses ns and returns every parse error found, flattened.
func NewNodeSelector(ns *corev1.NodeSelector) (*NodeSelector, error) {
	sel := NewLazyNodeSelector(ns)
	var errs []error
	for _, t := range sel.terms {
		errs = append(errs, t.errs...)
	}
	if len(errs) > 0 {
		return nil, utilerrors.Flatten(utilerrors.NewAggregate(errs))
	}
	return sel, nil
}

// NewLazyNodeSelector parses ns, keeping parse errors inside the terms that
// have them (those terms match nothing). A nil ns matches nothing.
func NewLazyNodeSelector(ns *corev1.NodeSelector) *NodeSelector {
	if ns == nil {
		return &NodeSelector{}
	}
	path := field.NewPath("nodeSelectorTerms")
	terms := make([]nodeSelectorTerm, 0, len(ns.NodeSelectorTerms))
	for i := range ns.NodeSelectorTerms {
		t := &ns.NodeSelectorTerms[i]
		if isEmptyNodeSelectorTerm(t) {
			continue
		}
		terms = append(terms, newNodeSelectorTerm(t, path.Index(i)))
	}
	return &NodeSelector{terms: terms}
}

// Match reports whether node matches at least one term. A nil node matches nothing.
func (s *NodeSelector) Match(node *corev1.Node) bool {
	if node == nil {
		return false
	}
	for i := range s.terms {
		if s.terms[i].match(node) {
			return true
		}
	}
	return false
}

func isEmptyNodeSelectorTerm(t *corev1.NodeSelectorTerm) bool {
	return len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0
}

func newNodeSelectorTerm(t *corev1.NodeSelectorTerm, path *field.Path) nodeSelectorTerm {
	var out nodeSelectorTerm
	if len(t.MatchExpressions) > 0 {
		sel, errs := nodeSelectorRequirementsAsSelector(t.MatchExpressions, path.Child("matchExpressions"))
		out.labels = sel
		out.errs = append(out.errs, errs...)
	}
	if len(t.MatchFields) > 0 {
		reqs, errs := nodeSelectorRequirementsAsFields(t.MatchFields, path.Child("matchFields"))
		out.fields = reqs
		out.errs = append(out.errs, errs...)
	}
	return out
}

// match applies the term to node. Field requirements are skipped for a node
// without a name, as upstream does (its field set is empty then).
func (t *nodeSelectorTerm) match(node *corev1.Node) bool {
	if len(t.errs) > 0 {
		return false
	}
	if t.labels != nil && !t.labels.Matches(labels.Set(node.Labels)) {
		return false
	}
	if t.fields != nil && node.Name != "" {
		for _, r := range t.fields {
			var v string
			if r.key == metav1.ObjectNameField {
				v = node.Name
			}
			if (v == r.value) != r.in {
				return false
			}
		}
	}
	return true
}

func nodeSelectorRequirementsAsSelector(reqs []corev1.NodeSelectorRequirement, path *field.Path) (labels.Selector, []error) {
	var errs []error
	selector := labels.NewSelector()
	for i, expr := range reqs {
		p := path.Index(i)
		var op selection.Operator
		switch expr.Operator {
		case corev1.NodeSelectorOpIn:
			op = selection.In
		case corev1.NodeSelectorOpNotIn:
			op = selection.NotIn
		case corev1.NodeSelectorOpExists:
			op = selection.Exists
		case corev1.NodeSelectorOpDoesNotExist:
			op = selection.DoesNotExist
		case corev1.NodeSelectorOpGt:
			op = selection.GreaterThan
		case corev1.NodeSelectorOpLt:
			op = selection.LessThan
		default:
			errs = append(errs, field.NotSupported(p.Child("operator"), expr.Operator, validSelectorOperators))
			continue
		}
		r, err := labels.NewRequirement(expr.Key, op, expr.Values, field.WithPath(p))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		selector = selector.Add(*r)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return selector, nil
}

func nodeSelectorRequirementsAsFields(reqs []corev1.NodeSelectorRequirement, path *field.Path) ([]fieldRequirement, []error) {
	var errs []error
	out := make([]fieldRequirement, 0, len(reqs))
	for i, expr := range reqs {
		p := path.Index(i)
		switch expr.Operator {
		case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
			if len(expr.Values) != 1 {
				errs = append(errs, field.Invalid(p.Child("values"), expr.Values, "must have one element"))
				continue
			}
			out = append(out, fieldRequirement{key: expr.Key, value: expr.Values[0], in: expr.Operator == corev1.NodeSelectorOpIn})
		default:
			errs = append(errs, field.NotSupported(p.Child("operator"), expr.Operator, validFieldSelectorOperators))
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// RequiredNodeAffinity is what a pod requires of its node: spec.nodeSelector
// and requiredDuringSchedulingIgnoredDuringExecution node affinity, ANDed.
type RequiredNodeAffinity struct {
	// nodeSelector is nil when spec.nodeSelector is empty.
	nodeSelector labels.Selector
	// affinity is nil when the pod has no required node affinity.
	affinity *NodeSelector
}

// GetRequiredNodeAffinity parses pod's node selector and required node
// affinity. Terms that fail to parse match no node.
func GetRequiredNodeAffinity(pod *corev1.Pod) RequiredNodeAffinity {
	var r RequiredNodeAffinity
	if len(pod.Spec.NodeSelector) > 0 {
		r.nodeSelector = labels.SelectorFromSet(pod.Spec.NodeSelector)
	}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		r.affinity = NewLazyNodeSelector(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
	}
	return r
}

// IsEmpty reports whether the pod requires nothing of its node.
func (r RequiredNodeAffinity) IsEmpty() bool {
	return r.nodeSelector == nil && r.affinity == nil
}

// Match reports whether node satisfies both the node selector and the required node affinity.
func (r RequiredNodeAffinity) Match(node *corev1.Node) bool {
	if r.nodeSelector != nil {
		if node == nil || !r.nodeSelector.Matches(labels.Set(node.Labels)) {
			return false
		}
	}
	if r.affinity != nil {
		return r.affinity.Match(node)
	}
	return true
}

// PreferredSchedulingTerms is a parsed list of corev1.PreferredSchedulingTerm.
type PreferredSchedulingTerms struct {
	terms []weightedNodeSelectorTerm
}

type weightedNodeSelectorTerm struct {
	nodeSelectorTerm
	weight int64
}

// NewPreferredSchedulingTerms parses terms; terms with weight 0 or no
// requirements are dropped. It returns every parse error found.
func NewPreferredSchedulingTerms(terms []corev1.PreferredSchedulingTerm) (*PreferredSchedulingTerms, error) {
	var errs []error
	out := make([]weightedNodeSelectorTerm, 0, len(terms))
	for i := range terms {
		t := &terms[i]
		if t.Weight == 0 || isEmptyNodeSelectorTerm(&t.Preference) {
			continue
		}
		parsed := newNodeSelectorTerm(&t.Preference, field.NewPath("").Index(i))
		if len(parsed.errs) > 0 {
			errs = append(errs, parsed.errs...)
			continue
		}
		out = append(out, weightedNodeSelectorTerm{nodeSelectorTerm: parsed, weight: int64(t.Weight)})
	}
	if len(errs) > 0 {
		return nil, utilerrors.Flatten(utilerrors.NewAggregate(errs))
	}
	return &PreferredSchedulingTerms{terms: out}, nil
}

// Score returns the sum of the weights of the terms that node matches.
func (p *PreferredSchedulingTerms) Score(node *corev1.Node) int64 {
	if p == nil || node == nil {
		return 0
	}
	var score int64
	for i := range p.terms {
		if p.terms[i].match(node) {
			score += p.terms[i].weight
		}
	}
	return score
}
