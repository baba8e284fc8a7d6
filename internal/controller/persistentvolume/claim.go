package persistentvolume

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/kubette/kubette/internal/controller/podclaims"
)

// SyncClaim brings the claim of key (namespace/name) one step nearer to Bound, or
// keeps its phase true once it is.
func (c *Controller) SyncClaim(ctx context.Context, key string) error {
	obj, exists, err := c.claims.GetByKey(key)
	if err != nil {
		return fmt.Errorf("get claim %s: %w", key, err)
	}
	if !exists {
		return nil
	}
	claim, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return fmt.Errorf("claim cache holds %T for %s", obj, key)
	}
	if metav1.HasAnnotation(claim.ObjectMeta, storagehelpers.AnnBindCompleted) {
		return c.syncBoundClaim(ctx, claim)
	}
	return c.syncUnboundClaim(ctx, claim)
}

// volume returns the cached volume called name, or nil.
func (c *Controller) volume(name string) (*corev1.PersistentVolume, error) {
	obj, exists, err := c.volumes.GetByKey(name)
	if err != nil {
		return nil, fmt.Errorf("get volume %s: %w", name, err)
	}
	if !exists {
		return nil, nil
	}
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok {
		return nil, fmt.Errorf("volume cache holds %T for %s", obj, name)
	}
	return pv, nil
}

// candidates are the volumes claim may bind to: those of its class and those whose
// claimRef names it (a pre-bound volume is matched whatever its class).
func (c *Controller) candidates(claim *corev1.PersistentVolumeClaim) ([]*corev1.PersistentVolume, error) {
	seen := map[string]bool{}
	var out []*corev1.PersistentVolume
	for _, q := range []struct{ index, value string }{
		{volumesByClass, storagehelpers.GetPersistentVolumeClaimClass(claim)},
		{volumesByClaim, claimKey(claim)},
	} {
		objs, err := c.volumes.ByIndex(q.index, q.value)
		if err != nil {
			return nil, fmt.Errorf("list volumes: %w", err)
		}
		for _, o := range objs {
			if pv, ok := o.(*corev1.PersistentVolume); ok && !seen[pv.Name] {
				seen[pv.Name] = true
				out = append(out, pv)
			}
		}
	}
	return out, nil
}

// syncUnboundClaim handles a claim that has not completed binding (phase Pending).
func (c *Controller) syncUnboundClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	if claim.Spec.VolumeName != "" {
		return c.syncRequestedVolume(ctx, claim)
	}
	delayBinding, err := storagehelpers.IsDelayBindingMode(claim, c.classLister)
	if err != nil {
		return fmt.Errorf("binding mode of claim %s: %w", claimKey(claim), err)
	}
	candidates, err := c.candidates(claim)
	if err != nil {
		return err
	}
	volume, err := bestMatch(claim, candidates, delayBinding)
	if err != nil {
		return fmt.Errorf("error finding PV for claim %q: %w", claimKey(claim), err)
	}
	if volume != nil {
		return c.bind(ctx, volume, claim)
	}
	switch {
	case delayBinding && !storagehelpers.IsDelayBindingProvisioning(claim):
		// No pod using the claim has been scheduled yet.
		if err := c.eventForDelayedClaim(claim); err != nil {
			return err
		}
	case storagehelpers.GetPersistentVolumeClaimClass(claim) != "":
		// A provisioner makes the volume; the claim binds to it on a later sync.
		return c.provision(ctx, claim)
	default:
		c.recorder.Event(claim, corev1.EventTypeNormal, reasonFailedBinding, msgNoClassNoVolume)
	}
	_, err = c.updateClaimStatus(ctx, claim, corev1.ClaimPending, nil)
	return err
}

// syncRequestedVolume handles an unbound claim that names its volume.
func (c *Controller) syncRequestedVolume(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	volume, err := c.volume(claim.Spec.VolumeName)
	if err != nil {
		return err
	}
	switch {
	case volume == nil:
		// The volume may yet be created: stay Pending.
		_, err = c.updateClaimStatus(ctx, claim, corev1.ClaimPending, nil)
		return err
	case volume.Spec.ClaimRef == nil:
		if err := checkSatisfies(volume, claim); err != nil {
			c.recorder.Event(claim, corev1.EventTypeWarning, reasonVolumeMismatch,
				fmt.Sprintf("Cannot bind to requested volume %q: %s", volume.Name, err))
			_, err = c.updateClaimStatus(ctx, claim, corev1.ClaimPending, nil)
			return err
		}
		return c.bind(ctx, volume, claim)
	case storagehelpers.IsVolumeBoundToClaim(volume, claim):
		// The volume names the claim already: finish the binding.
		return c.bind(ctx, volume, claim)
	}
	c.recorder.Event(claim, corev1.EventTypeWarning, reasonFailedBinding,
		fmt.Sprintf("volume %q already bound to a different claim.", volume.Name))
	if metav1.HasAnnotation(claim.ObjectMeta, storagehelpers.AnnBoundByController) {
		// Only a removed bind-completed annotation leads here.
		return fmt.Errorf("invalid binding of claim %q to volume %q: volume already claimed by %q",
			claimKey(claim), claim.Spec.VolumeName, volume.Spec.ClaimRef.Namespace+"/"+volume.Spec.ClaimRef.Name)
	}
	_, err = c.updateClaimStatus(ctx, claim, corev1.ClaimPending, nil)
	return err
}

// syncBoundClaim keeps a claim that completed binding Bound while its volume is
// bound to it, and marks it Lost when the volume is gone or belongs to another claim.
func (c *Controller) syncBoundClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	if claim.Spec.VolumeName == "" {
		_, err := c.updateClaimStatusWithEvent(ctx, claim, corev1.ClaimLost, nil, corev1.EventTypeWarning, reasonClaimLost, msgLostReference)
		return err
	}
	volume, err := c.volume(claim.Spec.VolumeName)
	if err != nil {
		return err
	}
	switch {
	case volume == nil:
		_, err = c.updateClaimStatusWithEvent(ctx, claim, corev1.ClaimLost, nil, corev1.EventTypeWarning, reasonClaimLost, msgLostVolume)
		return err
	case volume.Spec.ClaimRef == nil, volume.Spec.ClaimRef.UID == claim.UID:
		// Unbound volume (or one whose binding the cache has not seen yet): bind it
		// again; a correct binding is left as it is.
		return c.bind(ctx, volume, claim)
	}
	_, err = c.updateClaimStatusWithEvent(ctx, claim, corev1.ClaimLost, nil, corev1.EventTypeWarning, reasonClaimMisbound, msgMisbound)
	return err
}

// eventForDelayedClaim tells a WaitForFirstConsumer claim's owner what it waits for:
// a pod that uses it, or the scheduling of the pods that do.
func (c *Controller) eventForDelayedClaim(claim *corev1.PersistentVolumeClaim) error {
	pods, err := podclaims.Pods(c.podIndexer, claim.Namespace, claim.Name)
	if err != nil {
		return err
	}
	var waiting []string
	for _, p := range pods {
		if !podclaims.IsTerminated(p) && p.Spec.NodeName == "" {
			waiting = append(waiting, p.Name)
		}
	}
	sort.Strings(waiting)
	switch len(waiting) {
	case 0:
		c.recorder.Event(claim, corev1.EventTypeNormal, reasonWaitForFirstConsumer, msgWaitFirstConsumer)
	case 1:
		c.recorder.Event(claim, corev1.EventTypeNormal, reasonWaitForPodScheduled, fmt.Sprintf("waiting for pod %s to be scheduled", waiting[0]))
	default:
		c.recorder.Event(claim, corev1.EventTypeNormal, reasonWaitForPodScheduled,
			fmt.Sprintf("waiting for pods %s to be scheduled", strings.Join(waiting, ",")))
	}
	return nil
}

// provision hands a claim of a provisioning class to its provisioner: the
// storage-provisioner annotations name it, as for upstream's external provisioners.
// kubette has no in-tree volume plugins, so a class naming one (kubernetes.io/...)
// fails as upstream's does for a plugin it lacks.
func (c *Controller) provision(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	class, err := c.classLister.Get(storagehelpers.GetPersistentVolumeClaimClass(claim))
	if apierrors.IsNotFound(err) {
		c.recorder.Event(claim, corev1.EventTypeWarning, reasonProvisioningFailed, err.Error())
		return nil
	}
	if err != nil {
		return fmt.Errorf("get the class of claim %s: %w", claimKey(claim), err)
	}
	if strings.HasPrefix(class.Provisioner, "kubernetes.io/") {
		c.recorder.Event(claim, corev1.EventTypeWarning, reasonProvisioningFailed,
			fmt.Sprintf("no volume plugin matched name: %s", class.Provisioner))
		return nil
	}
	claim, err = c.setClaimProvisioner(ctx, claim, class.Provisioner)
	if err != nil {
		c.recorder.Event(claim, corev1.EventTypeWarning, reasonProvisioningFailed, fmt.Sprintf("Error saving claim: %v", err))
		return err
	}
	c.recorder.Event(claim, corev1.EventTypeNormal, reasonExternalProvisioning,
		fmt.Sprintf("Waiting for a volume to be created either by the external provisioner '%s' "+
			"or manually by the system administrator. If volume creation is delayed, please verify that "+
			"the provisioner is running and correctly registered.", class.Provisioner))
	return nil
}

// setClaimProvisioner names the provisioner in the claim's annotations (GA and beta).
func (c *Controller) setClaimProvisioner(ctx context.Context, claim *corev1.PersistentVolumeClaim, provisioner string) (*corev1.PersistentVolumeClaim, error) {
	if v, ok := claim.Annotations[storagehelpers.AnnStorageProvisioner]; ok && v == provisioner {
		return claim, nil
	}
	clone := claim.DeepCopy()
	metav1.SetMetaDataAnnotation(&clone.ObjectMeta, storagehelpers.AnnBetaStorageProvisioner, provisioner)
	metav1.SetMetaDataAnnotation(&clone.ObjectMeta, storagehelpers.AnnStorageProvisioner, provisioner)
	updated, err := c.client.CoreV1().PersistentVolumeClaims(clone.Namespace).Update(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		return claim, fmt.Errorf("set the provisioner of claim %s: %w", claimKey(claim), err)
	}
	c.claims.Mutation(updated)
	return updated, nil
}
