package affinitymatch

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Term is a parsed corev1.PodAffinityTerm.
type Term struct {
	// Namespaces are the namespaces selected by name. When the term sets
	// neither namespaces nor namespaceSelector it holds the owning pod's namespace.
	Namespaces sets.Set[string]
	// NamespaceSelector selects namespaces by label: labels.Nothing() when
	// unset, labels.Everything() for an empty selector.
	NamespaceSelector labels.Selector
	// Selector selects pods by label (labels.Nothing() when unset). The term's
	// matchLabelKeys and mismatchLabelKeys are already merged into it.
	Selector labels.Selector
	// TopologyKey is the node label whose value defines the topology domain.
	TopologyKey string
}

// Matches reports whether pod is selected by the term: its namespace is listed
// or its namespace's labels (nsLabels) match the namespace selector, and its
// labels match the label selector.
func (t *Term) Matches(pod *corev1.Pod, nsLabels labels.Set) bool {
	if t.Namespaces.Has(pod.Namespace) || t.NamespaceSelector.Matches(nsLabels) {
		return t.Selector.Matches(labels.Set(pod.Labels))
	}
	return false
}

// WeightedTerm is a parsed corev1.WeightedPodAffinityTerm.
type WeightedTerm struct {
	Term
	// Weight is the term's weight (1-100).
	Weight int32
}

// PodTerms are a pod's parsed inter-pod affinity and anti-affinity terms.
type PodTerms struct {
	// RequiredAffinity are podAffinity.requiredDuringSchedulingIgnoredDuringExecution.
	RequiredAffinity []Term
	// RequiredAntiAffinity are podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution.
	RequiredAntiAffinity []Term
	// PreferredAffinity are podAffinity.preferredDuringSchedulingIgnoredDuringExecution.
	PreferredAffinity []WeightedTerm
	// PreferredAntiAffinity are podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution.
	PreferredAntiAffinity []WeightedTerm
}

// HasRequired reports whether the pod has required affinity or anti-affinity terms.
func (p *PodTerms) HasRequired() bool {
	return len(p.RequiredAffinity) > 0 || len(p.RequiredAntiAffinity) > 0
}

// ParsePodTerms parses the affinity terms of pod. A group of terms (required
// affinity, required anti-affinity, preferred affinity, preferred
// anti-affinity) with an invalid selector is left empty and its error is
// returned, prefixed as upstream does ("requiredAffinityTerms: ..."); the
// other groups are still parsed, so the result is never nil.
//
// Unlike upstream, whose API server merges matchLabelKeys and
// mismatchLabelKeys into the label selector when the pod is created, the
// scheduler merges them here (an In or NotIn requirement on the pod's own
// label value, only when the term has a label selector). Merging twice is
// harmless, so this stays correct if the API server starts doing it.
func ParsePodTerms(pod *corev1.Pod) (*PodTerms, error) {
	out := &PodTerms{}
	a := pod.Spec.Affinity
	if a == nil || (a.PodAffinity == nil && a.PodAntiAffinity == nil) {
		return out, nil
	}
	var errs []error
	var err error
	if a.PodAffinity != nil {
		if out.RequiredAffinity, err = parseTerms(pod, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution); err != nil {
			errs = append(errs, fmt.Errorf("requiredAffinityTerms: %w", err))
		}
	}
	if a.PodAntiAffinity != nil {
		if out.RequiredAntiAffinity, err = parseTerms(pod, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution); err != nil {
			errs = append(errs, fmt.Errorf("requiredAntiAffinityTerms: %w", err))
		}
	}
	if a.PodAffinity != nil {
		if out.PreferredAffinity, err = parseWeightedTerms(pod, a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution); err != nil {
			errs = append(errs, fmt.Errorf("preferredAffinityTerms: %w", err))
		}
	}
	if a.PodAntiAffinity != nil {
		if out.PreferredAntiAffinity, err = parseWeightedTerms(pod, a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution); err != nil {
			errs = append(errs, fmt.Errorf("preferredAntiAffinityTerms: %w", err))
		}
	}
	return out, utilerrors.NewAggregate(errs)
}

// MatchesAll reports whether pod matches every term (false for no terms).
// It is used with the incoming pod's terms, whose namespace selectors are
// already resolved, so no namespace labels are needed.
func MatchesAll(terms []Term, pod *corev1.Pod) bool {
	if len(terms) == 0 {
		return false
	}
	for i := range terms {
		if !terms[i].Matches(pod, nil) {
			return false
		}
	}
	return true
}

func parseTerms(pod *corev1.Pod, terms []corev1.PodAffinityTerm) ([]Term, error) {
	if len(terms) == 0 {
		return nil, nil
	}
	out := make([]Term, 0, len(terms))
	for i := range terms {
		t, err := newTerm(pod, &terms[i])
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func parseWeightedTerms(pod *corev1.Pod, terms []corev1.WeightedPodAffinityTerm) ([]WeightedTerm, error) {
	if len(terms) == 0 {
		return nil, nil
	}
	out := make([]WeightedTerm, 0, len(terms))
	for i := range terms {
		t, err := newTerm(pod, &terms[i].PodAffinityTerm)
		if err != nil {
			return nil, err
		}
		out = append(out, WeightedTerm{Term: t, Weight: terms[i].Weight})
	}
	return out, nil
}

func newTerm(pod *corev1.Pod, term *corev1.PodAffinityTerm) (Term, error) {
	selector, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
	if err != nil {
		return Term{}, err
	}
	if term.LabelSelector != nil {
		if selector, err = mergeLabelKeys(selector, term, pod.Labels); err != nil {
			return Term{}, err
		}
	}
	nsSelector, err := metav1.LabelSelectorAsSelector(term.NamespaceSelector)
	if err != nil {
		return Term{}, err
	}
	return Term{
		Namespaces:        namespacesOf(pod, term),
		NamespaceSelector: nsSelector,
		Selector:          selector,
		TopologyKey:       term.TopologyKey,
	}, nil
}

// mergeLabelKeys adds "key in (value)" for each matchLabelKeys entry and
// "key notin (value)" for each mismatchLabelKeys entry whose key the pod has.
func mergeLabelKeys(selector labels.Selector, term *corev1.PodAffinityTerm, podLabels map[string]string) (labels.Selector, error) {
	add := func(keys []string, op selection.Operator) error {
		for _, k := range keys {
			v, ok := podLabels[k]
			if !ok {
				continue
			}
			r, err := labels.NewRequirement(k, op, []string{v})
			if err != nil {
				return err
			}
			selector = selector.Add(*r)
		}
		return nil
	}
	if err := add(term.MatchLabelKeys, selection.In); err != nil {
		return nil, err
	}
	if err := add(term.MismatchLabelKeys, selection.NotIn); err != nil {
		return nil, err
	}
	return selector, nil
}

// namespacesOf returns the namespaces a term names; the pod's own namespace
// when it names none and has no namespace selector.
func namespacesOf(pod *corev1.Pod, term *corev1.PodAffinityTerm) sets.Set[string] {
	if len(term.Namespaces) == 0 && term.NamespaceSelector == nil {
		return sets.New(pod.Namespace)
	}
	return sets.New(term.Namespaces...)
}
