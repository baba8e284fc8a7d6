package deployment

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/dump"
)

// computeHash returns the pod-template-hash of a template, as upstream's
// controller.ComputeHash: the FNV-32a of the template printed by the deep
// (pointer-following, key-sorted) printer, followed by the collision count as a
// little-endian word when there is one, printed in decimal and then mapped onto
// the alphabet of safe name characters. ReplicaSet names get the same shape as
// upstream's (web-7d4b9c6f8b).
func computeHash(template *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(*template))
	if collisionCount != nil {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, uint32(*collisionCount))
		h.Write(b)
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// replicaSetName names the ReplicaSet of a template hash: "<deployment>-<hash>",
// the deployment's part cut so that the whole stays a valid DNS subdomain name
// (upstream's generateReplicaSetName).
func replicaSetName(deploymentName, hash string) string {
	maxPrefix := validation.DNS1123SubdomainMaxLength - len(hash) - 1
	if maxPrefix > 0 && len(deploymentName) > maxPrefix {
		deploymentName = deploymentName[:maxPrefix]
	}
	return deploymentName + "-" + hash
}

// equalIgnoreHash reports whether two pod templates are semantically equal
// once the pod-template-hash label is left out of both.
func equalIgnoreHash(a, b *corev1.PodTemplateSpec) bool {
	a1, b1 := a.DeepCopy(), b.DeepCopy()
	delete(a1.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b1.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return apiequality.Semantic.DeepEqual(a1, b1)
}

// cloneAndAddLabel returns a copy of labels with key=value added; an empty key
// returns the labels unchanged (not copied), as upstream's labelsutil.
func cloneAndAddLabel(labels map[string]string, key, value string) map[string]string {
	if key == "" {
		return labels
	}
	out := make(map[string]string, len(labels)+1)
	for k, v := range labels {
		out[k] = v
	}
	out[key] = value
	return out
}

// cloneSelectorAndAddLabel returns a copy of selector whose matchLabels also
// require key=value (upstream's labelsutil.CloneSelectorAndAddLabel).
func cloneSelectorAndAddLabel(selector *metav1.LabelSelector, key, value string) *metav1.LabelSelector {
	if key == "" {
		return selector
	}
	out := &metav1.LabelSelector{}
	if selector != nil {
		out = selector.DeepCopy()
	}
	if out.MatchLabels == nil {
		out.MatchLabels = map[string]string{}
	}
	out.MatchLabels[key] = value
	return out
}
