package persistentvolume

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
)

// fixture is a controller on a fake clientset whose informers' caches hold objs.
type fixture struct {
	c      *Controller
	client *fake.Clientset
	events *record.FakeRecorder
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	for _, o := range objs {
		if m, ok := o.(metav1.Object); ok && m.GetResourceVersion() == "" {
			m.SetResourceVersion("1")
		}
	}
	client := fake.NewClientset(objs...)
	// The fake tracker keeps resourceVersions as written; number the writes as the API
	// server does, so that the mutation cache can tell newer objects.
	var rv atomic.Int64
	rv.Store(100)
	client.PrependReactor("update", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if m, ok := a.(k8stesting.UpdateAction).GetObject().(metav1.Object); ok {
			m.SetResourceVersion(strconv.FormatInt(rv.Add(1), 10))
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	events := record.NewFakeRecorder(100)
	c, err := NewWithOptions(controller.Deps{Client: client, Informers: factory, Logger: slog.New(slog.DiscardHandler),
		Recorder: func(string) record.EventRecorder { return events }}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		var err error
		switch o.(type) {
		case *corev1.PersistentVolume:
			err = factory.Core().V1().PersistentVolumes().Informer().GetIndexer().Add(o)
		case *corev1.PersistentVolumeClaim:
			err = factory.Core().V1().PersistentVolumeClaims().Informer().GetIndexer().Add(o)
		case *storagev1.StorageClass:
			err = factory.Storage().V1().StorageClasses().Informer().GetIndexer().Add(o)
		case *corev1.Pod:
			err = factory.Core().V1().Pods().Informer().GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	client.ClearActions()
	return &fixture{c: c, client: client, events: events}
}

// actions are the writes the controller made, as "verb resource[/subresource] name".
func (f *fixture) actions() []string {
	var out []string
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "get" || a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		res := a.GetResource().Resource
		if a.GetSubresource() != "" {
			res += "/" + a.GetSubresource()
		}
		name := ""
		switch a := a.(type) {
		case k8stesting.UpdateAction:
			name = objectName(a.GetObject())
		case k8stesting.DeleteAction:
			name = a.GetName()
		}
		out = append(out, a.GetVerb()+" "+res+" "+name)
	}
	return out
}

func objectName(o runtime.Object) string {
	switch o := o.(type) {
	case *corev1.PersistentVolume:
		return o.Name
	case *corev1.PersistentVolumeClaim:
		return o.Name
	}
	return fmt.Sprintf("%T", o)
}

func (f *fixture) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-f.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestSyncClaimBindsInUpstreamOrder(t *testing.T) {
	claim := pvc("data", "1Gi", modes(rwo))
	claim.Status.Phase = corev1.ClaimPending
	f := newFixture(t, claim, pv("vol", "2Gi", modes(rwo)))
	if err := f.c.SyncClaim(context.Background(), "ns/data"); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"update persistentvolumes vol",
		"update persistentvolumes/status vol",
		"update persistentvolumeclaims data",
		"update persistentvolumeclaims/status data",
	}
	if got := f.actions(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("actions:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A second sync (the caches now current through the mutation cache) writes nothing.
	f.client.ClearActions()
	if err := f.c.SyncClaim(context.Background(), "ns/data"); err != nil {
		t.Fatal(err)
	}
	if got := f.actions(); len(got) != 0 {
		t.Errorf("second sync wrote %v", got)
	}
}

func TestSyncUnboundClaimEvents(t *testing.T) {
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	now := storagev1.VolumeBindingImmediate
	for _, tc := range []struct {
		name   string
		claim  *corev1.PersistentVolumeClaim
		objs   []runtime.Object
		want   []string
		writes []string
	}{
		{name: "no class, no volume", claim: pvc("c", "1Gi", modes(rwo)),
			want: []string{"Normal FailedBinding no persistent volumes available for this claim and no storage class is set"},
			// A new claim's phase is "" here (the API server defaults it to Pending).
			writes: []string{"update persistentvolumeclaims/status c"}},
		{name: "unknown class", claim: pvc("c", "1Gi", modes(rwo), func(c *corev1.PersistentVolumeClaim) {
			c.Spec.StorageClassName, c.Status.Phase = ptr.To("fast"), corev1.ClaimPending
		}), want: []string{`Warning ProvisioningFailed storageclass.storage.k8s.io "fast" not found`}},
		{name: "in-tree provisioner", claim: pvc("c", "1Gi", modes(rwo), func(c *corev1.PersistentVolumeClaim) {
			c.Spec.StorageClassName, c.Status.Phase = ptr.To("local"), corev1.ClaimPending
		}), objs: []runtime.Object{&storagev1.StorageClass{ObjectMeta: metaName("local"), Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &now}},
			want: []string{"Warning ProvisioningFailed no volume plugin matched name: kubernetes.io/no-provisioner"}},
		{name: "wait for first consumer", claim: pvc("c", "1Gi", modes(rwo), func(c *corev1.PersistentVolumeClaim) {
			c.Spec.StorageClassName, c.Status.Phase = ptr.To("late"), corev1.ClaimPending
		}), objs: []runtime.Object{&storagev1.StorageClass{ObjectMeta: metaName("late"), Provisioner: "example.com/p", VolumeBindingMode: &wait}},
			want: []string{"Normal WaitForFirstConsumer waiting for first consumer to be created before binding"}},
		{name: "wait for two pods", claim: pvc("c", "1Gi", modes(rwo), func(c *corev1.PersistentVolumeClaim) {
			c.Spec.StorageClassName, c.Status.Phase = ptr.To("late"), corev1.ClaimPending
		}), objs: []runtime.Object{&storagev1.StorageClass{ObjectMeta: metaName("late"), Provisioner: "example.com/p", VolumeBindingMode: &wait},
			podUsing("p1", "c", ""), podUsing("p2", "c", ""), podUsing("scheduled", "c", "n1")},
			want: []string{"Normal WaitForPodScheduled waiting for pods p1,p2 to be scheduled"}},
		{name: "external provisioner", claim: pvc("c", "1Gi", modes(rwo), func(c *corev1.PersistentVolumeClaim) {
			c.Spec.StorageClassName, c.Status.Phase = ptr.To("ext"), corev1.ClaimPending
		}), objs: []runtime.Object{&storagev1.StorageClass{ObjectMeta: metaName("ext"), Provisioner: "example.com/p", VolumeBindingMode: &now}},
			want:   []string{"Normal ExternalProvisioning Waiting for a volume to be created either by the external provisioner 'example.com/p' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered."},
			writes: []string{"update persistentvolumeclaims c"}},
		{name: "volume bound to another claim by the user", claim: pvc("c", "1Gi", modes(rwo), func(c *corev1.PersistentVolumeClaim) {
			c.Spec.VolumeName, c.Status.Phase = "taken", corev1.ClaimPending
		}), objs: []runtime.Object{pv("taken", "1Gi", modes(rwo), func(v *corev1.PersistentVolume) {
			v.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "ns", Name: "other", UID: "other"}
		})}, want: []string{`Warning FailedBinding volume "taken" already bound to a different claim.`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, append(tc.objs, tc.claim)...)
			if err := f.c.SyncClaim(context.Background(), "ns/c"); err != nil {
				t.Fatal(err)
			}
			if got := f.drainEvents(); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("events %q, want %q", got, tc.want)
			}
			if got := f.actions(); strings.Join(got, "\n") != strings.Join(tc.writes, "\n") {
				t.Errorf("writes %q, want %q", got, tc.writes)
			}
		})
	}
}

func TestSyncBoundClaimLost(t *testing.T) {
	bound := func(c *corev1.PersistentVolumeClaim) {
		c.Annotations = map[string]string{"pv.kubernetes.io/bind-completed": "yes"}
		c.Status.Phase = corev1.ClaimBound
	}
	for _, tc := range []struct {
		name  string
		claim *corev1.PersistentVolumeClaim
		objs  []runtime.Object
		want  string
	}{
		{name: "volumeName removed", claim: pvc("c", "1Gi", modes(rwo), bound),
			want: "Warning ClaimLost Bound claim has lost reference to PersistentVolume. Data on the volume is lost!"},
		{name: "volume gone", claim: pvc("c", "1Gi", modes(rwo), bound, func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "gone" }),
			want: "Warning ClaimLost Bound claim has lost its PersistentVolume. Data on the volume is lost!"},
		{name: "volume bound elsewhere", claim: pvc("c", "1Gi", modes(rwo), bound, func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "v" }),
			objs: []runtime.Object{pv("v", "1Gi", modes(rwo), func(v *corev1.PersistentVolume) {
				v.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "ns", Name: "c", UID: "someone-else"}
			})},
			want: "Warning ClaimMisbound Two claims are bound to the same volume, this one is bound incorrectly"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, append(tc.objs, tc.claim)...)
			if err := f.c.SyncClaim(context.Background(), "ns/c"); err != nil {
				t.Fatal(err)
			}
			if got := f.drainEvents(); len(got) != 1 || got[0] != tc.want {
				t.Errorf("events %q, want %q", got, tc.want)
			}
			if got := f.actions(); len(got) != 1 || got[0] != "update persistentvolumeclaims/status c" {
				t.Errorf("writes %q, want the status", got)
			}
			pvc, err := f.client.CoreV1().PersistentVolumeClaims("ns").Get(context.Background(), "c", metaGet)
			if err != nil {
				t.Fatal(err)
			}
			if pvc.Status.Phase != corev1.ClaimLost {
				t.Errorf("phase %s, want Lost", pvc.Status.Phase)
			}
		})
	}
}

func TestSyncVolume(t *testing.T) {
	ref := func(v *corev1.PersistentVolume) {
		v.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "ns", Name: "c", UID: claimUID}
		v.Status.Phase = corev1.VolumeBound
	}
	policy := func(p corev1.PersistentVolumeReclaimPolicy) func(*corev1.PersistentVolume) {
		return func(v *corev1.PersistentVolume) { v.Spec.PersistentVolumeReclaimPolicy = p }
	}
	for _, tc := range []struct {
		name      string
		volume    *corev1.PersistentVolume
		objs      []runtime.Object
		writes    []string
		phase     corev1.PersistentVolumePhase
		wantEvent string
	}{
		{name: "new volume becomes Available", volume: pv("v", "1Gi", modes(rwo), func(v *corev1.PersistentVolume) { v.Status.Phase = corev1.VolumePending }),
			writes: []string{"update persistentvolumes/status v"}, phase: corev1.VolumeAvailable},
		{name: "claim still there", volume: pv("v", "1Gi", modes(rwo), ref),
			objs: []runtime.Object{pvc("c", "1Gi", modes(rwo), func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "v" })}, phase: corev1.VolumeBound},
		{name: "retain", volume: pv("v", "1Gi", modes(rwo), ref, policy(corev1.PersistentVolumeReclaimRetain)),
			writes: []string{"update persistentvolumes/status v"}, phase: corev1.VolumeReleased},
		{name: "recycle without a recycler", volume: pv("v", "1Gi", modes(rwo), ref, policy(corev1.PersistentVolumeReclaimRecycle)),
			writes: []string{"update persistentvolumes/status v", "update persistentvolumes/status v"}, phase: corev1.VolumeFailed,
			wantEvent: "Warning VolumeFailedRecycle No recycler plugin found for the volume!"},
		{name: "delete of an external provisioner's volume", volume: pv("v", "1Gi", modes(rwo), ref, policy(corev1.PersistentVolumeReclaimDelete), func(v *corev1.PersistentVolume) {
			v.Annotations = map[string]string{"pv.kubernetes.io/provisioned-by": "example.com/p"}
		}), writes: []string{"update persistentvolumes/status v"}, phase: corev1.VolumeReleased},
		{name: "delete without a deleter", volume: pv("v", "1Gi", modes(rwo), ref, policy(corev1.PersistentVolumeReclaimDelete)),
			writes: []string{"update persistentvolumes/status v", "update persistentvolumes/status v"}, phase: corev1.VolumeFailed,
			wantEvent: `Warning VolumeFailedDelete error getting deleter volume plugin for volume "v": no deletable volume plugin matched`},
		{name: "delete of a volume being deleted already (waiting for pv-protection)", volume: pv("v", "1Gi", modes(rwo), ref, policy(corev1.PersistentVolumeReclaimDelete), func(v *corev1.PersistentVolume) {
			v.DeletionTimestamp = ptr.To(metav1.Now())
			v.Finalizers = []string{"kubernetes.io/pv-protection"}
		}), writes: []string{"update persistentvolumes/status v"}, phase: corev1.VolumeReleased},
		{name: "claim bound to another volume: controller's binding undone", volume: pv("v", "1Gi", modes(rwo), ref, func(v *corev1.PersistentVolume) {
			v.Annotations = map[string]string{"pv.kubernetes.io/bound-by-controller": "yes"}
		}), objs: []runtime.Object{pvc("c", "1Gi", modes(rwo), func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "other" })},
			writes: []string{"update persistentvolumes v", "update persistentvolumes/status v"}, phase: corev1.VolumeAvailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, append(tc.objs, tc.volume)...)
			if err := f.c.SyncVolume(context.Background(), "v"); err != nil {
				t.Fatal(err)
			}
			if got := f.actions(); strings.Join(got, "\n") != strings.Join(tc.writes, "\n") {
				t.Errorf("writes %q, want %q", got, tc.writes)
			}
			pv, err := f.client.CoreV1().PersistentVolumes().Get(context.Background(), "v", metaGet)
			if err != nil {
				t.Fatal(err)
			}
			if pv.Status.Phase != tc.phase {
				t.Errorf("phase %s, want %s", pv.Status.Phase, tc.phase)
			}
			events := f.drainEvents()
			if tc.wantEvent == "" && len(events) != 0 || tc.wantEvent != "" && (len(events) != 1 || events[0] != tc.wantEvent) {
				t.Errorf("events %q, want %q", events, tc.wantEvent)
			}
		})
	}
}

var metaGet = metav1.GetOptions{}

func metaName(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

// podUsing is a pod of namespace ns using claim, on node (or unscheduled).
func podUsing(name, claim, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: corev1.PodSpec{NodeName: node, Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}},
	}
}
