package validation

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The storage rules of upstream's pkg/apis/core/validation (PersistentVolumes and
// claims) and pkg/apis/storage/validation (classes, CSI objects, attachments): the
// required fields, supported values and immutability, with upstream's messages.

var (
	accessModes         = []string{string(corev1.ReadOnlyMany), string(corev1.ReadWriteMany), string(corev1.ReadWriteOnce), string(corev1.ReadWriteOncePod)}
	pvReclaimPolicies   = []string{string(corev1.PersistentVolumeReclaimDelete), string(corev1.PersistentVolumeReclaimRecycle), string(corev1.PersistentVolumeReclaimRetain)}
	classReclaimPolices = []string{string(corev1.PersistentVolumeReclaimDelete), string(corev1.PersistentVolumeReclaimRetain)}
	volumeModes         = []string{string(corev1.PersistentVolumeBlock), string(corev1.PersistentVolumeFilesystem)}
	bindingModes        = []string{string(storagev1.VolumeBindingImmediate), string(storagev1.VolumeBindingWaitForFirstConsumer)}
)

// ValidatePersistentVolume returns the field errors of a new PersistentVolume.
func ValidatePersistentVolume(pv *corev1.PersistentVolume) field.ErrorList {
	errs := validateMeta(&pv.ObjectMeta, false, path.ValidatePathSegmentName)
	return append(errs, validatePersistentVolumeSpec(&pv.Spec, field.NewPath("spec"))...)
}

// ValidatePersistentVolumeUpdate returns the field errors of an update of a
// PersistentVolume: its source and volume mode are immutable, as upstream.
func ValidatePersistentVolumeUpdate(pv, old *corev1.PersistentVolume) field.ErrorList {
	errs := validateMetaUpdate(&pv.ObjectMeta, &old.ObjectMeta)
	spec := field.NewPath("spec")
	errs = append(errs, validatePersistentVolumeSpec(&pv.Spec, spec)...)
	if !apiequality.Semantic.DeepEqual(pv.Spec.PersistentVolumeSource, old.Spec.PersistentVolumeSource) {
		diff := cmp.Diff(old.Spec.PersistentVolumeSource, pv.Spec.PersistentVolumeSource)
		errs = append(errs, field.Forbidden(spec.Child("persistentvolumesource"), "spec.persistentvolumesource is forbidden once the PV is created\n"+diff))
	}
	errs = append(errs, validateImmutable(pv.Spec.VolumeMode, old.Spec.VolumeMode, field.NewPath("volumeMode"))...)
	if old.Spec.NodeAffinity != nil {
		errs = append(errs, validateImmutable(pv.Spec.NodeAffinity, old.Spec.NodeAffinity, field.NewPath("nodeAffinity"))...)
	}
	return errs
}

// ValidatePersistentVolumeStatusUpdate returns the field errors of a status update.
func ValidatePersistentVolumeStatusUpdate(pv, old *corev1.PersistentVolume) field.ErrorList {
	return validateMetaUpdate(&pv.ObjectMeta, &old.ObjectMeta)
}

func validatePersistentVolumeSpec(spec *corev1.PersistentVolumeSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateAccessModes(spec.AccessModes, fld.Child("accessModes"), "")...)
	if len(spec.Capacity) == 0 {
		errs = append(errs, field.Required(fld.Child("capacity"), ""))
	}
	if _, ok := spec.Capacity[corev1.ResourceStorage]; !ok || len(spec.Capacity) > 1 {
		errs = append(errs, field.NotSupported(fld.Child("capacity"), spec.Capacity, []string{string(corev1.ResourceStorage)}))
	}
	for name, q := range spec.Capacity {
		if q.Sign() <= 0 {
			errs = append(errs, field.Invalid(fld.Child("capacity").Key(string(name)), q.String(), "must be greater than zero"))
		}
	}
	if spec.PersistentVolumeReclaimPolicy != "" {
		errs = append(errs, validateEnum(string(spec.PersistentVolumeReclaimPolicy), fld.Child("persistentVolumeReclaimPolicy"), pvReclaimPolicies)...)
	}
	if spec.StorageClassName != "" {
		errs = append(errs, validateName(apimachineryvalidation.NameIsDNSSubdomain, spec.StorageClassName, fld.Child("storageClassName"))...)
	}
	if spec.VolumeMode != nil {
		errs = append(errs, validateEnum(string(*spec.VolumeMode), fld.Child("volumeMode"), volumeModes)...)
	}
	if spec.NodeAffinity != nil {
		if spec.NodeAffinity.Required == nil {
			errs = append(errs, field.Required(fld.Child("nodeAffinity", "required"), "must specify required node constraints"))
		} else {
			errs = append(errs, validateNodeSelector(spec.NodeAffinity.Required, fld.Child("nodeAffinity", "required"))...)
		}
	}
	sources := volumeSourcesSet(reflect.ValueOf(spec.PersistentVolumeSource))
	switch {
	case len(sources) == 0:
		errs = append(errs, field.Required(fld, "must specify a volume type"))
	case len(sources) > 1:
		for _, s := range sources[1:] {
			errs = append(errs, field.Forbidden(fld.Child(s), "may not specify more than 1 volume type"))
		}
	}
	if hp := spec.HostPath; hp != nil {
		if hp.Path == "" {
			errs = append(errs, field.Required(fld.Child("hostPath", "path"), ""))
		} else if !strings.HasPrefix(hp.Path, "/") {
			// Upstream: a PV's hostPath must be absolute (and "/" is refused by the recycler only).
			errs = append(errs, field.Invalid(fld.Child("hostPath", "path"), hp.Path, "must be an absolute path"))
		}
	}
	if l := spec.Local; l != nil && l.Path == "" {
		errs = append(errs, field.Required(fld.Child("local", "path"), ""))
	}
	if c := spec.CSI; c != nil {
		if c.Driver == "" {
			errs = append(errs, field.Required(fld.Child("csi", "driver"), ""))
		}
		if c.VolumeHandle == "" {
			errs = append(errs, field.Required(fld.Child("csi", "volumeHandle"), ""))
		}
	}
	return errs
}

// volumeSourcesSet returns the JSON names of the set (non-nil) pointer fields of a
// volume source struct, in field order.
func volumeSourcesSet(v reflect.Value) []string {
	var set []string
	t := v.Type()
	for i := range t.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			set = append(set, name)
		}
	}
	return set
}

func validateAccessModes(modes []corev1.PersistentVolumeAccessMode, fld *field.Path, requiredMsg string) field.ErrorList {
	var errs field.ErrorList
	if len(modes) == 0 {
		errs = append(errs, field.Required(fld, requiredMsg))
	}
	once, other := false, false
	for _, m := range modes {
		errs = append(errs, validateEnum(string(m), fld, accessModes)...)
		switch m {
		case corev1.ReadWriteOncePod:
			once = true
		case corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany:
			other = true
		}
	}
	if once && other {
		errs = append(errs, field.Forbidden(fld, "may not use ReadWriteOncePod with other access modes"))
	}
	return errs
}

// validateEnum reports value as NotSupported unless it is one of supported.
func validateEnum(value string, fld *field.Path, supported []string) field.ErrorList {
	for _, s := range supported {
		if value == s {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(fld, value, supported)}
}

// ValidatePersistentVolumeClaim returns the field errors of a new claim.
func ValidatePersistentVolumeClaim(pvc *corev1.PersistentVolumeClaim) field.ErrorList {
	errs := validateMeta(&pvc.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain)
	return append(errs, validatePersistentVolumeClaimSpec(&pvc.Spec, field.NewPath("spec"))...)
}

func validatePersistentVolumeClaimSpec(spec *corev1.PersistentVolumeClaimSpec, fld *field.Path) field.ErrorList {
	errs := validateAccessModes(spec.AccessModes, fld.Child("accessModes"), "at least 1 access mode is required")
	if spec.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(spec.Selector, metav1validation.LabelSelectorValidationOptions{}, fld.Child("selector"))...)
	}
	storage, ok := spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		errs = append(errs, field.Required(fld.Child("resources").Key(string(corev1.ResourceStorage)), ""))
	} else if storage.Sign() <= 0 {
		errs = append(errs, field.Invalid(fld.Child("resources").Key(string(corev1.ResourceStorage)), storage.String(), "must be greater than zero"))
	}
	if spec.StorageClassName != nil && *spec.StorageClassName != "" {
		errs = append(errs, validateName(apimachineryvalidation.NameIsDNSSubdomain, *spec.StorageClassName, fld.Child("storageClassName"))...)
	}
	if spec.VolumeMode != nil {
		errs = append(errs, validateEnum(string(*spec.VolumeMode), fld.Child("volumeMode"), volumeModes)...)
	}
	return errs
}

// ValidatePersistentVolumeClaimUpdate returns the field errors of an update of a
// claim: the spec is immutable but for a growing storage request of a bound claim,
// and the volume name while none is set (the binder sets it), as upstream.
func ValidatePersistentVolumeClaimUpdate(pvc, old *corev1.PersistentVolumeClaim) field.ErrorList {
	errs := validateMetaUpdate(&pvc.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validatePersistentVolumeClaimSpec(&pvc.Spec, field.NewPath("spec"))...)
	newSpec, oldSpec := pvc.Spec.DeepCopy(), old.Spec.DeepCopy()
	if oldSpec.VolumeName == "" {
		newSpec.VolumeName = ""
	}
	if pvc.Status.Phase == corev1.ClaimBound && newSpec.Resources.Requests != nil {
		newSpec.Resources.Requests[corev1.ResourceStorage] = oldSpec.Resources.Requests[corev1.ResourceStorage]
	}
	if pvc.Status.Phase == corev1.ClaimBound {
		newSpec.VolumeAttributesClassName = oldSpec.VolumeAttributesClassName
	}
	if !apiequality.Semantic.DeepEqual(newSpec, oldSpec) {
		diff := cmp.Diff(oldSpec, newSpec)
		errs = append(errs, field.Forbidden(field.NewPath("spec"), fmt.Sprintf("spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n%v", diff)))
	}
	oldSize, newSize := old.Spec.Resources.Requests[corev1.ResourceStorage], pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if newSize.Cmp(oldSize) < 0 {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "resources", "requests", "storage"), "field can not be less than previous value"))
	}
	return append(errs, validateImmutable(pvc.Spec.VolumeMode, old.Spec.VolumeMode, field.NewPath("volumeMode"))...)
}

// ValidatePersistentVolumeClaimStatusUpdate returns the field errors of a status update.
func ValidatePersistentVolumeClaimStatusUpdate(pvc, old *corev1.PersistentVolumeClaim) field.ErrorList {
	errs := validateMetaUpdate(&pvc.ObjectMeta, &old.ObjectMeta)
	st := field.NewPath("status")
	for name, q := range pvc.Status.Capacity {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(st.Child("capacity").Key(string(name)), q.String(), "must be greater than or equal to 0"))
		}
	}
	return errs
}

// ValidateStorageClass returns the field errors of a new StorageClass.
func ValidateStorageClass(sc *storagev1.StorageClass) field.ErrorList {
	errs := validateMetaWith(&sc.ObjectMeta, false, apimachineryvalidation.NameIsDNSSubdomain, false)
	if sc.Provisioner == "" {
		errs = append(errs, field.Required(field.NewPath("provisioner"), ""))
	} else {
		errs = append(errs, qualifiedName(strings.ToLower(sc.Provisioner), field.NewPath("provisioner"))...)
	}
	for k := range sc.Parameters {
		if k == "" {
			errs = append(errs, field.Invalid(field.NewPath("parameters"), k, "field can not be empty."))
		}
	}
	if sc.ReclaimPolicy != nil && *sc.ReclaimPolicy != "" {
		errs = append(errs, validateEnum(string(*sc.ReclaimPolicy), field.NewPath("reclaimPolicy"), classReclaimPolices)...)
	}
	if sc.VolumeBindingMode == nil {
		errs = append(errs, field.Required(field.NewPath("volumeBindingMode"), ""))
	} else {
		errs = append(errs, validateEnum(string(*sc.VolumeBindingMode), field.NewPath("volumeBindingMode"), bindingModes)...)
	}
	return errs
}

// ValidateStorageClassUpdate returns the field errors of an update of a class: its
// parameters, provisioner, reclaim policy and binding mode are fixed, as upstream.
func ValidateStorageClassUpdate(sc, old *storagev1.StorageClass) field.ErrorList {
	errs := validateMetaUpdateWith(&sc.ObjectMeta, &old.ObjectMeta, false)
	if !reflect.DeepEqual(old.Parameters, sc.Parameters) {
		errs = append(errs, field.Forbidden(field.NewPath("parameters"), "updates to parameters are forbidden."))
	}
	if sc.Provisioner != old.Provisioner {
		errs = append(errs, field.Forbidden(field.NewPath("provisioner"), "updates to provisioner are forbidden."))
	}
	if !reflect.DeepEqual(sc.ReclaimPolicy, old.ReclaimPolicy) {
		errs = append(errs, field.Forbidden(field.NewPath("reclaimPolicy"), "updates to reclaimPolicy are forbidden."))
	}
	return append(errs, validateImmutable(sc.VolumeBindingMode, old.VolumeBindingMode, field.NewPath("volumeBindingMode"))...)
}

// qualifiedName reports the errors of a qualified name (a CSI driver, a provisioner).
func qualifiedName(name string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsQualifiedName(name) {
		errs = append(errs, field.Invalid(fld, name, msg))
	}
	return errs
}

// validateCSIDriverName is upstream's rule for a CSI driver's name: required, at most
// 63 characters, a DNS-1123 subdomain once lower-cased.
func validateCSIDriverName(name string, fld *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fld, "")}
	}
	var errs field.ErrorList
	if len(name) > 63 {
		errs = append(errs, field.TooLong(fld, "", 63))
	}
	for _, msg := range utilvalidation.IsDNS1123Subdomain(strings.ToLower(name)) {
		errs = append(errs, field.Invalid(fld, name, msg))
	}
	return errs
}

// ValidateCSIDriver returns the field errors of a new CSIDriver.
func ValidateCSIDriver(d *storagev1.CSIDriver) field.ErrorList {
	errs := validateCSIDriverName(d.Name, field.NewPath("name"))
	errs = append(errs, validateMetaWith(&d.ObjectMeta, false, apimachineryvalidation.NameIsDNSSubdomain, false)...)
	spec := field.NewPath("spec")
	for _, req := range []struct {
		set  bool
		name string
	}{{d.Spec.AttachRequired != nil, "attachRequired"}, {d.Spec.PodInfoOnMount != nil, "podInfoOnMount"},
		{d.Spec.StorageCapacity != nil, "storageCapacity"}, {d.Spec.RequiresRepublish != nil, "requiresRepublish"}} {
		if !req.set {
			errs = append(errs, field.Required(spec.Child(req.name), ""))
		}
	}
	if d.Spec.FSGroupPolicy != nil {
		errs = append(errs, validateEnum(string(*d.Spec.FSGroupPolicy), spec.Child("fsGroupPolicy"),
			[]string{string(storagev1.FileFSGroupPolicy), string(storagev1.NoneFSGroupPolicy), string(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy)})...)
	}
	for _, m := range d.Spec.VolumeLifecycleModes {
		errs = append(errs, validateEnum(string(m), spec.Child("volumeLifecycleModes"),
			[]string{string(storagev1.VolumeLifecycleEphemeral), string(storagev1.VolumeLifecyclePersistent)})...)
	}
	for i, tr := range d.Spec.TokenRequests {
		if tr.Audience == "" && i > 0 {
			errs = append(errs, field.Invalid(spec.Child("tokenRequests").Index(i).Child("audience"), tr.Audience, "may not be empty more than once"))
		}
	}
	return errs
}

// ValidateCSIDriverUpdate returns the field errors of an update of a CSIDriver:
// attachRequired, fsGroupPolicy and volumeLifecycleModes are fixed, as upstream 1.32.
func ValidateCSIDriverUpdate(d, old *storagev1.CSIDriver) field.ErrorList {
	errs := validateMetaUpdateWith(&d.ObjectMeta, &old.ObjectMeta, false)
	errs = append(errs, ValidateCSIDriver(d)...)
	spec := field.NewPath("spec")
	errs = append(errs, validateImmutable(d.Spec.AttachRequired, old.Spec.AttachRequired, spec.Child("attachRequired"))...)
	errs = append(errs, validateImmutable(d.Spec.FSGroupPolicy, old.Spec.FSGroupPolicy, spec.Child("fsGroupPolicy"))...)
	return append(errs, validateImmutable(d.Spec.VolumeLifecycleModes, old.Spec.VolumeLifecycleModes, spec.Child("volumeLifecycleModes"))...)
}

// ValidateCSINode returns the field errors of a new CSINode: unique, valid driver names.
func ValidateCSINode(n *storagev1.CSINode) field.ErrorList {
	errs := validateMetaWith(&n.ObjectMeta, false, apimachineryvalidation.NameIsDNSSubdomain, false)
	fld := field.NewPath("spec", "drivers")
	seen := map[string]bool{}
	for i, d := range n.Spec.Drivers {
		p := fld.Index(i)
		errs = append(errs, validateCSIDriverName(d.Name, p.Child("name"))...)
		if seen[d.Name] {
			errs = append(errs, field.Duplicate(p.Child("name"), d.Name))
		}
		seen[d.Name] = true
		if d.NodeID == "" {
			errs = append(errs, field.Required(p.Child("nodeID"), ""))
		} else if len(d.NodeID) > 192 {
			errs = append(errs, field.TooLong(p.Child("nodeID"), "", 192))
		}
		if d.Allocatable != nil && d.Allocatable.Count != nil && *d.Allocatable.Count < 0 {
			errs = append(errs, validateNonnegative(int64(*d.Allocatable.Count), p.Child("allocatable", "count"))...)
		}
	}
	return errs
}

// ValidateCSINodeUpdate returns the field errors of an update of a CSINode: a driver
// already listed keeps its node ID and topology keys.
func ValidateCSINodeUpdate(n, old *storagev1.CSINode) field.ErrorList {
	errs := validateMetaUpdateWith(&n.ObjectMeta, &old.ObjectMeta, false)
	errs = append(errs, ValidateCSINode(n)...)
	for _, od := range old.Spec.Drivers {
		for i, d := range n.Spec.Drivers {
			if d.Name != od.Name {
				continue
			}
			p := field.NewPath("spec", "drivers").Index(i)
			if d.NodeID != od.NodeID {
				errs = append(errs, field.Invalid(p.Child("nodeID"), d.NodeID, "field is immutable"))
			}
			if !reflect.DeepEqual(d.TopologyKeys, od.TopologyKeys) {
				errs = append(errs, field.Invalid(p.Child("topologyKeys"), d.TopologyKeys, "field is immutable"))
			}
		}
	}
	return errs
}

// ValidateCSIStorageCapacity returns the field errors of a new CSIStorageCapacity.
func ValidateCSIStorageCapacity(c *storagev1.CSIStorageCapacity) field.ErrorList {
	errs := validateMetaWith(&c.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain, false)
	if c.NodeTopology != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(c.NodeTopology, metav1validation.LabelSelectorValidationOptions{}, field.NewPath("nodeTopology"))...)
	}
	if c.StorageClassName == "" {
		errs = append(errs, field.Required(field.NewPath("storageClassName"), ""))
	} else {
		errs = append(errs, validateName(apimachineryvalidation.NameIsDNSSubdomain, c.StorageClassName, field.NewPath("storageClassName"))...)
	}
	if c.Capacity != nil && c.Capacity.Sign() < 0 {
		errs = append(errs, field.Invalid(field.NewPath("capacity"), c.Capacity.String(), "must be greater than or equal to 0"))
	}
	if c.MaximumVolumeSize != nil && c.MaximumVolumeSize.Sign() < 0 {
		errs = append(errs, field.Invalid(field.NewPath("maximumVolumeSize"), c.MaximumVolumeSize.String(), "must be greater than or equal to 0"))
	}
	return errs
}

// ValidateCSIStorageCapacityUpdate returns the field errors of an update: only the
// capacity and the maximum volume size may change, as upstream.
func ValidateCSIStorageCapacityUpdate(c, old *storagev1.CSIStorageCapacity) field.ErrorList {
	errs := validateMetaUpdateWith(&c.ObjectMeta, &old.ObjectMeta, false)
	errs = append(errs, ValidateCSIStorageCapacity(c)...)
	errs = append(errs, validateImmutable(c.NodeTopology, old.NodeTopology, field.NewPath("nodeTopology"))...)
	return append(errs, validateImmutable(c.StorageClassName, old.StorageClassName, field.NewPath("storageClassName"))...)
}

// ValidateVolumeAttachment returns the field errors of a new VolumeAttachment.
func ValidateVolumeAttachment(va *storagev1.VolumeAttachment) field.ErrorList {
	errs := validateMetaWith(&va.ObjectMeta, false, apimachineryvalidation.NameIsDNSSubdomain, false)
	spec := field.NewPath("spec")
	if va.Spec.Attacher == "" {
		errs = append(errs, field.Required(spec.Child("attacher"), ""))
	} else {
		errs = append(errs, validateCSIDriverName(va.Spec.Attacher, field.NewPath("spec.attacher"))...)
	}
	src := spec.Child("source")
	switch s := va.Spec.Source; {
	case s.InlineVolumeSpec == nil && s.PersistentVolumeName == nil:
		errs = append(errs, field.Required(src, "must specify exactly one of inlineVolumeSpec and persistentVolumeName"))
	case s.InlineVolumeSpec != nil && s.PersistentVolumeName != nil:
		errs = append(errs, field.Forbidden(src, "must specify exactly one of inlineVolumeSpec and persistentVolumeName"))
	case s.PersistentVolumeName != nil && *s.PersistentVolumeName == "":
		errs = append(errs, field.Required(src.Child("persistentVolumeName"), "must specify non empty persistentVolumeName"))
	}
	if va.Spec.NodeName == "" {
		errs = append(errs, field.Required(spec.Child("nodeName"), ""))
	} else {
		errs = append(errs, validateName(apimachineryvalidation.NameIsDNSSubdomain, va.Spec.NodeName, spec.Child("nodeName"))...)
	}
	return errs
}

// ValidateVolumeAttachmentUpdate returns the field errors of an update: the spec is fixed.
func ValidateVolumeAttachmentUpdate(va, old *storagev1.VolumeAttachment) field.ErrorList {
	errs := validateMetaUpdateWith(&va.ObjectMeta, &old.ObjectMeta, false)
	return append(errs, validateImmutable(va.Spec, old.Spec, field.NewPath("spec"))...)
}

// ValidateVolumeAttachmentStatusUpdate returns the field errors of a status update:
// attach metadata within upstream's size limit.
func ValidateVolumeAttachmentStatusUpdate(va, old *storagev1.VolumeAttachment) field.ErrorList {
	errs := validateMetaUpdateWith(&va.ObjectMeta, &old.ObjectMeta, false)
	size := 0
	for k, v := range va.Status.AttachmentMetadata {
		size += len(k) + len(v)
	}
	if size > 256*1024 {
		errs = append(errs, field.TooLong(field.NewPath("status", "attachmentMetadata"), "", 256*1024))
	}
	return errs
}
