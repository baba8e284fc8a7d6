package kubelet

import (
	v1 "k8s.io/api/core/v1"
)

// event records an event about a pod, or about one of its containers when fieldPath is set
// (spec.containers{name}), from component kubelet on this node.
func (k *Kubelet) event(pod *v1.Pod, fieldPath, eventType, reason, message string) {
	ref := &v1.ObjectReference{
		Kind:            "Pod",
		APIVersion:      "v1",
		Namespace:       pod.Namespace,
		Name:            pod.Name,
		UID:             pod.UID,
		ResourceVersion: pod.ResourceVersion,
		FieldPath:       fieldPath,
	}
	k.recorder.Event(ref, eventType, reason, message)
}
