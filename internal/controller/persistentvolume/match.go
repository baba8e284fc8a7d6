package persistentvolume

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"
)

// vacEnabled is whether volumeAttributesClassName takes part in matching: the
// VolumeAttributesClass feature is off by default in upstream 1.32, so a claim that
// names one matches no volume and a volume that names one takes no claim.
const vacEnabled = false

func indexVolumeByClass(obj any) ([]string, error) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok {
		return nil, nil
	}
	return []string{volumeClass(pv)}, nil
}

func indexVolumeByClaim(obj any) ([]string, error) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok || pv.Spec.ClaimRef == nil {
		return nil, nil
	}
	return []string{pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name}, nil
}

func indexPendingClaimByClass(obj any) ([]string, error) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return nil, nil
	}
	if _, done := pvc.Annotations[storagehelpers.AnnBindCompleted]; done {
		return nil, nil
	}
	return []string{storagehelpers.GetPersistentVolumeClaimClass(pvc)}, nil
}

func volumeClass(pv *corev1.PersistentVolume) string {
	return storagehelpers.GetPersistentVolumeClass(pv)
}

// canonicalModes are the access modes in upstream's canonical order.
var canonicalModes = []corev1.PersistentVolumeAccessMode{
	corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOncePod,
}

// modeSet is a volume's access modes in canonical order, without repeats.
func modeSet(modes []corev1.PersistentVolumeAccessMode) []corev1.PersistentVolumeAccessMode {
	var out []corev1.PersistentVolumeAccessMode
	for _, m := range canonicalModes {
		for _, have := range modes {
			if have == m {
				out = append(out, m)
				break
			}
		}
	}
	return out
}

func modesKey(modes []corev1.PersistentVolumeAccessMode) string {
	parts := make([]string, len(modes))
	for i, m := range modes {
		parts[i] = string(m)
	}
	return strings.Join(parts, ",")
}

func containsAll(have, want []corev1.PersistentVolumeAccessMode) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if h == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// bestMatch returns the volume among candidates that claim should bind to, as
// upstream's index: the volumes are grouped by their set of access modes; among the
// groups that hold every mode the claim asks for, those with the fewest modes are
// tried first, and within a group the volume pre-bound to the claim wins, else the
// smallest Available one that fits (see storagehelpers.FindMatchingVolume). With
// delayBinding (WaitForFirstConsumer) only pre-bound volumes are returned: the
// scheduler binds the others.
func bestMatch(claim *corev1.PersistentVolumeClaim, candidates []*corev1.PersistentVolume, delayBinding bool) (*corev1.PersistentVolume, error) {
	groups := map[string][]*corev1.PersistentVolume{}
	sizes := map[string]int{}
	for _, pv := range candidates {
		modes := modeSet(pv.Spec.AccessModes)
		if !containsAll(modes, claim.Spec.AccessModes) {
			continue
		}
		k := modesKey(modes)
		groups[k] = append(groups[k], pv)
		sizes[k] = len(modes)
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if sizes[keys[i]] != sizes[keys[j]] {
			return sizes[keys[i]] < sizes[keys[j]]
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		vols := groups[k]
		// A fixed order, so that equal volumes are chosen the same way every time.
		sort.Slice(vols, func(i, j int) bool { return vols[i].Name < vols[j].Name })
		pv, err := storagehelpers.FindMatchingVolume(claim, vols, nil, nil, delayBinding, vacEnabled)
		if err != nil {
			return nil, err
		}
		if pv != nil {
			return pv, nil
		}
	}
	return nil, nil
}

// checkSatisfies returns why volume cannot serve the claim that asked for it by name
// (spec.volumeName), or nil; the reasons are upstream's.
func checkSatisfies(volume *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) error {
	if volume.DeletionTimestamp != nil {
		return fmt.Errorf("the volume is marked for deletion %q", volume.Name)
	}
	requested := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	capacity := volume.Spec.Capacity[corev1.ResourceStorage]
	if capacity.Value() < requested.Value() {
		return fmt.Errorf("requested PV is too small")
	}
	if volumeClass(volume) != storagehelpers.GetPersistentVolumeClaimClass(claim) {
		return fmt.Errorf("storageClassName does not match")
	}
	if ptr.Deref(claim.Spec.VolumeAttributesClassName, "") != "" || ptr.Deref(volume.Spec.VolumeAttributesClassName, "") != "" {
		return fmt.Errorf("volumeAttributesClassName is not supported when the feature-gate VolumeAttributesClass is disabled")
	}
	if storagehelpers.CheckVolumeModeMismatches(&claim.Spec, &volume.Spec) {
		return fmt.Errorf("incompatible volumeMode")
	}
	if !storagehelpers.CheckAccessModes(claim, volume) {
		return fmt.Errorf("incompatible accessMode")
	}
	return nil
}
