package printers

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// accessModesString is kubectl's short form of access modes (RWO,ROX,RWX,RWOP), in
// upstream's fixed order whatever the order given.
func accessModesString(modes []corev1.PersistentVolumeAccessMode) string {
	has := func(m corev1.PersistentVolumeAccessMode) bool {
		for _, x := range modes {
			if x == m {
				return true
			}
		}
		return false
	}
	var out []string
	for _, m := range []struct {
		mode  corev1.PersistentVolumeAccessMode
		short string
	}{{corev1.ReadWriteOnce, "RWO"}, {corev1.ReadOnlyMany, "ROX"}, {corev1.ReadWriteMany, "RWX"}, {corev1.ReadWriteOncePod, "RWOP"}} {
		if has(m.mode) {
			out = append(out, m.short)
		}
	}
	return strings.Join(out, ",")
}

// unsetOr is s, or "<unset>" for nil, as upstream prints optional class names and modes.
func unsetOr[T ~string](s *T) string {
	if s == nil {
		return "<unset>"
	}
	return string(*s)
}

// pvClass is a volume's or claim's class: the field, else the beta annotation.
func pvClass(field string, annotations map[string]string) string {
	if field != "" {
		return field
	}
	return annotations[corev1.BetaStorageClassAnnotation]
}

// persistentVolumePrinter prints PersistentVolumes: NAME CAPACITY ACCESS MODES RECLAIM
// POLICY STATUS CLAIM STORAGECLASS VOLUMEATTRIBUTESCLASS REASON AGE (VOLUMEMODE wide), as upstream 1.32.
func persistentVolumePrinter() Printer {
	spec, status := corev1.PersistentVolumeSpec{}.SwaggerDoc(), corev1.PersistentVolumeStatus{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Capacity", "string", 0, spec["capacity"]),
			column("Access Modes", "string", 0, spec["accessModes"]),
			column("Reclaim Policy", "string", 0, spec["persistentVolumeReclaimPolicy"]),
			column("Status", "string", 0, status["phase"]),
			column("Claim", "string", 0, spec["claimRef"]),
			column("StorageClass", "string", 0, "StorageClass of the pv"),
			column("VolumeAttributesClass", "string", 0, "VolumeAttributesClass of the pv"),
			column("Reason", "string", 0, status["reason"]),
			ageColumn(),
			column("VolumeMode", "string", 1, spec["volumeMode"]),
		},
		Row: rowFor(func(pv *corev1.PersistentVolume, now time.Time) []interface{} {
			claim := ""
			if ref := pv.Spec.ClaimRef; ref != nil {
				claim = ref.Namespace + "/" + ref.Name
			}
			size := pv.Spec.Capacity[corev1.ResourceStorage]
			phase := string(pv.Status.Phase)
			if pv.DeletionTimestamp != nil {
				phase = "Terminating"
			}
			return []interface{}{pv.Name, size.String(), accessModesString(pv.Spec.AccessModes), string(pv.Spec.PersistentVolumeReclaimPolicy),
				phase, claim, pvClass(pv.Spec.StorageClassName, pv.Annotations), unsetOr(pv.Spec.VolumeAttributesClassName),
				pv.Status.Reason, translateTimestampSince(pv.CreationTimestamp, now), unsetOr(pv.Spec.VolumeMode)}
		}),
	}
}

// persistentVolumeClaimPrinter prints claims: NAME STATUS VOLUME CAPACITY ACCESS MODES
// STORAGECLASS VOLUMEATTRIBUTESCLASS AGE (VOLUMEMODE wide), as upstream 1.32: capacity and
// access modes are those of the bound volume (empty until bound).
func persistentVolumeClaimPrinter() Printer {
	spec, status := corev1.PersistentVolumeClaimSpec{}.SwaggerDoc(), corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Status", "string", 0, status["phase"]),
			column("Volume", "string", 0, spec["volumeName"]),
			column("Capacity", "string", 0, status["capacity"]),
			column("Access Modes", "string", 0, status["accessModes"]),
			column("StorageClass", "string", 0, "StorageClass of the pvc"),
			column("VolumeAttributesClass", "string", 0, "VolumeAttributesClass of the pvc"),
			ageColumn(),
			column("VolumeMode", "string", 1, spec["volumeMode"]),
		},
		Row: rowFor(func(pvc *corev1.PersistentVolumeClaim, now time.Time) []interface{} {
			phase := string(pvc.Status.Phase)
			if pvc.DeletionTimestamp != nil {
				phase = "Terminating"
			}
			capacity, modes := "", ""
			if pvc.Spec.VolumeName != "" {
				modes = accessModesString(pvc.Status.AccessModes)
				if q, ok := pvc.Status.Capacity[corev1.ResourceStorage]; ok {
					capacity = q.String()
				}
			}
			class := ""
			if pvc.Spec.StorageClassName != nil {
				class = *pvc.Spec.StorageClassName
			}
			return []interface{}{pvc.Name, phase, pvc.Spec.VolumeName, capacity, modes, pvClass(class, pvc.Annotations),
				unsetOr(pvc.Spec.VolumeAttributesClassName), translateTimestampSince(pvc.CreationTimestamp, now), unsetOr(pvc.Spec.VolumeMode)}
		}),
	}
}

// storageClassPrinter prints StorageClasses: NAME (marked "(default)") PROVISIONER
// RECLAIMPOLICY VOLUMEBINDINGMODE ALLOWVOLUMEEXPANSION AGE, as upstream 1.32.
func storageClassPrinter() Printer {
	doc := storagev1.StorageClass{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Provisioner", "string", 0, doc["provisioner"]),
			column("ReclaimPolicy", "string", 0, doc["reclaimPolicy"]),
			column("VolumeBindingMode", "string", 0, doc["volumeBindingMode"]),
			column("AllowVolumeExpansion", "string", 0, doc["allowVolumeExpansion"]),
			ageColumn(),
		},
		Row: rowFor(func(sc *storagev1.StorageClass, now time.Time) []interface{} {
			name := sc.Name
			if sc.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" ||
				sc.Annotations["storageclass.beta.kubernetes.io/is-default-class"] == "true" {
				name += " (default)"
			}
			reclaim, binding := string(corev1.PersistentVolumeReclaimDelete), string(storagev1.VolumeBindingImmediate)
			if sc.ReclaimPolicy != nil {
				reclaim = string(*sc.ReclaimPolicy)
			}
			if sc.VolumeBindingMode != nil {
				binding = string(*sc.VolumeBindingMode)
			}
			expand := sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion
			return []interface{}{name, sc.Provisioner, reclaim, binding, expand, translateTimestampSince(sc.CreationTimestamp, now)}
		}),
	}
}

// volumeAttachmentPrinter prints VolumeAttachments: NAME ATTACHER PV NODE ATTACHED AGE.
func volumeAttachmentPrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			{Name: "Attacher", Type: "string", Format: "name", Description: storagev1.VolumeAttachmentSpec{}.SwaggerDoc()["attacher"]},
			column("PV", "string", 0, storagev1.VolumeAttachmentSource{}.SwaggerDoc()["persistentVolumeName"]),
			column("Node", "string", 0, storagev1.VolumeAttachmentSpec{}.SwaggerDoc()["nodeName"]),
			column("Attached", "boolean", 0, storagev1.VolumeAttachmentStatus{}.SwaggerDoc()["attached"]),
			ageColumn(),
		},
		Row: rowFor(func(va *storagev1.VolumeAttachment, now time.Time) []interface{} {
			pv := ""
			if va.Spec.Source.PersistentVolumeName != nil {
				pv = *va.Spec.Source.PersistentVolumeName
			}
			return []interface{}{va.Name, va.Spec.Attacher, pv, va.Spec.NodeName, va.Status.Attached, translateTimestampSince(va.CreationTimestamp, now)}
		}),
	}
}

// csiNodePrinter prints CSINodes: NAME DRIVERS (their count) AGE.
func csiNodePrinter() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Drivers", "integer", 0, "Drivers indicates the number of CSI drivers registered on the node"),
			ageColumn(),
		},
		Row: rowFor(func(n *storagev1.CSINode, now time.Time) []interface{} {
			return []interface{}{n.Name, int64(len(n.Spec.Drivers)), translateTimestampSince(n.CreationTimestamp, now)}
		}),
	}
}

// csiStorageCapacityPrinter prints CSIStorageCapacities: NAME STORAGECLASSNAME CAPACITY AGE.
func csiStorageCapacityPrinter() Printer {
	doc := storagev1.CSIStorageCapacity{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("StorageClassName", "string", 0, doc["storageClassName"]),
			column("Capacity", "string", 0, doc["capacity"]),
			ageColumn(),
		},
		Row: rowFor(func(c *storagev1.CSIStorageCapacity, now time.Time) []interface{} {
			capacity := "<unset>"
			if c.Capacity != nil {
				capacity = c.Capacity.String()
			}
			return []interface{}{c.Name, c.StorageClassName, capacity, translateTimestampSince(c.CreationTimestamp, now)}
		}),
	}
}
