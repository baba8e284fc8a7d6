package volumebinding

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// assumePodVolumes lays the node's choices over the caches: each static volume
// pre-bound to its claim, each claim to provision annotated with the node. It
// reports whether the pod's claims were all bound already (nothing to do);
// volumes then holds the assumed objects that PreBind writes.
func (pl *VolumeBinding) assumePodVolumes(pod *corev1.Pod, nodeName string, volumes *podVolumes) (bool, error) {
	if pl.arePodVolumesBound(pod) {
		return true, nil
	}
	static := make([]binding, 0, len(volumes.static))
	for _, b := range volumes.static {
		pv, dirty, err := storagehelpers.GetBindVolumeToClaim(b.pv, b.pvc)
		if err != nil {
			pl.revert(static, nil)
			return false, fmt.Errorf("bind volume %q to claim %s/%s: %w", b.pv.Name, b.pvc.Namespace, b.pvc.Name, err)
		}
		if dirty {
			if err := pl.pvs.assume(pv); err != nil {
				pl.revert(static, nil)
				return false, err
			}
		}
		static = append(static, binding{pvc: b.pvc, pv: pv})
	}
	provision := make([]*corev1.PersistentVolumeClaim, 0, len(volumes.provision))
	for _, pvc := range volumes.provision {
		// The claim is the informer's: annotate a copy.
		c := pvc.DeepCopy()
		metav1.SetMetaDataAnnotation(&c.ObjectMeta, storagehelpers.AnnSelectedNode, nodeName)
		if err := pl.pvcs.assume(c); err != nil {
			pl.revert(static, provision)
			return false, err
		}
		provision = append(provision, c)
	}
	volumes.static, volumes.provision = static, provision
	return false, nil
}

// revert forgets the assumed volumes and claims.
func (pl *VolumeBinding) revert(static []binding, provision []*corev1.PersistentVolumeClaim) {
	for _, b := range static {
		pl.pvs.restore(b.pv.Name)
	}
	for _, pvc := range provision {
		pl.pvcs.restore(pvc.Namespace + "/" + pvc.Name)
	}
}

// bindPodVolumes writes the assumed bindings and waits until the binder has bound
// every claim they concern, at most the bind timeout.
func (pl *VolumeBinding) bindPodVolumes(ctx context.Context, pod *corev1.Pod, volumes *podVolumes) error {
	if err := pl.bindAPIUpdate(ctx, volumes); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, pl.bindTimeout)
	defer cancel()
	tick := time.NewTicker(pl.recheck)
	defer tick.Stop()
	for {
		// Taken before the check, so that a change during it is not missed.
		changed := pl.changed.wait()
		done, err := pl.checkBindings(pod, volumes)
		if err != nil {
			return fmt.Errorf("binding volumes: %w", err)
		}
		if done {
			return nil
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("binding volumes: %w", ctx.Err())
		}
	}
}

// bindAPIUpdate writes each assumed volume (its claimRef) and each claim to
// provision (its selected-node annotation), in that order; what was not
// written is forgotten from the caches. Nothing written is rolled back: the
// binder completes or undoes it.
func (pl *VolumeBinding) bindAPIUpdate(ctx context.Context, volumes *podVolumes) error {
	bound, provisioned := 0, 0
	defer func() {
		pl.revert(volumes.static[bound:], volumes.provision[provisioned:])
	}()
	for i := range volumes.static {
		b := &volumes.static[i]
		pv, err := pl.client.CoreV1().PersistentVolumes().Update(ctx, b.pv, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("update PersistentVolume %q: %w", b.pv.Name, err)
		}
		// Kept to tell the informer's older versions from the written one.
		b.pv = pv
		bound++
	}
	for i, c := range volumes.provision {
		pvc, err := pl.client.CoreV1().PersistentVolumeClaims(c.Namespace).Update(ctx, c, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("update PersistentVolumeClaim %s/%s: %w", c.Namespace, c.Name, err)
		}
		volumes.provision[i] = pvc
		provisioned++
	}
	return nil
}

// olderThan reports whether the informer's object is older than the one written.
func olderThan[T storageObject](kind string, informer, written T) bool {
	iv, err1 := version(kind, informer)
	wv, err2 := version(kind, written)
	return err1 == nil && err2 == nil && iv < wv
}

// checkBindings reports whether every claim PreBind wrote for is fully bound,
// from the informers (not the assumed objects: the binder and provisioners
// write the truth). An error means the binding failed and the pod is tried
// again: the pod is gone, a volume lost its claimRef or does not accept the
// node, or a provisioner gave up (removed the selected-node annotation).
func (pl *VolumeBinding) checkBindings(pod *corev1.Pod, volumes *podVolumes) (bool, error) {
	node, err := pl.nodeLister.Get(pod.Spec.NodeName)
	if err != nil {
		return false, fmt.Errorf("failed to get node %q: %w", pod.Spec.NodeName, err)
	}
	if _, err := pl.podLister.Pods(pod.Namespace).Get(pod.Name); apierrors.IsNotFound(err) {
		return false, fmt.Errorf("pod does not exist any more: %w", err)
	}
	for _, b := range volumes.static {
		pv, err := pl.pvs.getAPI(b.pv.Name)
		if err != nil {
			return false, fmt.Errorf("failed to check binding: %w", err)
		}
		pvc, err := pl.pvcs.getAPI(b.pvc.Namespace + "/" + b.pvc.Name)
		if err != nil {
			return false, fmt.Errorf("failed to check binding: %w", err)
		}
		if olderThan("v1.PersistentVolume", pv, b.pv) {
			return false, nil
		}
		if err := storagehelpers.CheckNodeAffinity(pv, node.Labels); err != nil {
			return false, fmt.Errorf("pv %q node affinity doesn't match node %q: %w", pv.Name, node.Name, err)
		}
		if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID == "" {
			return false, fmt.Errorf("ClaimRef got reset for pv %q", pv.Name)
		}
		if !fullyBound(pvc) {
			return false, nil
		}
	}
	for _, c := range volumes.provision {
		pvc, err := pl.pvcs.getAPI(c.Namespace + "/" + c.Name)
		if err != nil {
			return false, fmt.Errorf("failed to check provisioning pvc: %w", err)
		}
		if olderThan("v1.PersistentVolumeClaim", pvc, c) {
			return false, nil
		}
		if pvc.Annotations == nil {
			return false, fmt.Errorf("selectedNode annotation reset for PVC %q", pvc.Name)
		}
		if pvc.Annotations[storagehelpers.AnnSelectedNode] != pod.Spec.NodeName {
			return false, fmt.Errorf("provisioning failed for PVC %q", pvc.Name)
		}
		if pvc.Spec.VolumeName != "" {
			pv, err := pl.pvs.getAPI(pvc.Spec.VolumeName)
			var nf *notFoundError
			if errors.As(err, &nf) {
				// Not in the cache yet, or deleted (the claim then loses it).
				return false, nil
			}
			if err != nil {
				return false, fmt.Errorf("failed to get pv %q from cache: %w", pvc.Spec.VolumeName, err)
			}
			if err := storagehelpers.CheckNodeAffinity(pv, node.Labels); err != nil {
				return false, fmt.Errorf("pv %q node affinity doesn't match node %q: %w", pv.Name, node.Name, err)
			}
		}
		if !fullyBound(pvc) {
			return false, nil
		}
	}
	return true, nil
}
