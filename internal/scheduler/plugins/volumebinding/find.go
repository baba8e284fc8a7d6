package volumebinding

import (
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// binding is a static volume chosen for an unbound claim.
type binding struct {
	pvc *corev1.PersistentVolumeClaim
	pv  *corev1.PersistentVolume
}

// podVolumes is what the pod's unbound claims get on one node.
type podVolumes struct {
	// static are the claims bound to existing volumes.
	static []binding
	// provision are the claims whose provisioner makes a volume on the node.
	provision []*corev1.PersistentVolumeClaim
}

// findPodVolumes finds, for the node, the volumes and provisioning of the pod's
// unbound claims, or the reasons the node does not do (in upstream's order).
func (pl *VolumeBinding) findPodVolumes(claims *podClaims, node *corev1.Node) (*podVolumes, []string, error) {
	out := &podVolumes{}
	boundSatisfied, boundFound := true, true
	unboundSatisfied, enoughSpace := true, true
	var err error
	if len(claims.bound) > 0 {
		if boundSatisfied, boundFound, err = pl.checkBoundClaims(claims.bound, node); err != nil {
			return nil, nil, err
		}
	}
	if len(claims.unboundDelay) > 0 {
		unboundSatisfied, enoughSpace, err = pl.findUnbound(claims, node, out)
		if err != nil {
			return nil, nil, err
		}
	}
	var reasons []string
	if !boundSatisfied {
		reasons = append(reasons, ErrReasonNodeConflict)
	}
	if !unboundSatisfied {
		reasons = append(reasons, ErrReasonBindConflict)
	}
	if !enoughSpace {
		reasons = append(reasons, ErrReasonNotEnoughSpace)
	}
	if !boundFound {
		reasons = append(reasons, ErrReasonPVNotExist)
	}
	return out, reasons, nil
}

// checkBoundClaims reports whether the volumes of bound claims accept the node,
// and whether they all exist.
func (pl *VolumeBinding) checkBoundClaims(claims []*corev1.PersistentVolumeClaim, node *corev1.Node) (satisfied, found bool, err error) {
	for _, pvc := range claims {
		pv, err := pl.pvs.get(pvc.Spec.VolumeName)
		if err != nil {
			var nf *notFoundError
			if errors.As(err, &nf) {
				err = nil
			}
			return true, false, err
		}
		if storagehelpers.CheckNodeAffinity(pv, node.Labels) != nil {
			return false, true, nil
		}
	}
	return true, true, nil
}

// findUnbound fills out with the volumes and provisioning of the pod's unbound
// WaitForFirstConsumer claims on the node; it reports whether they can all be
// met and whether the storage to provision is there.
func (pl *VolumeBinding) findUnbound(claims *podClaims, node *corev1.Node, out *podVolumes) (satisfied, enoughSpace bool, err error) {
	var toMatch, toProvision []*corev1.PersistentVolumeClaim
	for _, pvc := range claims.unboundDelay {
		selected, ok := pvc.Annotations[storagehelpers.AnnSelectedNode]
		if !ok {
			toMatch = append(toMatch, pvc)
			continue
		}
		if selected != node.Name {
			// Provisioning for another node has started.
			return false, true, nil
		}
		toProvision = append(toProvision, pvc)
	}
	satisfied, enoughSpace = true, true
	if len(toMatch) > 0 {
		var unmatched []*corev1.PersistentVolumeClaim
		satisfied, out.static, unmatched, err = findMatchingVolumes(toMatch, claims.volumesByClass, node)
		if err != nil {
			return false, false, err
		}
		toProvision = append(toProvision, unmatched...)
	}
	if len(toProvision) > 0 {
		satisfied, enoughSpace, out.provision, err = pl.checkVolumeProvisions(toProvision, node)
		if err != nil {
			return false, false, err
		}
	}
	return satisfied, enoughSpace, nil
}

// findMatchingVolumes gives each claim, smallest request first, the smallest
// fitting volume reachable from the node that no other claim of the pod took;
// the claims without one are returned for provisioning.
func findMatchingVolumes(claims []*corev1.PersistentVolumeClaim, volumesByClass map[string][]*corev1.PersistentVolume, node *corev1.Node) (bool, []binding, []*corev1.PersistentVolumeClaim, error) {
	sorted := slices.Clone(claims)
	slices.SortStableFunc(sorted, func(a, b *corev1.PersistentVolumeClaim) int {
		qa, qb := a.Spec.Resources.Requests[corev1.ResourceStorage], b.Spec.Resources.Requests[corev1.ResourceStorage]
		return qa.Cmp(qb)
	})
	chosen := map[string]*corev1.PersistentVolume{}
	var bindings []binding
	var unmatched []*corev1.PersistentVolumeClaim
	all := true
	for _, pvc := range sorted {
		class := storagehelpers.GetPersistentVolumeClaimClass(pvc)
		// VolumeAttributesClasses are off in 1.32.
		pv, err := storagehelpers.FindMatchingVolume(pvc, volumesByClass[class], node, chosen, true, false)
		if err != nil {
			return false, nil, nil, err
		}
		if pv == nil {
			unmatched = append(unmatched, pvc)
			all = false
			continue
		}
		chosen[pv.Name] = pv
		bindings = append(bindings, binding{pvc: pvc, pv: pv})
	}
	return all, bindings, unmatched, nil
}

// checkVolumeProvisions reports whether every claim's class can provision a
// volume reachable from the node, and whether there is room for it.
func (pl *VolumeBinding) checkVolumeProvisions(claims []*corev1.PersistentVolumeClaim, node *corev1.Node) (satisfied, enoughSpace bool, provision []*corev1.PersistentVolumeClaim, err error) {
	for _, pvc := range claims {
		className := storagehelpers.GetPersistentVolumeClaimClass(pvc)
		if className == "" {
			return false, false, nil, fmt.Errorf("no class for claim %q", pvc.Namespace+"/"+pvc.Name)
		}
		class, err := pl.classLister.Get(className)
		if err != nil {
			return false, false, nil, fmt.Errorf("failed to find storage class %q", className)
		}
		if class.Provisioner == "" || class.Provisioner == storagehelpers.NotSupportedProvisioner {
			return false, true, nil, nil
		}
		if !matchTopologySelectorTerms(class.AllowedTopologies, node.Labels) {
			return false, true, nil, nil
		}
		enough, err := pl.hasEnoughCapacity(class, pvc, node)
		if err != nil {
			return false, false, nil, err
		}
		if !enough {
			return true, false, nil, nil
		}
		provision = append(provision, pvc)
	}
	return true, true, provision, nil
}

// hasEnoughCapacity reports whether a CSIStorageCapacity of the class reachable
// from the node holds the claim's request. Only CSI drivers that ask for it
// (spec.storageCapacity) are checked, as upstream.
func (pl *VolumeBinding) hasEnoughCapacity(class *storagev1.StorageClass, pvc *corev1.PersistentVolumeClaim, node *corev1.Node) (bool, error) {
	want, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return true, nil
	}
	driver, err := pl.driverLister.Get(class.Provisioner)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("get CSIDriver %q: %w", class.Provisioner, err)
	}
	if driver.Spec.StorageCapacity == nil || !*driver.Spec.StorageCapacity {
		return true, nil
	}
	capacities, err := pl.capacityLister.List(labels.Everything())
	if err != nil {
		return false, fmt.Errorf("list CSIStorageCapacities: %w", err)
	}
	for _, c := range capacities {
		if c.StorageClassName != class.Name {
			continue
		}
		if limit := volumeLimit(c); limit == nil || limit.Cmp(want) < 0 {
			continue
		}
		if c.NodeTopology == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(c.NodeTopology)
		if err == nil && sel.Matches(labels.Set(node.Labels)) {
			return true, nil
		}
	}
	return false, nil
}

// volumeLimit is the largest volume a capacity admits: maximumVolumeSize, else capacity.
func volumeLimit(c *storagev1.CSIStorageCapacity) *resource.Quantity {
	if c.MaximumVolumeSize != nil {
		return c.MaximumVolumeSize
	}
	return c.Capacity
}

// matchTopologySelectorTerms reports whether node labels satisfy a class's
// allowedTopologies: no terms match every node; otherwise some term with
// expressions must have each key's label among its values.
func matchTopologySelectorTerms(terms []corev1.TopologySelectorTerm, nodeLabels map[string]string) bool {
	if len(terms) == 0 {
		return true
	}
	for _, t := range terms {
		if len(t.MatchLabelExpressions) == 0 {
			continue
		}
		if slices.IndexFunc(t.MatchLabelExpressions, func(e corev1.TopologySelectorLabelRequirement) bool {
			v, ok := nodeLabels[e.Key]
			return !ok || !slices.Contains(e.Values, v)
		}) < 0 {
			return true
		}
	}
	return false
}
