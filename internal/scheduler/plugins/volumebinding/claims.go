package volumebinding

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/storage/ephemeral"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// The plugin's rejections, exactly as upstream's.
const (
	// ErrReasonUnboundImmediate is PreFilter's for a pod with an unbound Immediate claim.
	ErrReasonUnboundImmediate = "pod has unbound immediate PersistentVolumeClaims"
	// ErrReasonBindConflict: an unbound claim has no volume and no provisioner for the node.
	ErrReasonBindConflict = "node(s) didn't find available persistent volumes to bind"
	// ErrReasonNodeConflict: a bound claim's volume does not accept the node.
	ErrReasonNodeConflict = "node(s) had volume node affinity conflict"
	// ErrReasonNotEnoughSpace: no CSIStorageCapacity reachable from the node holds the claim.
	ErrReasonNotEnoughSpace = "node(s) did not have enough free storage"
	// ErrReasonPVNotExist: a bound claim's volume does not exist.
	ErrReasonPVNotExist = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
)

// podClaims are a pod's claims by what scheduling has to do for them.
type podClaims struct {
	// bound are fully bound (a volume name and the bind-completed annotation).
	bound []*corev1.PersistentVolumeClaim
	// unboundDelay are unbound claims of WaitForFirstConsumer classes: the
	// scheduler picks their volume or node.
	unboundDelay []*corev1.PersistentVolumeClaim
	// unboundImmediate are unbound claims the binder should have bound
	// (Immediate classes, and claims that name their volume).
	unboundImmediate []*corev1.PersistentVolumeClaim
	// volumesByClass are the volumes of the classes of unboundDelay, as the
	// plugin's caches saw them at PreFilter.
	volumesByClass map[string][]*corev1.PersistentVolume
}

// claimName is the claim a volume of pod uses ("" for another kind of volume)
// and whether it is a generic ephemeral volume's.
func claimName(pod *corev1.Pod, v *corev1.Volume) (string, bool) {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName, false
	case v.Ephemeral != nil:
		return ephemeral.VolumeClaimName(pod, v), true
	}
	return "", false
}

// checkPodClaims reports whether the pod uses claims, and refuses it when one is
// missing, lost, being deleted, or (ephemeral) not made for the pod.
func (pl *VolumeBinding) checkPodClaims(pod *corev1.Pod) (bool, error) {
	has := false
	for i := range pod.Spec.Volumes {
		name, isEphemeral := claimName(pod, &pod.Spec.Volumes[i])
		if name == "" {
			continue
		}
		has = true
		pvc, err := pl.pvcLister.PersistentVolumeClaims(pod.Namespace).Get(name)
		if err != nil {
			if isEphemeral && apierrors.IsNotFound(err) {
				return true, fmt.Errorf("waiting for ephemeral volume controller to create the persistentvolumeclaim %q", name)
			}
			return true, err
		}
		if pvc.Status.Phase == corev1.ClaimLost {
			return true, fmt.Errorf("persistentvolumeclaim %q bound to non-existent persistentvolume %q", pvc.Name, pvc.Spec.VolumeName)
		}
		if pvc.DeletionTimestamp != nil {
			return true, fmt.Errorf("persistentvolumeclaim %q is being deleted", pvc.Name)
		}
		if isEphemeral {
			if err := ephemeral.VolumeIsForPod(pod, pvc); err != nil {
				return true, err
			}
		}
	}
	return has, nil
}

// fullyBound reports whether the binder finished binding the claim.
func fullyBound(pvc *corev1.PersistentVolumeClaim) bool {
	return pvc.Spec.VolumeName != "" && metav1.HasAnnotation(pvc.ObjectMeta, storagehelpers.AnnBindCompleted)
}

// volumeClaim returns the latest claim a volume of pod uses (nil for a volume of
// another kind) and whether it is fully bound.
func (pl *VolumeBinding) volumeClaim(pod *corev1.Pod, v *corev1.Volume) (*corev1.PersistentVolumeClaim, bool, error) {
	name, isEphemeral := claimName(pod, v)
	if name == "" {
		return nil, true, nil
	}
	key := pod.Namespace + "/" + name
	pvc, err := pl.pvcs.get(key)
	if err != nil {
		return nil, false, fmt.Errorf("error getting PVC %q: %w", key, err)
	}
	if isEphemeral {
		if err := ephemeral.VolumeIsForPod(pod, pvc); err != nil {
			return nil, false, err
		}
	}
	return pvc, fullyBound(pvc), nil
}

// podVolumeClaims sorts the pod's claims (see podClaims).
func (pl *VolumeBinding) podVolumeClaims(pod *corev1.Pod) (*podClaims, error) {
	out := &podClaims{volumesByClass: map[string][]*corev1.PersistentVolume{}}
	for i := range pod.Spec.Volumes {
		pvc, bound, err := pl.volumeClaim(pod, &pod.Spec.Volumes[i])
		if err != nil {
			return nil, err
		}
		switch {
		case pvc == nil:
		case bound:
			out.bound = append(out.bound, pvc)
		default:
			delay, err := storagehelpers.IsDelayBindingMode(pvc, pl.classLister)
			if err != nil {
				return nil, err
			}
			if delay && pvc.Spec.VolumeName == "" {
				out.unboundDelay = append(out.unboundDelay, pvc)
			} else {
				out.unboundImmediate = append(out.unboundImmediate, pvc)
			}
		}
	}
	for _, pvc := range out.unboundDelay {
		class := storagehelpers.GetPersistentVolumeClaimClass(pvc)
		if _, ok := out.volumesByClass[class]; ok {
			continue
		}
		out.volumesByClass[class] = pl.pvs.list(func(pv *corev1.PersistentVolume) bool {
			return storagehelpers.GetPersistentVolumeClass(pv) == class
		})
	}
	return out, nil
}

// arePodVolumesBound reports whether every claim of the pod is fully bound.
func (pl *VolumeBinding) arePodVolumesBound(pod *corev1.Pod) bool {
	for i := range pod.Spec.Volumes {
		if _, bound, err := pl.volumeClaim(pod, &pod.Spec.Volumes[i]); err != nil || !bound {
			return false
		}
	}
	return true
}
