package defaults

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// setPersistentVolume: Retain, Filesystem, a Pending phase, and an unset hostPath type
// as upstream's SetDefaults_PersistentVolume and SetDefaults_HostPathVolumeSource.
func setPersistentVolume(pv *corev1.PersistentVolume) {
	if pv.Spec.PersistentVolumeReclaimPolicy == "" {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	}
	if pv.Spec.VolumeMode == nil {
		m := corev1.PersistentVolumeFilesystem
		pv.Spec.VolumeMode = &m
	}
	if pv.Status.Phase == "" {
		pv.Status.Phase = corev1.VolumePending
	}
	if hp := pv.Spec.HostPath; hp != nil && hp.Type == nil {
		t := corev1.HostPathUnset
		hp.Type = &t
	}
}

// setPersistentVolumeClaim: Filesystem and a Pending phase, as upstream's
// SetDefaults_PersistentVolumeClaim and SetDefaults_PersistentVolumeClaimSpec.
func setPersistentVolumeClaim(pvc *corev1.PersistentVolumeClaim) {
	if pvc.Spec.VolumeMode == nil {
		m := corev1.PersistentVolumeFilesystem
		pvc.Spec.VolumeMode = &m
	}
	if pvc.Status.Phase == "" {
		pvc.Status.Phase = corev1.ClaimPending
	}
}

// setStorageClass: Delete and Immediate, as upstream's SetDefaults_StorageClass.
func setStorageClass(sc *storagev1.StorageClass) {
	if sc.ReclaimPolicy == nil {
		p := corev1.PersistentVolumeReclaimDelete
		sc.ReclaimPolicy = &p
	}
	if sc.VolumeBindingMode == nil {
		m := storagev1.VolumeBindingImmediate
		sc.VolumeBindingMode = &m
	}
}

// setCSIDriver: upstream's SetDefaults_CSIDriver (storage/v1) with the GA features of
// 1.32 (storage capacity, fsGroup policy, SELinux mount off).
func setCSIDriver(d *storagev1.CSIDriver) {
	yes, no := true, false
	if d.Spec.AttachRequired == nil {
		d.Spec.AttachRequired = &yes
	}
	if d.Spec.PodInfoOnMount == nil {
		d.Spec.PodInfoOnMount = &no
	}
	if d.Spec.StorageCapacity == nil {
		d.Spec.StorageCapacity = &no
	}
	if d.Spec.FSGroupPolicy == nil {
		p := storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy
		d.Spec.FSGroupPolicy = &p
	}
	if len(d.Spec.VolumeLifecycleModes) == 0 {
		d.Spec.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
	}
	if d.Spec.RequiresRepublish == nil {
		d.Spec.RequiresRepublish = &no
	}
	if d.Spec.SELinuxMount == nil {
		d.Spec.SELinuxMount = &no
	}
}
