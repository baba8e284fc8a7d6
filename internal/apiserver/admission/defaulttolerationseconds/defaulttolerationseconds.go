// Package defaulttolerationseconds is the DefaultTolerationSeconds admission plugin,
// as upstream's: every pod tolerates the node.kubernetes.io/not-ready and
// node.kubernetes.io/unreachable NoExecute taints for 300 seconds, unless it says
// itself how long it tolerates them.
package defaulttolerationseconds

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/admission"
)

// Name is the plugin's name, as upstream's.
const Name = "DefaultTolerationSeconds"

// Seconds is how long a pod stays on a node that is not ready or unreachable, as
// upstream's default --default-not-ready-toleration-seconds and
// --default-unreachable-toleration-seconds.
const Seconds = int64(300)

var pods = schema.GroupResource{Resource: "pods"}

// Plugin adds the default tolerations.
type Plugin struct{}

var _ admission.Mutator = Plugin{}

// Admit adds the tolerations a pod being created or updated lacks.
func (Plugin) Admit(_ context.Context, a *admission.Attributes) error {
	if a.Subresource != "" || a.Resource.GroupResource() != pods || (a.Operation != admission.Create && a.Operation != admission.Update) {
		return nil
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return nil
	}
	notReady, unreachable := false, false
	for _, t := range pod.Spec.Tolerations {
		if t.Effect != corev1.TaintEffectNoExecute && t.Effect != "" {
			continue
		}
		notReady = notReady || t.Key == corev1.TaintNodeNotReady || t.Key == ""
		unreachable = unreachable || t.Key == corev1.TaintNodeUnreachable || t.Key == ""
	}
	if !notReady {
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, toleration(corev1.TaintNodeNotReady))
	}
	if !unreachable {
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, toleration(corev1.TaintNodeUnreachable))
	}
	return nil
}

func toleration(key string) corev1.Toleration {
	s := Seconds
	return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &s}
}
