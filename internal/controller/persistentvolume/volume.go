package persistentvolume

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/kubette/kubette/internal/controller/podclaims"
)

// SyncVolume keeps the phase of the volume called key true and reclaims it when its
// claim is gone.
func (c *Controller) SyncVolume(ctx context.Context, key string) error {
	volume, err := c.volume(key)
	if err != nil || volume == nil {
		return err
	}
	ref := volume.Spec.ClaimRef
	if ref == nil || ref.UID == "" {
		// Unused, or reserved for a claim that has not bound yet (its sync binds it).
		_, err := c.updateVolumePhase(ctx, volume, corev1.VolumeAvailable, "")
		return err
	}
	claim, err := c.claimOf(ctx, volume)
	if err != nil {
		return err
	}
	switch {
	case claim == nil:
		// The claim was deleted: release the volume (a Failed one stays Failed, so
		// that the user sees what went wrong) and apply its reclaim policy.
		if volume.Status.Phase != corev1.VolumeReleased && volume.Status.Phase != corev1.VolumeFailed {
			c.log.Info("volume released", "volume", volume.Name, "reclaimPolicy", volume.Spec.PersistentVolumeReclaimPolicy)
			if volume, err = c.updateVolumePhase(ctx, volume, corev1.VolumeReleased, ""); err != nil {
				return err
			}
		}
		return c.reclaim(ctx, volume)
	case claim.Spec.VolumeName == "":
		if storagehelpers.CheckVolumeModeMismatches(&claim.Spec, &volume.Spec) {
			c.recorder.Event(volume, corev1.EventTypeWarning, reasonVolumeMismatch,
				fmt.Sprintf("Cannot bind PersistentVolume to requested PersistentVolumeClaim %q due to incompatible volumeMode.", claim.Name))
			c.recorder.Event(claim, corev1.EventTypeWarning, reasonVolumeMismatch,
				fmt.Sprintf("Cannot bind PersistentVolume %q to requested PersistentVolumeClaim due to incompatible volumeMode.", volume.Name))
			return nil
		}
		// The binding is half done (or the user unbound the claim): the claim's sync
		// finishes it.
		c.claimQueue.Add(claimKey(claim))
		return nil
	case claim.Spec.VolumeName == volume.Name:
		_, err = c.updateVolumePhase(ctx, volume, corev1.VolumeBound, "")
		return err
	case metav1.HasAnnotation(volume.ObjectMeta, storagehelpers.AnnDynamicallyProvisioned) &&
		volume.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete:
		// Provisioned for a claim that bound elsewhere: not needed.
		if volume.Status.Phase != corev1.VolumeReleased && volume.Status.Phase != corev1.VolumeFailed {
			if volume, err = c.updateVolumePhase(ctx, volume, corev1.VolumeReleased, ""); err != nil {
				return err
			}
		}
		return c.reclaim(ctx, volume)
	}
	// The claim is bound to another volume: undo this binding.
	return c.unbindVolume(ctx, volume)
}

// claimOf returns the claim the volume's claimRef names, or nil when it is gone
// (none of that name, or one of another UID). A claim missing from the cache, or
// of another UID there, is looked up on the API server before the volume is taken
// for released: the cache may not have seen it yet.
func (c *Controller) claimOf(ctx context.Context, volume *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, error) {
	ref := volume.Spec.ClaimRef
	key := ref.Namespace + "/" + ref.Name
	obj, exists, err := c.claims.GetByKey(key)
	if err != nil {
		return nil, fmt.Errorf("get claim %s: %w", key, err)
	}
	var claim *corev1.PersistentVolumeClaim
	if exists {
		claim, _ = obj.(*corev1.PersistentVolumeClaim)
	}
	askServer := (claim == nil && volume.Status.Phase != corev1.VolumeReleased && volume.Status.Phase != corev1.VolumeFailed) ||
		(claim != nil && claim.UID != ref.UID)
	if askServer {
		live, err := c.client.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			claim = nil
		case err != nil:
			return nil, fmt.Errorf("get claim %s: %w", key, err)
		default:
			claim = live
		}
	}
	if claim != nil && claim.UID != ref.UID {
		// The claim was deleted and another of the same name created.
		return nil, nil
	}
	return claim, nil
}

// reclaim applies the reclaim policy of a released volume.
func (c *Controller) reclaim(ctx context.Context, volume *corev1.PersistentVolume) error {
	if volume.Annotations[storagehelpers.AnnMigratedTo] != "" {
		// A CSI driver's provisioner reclaims it.
		return nil
	}
	switch volume.Spec.PersistentVolumeReclaimPolicy {
	case corev1.PersistentVolumeReclaimRetain:
		return nil
	case corev1.PersistentVolumeReclaimRecycle:
		return c.recycle(ctx, volume)
	case corev1.PersistentVolumeReclaimDelete:
		return c.delete(ctx, volume)
	}
	_, err := c.updateVolumePhaseWithEvent(ctx, volume, corev1.VolumeFailed, corev1.EventTypeWarning, reasonUnknownReclaimPolicy, msgUnknownPolicy)
	return err
}

// released reports whether the (fresh) volume still needs reclaiming: it is bound
// (with a UID) to a claim that is gone or bound to another volume.
func (c *Controller) released(volume *corev1.PersistentVolume) (bool, error) {
	ref := volume.Spec.ClaimRef
	if ref == nil || ref.UID == "" {
		return false, nil
	}
	obj, exists, err := c.claims.GetByKey(ref.Namespace + "/" + ref.Name)
	if err != nil {
		return false, fmt.Errorf("get claim %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	if !exists {
		return true, nil
	}
	claim, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok || claim.UID != ref.UID {
		return true, nil
	}
	return claim.Spec.VolumeName != "" && claim.Spec.VolumeName != volume.Name, nil
}

// recycle fails the volume as upstream does without a recycler plugin for it (kubette
// has none): unless pods still use it, when it waits.
func (c *Controller) recycle(ctx context.Context, volume *corev1.PersistentVolume) error {
	fresh, err := c.client.CoreV1().PersistentVolumes().Get(ctx, volume.Name, metav1.GetOptions{})
	if err != nil {
		return ignoreNotFound(err, "get volume "+volume.Name)
	}
	if ok, err := c.released(fresh); err != nil || !ok {
		return err
	}
	ref := fresh.Spec.ClaimRef
	pods, err := podclaims.Pods(c.podIndexer, ref.Namespace, ref.Name)
	if err != nil {
		return err
	}
	var using []string
	for _, p := range pods {
		if !podclaims.IsTerminated(p) {
			using = append(using, p.Namespace+"/"+p.Name)
		}
	}
	_, cached, err := c.claims.GetByKey(ref.Namespace + "/" + ref.Name)
	if err != nil {
		return err
	}
	if len(using) > 0 && !cached {
		sort.Strings(using)
		c.recorder.Event(fresh, corev1.EventTypeNormal, reasonVolumeFailedRecycle, "Volume is used by pods: "+strings.Join(using, ","))
		return nil
	}
	_, err = c.updateVolumePhaseWithEvent(ctx, fresh, corev1.VolumeFailed, corev1.EventTypeWarning, reasonVolumeFailedRecycle, msgNoRecycler)
	return err
}

// errExternal means that the volume's provisioner, not this controller, deletes it.
var errExternal = errors.New("deleted by an external provisioner")

// deleterFor returns the in-process deleter of volume, errExternal when another
// component deletes it, or the error upstream reports when no plugin can.
func (c *Controller) deleterFor(volume *corev1.PersistentVolume) (Deleter, error) {
	if by := volume.Annotations[storagehelpers.AnnDynamicallyProvisioned]; by != "" {
		if d, ok := c.deleters[by]; ok {
			return d, nil
		}
		if !strings.HasPrefix(by, "kubernetes.io/") {
			return nil, errExternal
		}
		return nil, fmt.Errorf("no volume plugin matched name: %s", by)
	}
	if volume.Annotations[storagehelpers.AnnMigratedTo] != "" || volume.Spec.CSI != nil {
		return nil, errExternal
	}
	return nil, fmt.Errorf("error getting deleter volume plugin for volume %q: no deletable volume plugin matched", volume.Name)
}

// delete deletes a released volume with reclaim policy Delete: its asset through its
// deleter, then its object. Without a deleter of this controller's the volume is
// either left to its external provisioner or, as upstream, marked Failed.
func (c *Controller) delete(ctx context.Context, volume *corev1.PersistentVolume) error {
	fresh, err := c.client.CoreV1().PersistentVolumes().Get(ctx, volume.Name, metav1.GetOptions{})
	if err != nil {
		return ignoreNotFound(err, "get volume "+volume.Name)
	}
	if fresh.DeletionTimestamp != nil {
		// Deleted already, waiting for its finalizers (pv-protection): upstream
		// without HonorPVReclaimPolicy, whose deletion finalizer kubette lacks.
		return nil
	}
	if ok, err := c.released(fresh); err != nil || !ok {
		return err
	}
	d, err := c.deleterFor(fresh)
	if errors.Is(err, errExternal) {
		return nil
	}
	if err == nil {
		err = d.Delete(ctx, fresh)
	}
	if err != nil {
		// Marked Failed once; every later sync tries again.
		if _, uerr := c.updateVolumePhaseWithEvent(ctx, fresh, corev1.VolumeFailed, corev1.EventTypeWarning, reasonVolumeFailedDelete, err.Error()); uerr != nil {
			return uerr
		}
		c.log.Info("deleting volume failed", "volume", fresh.Name, "err", err)
		return nil
	}
	err = c.client.CoreV1().PersistentVolumes().Delete(ctx, fresh.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &fresh.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete volume %s: %w", fresh.Name, err)
	}
	c.log.Info("volume deleted", "volume", fresh.Name)
	return nil
}

func ignoreNotFound(err error, what string) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
