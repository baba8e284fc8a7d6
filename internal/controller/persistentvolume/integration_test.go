package persistentvolume_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/persistentvolume"
	"github.com/kubette/kubette/internal/controller/pvcprotection"
	"github.com/kubette/kubette/internal/controller/pvprotection"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

const ns = "default"

// recordingDeleter is an in-process deleter that records the volumes it deleted.
type recordingDeleter struct {
	mu      sync.Mutex
	deleted []string
}

func (d *recordingDeleter) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deleted = append(d.deleted, pv.Name)
	return nil
}

func (d *recordingDeleter) names() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.deleted...)
}

type cluster struct {
	t       *testing.T
	ctx     context.Context
	c       kubernetes.Interface
	deleter *recordingDeleter
}

// start runs the binder as its ServiceAccount (so that the default RBAC policy is
// checked too), with an in-process deleter for provisioner "kubette.io/test", and
// the pvc-protection and pv-protection controllers as theirs.
func start(t *testing.T) *cluster {
	t.Helper()
	env := testenv.Start(t, testenv.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	cfg, err := env.ServiceAccountConfig(persistentvolume.ClientName)
	if err != nil {
		t.Fatal(err)
	}
	deps, starter, err := controller.NewDeps(cfg, persistentvolume.ClientName)
	if err != nil {
		t.Fatal(err)
	}
	d := &recordingDeleter{}
	pvc, err := persistentvolume.NewWithOptions(deps, persistentvolume.Options{
		Deleters: map[string]persistentvolume.Deleter{"kubette.io/test": d},
	})
	if err != nil {
		t.Fatal(err)
	}
	starter.Start(ctx)
	wg.Go(func() { pvc.Run(ctx, 2) })
	// The protection controllers, which let claims and volumes be deleted once unused.
	for _, p := range []struct {
		client string
		build  controller.Constructor
	}{{pvcprotection.ClientName, pvcprotection.New}, {pvprotection.ClientName, pvprotection.New}} {
		cfg, err := env.ServiceAccountConfig(p.client)
		if err != nil {
			t.Fatal(err)
		}
		deps, starter, err := controller.NewDeps(cfg, p.client)
		if err != nil {
			t.Fatal(err)
		}
		r, err := p.build(deps)
		if err != nil {
			t.Fatal(err)
		}
		starter.Start(ctx)
		wg.Go(func() { r.Run(ctx, 1) })
	}
	return &cluster{t: t, ctx: ctx, c: env.Client, deleter: d}
}

func volume(name, size string, modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolume {
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:            modes,
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + name}},
		},
	}
}

func claim(name, size string, modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: modes,
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
}

func (k *cluster) createVolume(pv *corev1.PersistentVolume) *corev1.PersistentVolume {
	k.t.Helper()
	out, err := k.c.CoreV1().PersistentVolumes().Create(k.ctx, pv, metav1.CreateOptions{})
	if err != nil {
		k.t.Fatal(err)
	}
	return out
}

func (k *cluster) createClaim(pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	k.t.Helper()
	out, err := k.c.CoreV1().PersistentVolumeClaims(ns).Create(k.ctx, pvc, metav1.CreateOptions{})
	if err != nil {
		k.t.Fatal(err)
	}
	return out
}

func (k *cluster) getVolume(name string) *corev1.PersistentVolume {
	k.t.Helper()
	pv, err := k.c.CoreV1().PersistentVolumes().Get(k.ctx, name, metav1.GetOptions{})
	if err != nil {
		k.t.Fatal(err)
	}
	return pv
}

func (k *cluster) getClaim(name string) *corev1.PersistentVolumeClaim {
	k.t.Helper()
	pvc, err := k.c.CoreV1().PersistentVolumeClaims(ns).Get(k.ctx, name, metav1.GetOptions{})
	if err != nil {
		k.t.Fatal(err)
	}
	return pvc
}

// waitBound waits until claim and volume are bound to each other and checks the binding.
func (k *cluster) waitBound(claimName, volumeName string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	k.t.Helper()
	var pvc *corev1.PersistentVolumeClaim
	var pv *corev1.PersistentVolume
	poll.Until(k.t, fmt.Sprintf("claim %s bound to volume %s", claimName, volumeName), func() error {
		pvc, pv = k.getClaim(claimName), k.getVolume(volumeName)
		if pvc.Status.Phase != corev1.ClaimBound || pv.Status.Phase != corev1.VolumeBound {
			return fmt.Errorf("claim %s, volume %s", pvc.Status.Phase, pv.Status.Phase)
		}
		return nil
	})
	if pvc.Spec.VolumeName != volumeName {
		k.t.Errorf("claim's volumeName = %q, want %q", pvc.Spec.VolumeName, volumeName)
	}
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.Name != claimName || ref.Namespace != ns || ref.UID != pvc.UID || ref.Kind != "PersistentVolumeClaim" || ref.APIVersion != "v1" {
		k.t.Errorf("volume's claimRef = %+v, want the claim %s with UID %s", ref, claimName, pvc.UID)
	}
	if pvc.Annotations["pv.kubernetes.io/bind-completed"] != "yes" {
		k.t.Errorf("claim annotations = %v, want bind-completed", pvc.Annotations)
	}
	if !pvc.Status.Capacity[corev1.ResourceStorage].Equal(pv.Spec.Capacity[corev1.ResourceStorage]) ||
		fmt.Sprint(pvc.Status.AccessModes) != fmt.Sprint(pv.Spec.AccessModes) {
		k.t.Errorf("claim status = %+v, want the volume's capacity %v and modes %v", pvc.Status, pv.Spec.Capacity, pv.Spec.AccessModes)
	}
	if pv.Status.LastPhaseTransitionTime == nil {
		k.t.Error("the Bound volume has no lastPhaseTransitionTime")
	}
	return pvc, pv
}

// waitEvent waits for an event with reason and message on the object named name.
func (k *cluster) waitEvent(name, reason, message string) {
	k.t.Helper()
	poll.Until(k.t, fmt.Sprintf("event %s %q on %s", reason, message, name), func() error {
		list, err := k.c.CoreV1().Events("").List(k.ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Reason == reason && e.Message == message {
				if e.Source.Component != persistentvolume.EventComponent {
					k.t.Errorf("event source %q, want %q", e.Source.Component, persistentvolume.EventComponent)
				}
				return nil
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return fmt.Errorf("events: %q", seen)
	})
}

func TestBindStaticVolume(t *testing.T) {
	k := start(t)
	// The smallest volume that fits wins; too small, wrong mode and wrong class lose.
	k.createVolume(volume("small", "1Gi"))
	k.createVolume(volume("rox", "3Gi", corev1.ReadOnlyMany))
	gold := volume("gold", "3Gi")
	gold.Spec.StorageClassName = "gold"
	k.createVolume(gold)
	k.createVolume(volume("fits", "5Gi"))
	k.createVolume(volume("big", "10Gi"))
	before := k.getVolume("fits").Status.LastPhaseTransitionTime
	k.createClaim(claim("data", "2Gi"))
	pvc, pv := k.waitBound("data", "fits")
	if pvc.Annotations["pv.kubernetes.io/bound-by-controller"] != "yes" || pv.Annotations["pv.kubernetes.io/bound-by-controller"] != "yes" {
		t.Errorf("annotations claim %v volume %v, want bound-by-controller on both", pvc.Annotations, pv.Annotations)
	}
	if before == nil || pv.Status.LastPhaseTransitionTime.Before(before) {
		t.Errorf("lastPhaseTransitionTime %v after Bound, %v before", pv.Status.LastPhaseTransitionTime, before)
	}
	for _, name := range []string{"small", "rox", "gold", "big"} {
		poll.Until(t, name+" Available", func() error {
			if pv := k.getVolume(name); pv.Status.Phase != corev1.VolumeAvailable || pv.Spec.ClaimRef != nil {
				return fmt.Errorf("phase %s claimRef %v", pv.Status.Phase, pv.Spec.ClaimRef)
			}
			return nil
		})
	}
}

func TestPreBinding(t *testing.T) {
	k := start(t)
	// The claim names the volume: not the smallest, and the claim is not bound by the controller.
	k.createVolume(volume("smallest", "1Gi"))
	k.createVolume(volume("chosen", "8Gi"))
	byName := claim("by-name", "1Gi")
	byName.Spec.VolumeName = "chosen"
	k.createClaim(byName)
	pvc, pv := k.waitBound("by-name", "chosen")
	if _, ok := pvc.Annotations["pv.kubernetes.io/bound-by-controller"]; ok {
		t.Errorf("claim that named its volume has annotations %v", pvc.Annotations)
	}
	if pv.Annotations["pv.kubernetes.io/bound-by-controller"] != "yes" {
		t.Errorf("volume bound for the claim has annotations %v", pv.Annotations)
	}

	// The volume names the claim (claimRef without UID): the claim gets it, the volume
	// is not marked bound by the controller.
	reserved := volume("reserved", "9Gi")
	reserved.Spec.ClaimRef = &corev1.ObjectReference{Namespace: ns, Name: "by-ref"}
	k.createVolume(reserved)
	k.createClaim(claim("by-ref", "1Gi"))
	pvc, pv = k.waitBound("by-ref", "reserved")
	if _, ok := pv.Annotations["pv.kubernetes.io/bound-by-controller"]; ok {
		t.Errorf("pre-bound volume has annotations %v", pv.Annotations)
	}
	if pvc.Annotations["pv.kubernetes.io/bound-by-controller"] != "yes" {
		t.Errorf("claim bound to a pre-bound volume has annotations %v", pvc.Annotations)
	}

	// A claim that names a volume that does not fit stays Pending with upstream's event.
	k.createVolume(volume("tiny", "1Mi"))
	tooBig := claim("too-big", "1Gi")
	tooBig.Spec.VolumeName = "tiny"
	k.createClaim(tooBig)
	k.waitEvent("too-big", "VolumeMismatch", `Cannot bind to requested volume "tiny": requested PV is too small`)
	if pvc := k.getClaim("too-big"); pvc.Status.Phase != corev1.ClaimPending {
		t.Errorf("claim phase %s, want Pending", pvc.Status.Phase)
	}
}

func TestMismatchesStayPending(t *testing.T) {
	k := start(t)
	labelled := volume("labelled", "5Gi")
	labelled.Labels = map[string]string{"tier": "cold"}
	k.createVolume(labelled)
	rwo := volume("rwo", "5Gi")
	k.createVolume(rwo)
	block := volume("block", "5Gi")
	block.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock)
	block.Labels = map[string]string{"tier": "hot"}
	k.createVolume(block)

	selector := claim("selector", "1Gi")
	selector.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "hot"}}
	k.createClaim(selector)
	k.createClaim(claim("rwx", "1Gi", corev1.ReadWriteMany))
	const noClass = "no persistent volumes available for this claim and no storage class is set"
	k.waitEvent("selector", "FailedBinding", noClass)
	k.waitEvent("rwx", "FailedBinding", noClass)

	// A class that does not exist is named in the event.
	unknown := claim("unknown-class", "1Gi")
	unknown.Spec.StorageClassName = ptr.To("fast")
	k.createClaim(unknown)
	k.waitEvent("unknown-class", "ProvisioningFailed", `storageclass.storage.k8s.io "fast" not found`)

	for _, name := range []string{"selector", "rwx", "unknown-class"} {
		if pvc := k.getClaim(name); pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeName != "" {
			t.Errorf("claim %s: phase %s volume %q, want Pending and unbound", name, pvc.Status.Phase, pvc.Spec.VolumeName)
		}
	}
	for _, name := range []string{"labelled", "rwo", "block"} {
		if pv := k.getVolume(name); pv.Spec.ClaimRef != nil {
			t.Errorf("volume %s bound to %v", name, pv.Spec.ClaimRef)
		}
	}
}

// deleteClaim deletes a claim and waits until it is gone.
func (k *cluster) deleteClaim(name string) {
	k.t.Helper()
	if err := k.c.CoreV1().PersistentVolumeClaims(ns).Delete(k.ctx, name, metav1.DeleteOptions{}); err != nil {
		k.t.Fatal(err)
	}
	poll.Until(k.t, "claim "+name+" gone", func() error {
		_, err := k.c.CoreV1().PersistentVolumeClaims(ns).Get(k.ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}

func (k *cluster) waitVolumePhase(name string, phase corev1.PersistentVolumePhase) *corev1.PersistentVolume {
	k.t.Helper()
	var pv *corev1.PersistentVolume
	poll.Until(k.t, "volume "+name+" "+string(phase), func() error {
		pv = k.getVolume(name)
		if pv.Status.Phase != phase {
			return fmt.Errorf("phase %s", pv.Status.Phase)
		}
		return nil
	})
	return pv
}

func TestReclaim(t *testing.T) {
	k := start(t)
	retain := volume("retain", "1Gi")
	retain.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	retain.Spec.ClaimRef = &corev1.ObjectReference{Namespace: ns, Name: "c-retain"}
	k.createVolume(retain)

	provisioned := volume("provisioned", "1Gi")
	provisioned.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	provisioned.Annotations = map[string]string{"pv.kubernetes.io/provisioned-by": "kubette.io/test"}
	provisioned.Spec.ClaimRef = &corev1.ObjectReference{Namespace: ns, Name: "c-provisioned"}
	k.createVolume(provisioned)

	external := volume("external", "1Gi")
	external.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	external.Annotations = map[string]string{"pv.kubernetes.io/provisioned-by": "example.com/external"}
	external.Spec.ClaimRef = &corev1.ObjectReference{Namespace: ns, Name: "c-external"}
	k.createVolume(external)

	static := volume("static", "1Gi")
	static.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	static.Spec.ClaimRef = &corev1.ObjectReference{Namespace: ns, Name: "c-static"}
	k.createVolume(static)

	recycle := volume("recycle", "1Gi")
	recycle.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRecycle
	recycle.Spec.ClaimRef = &corev1.ObjectReference{Namespace: ns, Name: "c-recycle"}
	k.createVolume(recycle)

	for _, name := range []string{"retain", "provisioned", "external", "static", "recycle"} {
		k.createClaim(claim("c-"+name, "1Gi"))
		k.waitBound("c-"+name, name)
		k.deleteClaim("c-" + name)
	}

	pv := k.waitVolumePhase("retain", corev1.VolumeReleased)
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Name != "c-retain" {
		t.Errorf("released volume's claimRef = %v, want the deleted claim kept", pv.Spec.ClaimRef)
	}
	poll.Until(t, "the provisioned volume deleted", func() error {
		_, err := k.c.CoreV1().PersistentVolumes().Get(k.ctx, "provisioned", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	if got := k.deleter.names(); len(got) != 1 || got[0] != "provisioned" {
		t.Errorf("deleter deleted %v, want [provisioned]", got)
	}
	// An external provisioner's volume is left Released for it to delete.
	k.waitVolumePhase("external", corev1.VolumeReleased)
	// Without a deleter or recycler, as upstream without a plugin: Failed, with the event.
	k.waitVolumePhase("static", corev1.VolumeFailed)
	k.waitEvent("static", "VolumeFailedDelete", `error getting deleter volume plugin for volume "static": no deletable volume plugin matched`)
	k.waitVolumePhase("recycle", corev1.VolumeFailed)
	k.waitEvent("recycle", "VolumeFailedRecycle", "No recycler plugin found for the volume!")
	if pv := k.getVolume("external"); pv.Status.Phase != corev1.VolumeReleased {
		t.Errorf("external volume phase %s, want Released", pv.Status.Phase)
	}
}

func TestProvisioningAnnotations(t *testing.T) {
	k := start(t)
	immediate := storagev1.VolumeBindingImmediate
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	for name, mode := range map[string]*storagev1.VolumeBindingMode{"now": &immediate, "later": &wait} {
		if _, err := k.c.StorageV1().StorageClasses().Create(k.ctx, &storagev1.StorageClass{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "example.com/" + name, VolumeBindingMode: mode,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	now := claim("now", "1Gi")
	now.Spec.StorageClassName = ptr.To("now")
	k.createClaim(now)
	k.waitEvent("now", "ExternalProvisioning", "Waiting for a volume to be created either by the external provisioner "+
		"'example.com/now' or manually by the system administrator. If volume creation is delayed, please verify that "+
		"the provisioner is running and correctly registered.")
	pvc := k.getClaim("now")
	if pvc.Annotations["volume.kubernetes.io/storage-provisioner"] != "example.com/now" ||
		pvc.Annotations["volume.beta.kubernetes.io/storage-provisioner"] != "example.com/now" {
		t.Errorf("claim annotations %v, want the provisioner named", pvc.Annotations)
	}
	// The provisioner creates the volume bound to the claim; the binder completes it.
	made := volume("pvc-"+string(pvc.UID), "1Gi")
	made.Spec.StorageClassName = "now"
	made.Annotations = map[string]string{"pv.kubernetes.io/provisioned-by": "example.com/now"}
	made.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: "now", UID: pvc.UID}
	k.createVolume(made)
	k.waitBound("now", made.Name)

	later := claim("later", "1Gi")
	later.Spec.StorageClassName = ptr.To("later")
	k.createClaim(later)
	k.waitEvent("later", "WaitForFirstConsumer", "waiting for first consumer to be created before binding")
	if pvc := k.getClaim("later"); pvc.Annotations["volume.kubernetes.io/storage-provisioner"] != "" {
		t.Errorf("a WaitForFirstConsumer claim without a node got annotations %v", pvc.Annotations)
	}
	// A pod that uses it and is not scheduled yet is named.
	if _, err := k.c.CoreV1().Pods(ns).Create(k.ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "user", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "later"}}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	k.waitEvent("later", "WaitForPodScheduled", "waiting for pod user to be scheduled")
	// The scheduler picks a node: the provisioner is named.
	poll.Until(t, "select a node for the claim", func() error {
		pvc := k.getClaim("later")
		metav1.SetMetaDataAnnotation(&pvc.ObjectMeta, "volume.kubernetes.io/selected-node", "n1")
		_, err := k.c.CoreV1().PersistentVolumeClaims(ns).Update(k.ctx, pvc, metav1.UpdateOptions{})
		return err
	})
	poll.Until(t, "the provisioner named on the claim", func() error {
		if got := k.getClaim("later").Annotations["volume.kubernetes.io/storage-provisioner"]; got != "example.com/later" {
			return fmt.Errorf("annotation %q", got)
		}
		return nil
	})
}

func TestClaimLost(t *testing.T) {
	k := start(t)
	k.createVolume(volume("goes", "1Gi"))
	k.createClaim(claim("stays", "1Gi"))
	k.waitBound("stays", "goes")
	// Take the volume away: delete it (pv-protection keeps it while Bound), then
	// remove its finalizers (once it is being deleted none is added back).
	if err := k.c.CoreV1().PersistentVolumes().Delete(k.ctx, "goes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.c.CoreV1().PersistentVolumes().Patch(k.ctx, "goes", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	k.waitEvent("stays", "ClaimLost", "Bound claim has lost its PersistentVolume. Data on the volume is lost!")
	if pvc := k.getClaim("stays"); pvc.Status.Phase != corev1.ClaimLost {
		t.Errorf("claim phase %s, want Lost", pvc.Status.Phase)
	}
}
