// Package podclaims indexes pods by the PersistentVolumeClaims their volumes name
// (a persistentVolumeClaim volume's claimName, or the claim `<pod>-<volume>` of a
// generic ephemeral volume), so that the volume controllers find the pods of a
// claim without scanning every pod, as upstream's pod-PVC index.
package podclaims

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/storage/ephemeral"
)

// Index is the name of the index on a pod informer.
const Index = "podclaims/claim"

// Keys returns the claim keys (namespace/name) the volumes of pod name.
func Keys(pod *corev1.Pod) []string {
	var keys []string
	for i := range pod.Spec.Volumes {
		if name := ClaimName(pod, &pod.Spec.Volumes[i]); name != "" {
			keys = append(keys, pod.Namespace+"/"+name)
		}
	}
	return keys
}

// ClaimName is the claim a volume of pod names, or "" for a volume of another kind.
func ClaimName(pod *corev1.Pod, v *corev1.Volume) string {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName
	case v.Ephemeral != nil:
		return ephemeral.VolumeClaimName(pod, v)
	}
	return ""
}

func index(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	return Keys(pod), nil
}

// AddIndex adds the index to a pod informer that does not have it yet; call it
// before the informer starts.
func AddIndex(inf cache.SharedIndexInformer) error {
	if _, ok := inf.GetIndexer().GetIndexers()[Index]; ok {
		return nil
	}
	if err := inf.AddIndexers(cache.Indexers{Index: index}); err != nil {
		return fmt.Errorf("add the pod index by claim: %w", err)
	}
	return nil
}

// Pods returns the pods of indexer (a pod informer's, with the index) whose volumes
// name the claim namespace/name.
func Pods(indexer cache.Indexer, namespace, name string) ([]*corev1.Pod, error) {
	objs, err := indexer.ByIndex(Index, namespace+"/"+name)
	if err != nil {
		return nil, fmt.Errorf("pods of claim %s/%s: %w", namespace, name, err)
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

// IsTerminated reports whether pod is done with its volumes as upstream's volume
// utilities judge it: it succeeded or failed, or it is being deleted and none of its
// containers runs.
func IsTerminated(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return true
	}
	return pod.DeletionTimestamp != nil && notRunning(pod.Status.InitContainerStatuses) &&
		notRunning(pod.Status.ContainerStatuses) && notRunning(pod.Status.EphemeralContainerStatuses)
}

// notRunning reports whether every container is waiting or terminated.
func notRunning(statuses []corev1.ContainerStatus) bool {
	for _, s := range statuses {
		if s.State.Terminated == nil && s.State.Waiting == nil {
			return false
		}
	}
	return true
}
