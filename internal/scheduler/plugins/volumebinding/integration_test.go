package volumebinding_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/persistentvolume"
	"github.com/kubette/kubette/internal/controller/pvcprotection"
	"github.com/kubette/kubette/internal/controller/pvprotection"
	"github.com/kubette/kubette/internal/scheduler"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

const ns = "default"

type cluster struct {
	t   *testing.T
	ctx context.Context
	c   kubernetes.Interface
}

// start runs the scheduler as system:kube-scheduler and the PersistentVolume
// binder and the protection controllers as their ServiceAccounts, so that the
// default RBAC policy is exercised too.
func start(t *testing.T) *cluster {
	t.Helper()
	env := testenv.Start(t, testenv.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, p := range []struct {
		client string
		build  controller.Constructor
	}{
		{persistentvolume.ClientName, persistentvolume.New},
		{pvcprotection.ClientName, pvcprotection.New},
		{pvprotection.ClientName, pvprotection.New},
	} {
		cfg, err := env.ServiceAccountConfig(p.client)
		if err != nil {
			t.Fatal(err)
		}
		deps, starter, err := controller.NewDeps(cfg, p.client)
		if err != nil {
			t.Fatal(err)
		}
		deps.Logger = quiet
		r, err := p.build(deps)
		if err != nil {
			t.Fatal(err)
		}
		starter.Start(ctx)
		wg.Go(func() { r.Run(ctx, 1) })
	}
	cfg, err := env.ComponentConfig("scheduler", "system:kube-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() {
		if err := scheduler.RunWithLeaderElection(ctx, cfg, scheduler.Options{Logger: quiet}); err != nil {
			t.Errorf("scheduler: %v", err)
		}
	})
	k := &cluster{t: t, ctx: ctx, c: env.Client}
	for _, n := range []string{"n1", "n2"} {
		k.create(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{corev1.LabelHostname: n}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"),
				corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}})
	}
	return k
}

func (k *cluster) create(obj any) {
	k.t.Helper()
	var err error
	switch o := obj.(type) {
	case *corev1.Node:
		var n *corev1.Node
		if n, err = k.c.CoreV1().Nodes().Create(k.ctx, o, metav1.CreateOptions{}); err == nil {
			n.Status = o.Status
			_, err = k.c.CoreV1().Nodes().UpdateStatus(k.ctx, n, metav1.UpdateOptions{})
		}
	case *corev1.PersistentVolume:
		_, err = k.c.CoreV1().PersistentVolumes().Create(k.ctx, o, metav1.CreateOptions{})
	case *corev1.PersistentVolumeClaim:
		_, err = k.c.CoreV1().PersistentVolumeClaims(ns).Create(k.ctx, o, metav1.CreateOptions{})
	case *storagev1.StorageClass:
		_, err = k.c.StorageV1().StorageClasses().Create(k.ctx, o, metav1.CreateOptions{})
	case *corev1.Pod:
		_, err = k.c.CoreV1().Pods(ns).Create(k.ctx, o, metav1.CreateOptions{})
	default:
		err = fmt.Errorf("cannot create %T", obj)
	}
	if err != nil {
		k.t.Fatal(err)
	}
}

func storageClass(name, provisioner string, mode storagev1.VolumeBindingMode) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: &mode}
}

// localVolume is a volume of class pinned to node.
func localVolume(name, class, node string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:       class,
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/" + name}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
}

func claim(name, class string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			StorageClassName: ptr.To(class),
		},
	}
}

func podWith(name, claimName string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "registry.local/pause:1"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName}}}},
		},
	}
}

func (k *cluster) pod(name string) *corev1.Pod {
	k.t.Helper()
	p, err := k.c.CoreV1().Pods(ns).Get(k.ctx, name, metav1.GetOptions{})
	if err != nil {
		k.t.Fatal(err)
	}
	return p
}

func (k *cluster) claim(name string) *corev1.PersistentVolumeClaim {
	k.t.Helper()
	c, err := k.c.CoreV1().PersistentVolumeClaims(ns).Get(k.ctx, name, metav1.GetOptions{})
	if err != nil {
		k.t.Fatal(err)
	}
	return c
}

// waitScheduled waits until the pod is bound and returns its node.
func (k *cluster) waitScheduled(name string) string {
	k.t.Helper()
	var node string
	poll.Until(k.t, "pod "+name+" scheduled", func() error {
		p := k.pod(name)
		if node = p.Spec.NodeName; node == "" {
			return fmt.Errorf("unscheduled: %v", p.Status.Conditions)
		}
		return nil
	})
	return node
}

// waitUnschedulable waits until the pod's PodScheduled condition is False with msg.
func (k *cluster) waitUnschedulable(name, msg string) {
	k.t.Helper()
	poll.Until(k.t, "pod "+name+" unschedulable", func() error {
		p := k.pod(name)
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && c.Message == msg {
				return nil
			}
		}
		return fmt.Errorf("node %q, conditions %+v", p.Spec.NodeName, p.Status.Conditions)
	})
}

func (k *cluster) waitClaimBound(name, volume string) {
	k.t.Helper()
	poll.Until(k.t, "claim "+name+" bound to "+volume, func() error {
		c := k.claim(name)
		if c.Status.Phase != corev1.ClaimBound || c.Spec.VolumeName != volume {
			return fmt.Errorf("phase %s volume %q", c.Status.Phase, c.Spec.VolumeName)
		}
		return nil
	})
}

func (k *cluster) waitClaimGone(name string) {
	k.t.Helper()
	poll.Until(k.t, "claim "+name+" gone", func() error {
		_, err := k.c.CoreV1().PersistentVolumeClaims(ns).Get(k.ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}

// TestStaticVolumeOnItsNode: a WaitForFirstConsumer claim whose only matching
// volume is pinned to n2 puts its pod on n2 and is bound to that volume; a
// claim bound to a volume of a node that does not exist keeps its pod Pending
// with upstream's message; deleting a claim a scheduled pod uses leaves it
// Terminating until the pod is gone.
func TestStaticVolumeOnItsNode(t *testing.T) {
	k := start(t)
	k.create(storageClass("local", "kubernetes.io/no-provisioner", storagev1.VolumeBindingWaitForFirstConsumer))
	k.create(localVolume("pv-n2", "local", "n2"))
	k.create(claim("data", "local"))
	k.create(podWith("web", "data"))
	if node := k.waitScheduled("web"); node != "n2" {
		t.Fatalf("pod on %s, want n2 (its volume's node)", node)
	}
	k.waitClaimBound("data", "pv-n2")

	// A volume pinned to a node the cluster does not have.
	pinned := localVolume("pv-gone-node", "local", "n9")
	pinned.Spec.ClaimRef = &corev1.ObjectReference{Namespace: ns, Name: "pinned"}
	k.create(pinned)
	c := claim("pinned", "local")
	c.Spec.VolumeName = "pv-gone-node"
	k.create(c)
	k.waitClaimBound("pinned", "pv-gone-node")
	k.create(podWith("stuck", "pinned"))
	k.waitUnschedulable("stuck", "0/2 nodes are available: 2 node(s) had volume node affinity conflict. "+
		"preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling..")

	// Deleting a claim in use: it waits for its pod. A spare claim deleted right
	// after goes at once (the controller looked at both by then, in order).
	k.create(claim("spare", "local"))
	for _, name := range []string{"data", "spare"} {
		if err := k.c.CoreV1().PersistentVolumeClaims(ns).Delete(k.ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	k.waitClaimGone("spare")
	if got := k.claim("data"); got.DeletionTimestamp == nil || len(got.Finalizers) != 1 || got.Finalizers[0] != "kubernetes.io/pvc-protection" {
		t.Fatalf("claim in use: deletion %v finalizers %q, want Terminating with the pvc-protection finalizer", got.DeletionTimestamp, got.Finalizers)
	}
	// The pod's new claims are refused meanwhile.
	k.create(podWith("late", "data"))
	k.waitUnschedulable("late", `0/2 nodes are available: persistentvolumeclaim "data" is being deleted. `+
		"preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling..")
	if err := k.c.CoreV1().Pods(ns).Delete(k.ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	k.waitClaimGone("data")
	poll.Until(t, "pv-n2 Released", func() error {
		pv, err := k.c.CoreV1().PersistentVolumes().Get(k.ctx, "pv-n2", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pv.Status.Phase != corev1.VolumeReleased {
			return fmt.Errorf("phase %s", pv.Status.Phase)
		}
		return nil
	})
}

// TestImmediateClaimThenVolume: a pod whose Immediate claim is unbound waits
// with upstream's message, and is scheduled once a volume appears and the
// binder binds the claim (the claim's update brings the pod back to the queue).
func TestImmediateClaimThenVolume(t *testing.T) {
	k := start(t)
	k.create(storageClass("fast", "example.com/none", storagev1.VolumeBindingImmediate))
	k.create(claim("now", "fast"))
	k.create(podWith("app", "now"))
	k.waitUnschedulable("app", "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims. "+
		"preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling..")
	k.create(localVolume("pv-n1", "fast", "n1"))
	k.waitClaimBound("now", "pv-n1")
	if node := k.waitScheduled("app"); node != "n1" {
		t.Fatalf("pod on %s, want n1", node)
	}
}

// TestProvisionOnSelectedNode: a WaitForFirstConsumer claim with no volume is
// given the node the scheduler chose (volume.kubernetes.io/selected-node); the
// test plays the external provisioner, and the pod is bound once the claim is.
func TestProvisionOnSelectedNode(t *testing.T) {
	k := start(t)
	k.create(storageClass("csi", "example.com/csi", storagev1.VolumeBindingWaitForFirstConsumer))
	k.create(claim("made", "csi"))
	p := podWith("db", "made")
	p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "n1"}
	k.create(p)
	var selected *corev1.PersistentVolumeClaim
	poll.Until(t, "claim handed to the provisioner", func() error {
		selected = k.claim("made")
		if selected.Annotations["volume.kubernetes.io/selected-node"] != "n1" ||
			selected.Annotations["volume.kubernetes.io/storage-provisioner"] != "example.com/csi" {
			return fmt.Errorf("annotations %v", selected.Annotations)
		}
		return nil
	})
	if p := k.pod("db"); p.Spec.NodeName != "" {
		t.Fatalf("pod bound to %s before its claim", p.Spec.NodeName)
	}
	pv := localVolume("pvc-made", "csi", "n1")
	pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: "made", UID: selected.UID}
	pv.Annotations = map[string]string{"pv.kubernetes.io/provisioned-by": "example.com/csi"}
	k.create(pv)
	k.waitClaimBound("made", "pvc-made")
	if node := k.waitScheduled("db"); node != "n1" {
		t.Fatalf("pod on %s, want n1", node)
	}
}
