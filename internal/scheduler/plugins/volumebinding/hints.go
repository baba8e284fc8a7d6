package volumebinding

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

// EventsToRegister lists the changes that may make a pod the plugin rejected
// schedulable, with upstream's queueing hints: a new or changed volume; a new
// or changed claim the pod uses; a new class, or a class whose
// allowedTopologies changed; a CSIDriver that stopped asking for capacity
// checks; a new capacity, or one whose limit grew. Node changes move the pod
// anyway (the scheduler's own node events). Upstream also watches CSINodes for
// CSI migration, which kubette does not do: a CSINode cannot change the outcome.
func (pl *VolumeBinding) EventsToRegister() []framework.ClusterEventWithHint {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.StorageClass, ActionType: framework.Add | framework.Update}, QueueingHintFn: classChangeMayHelp},
		{Event: framework.ClusterEvent{Resource: framework.PersistentVolumeClaim, ActionType: framework.Add | framework.Update}, QueueingHintFn: claimChangeMayHelp},
		{Event: framework.ClusterEvent{Resource: framework.PersistentVolume, ActionType: framework.Add | framework.Update}},
		{Event: framework.ClusterEvent{Resource: framework.CSIDriver, ActionType: framework.Update}, QueueingHintFn: driverChangeMayHelp},
		{Event: framework.ClusterEvent{Resource: framework.CSIStorageCapacity, ActionType: framework.Add | framework.Update}, QueueingHintFn: capacityChangeMayHelp},
	}
}

// claimChangeMayHelp: the claim is one of the pod's.
func claimChangeMayHelp(pod *corev1.Pod, _, newObj any) bool {
	pvc, ok := newObj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return true
	}
	if pvc.Namespace != pod.Namespace {
		return false
	}
	for i := range pod.Spec.Volumes {
		if name, _ := claimName(pod, &pod.Spec.Volumes[i]); name == pvc.Name {
			return true
		}
	}
	return false
}

// classChangeMayHelp: a new class, or new allowedTopologies (the binding mode
// and provisioner cannot change).
func classChangeMayHelp(_ *corev1.Pod, oldObj, newObj any) bool {
	oldSC, ok1 := oldObj.(*storagev1.StorageClass)
	newSC, ok2 := newObj.(*storagev1.StorageClass)
	if !ok1 || !ok2 {
		return true
	}
	return !apiequality.Semantic.DeepEqual(oldSC.AllowedTopologies, newSC.AllowedTopologies)
}

// driverChangeMayHelp: the driver no longer asks for capacity checks, so a
// claim refused for lack of storage may be provisioned.
func driverChangeMayHelp(_ *corev1.Pod, oldObj, newObj any) bool {
	oldD, ok1 := oldObj.(*storagev1.CSIDriver)
	newD, ok2 := newObj.(*storagev1.CSIDriver)
	if !ok1 || !ok2 {
		return true
	}
	wasChecked := oldD.Spec.StorageCapacity != nil && *oldD.Spec.StorageCapacity
	isChecked := newD.Spec.StorageCapacity != nil && *newD.Spec.StorageCapacity
	return wasChecked && !isChecked
}

// capacityChangeMayHelp: a new capacity, or a larger volume limit.
func capacityChangeMayHelp(_ *corev1.Pod, oldObj, newObj any) bool {
	newC, ok := newObj.(*storagev1.CSIStorageCapacity)
	if !ok {
		return true
	}
	oldC, ok := oldObj.(*storagev1.CSIStorageCapacity)
	if !ok {
		return true
	}
	newLimit, oldLimit := volumeLimit(newC), volumeLimit(oldC)
	return newLimit != nil && (oldLimit == nil || newLimit.Cmp(*oldLimit) > 0)
}
