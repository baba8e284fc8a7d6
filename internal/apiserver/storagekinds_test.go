package apiserver_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/testenv"
)

// TestStorageKinds drives PersistentVolumes, claims and the storage.k8s.io kinds
// through client-go as the storage conformance tests do: defaults on create, list by
// label, patch, status updates, the immutable fields refused with upstream's
// messages, delete and deletecollection.
func TestStorageKinds(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client
	labels := map[string]string{"suite": "storage"}

	pv, err := c.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "pv-", Labels: labels},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:       "manual",
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "example.csi", VolumeHandle: "h"}},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain || pv.Spec.VolumeMode == nil ||
		*pv.Spec.VolumeMode != corev1.PersistentVolumeFilesystem || pv.Status.Phase != corev1.VolumePending || pv.Status.LastPhaseTransitionTime == nil {
		t.Errorf("PV defaults: reclaim %q mode %v phase %q transition %v", pv.Spec.PersistentVolumeReclaimPolicy, pv.Spec.VolumeMode, pv.Status.Phase, pv.Status.LastPhaseTransitionTime)
	}
	pvc, err := c.CoreV1().PersistentVolumeClaims("default").Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To("manual"),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeMode == nil {
		t.Errorf("PVC defaults: phase %q mode %v", pvc.Status.Phase, pvc.Spec.VolumeMode)
	}
	// StorageObjectInUseProtection.
	if len(pv.Finalizers) != 1 || pv.Finalizers[0] != "kubernetes.io/pv-protection" {
		t.Errorf("PV finalizers %q", pv.Finalizers)
	}
	if len(pvc.Finalizers) != 1 || pvc.Finalizers[0] != "kubernetes.io/pvc-protection" {
		t.Errorf("PVC finalizers %q", pvc.Finalizers)
	}
	if l, err := c.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: "suite=storage"}); err != nil || len(l.Items) != 1 {
		t.Fatalf("PV list: %v %v", l, err)
	}
	if l, err := c.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{LabelSelector: "suite=storage"}); err != nil || len(l.Items) != 1 {
		t.Fatalf("PVC list across namespaces: %v %v", l, err)
	}
	if _, err := c.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"patched":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// Status: through the status subresource only.
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	if st, err := c.CoreV1().PersistentVolumeClaims("default").UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil || st.Status.Phase != corev1.ClaimBound {
		t.Fatalf("PVC status update: %v %v", st, err)
	}
	if st, err := c.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, []byte(`{"status":{"message":"hello"}}`), metav1.PatchOptions{}, "status"); err != nil || st.Status.Message != "hello" {
		t.Fatalf("PV status patch: %v %v", st, err)
	}
	// A claim's spec is immutable but for a growing request of a bound claim.
	_, err = c.CoreV1().PersistentVolumeClaims("default").Patch(ctx, "data", types.MergePatchType, []byte(`{"spec":{"accessModes":["ReadWriteMany"]}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims") {
		t.Errorf("changing a claim's access modes: %v", err)
	}
	if _, err := c.CoreV1().PersistentVolumeClaims("default").Patch(ctx, "data", types.MergePatchType, []byte(`{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("growing a bound claim: %v", err)
	}
	// Bad input: no volume source, no access modes.
	_, err = c.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.accessModes: Required value") || !strings.Contains(err.Error(), "spec: Required value: must specify a volume type") {
		t.Errorf("a PV without source and modes: %v", err)
	}

	sc, err := c.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast", Labels: labels},
		Provisioner: "example.com/fast", Parameters: map[string]string{"tier": "1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sc.ReclaimPolicy == nil || *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete || sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingImmediate {
		t.Errorf("StorageClass defaults: %v %v", sc.ReclaimPolicy, sc.VolumeBindingMode)
	}
	// The DefaultStorageClass admission: a claim naming no class gets the default one.
	if _, err := c.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard", Labels: labels,
		Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}}, Provisioner: "example.com/standard"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	classless, err := c.CoreV1().PersistentVolumeClaims("default").Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "classless", Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}, metav1.CreateOptions{})
	if err != nil || classless.Spec.StorageClassName == nil || *classless.Spec.StorageClassName != "standard" {
		t.Fatalf("a claim without a class: %v %v", classless, err)
	}
	sc.Parameters["tier"] = "2"
	if _, err := c.StorageV1().StorageClasses().Update(ctx, sc, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "updates to parameters are forbidden.") {
		t.Errorf("changing a class's parameters: %v", err)
	}

	d, err := c.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "example.csi", Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.AttachRequired == nil || !*d.Spec.AttachRequired || d.Spec.FSGroupPolicy == nil || *d.Spec.FSGroupPolicy != storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy ||
		len(d.Spec.VolumeLifecycleModes) != 1 || d.Spec.StorageCapacity == nil || d.Spec.RequiresRepublish == nil {
		t.Errorf("CSIDriver defaults: %+v", d.Spec)
	}
	if _, err := c.StorageV1().CSINodes().Create(ctx, &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: labels},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "example.csi", NodeID: "n1"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	capacity := resource.MustParse("10Gi")
	if _, err := c.StorageV1().CSIStorageCapacities("default").Create(ctx, &storagev1.CSIStorageCapacity{ObjectMeta: metav1.ObjectMeta{Name: "cap", Labels: labels},
		StorageClassName: "fast", Capacity: &capacity}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	va, err := c.StorageV1().VolumeAttachments().Create(ctx, &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va", Labels: labels},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "example.csi", NodeName: "node-1", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(pv.Name)}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	va.Status.Attached = true
	if st, err := c.StorageV1().VolumeAttachments().UpdateStatus(ctx, va, metav1.UpdateOptions{}); err != nil || !st.Status.Attached {
		t.Fatalf("VolumeAttachment status: %v %v", st, err)
	}
	va, _ = c.StorageV1().VolumeAttachments().Get(ctx, "va", metav1.GetOptions{})
	va.Spec.NodeName = "node-2"
	if _, err := c.StorageV1().VolumeAttachments().Update(ctx, va, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("changing an attachment's spec: %v", err)
	}

	// Deletion: one by one and by collection; nothing lingers.
	sel := metav1.ListOptions{LabelSelector: "suite=storage"}
	// In order: the claim by name first, then the rest of the claims by collection.
	for _, step := range []struct {
		what string
		del  func() error
	}{
		{"pvcs", func() error {
			return c.CoreV1().PersistentVolumeClaims("default").Delete(ctx, "data", metav1.DeleteOptions{})
		}},
		{"pvcs by collection", func() error {
			return c.CoreV1().PersistentVolumeClaims("default").DeleteCollection(ctx, metav1.DeleteOptions{}, sel)
		}},
		{"pvs", func() error { return c.CoreV1().PersistentVolumes().DeleteCollection(ctx, metav1.DeleteOptions{}, sel) }},
		{"scs", func() error { return c.StorageV1().StorageClasses().DeleteCollection(ctx, metav1.DeleteOptions{}, sel) }},
		{"csidrivers", func() error {
			return c.StorageV1().CSIDrivers().Delete(ctx, "example.csi", metav1.DeleteOptions{})
		}},
		{"csinodes", func() error { return c.StorageV1().CSINodes().DeleteCollection(ctx, metav1.DeleteOptions{}, sel) }},
		{"capacities", func() error {
			return c.StorageV1().CSIStorageCapacities("default").DeleteCollection(ctx, metav1.DeleteOptions{}, sel)
		}},
		{"attachments", func() error { return c.StorageV1().VolumeAttachments().Delete(ctx, "va", metav1.DeleteOptions{}) }},
	} {
		if err := step.del(); err != nil {
			t.Errorf("deleting %s: %v", step.what, err)
		}
	}
	// Volumes and claims wait for the protection controllers (not running here) to
	// remove their finalizers; without them they go.
	pvs, _ := c.CoreV1().PersistentVolumes().List(ctx, sel)
	for _, pv := range pvs.Items {
		if pv.DeletionTimestamp == nil {
			t.Errorf("PV %s not being deleted", pv.Name)
		}
		if _, err := c.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pvcs, _ := c.CoreV1().PersistentVolumeClaims("default").List(ctx, sel)
	if len(pvcs.Items) != 2 || len(pvs.Items) != 1 {
		t.Errorf("%d PVs and %d PVCs being deleted, want 1 and 2", len(pvs.Items), len(pvcs.Items))
	}
	for _, pvc := range pvcs.Items {
		if pvc.DeletionTimestamp == nil {
			t.Errorf("PVC %s not being deleted", pvc.Name)
		}
		if _, err := c.CoreV1().PersistentVolumeClaims("default").Patch(ctx, pvc.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if l, _ := c.CoreV1().PersistentVolumes().List(ctx, sel); len(l.Items) != 0 {
		t.Errorf("%d PVs left", len(l.Items))
	}
	if l, _ := c.CoreV1().PersistentVolumeClaims("default").List(ctx, sel); len(l.Items) != 0 {
		t.Errorf("%d PVCs left", len(l.Items))
	}
}
