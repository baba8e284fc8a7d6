package volumebinding

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/scheduler/framework"
	"github.com/kubette/kubette/internal/testenv/poll"
)

const ns = "default"

// handle is a framework.Handle with a clientset and an informer factory.
type handle struct {
	framework.Handle // nil: the methods the plugin never calls
	client           kubernetes.Interface
	informers        informers.SharedInformerFactory
}

func (h handle) ClientSet() kubernetes.Interface                        { return h.client }
func (h handle) SharedInformerFactory() informers.SharedInformerFactory { return h.informers }

// env is the plugin over a fake clientset whose updates bump resourceVersion
// as the API server does (the fake tracker keeps the object's own).
type env struct {
	t      *testing.T
	client *fake.Clientset
	pl     *VolumeBinding
	rv     atomic.Int64
}

func newEnv(t *testing.T, args any, objs ...runtime.Object) *env {
	t.Helper()
	e := &env{t: t}
	e.rv.Store(100)
	for _, o := range objs {
		m, err := meta.Accessor(o)
		if err != nil {
			t.Fatal(err)
		}
		if m.GetResourceVersion() == "" {
			m.SetResourceVersion("1")
		}
	}
	e.client = fake.NewClientset(objs...)
	e.client.PrependReactor("update", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.UpdateAction)
		obj := u.GetObject().DeepCopyObject()
		m, _ := meta.Accessor(obj)
		m.SetResourceVersion(strconv.FormatInt(e.rv.Add(1), 10))
		if err := e.client.Tracker().Update(u.GetResource(), obj, u.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj, nil
	})
	factory := informers.NewSharedInformerFactory(e.client, 0)
	pl, err := New(t.Context(), args, handle{client: e.client, informers: factory})
	if err != nil {
		t.Fatal(err)
	}
	e.pl = pl.(*VolumeBinding)
	// The scheduler's pod and node informers, which the plugin only reads.
	factory.Core().V1().Pods().Informer()
	factory.Core().V1().Nodes().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%v did not sync", typ)
		}
	}
	e.client.ClearActions()
	return e
}

func node(name string, labels map[string]string) *corev1.Node {
	l := map[string]string{corev1.LabelHostname: name}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

func nodeInfo(n *corev1.Node) *framework.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(n)
	return ni
}

// volume is an Available volume of class, pinned to the node onNode when set.
func volume(name, class, size, onNode string) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:              class,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			VolumeMode:                    ptr.To(corev1.PersistentVolumeFilesystem),
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/" + name}},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeAvailable},
	}
	if onNode != "" {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{onNode}}},
		}}}}
	}
	return pv
}

func claim(name, class, size string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
			StorageClassName: ptr.To(class),
			VolumeMode:       ptr.To(corev1.PersistentVolumeFilesystem),
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
}

// boundClaim is claim bound to volume pvName by the binder.
func boundClaim(name, class, size, pvName string) *corev1.PersistentVolumeClaim {
	c := claim(name, class, size)
	c.Spec.VolumeName = pvName
	c.Annotations = map[string]string{"pv.kubernetes.io/bind-completed": "yes"}
	c.Status.Phase = corev1.ClaimBound
	return c
}

// boundVolume is volume bound to the claim c.
func boundVolume(pv *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: c.Namespace, Name: c.Name, UID: c.UID}
	pv.Status.Phase = corev1.VolumeBound
	return pv
}

func class(name, provisioner string, mode storagev1.VolumeBindingMode, topologies ...corev1.TopologySelectorTerm) *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner,
		VolumeBindingMode: ptr.To(mode), AllowedTopologies: topologies,
	}
}

func zones(values ...string) corev1.TopologySelectorTerm {
	return corev1.TopologySelectorTerm{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: corev1.LabelTopologyZone, Values: values}}}
}

func pod(name string, claims ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)}}
	for i, c := range claims {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: fmt.Sprintf("v%d", i),
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
	}
	return p
}

// checkStatus compares a status by code and reasons (nil means Success).
func checkStatus(t *testing.T, what string, got, want *framework.Status) {
	t.Helper()
	if got.Code() != want.Code() || !slices.Equal(got.Reasons(), want.Reasons()) {
		t.Errorf("%s: got %v %q, want %v %q", what, got.Code(), got.Reasons(), want.Code(), want.Reasons())
	}
}

// waitFor waits until the plugin's informers show what cond looks for.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	poll.Until(e.t, what, poll.True(cond))
}

// updates lists the update actions the plugin made, as "resource ns/name".
func (e *env) updates() []k8stesting.UpdateAction {
	var out []k8stesting.UpdateAction
	for _, a := range e.client.Actions() {
		if u, ok := a.(k8stesting.UpdateAction); ok {
			out = append(out, u)
		}
	}
	return out
}
