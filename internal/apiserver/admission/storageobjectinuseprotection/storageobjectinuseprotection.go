// Package storageobjectinuseprotection is the StorageObjectInUseProtection
// admission plugin, as upstream's plugin/pkg/admission/storage/
// storageobjectinuseprotection: every new PersistentVolumeClaim gets the
// kubernetes.io/pvc-protection finalizer and every new PersistentVolume the
// kubernetes.io/pv-protection finalizer, so that deleting a claim a pod uses, or
// a volume a claim is bound to, waits until the pvc-protection and
// pv-protection controllers find it unused and remove the finalizer.
package storageobjectinuseprotection

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/admission"
)

// Name is the plugin's name, as upstream's.
const Name = "StorageObjectInUseProtection"

// The finalizers, as upstream's.
const (
	PVCProtectionFinalizer = "kubernetes.io/pvc-protection"
	PVProtectionFinalizer  = "kubernetes.io/pv-protection"
)

var (
	claims  = schema.GroupResource{Resource: "persistentvolumeclaims"}
	volumes = schema.GroupResource{Resource: "persistentvolumes"}
)

// Plugin adds the protection finalizers to new claims and volumes.
type Plugin struct{}

var _ admission.Mutator = Plugin{}

// Admit adds the finalizer to a new claim or volume that lacks it.
func (Plugin) Admit(_ context.Context, a *admission.Attributes) error {
	if a.Operation != admission.Create || a.Subresource != "" {
		return nil
	}
	switch a.Resource.GroupResource() {
	case claims:
		if pvc, ok := a.Object.(*corev1.PersistentVolumeClaim); ok && !slices.Contains(pvc.Finalizers, PVCProtectionFinalizer) {
			pvc.Finalizers = append(pvc.Finalizers, PVCProtectionFinalizer)
		}
	case volumes:
		if pv, ok := a.Object.(*corev1.PersistentVolume); ok && !slices.Contains(pv.Finalizers, PVProtectionFinalizer) {
			pv.Finalizers = append(pv.Finalizers, PVProtectionFinalizer)
		}
	}
	return nil
}
