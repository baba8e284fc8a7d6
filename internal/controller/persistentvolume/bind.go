package persistentvolume

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// annPreResizeCapacity is the volume's capacity before an expansion that still
// waits for the file system to grow (set by resizers); a claim that binds to such a
// volume reports it as its capacity.
const annPreResizeCapacity = "volume.alpha.kubernetes.io/pre-resize-capacity"

// bind binds volume and claim to each other and marks both Bound, in upstream's
// order: the volume's claimRef, the volume's phase, the claim's volumeName and
// annotations, the claim's status. It stops at the first failed write; a later sync
// finishes the binding.
func (c *Controller) bind(ctx context.Context, volume *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) error {
	volume, err := c.bindVolumeToClaim(ctx, volume, claim)
	if err != nil {
		return err
	}
	if volume, err = c.updateVolumePhase(ctx, volume, corev1.VolumeBound, ""); err != nil {
		return err
	}
	if claim, err = c.bindClaimToVolume(ctx, claim, volume); err != nil {
		return err
	}
	_, err = c.updateClaimStatus(ctx, claim, corev1.ClaimBound, volume)
	return err
}

// bindVolumeToClaim writes the claimRef (with the claim's UID) and, when the
// controller chose the volume, the bound-by-controller annotation.
func (c *Controller) bindVolumeToClaim(ctx context.Context, volume *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolume, error) {
	clone, dirty, err := storagehelpers.GetBindVolumeToClaim(volume, claim)
	if err != nil {
		return nil, fmt.Errorf("bind volume %s to claim %s: %w", volume.Name, claimKey(claim), err)
	}
	if !dirty {
		return volume, nil
	}
	updated, err := c.client.CoreV1().PersistentVolumes().Update(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("bind volume %s to claim %s: %w", volume.Name, claimKey(claim), err)
	}
	c.volumes.Mutation(updated)
	c.log.Info("claim bound to volume", "claim", claimKey(claim), "volume", volume.Name)
	return updated, nil
}

// bindClaimToVolume writes the claim's volumeName (with bound-by-controller when the
// controller chose it) and bind-completed.
func (c *Controller) bindClaimToVolume(ctx context.Context, claim *corev1.PersistentVolumeClaim, volume *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, error) {
	clone := claim.DeepCopy()
	dirty := false
	if claim.Spec.VolumeName != volume.Name {
		clone.Spec.VolumeName = volume.Name
		if !metav1.HasAnnotation(clone.ObjectMeta, storagehelpers.AnnBoundByController) {
			metav1.SetMetaDataAnnotation(&clone.ObjectMeta, storagehelpers.AnnBoundByController, "yes")
		}
		dirty = true
	}
	if !metav1.HasAnnotation(clone.ObjectMeta, storagehelpers.AnnBindCompleted) {
		metav1.SetMetaDataAnnotation(&clone.ObjectMeta, storagehelpers.AnnBindCompleted, "yes")
		dirty = true
	}
	if !dirty {
		return claim, nil
	}
	updated, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("bind claim %s to volume %s: %w", claimKey(claim), volume.Name, err)
	}
	c.claims.Mutation(updated)
	return updated, nil
}

// updateClaimStatus sets the claim's phase and, from volume (nil: cleared), its
// status access modes and, when it becomes Bound, its capacity.
func (c *Controller) updateClaimStatus(ctx context.Context, claim *corev1.PersistentVolumeClaim, phase corev1.PersistentVolumeClaimPhase, volume *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, error) {
	clone := claim.DeepCopy()
	dirty := false
	if claim.Status.Phase != phase {
		clone.Status.Phase = phase
		dirty = true
	}
	if volume == nil {
		if claim.Status.AccessModes != nil || claim.Status.Capacity != nil || claim.Status.CurrentVolumeAttributesClassName != nil {
			clone.Status.AccessModes, clone.Status.Capacity, clone.Status.CurrentVolumeAttributesClassName = nil, nil, nil
			dirty = true
		}
	} else {
		if !apiequality.Semantic.DeepEqual(claim.Status.AccessModes, volume.Spec.AccessModes) {
			clone.Status.AccessModes = volume.Spec.AccessModes
			dirty = true
		}
		// The capacity is set when the claim becomes Bound only: a difference later
		// may be deliberate (a file system smaller than its block device).
		if claim.Status.Phase != phase {
			volCap, ok := volume.Spec.Capacity[corev1.ResourceStorage]
			if !ok {
				return nil, fmt.Errorf("PersistentVolume %q is without a storage capacity", volume.Name)
			}
			claimCap, has := claim.Status.Capacity[corev1.ResourceStorage]
			if pre, ok := volume.Annotations[annPreResizeCapacity]; ok {
				q, err := resource.ParseQuantity(pre)
				if err != nil {
					q = volCap
				}
				if clone.Status.Capacity == nil {
					clone.Status.Capacity = corev1.ResourceList{}
				}
				clone.Status.Capacity[corev1.ResourceStorage] = q
				dirty = true
			} else if !has || volCap.Cmp(claimCap) != 0 {
				clone.Status.Capacity = volume.Spec.Capacity.DeepCopy()
				dirty = true
			}
		}
	}
	if !dirty {
		return claim, nil
	}
	updated, err := c.client.CoreV1().PersistentVolumeClaims(clone.Namespace).UpdateStatus(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("set claim %s %s: %w", claimKey(claim), phase, err)
	}
	c.claims.Mutation(updated)
	return updated, nil
}

// updateClaimStatusWithEvent is updateClaimStatus that records the event when the
// phase changes (only then, not on every sync).
func (c *Controller) updateClaimStatusWithEvent(ctx context.Context, claim *corev1.PersistentVolumeClaim, phase corev1.PersistentVolumeClaimPhase, volume *corev1.PersistentVolume, eventType, reason, message string) (*corev1.PersistentVolumeClaim, error) {
	if claim.Status.Phase == phase {
		return claim, nil
	}
	updated, err := c.updateClaimStatus(ctx, claim, phase, volume)
	if err != nil {
		return nil, err
	}
	c.recorder.Event(updated, eventType, reason, message)
	return updated, nil
}

// updateVolumePhase sets the volume's phase and message; the API server stamps
// status.lastPhaseTransitionTime.
func (c *Controller) updateVolumePhase(ctx context.Context, volume *corev1.PersistentVolume, phase corev1.PersistentVolumePhase, message string) (*corev1.PersistentVolume, error) {
	if volume.Status.Phase == phase {
		return volume, nil
	}
	clone := volume.DeepCopy()
	clone.Status.Phase, clone.Status.Message = phase, message
	updated, err := c.client.CoreV1().PersistentVolumes().UpdateStatus(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("set volume %s %s: %w", volume.Name, phase, err)
	}
	c.volumes.Mutation(updated)
	c.log.Debug("volume entered phase", "volume", volume.Name, "phase", phase)
	return updated, nil
}

// updateVolumePhaseWithEvent is updateVolumePhase that records the event when the
// phase changes.
func (c *Controller) updateVolumePhaseWithEvent(ctx context.Context, volume *corev1.PersistentVolume, phase corev1.PersistentVolumePhase, eventType, reason, message string) (*corev1.PersistentVolume, error) {
	if volume.Status.Phase == phase {
		return volume, nil
	}
	updated, err := c.updateVolumePhase(ctx, volume, phase, message)
	if err != nil {
		return nil, err
	}
	c.recorder.Event(updated, eventType, reason, message)
	return updated, nil
}

// unbindVolume undoes a binding: a volume the controller bound loses its claimRef
// and annotation, a volume the user pre-bound keeps its claimRef without the UID.
// The volume becomes Available.
func (c *Controller) unbindVolume(ctx context.Context, volume *corev1.PersistentVolume) error {
	clone := volume.DeepCopy()
	if metav1.HasAnnotation(volume.ObjectMeta, storagehelpers.AnnBoundByController) {
		clone.Spec.ClaimRef = nil
		delete(clone.Annotations, storagehelpers.AnnBoundByController)
		if len(clone.Annotations) == 0 {
			clone.Annotations = nil
		}
	} else {
		clone.Spec.ClaimRef.UID = ""
	}
	updated, err := c.client.CoreV1().PersistentVolumes().Update(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("unbind volume %s: %w", volume.Name, err)
	}
	c.volumes.Mutation(updated)
	_, err = c.updateVolumePhase(ctx, updated, corev1.VolumeAvailable, "")
	return err
}
