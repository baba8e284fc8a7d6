package daemonset

import (
	"fmt"
	"strconv"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/kubette/kubette/internal/controller/history"
)

// PodTemplateGenerationLabel is the label of a daemon pod that carries the DaemonSet's
// template generation when the pod was made.
const PodTemplateGenerationLabel = "pod-template-generation"

// daemonTolerations are the tolerations upstream adds to every daemon pod, so that a
// daemon keeps running on a node that is not ready, unreachable, under pressure or
// cordoned; hostNetwork pods also tolerate an unavailable network.
func daemonTolerations(hostNetwork bool) []corev1.Toleration {
	exists := func(key string, effect corev1.TaintEffect) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect}
	}
	t := []corev1.Toleration{
		exists(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute),
		exists(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute),
		exists(corev1.TaintNodeDiskPressure, corev1.TaintEffectNoSchedule),
		exists(corev1.TaintNodeMemoryPressure, corev1.TaintEffectNoSchedule),
		exists(corev1.TaintNodePIDPressure, corev1.TaintEffectNoSchedule),
		exists(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule),
	}
	if hostNetwork {
		t = append(t, exists(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule))
	}
	return t
}

// addTolerations adds each toleration to spec unless an equal one (same key,
// operator, value and effect) is there, which it replaces.
func addTolerations(spec *corev1.PodSpec, tolerations []corev1.Toleration) {
	for _, t := range tolerations {
		found := false
		for i := range spec.Tolerations {
			if spec.Tolerations[i].MatchToleration(&t) {
				spec.Tolerations[i] = t
				found = true
				break
			}
		}
		if !found {
			spec.Tolerations = append(spec.Tolerations, t)
		}
	}
}

// podTemplate is the template of the DaemonSet's new pods: its own, with the hash and
// template-generation labels and the daemon tolerations.
func podTemplate(ds *appsv1.DaemonSet, hash string) *corev1.PodTemplateSpec {
	t := ds.Spec.Template.DeepCopy()
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	if gen, ok := templateGeneration(ds); ok {
		t.Labels[PodTemplateGenerationLabel] = strconv.FormatInt(gen, 10)
	}
	if hash != "" {
		t.Labels[history.HashLabel] = hash
	}
	addTolerations(&t.Spec, daemonTolerations(t.Spec.HostNetwork))
	return t
}

// templateGeneration reads the DaemonSet's template generation annotation.
func templateGeneration(ds *appsv1.DaemonSet) (int64, bool) {
	v, ok := ds.Annotations[appsv1.DeprecatedTemplateGeneration]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// nodeNameAffinity returns aff with its required node affinity replaced by the one
// term that picks the node by name (metadata.name), as upstream binds a daemon pod to
// its node and lets the scheduler place it.
func nodeNameAffinity(aff *corev1.Affinity, nodeName string) *corev1.Affinity {
	term := corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{
		Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{nodeName},
	}}}
	if aff == nil {
		aff = &corev1.Affinity{}
	}
	if aff.NodeAffinity == nil {
		aff.NodeAffinity = &corev1.NodeAffinity{}
	}
	if aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = []corev1.NodeSelectorTerm{term}
	return aff
}

// targetNode is the node a daemon pod is for: its spec.nodeName once bound, else the
// node its metadata.name affinity term names.
func targetNode(pod *corev1.Pod) (string, error) {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName, nil
	}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, f := range term.MatchFields {
				if f.Key == metav1.ObjectNameField && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
					return f.Values[0], nil
				}
			}
		}
	}
	return "", fmt.Errorf("no node name found for pod %s/%s", pod.Namespace, pod.Name)
}

// shouldRun reports whether a daemon pod of template should run on node (run), and
// whether one that runs there already may keep running (keep): the node must match
// the pod's nodeName, node selector and required node affinity; a NoSchedule or
// NoExecute taint the pod does not tolerate keeps new pods off, and only an
// untolerated NoExecute one evicts a running pod.
func shouldRun(template *corev1.PodTemplateSpec, node *corev1.Node) (run, keep bool) {
	pod := &corev1.Pod{ObjectMeta: template.ObjectMeta, Spec: template.Spec}
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		return false, false
	}
	if fits, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !fits {
		return false, false
	}
	logger := logr.Discard()
	if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoExecute || t.Effect == corev1.TaintEffectNoSchedule
	}, false); !untolerated {
		return true, true
	}
	_, evicted := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoExecute
	}, false)
	return false, !evicted
}

// isUpdated reports whether a daemon pod is of the DaemonSet's current template: its
// hash label is the current revision's, or its template generation is the current one.
func isUpdated(pod *corev1.Pod, hash string, gen int64, hasGen bool) bool {
	if hash != "" && pod.Labels[history.HashLabel] == hash {
		return true
	}
	return hasGen && pod.Labels[PodTemplateGenerationLabel] == strconv.FormatInt(gen, 10)
}
