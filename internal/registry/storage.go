package registry

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubette/kubette/internal/registry/defaults"
	"github.com/kubette/kubette/internal/registry/validation"
)

var storageV1 = schema.GroupVersion{Group: "storage.k8s.io", Version: "v1"}

// storageResources are the kinds of persistent storage: core/v1 PersistentVolumes and
// PersistentVolumeClaims, and storage.k8s.io/v1's classes, CSI drivers and nodes,
// capacities and attachments, with upstream's defaults and validation.
func storageResources() []*Resource {
	res := []*Resource{
		{
			GroupVersion: coreV1, Kind: "PersistentVolume", ListKind: "PersistentVolumeList",
			Plural: "persistentvolumes", Singular: "persistentvolume", ShortNames: []string{"pv"},
			StoragePrefix: "/registry/persistentvolumes", Subresources: []string{"status"},
			Strategy: storageStrategy(validation.ValidatePersistentVolume, validation.ValidatePersistentVolumeUpdate,
				validation.ValidatePersistentVolumeStatusUpdate),
			New:     func() runtime.Object { return &corev1.PersistentVolume{} },
			NewList: func() runtime.Object { return &corev1.PersistentVolumeList{} },
			Fields: func(obj runtime.Object) fields.Set {
				pv, _ := obj.(*corev1.PersistentVolume)
				if pv == nil {
					pv = &corev1.PersistentVolume{}
				}
				return fields.Set{"status.phase": string(pv.Status.Phase)}
			},
		},
		{
			GroupVersion: coreV1, Kind: "PersistentVolumeClaim", ListKind: "PersistentVolumeClaimList",
			Plural: "persistentvolumeclaims", Singular: "persistentvolumeclaim", ShortNames: []string{"pvc"}, Namespaced: true,
			StoragePrefix: "/registry/persistentvolumeclaims", Subresources: []string{"status"},
			Strategy: storageStrategy(validation.ValidatePersistentVolumeClaim, validation.ValidatePersistentVolumeClaimUpdate,
				validation.ValidatePersistentVolumeClaimStatusUpdate),
			New:     func() runtime.Object { return &corev1.PersistentVolumeClaim{} },
			NewList: func() runtime.Object { return &corev1.PersistentVolumeClaimList{} },
		},
		{
			GroupVersion: storageV1, Kind: "StorageClass", ListKind: "StorageClassList",
			Plural: "storageclasses", Singular: "storageclass", ShortNames: []string{"sc"},
			StoragePrefix: "/registry/storageclasses",
			Strategy:      storageStrategy(validation.ValidateStorageClass, validation.ValidateStorageClassUpdate, nil),
			New:           func() runtime.Object { return &storagev1.StorageClass{} },
			NewList:       func() runtime.Object { return &storagev1.StorageClassList{} },
		},
		{
			GroupVersion: storageV1, Kind: "CSIDriver", ListKind: "CSIDriverList",
			Plural: "csidrivers", Singular: "csidriver", StoragePrefix: "/registry/csidrivers",
			Strategy: storageStrategy(validation.ValidateCSIDriver, validation.ValidateCSIDriverUpdate, nil),
			New:      func() runtime.Object { return &storagev1.CSIDriver{} },
			NewList:  func() runtime.Object { return &storagev1.CSIDriverList{} },
		},
		{
			GroupVersion: storageV1, Kind: "CSINode", ListKind: "CSINodeList",
			Plural: "csinodes", Singular: "csinode", StoragePrefix: "/registry/csinodes",
			Strategy: storageStrategy(validation.ValidateCSINode, validation.ValidateCSINodeUpdate, nil),
			New:      func() runtime.Object { return &storagev1.CSINode{} },
			NewList:  func() runtime.Object { return &storagev1.CSINodeList{} },
		},
		{
			GroupVersion: storageV1, Kind: "CSIStorageCapacity", ListKind: "CSIStorageCapacityList",
			Plural: "csistoragecapacities", Singular: "csistoragecapacity", Namespaced: true,
			StoragePrefix: "/registry/csistoragecapacities",
			Strategy:      storageStrategy(validation.ValidateCSIStorageCapacity, validation.ValidateCSIStorageCapacityUpdate, nil),
			New:           func() runtime.Object { return &storagev1.CSIStorageCapacity{} },
			NewList:       func() runtime.Object { return &storagev1.CSIStorageCapacityList{} },
		},
		{
			GroupVersion: storageV1, Kind: "VolumeAttachment", ListKind: "VolumeAttachmentList",
			Plural: "volumeattachments", Singular: "volumeattachment",
			StoragePrefix: "/registry/volumeattachments", Subresources: []string{"status"},
			Strategy: storageStrategy(validation.ValidateVolumeAttachment, validation.ValidateVolumeAttachmentUpdate,
				validation.ValidateVolumeAttachmentStatusUpdate),
			New:     func() runtime.Object { return &storagev1.VolumeAttachment{} },
			NewList: func() runtime.Object { return &storagev1.VolumeAttachmentList{} },
		},
	}
	// A new volume starts Pending, stamped with the time it entered that phase, as
	// upstream's strategy does.
	res[0].Strategy.PrepareForCreate = func(obj runtime.Object) {
		ClearStatus(obj)
		if pv, ok := obj.(*corev1.PersistentVolume); ok {
			now := metav1.Now()
			pv.Status.Phase, pv.Status.LastPhaseTransitionTime = corev1.VolumePending, &now
		}
	}
	// A status update that changes the phase stamps the time of the change, unless
	// the writer set a new time itself; one that keeps the phase keeps the time, as
	// upstream's status strategy does.
	res[0].Strategy.Subresources = map[string]SubresourceStrategy{"status": {
		PrepareForUpdate: volumeStatusUpdate,
		ValidateUpdate:   res[0].Strategy.ValidateStatusUpdate,
		Verbs:            []string{"get", "update", "patch"},
	}}
	return res
}

// volumeStatusUpdate is what an update of a PersistentVolume's status writes.
func volumeStatusUpdate(obj, old runtime.Object) runtime.Object {
	// What every status update keeps (see Resource.PrepareForStatusUpdate).
	CopySpec(obj, old)
	pv, ok1 := obj.(*corev1.PersistentVolume)
	prev, ok2 := old.(*corev1.PersistentVolume)
	if !ok1 || !ok2 {
		return obj
	}
	switch {
	case pv.Status.Phase == prev.Status.Phase && pv.Status.LastPhaseTransitionTime == nil:
		pv.Status.LastPhaseTransitionTime = prev.Status.LastPhaseTransitionTime
	case pv.Status.Phase != prev.Status.Phase && (pv.Status.LastPhaseTransitionTime == nil ||
		pv.Status.LastPhaseTransitionTime.Equal(prev.Status.LastPhaseTransitionTime)):
		now := metav1.Now()
		pv.Status.LastPhaseTransitionTime = &now
	}
	pv.Labels, pv.OwnerReferences = prev.Labels, prev.OwnerReferences
	return pv
}

// storageStrategy is a storage kind's strategy: upstream's defaults, and its create,
// update and (for kinds with a status subresource) status update validation.
func storageStrategy[T runtime.Object](create func(T) field.ErrorList, update, status func(T, T) field.ErrorList) Strategy {
	s := Strategy{
		Default:  defaults.Apply,
		Validate: func(obj runtime.Object) field.ErrorList { return validateAs(obj, create) },
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return validateUpdateAs(obj, old, update)
		},
	}
	if status != nil {
		s.ValidateStatusUpdate = func(obj, old runtime.Object) field.ErrorList { return validateUpdateAs(obj, old, status) }
	}
	return s
}
