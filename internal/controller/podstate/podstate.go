// Package podstate answers the questions controllers ask about a pod's
// lifecycle — is it ready, available, active, terminating — with upstream's
// definitions (k8s.io/kubernetes pkg/api/v1/pod and pkg/controller).
package podstate

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReadyCondition returns the pod's Ready condition, or nil when it has none.
func ReadyCondition(pod *corev1.Pod) *corev1.PodCondition {
	if pod == nil {
		return nil
	}
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// IsPodReady reports whether the pod's Ready condition is True.
func IsPodReady(pod *corev1.Pod) bool {
	c := ReadyCondition(pod)
	return c != nil && c.Status == corev1.ConditionTrue
}

// IsPodAvailable reports whether the pod is ready and has been ready for at
// least minReadySeconds at now, measured from the Ready condition's
// lastTransitionTime. With minReadySeconds 0 a ready pod is available at once;
// otherwise a ready pod without a transition time is not available.
func IsPodAvailable(pod *corev1.Pod, minReadySeconds int32, now metav1.Time) bool {
	if !IsPodReady(pod) {
		return false
	}
	if minReadySeconds == 0 {
		return true
	}
	c := ReadyCondition(pod)
	min := time.Duration(minReadySeconds) * time.Second
	return !c.LastTransitionTime.IsZero() && c.LastTransitionTime.Add(min).Before(now.Time)
}

// IsPodTerminal reports whether the pod reached a terminal phase (Succeeded or Failed).
func IsPodTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// IsPodActive reports whether the pod counts towards a controller's replicas:
// not in a terminal phase and not being deleted.
func IsPodActive(pod *corev1.Pod) bool {
	return !IsPodTerminal(pod) && pod.DeletionTimestamp == nil
}

// IsPodTerminating reports whether the pod is being deleted but has not yet
// reached a terminal phase.
func IsPodTerminating(pod *corev1.Pod) bool {
	return !IsPodTerminal(pod) && pod.DeletionTimestamp != nil
}

// FilterActive returns the active pods of pods, in order.
func FilterActive(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if IsPodActive(p) {
			out = append(out, p)
		}
	}
	return out
}
