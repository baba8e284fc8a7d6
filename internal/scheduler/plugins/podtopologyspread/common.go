package podtopologyspread

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/kubette/kubette/internal/scheduler/framework"
	"github.com/kubette/kubette/internal/scheduler/plugins/affinitymatch"
)

// constraint is a parsed corev1.TopologySpreadConstraint.
type constraint struct {
	MaxSkew     int32
	TopologyKey string
	// Selector is the label selector with the matchLabelKeys merged in.
	Selector labels.Selector
	// MinDomains is 1 when unset.
	MinDomains int32
	// NodeAffinityPolicy is Honor and NodeTaintsPolicy Ignore when unset.
	NodeAffinityPolicy corev1.NodeInclusionPolicy
	NodeTaintsPolicy   corev1.NodeInclusionPolicy
}

// parseConstraints parses the pod's constraints with the given action.
func parseConstraints(pod *corev1.Pod, action corev1.UnsatisfiableConstraintAction) ([]constraint, error) {
	var out []constraint
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != action {
			continue
		}
		selector, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil {
			return nil, err
		}
		if len(c.MatchLabelKeys) > 0 {
			matchLabels := make(labels.Set)
			for _, k := range c.MatchLabelKeys {
				if v, ok := pod.Labels[k]; ok {
					matchLabels[k] = v
				}
			}
			if len(matchLabels) > 0 {
				selector = mergeLabelSetWithSelector(matchLabels, selector)
			}
		}
		tsc := constraint{
			MaxSkew:            c.MaxSkew,
			TopologyKey:        c.TopologyKey,
			Selector:           selector,
			MinDomains:         1,
			NodeAffinityPolicy: corev1.NodeInclusionPolicyHonor,
			NodeTaintsPolicy:   corev1.NodeInclusionPolicyIgnore,
		}
		if c.MinDomains != nil {
			tsc.MinDomains = *c.MinDomains
		}
		if c.NodeAffinityPolicy != nil {
			tsc.NodeAffinityPolicy = *c.NodeAffinityPolicy
		}
		if c.NodeTaintsPolicy != nil {
			tsc.NodeTaintsPolicy = *c.NodeTaintsPolicy
		}
		out = append(out, tsc)
	}
	return out, nil
}

// mergeLabelSetWithSelector ANDs matchLabels into s; a selector that matches
// nothing (a nil labelSelector) stays as it is.
func mergeLabelSetWithSelector(matchLabels labels.Set, s labels.Selector) labels.Selector {
	requirements, ok := s.Requirements()
	if !ok {
		return s
	}
	merged := labels.SelectorFromSet(matchLabels)
	for _, r := range requirements {
		merged = merged.Add(r)
	}
	return merged
}

// matchNodeInclusionPolicies reports whether node counts for the constraint:
// with nodeAffinityPolicy Honor it must match the pod's node selector and
// required affinity; with nodeTaintsPolicy Honor the pod must tolerate its
// NoSchedule and NoExecute taints.
func (c *constraint) matchNodeInclusionPolicies(pod *corev1.Pod, node *corev1.Node, required affinitymatch.RequiredNodeAffinity) bool {
	if c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor && !required.Match(node) {
		return false
	}
	if c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor && hasUntoleratedTaint(node.Spec.Taints, pod.Spec.Tolerations) {
		return false
	}
	return true
}

// hasUntoleratedTaint reports whether a NoSchedule or NoExecute taint is not
// tolerated (upstream's FindMatchingUntoleratedTaint with the DoNotSchedule
// filter; the alpha Gt/Lt toleration operators are off).
func hasUntoleratedTaint(taints []corev1.Taint, tolerations []corev1.Toleration) bool {
	for i := range taints {
		t := &taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		tolerated := false
		for j := range tolerations {
			if tolerations[j].ToleratesTaint(klog.Background(), t, false) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return true
		}
	}
	return false
}

// nodeLabelsMatchSpreadConstraints reports whether the node has every constraint's topology key.
func nodeLabelsMatchSpreadConstraints(nodeLabels map[string]string, constraints []constraint) bool {
	for i := range constraints {
		if _, ok := nodeLabels[constraints[i].TopologyKey]; !ok {
			return false
		}
	}
	return true
}

// countPodsMatchSelector counts the pods in namespace ns that match selector,
// skipping terminating pods. An empty selector counts nothing, as upstream.
func countPodsMatchSelector(podInfos []*framework.PodInfo, selector labels.Selector, ns string) int {
	if selector.Empty() {
		return 0
	}
	count := 0
	for _, pi := range podInfos {
		p := pi.Pod
		if p.DeletionTimestamp != nil || p.Namespace != ns {
			continue
		}
		if selector.Matches(labels.Set(p.Labels)) {
			count++
		}
	}
	return count
}
