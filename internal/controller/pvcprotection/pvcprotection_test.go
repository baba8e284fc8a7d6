package pvcprotection

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
)

const ns = "default"

func claim(name string, deleted bool, finalizers ...string) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Finalizers: finalizers}}
	if deleted {
		c.DeletionTimestamp = ptr.To(metav1.Now())
	}
	return c
}

func pod(name, node string, phase corev1.PodPhase, claims ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	for _, c := range claims {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: c,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
	}
	return p
}

// ephemeralPod has a generic ephemeral volume "data", whose claim is <pod>-data.
func ephemeralPod(name string) *corev1.Pod {
	p := pod(name, "n1", corev1.PodRunning)
	p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}}
	return p
}

func ownedBy(c *corev1.PersistentVolumeClaim, p *corev1.Pod) *corev1.PersistentVolumeClaim {
	c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: ptr.To(true)}}
	return c
}

type fixture struct {
	client *fake.Clientset
	c      *Controller
}

// newFixture builds the controller over a fake clientset holding live, with
// cached in the informers' caches (not started: the test fills them).
func newFixture(t *testing.T, cached []runtime.Object, live ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewClientset(live...)
	f := informers.NewSharedInformerFactory(client, 0)
	c, err := NewController(controller.Deps{Client: client, Informers: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range cached {
		var err error
		switch o.(type) {
		case *corev1.PersistentVolumeClaim:
			err = f.Core().V1().PersistentVolumeClaims().Informer().GetIndexer().Add(o)
		case *corev1.Pod:
			err = f.Core().V1().Pods().Informer().GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return &fixture{client: client, c: c}
}

// actions names the fake clientset's actions: "verb resource[ finalizers]".
func (f *fixture) actions() []string {
	var out []string
	for _, a := range f.client.Actions() {
		s := a.GetVerb() + " " + a.GetResource().Resource
		if u, ok := a.(k8stesting.UpdateAction); ok {
			if pvc, ok := u.GetObject().(*corev1.PersistentVolumeClaim); ok {
				s += fmt.Sprintf(" %s %v", pvc.Name, pvc.Finalizers)
			}
		}
		out = append(out, s)
	}
	return out
}

func TestSync(t *testing.T) {
	eph := ephemeralPod("web")
	shutDown := ephemeralPod("web")
	shutDown.DeletionTimestamp = ptr.To(metav1.Now())
	shutDown.DeletionGracePeriodSeconds = ptr.To[int64](0)
	deletingPod := pod("p", "n1", corev1.PodRunning, "data")
	deletingPod.DeletionTimestamp = ptr.To(metav1.Now())
	deletingPod.DeletionGracePeriodSeconds = ptr.To[int64](30)
	for _, tc := range []struct {
		name   string
		claim  *corev1.PersistentVolumeClaim
		cached []runtime.Object // besides the claim
		live   []runtime.Object // the API server's pods
		want   []string
	}{
		{name: "claim without the finalizer gets it", claim: claim("data", false),
			want: []string{"update persistentvolumeclaims data [kubernetes.io/pvc-protection]"}},
		{name: "claim with the finalizer: nothing to do", claim: claim("data", false, Finalizer)},
		{name: "deleted claim, no pods: live list, then the finalizer goes", claim: claim("data", true, "other", Finalizer),
			want: []string{"list pods", "update persistentvolumeclaims data [other]"}},
		{name: "deleted claim used by a scheduled pod: kept", claim: claim("data", true, Finalizer),
			cached: []runtime.Object{pod("p", "n1", corev1.PodRunning, "data")}},
		{name: "deleted claim, a pod with another claim and an emptyDir", claim: claim("data", true, Finalizer),
			cached: []runtime.Object{pod("p", "n1", corev1.PodRunning, "logs")}, live: []runtime.Object{pod("p", "n1", corev1.PodRunning, "logs")},
			want: []string{"list pods", "update persistentvolumeclaims data []"}},
		{name: "deleted claim used by a finished pod that still exists: kept", claim: claim("data", true, Finalizer),
			cached: []runtime.Object{pod("p", "n1", corev1.PodFailed, "data")}},
		{name: "deleted claim used by a terminating pod: kept", claim: claim("data", true, Finalizer),
			cached: []runtime.Object{deletingPod}},
		{name: "deleted claim used by a pod the cache has not seen yet: kept", claim: claim("data", true, Finalizer),
			live: []runtime.Object{pod("p", "n1", corev1.PodPending, "data")}, want: []string{"list pods"}},
		{name: "deleted claim used by an unscheduled pod only", claim: claim("data", true, Finalizer),
			cached: []runtime.Object{pod("p", "", corev1.PodPending, "data")}, live: []runtime.Object{pod("p", "", corev1.PodPending, "data")},
			want: []string{"list pods", "update persistentvolumeclaims data []"}},
		{name: "deleted ephemeral claim of a running pod: kept", claim: ownedBy(claim("web-data", true, Finalizer), eph),
			cached: []runtime.Object{eph}},
		{name: "deleted ephemeral claim of a pod that is shut down", claim: ownedBy(claim("web-data", true, Finalizer), shutDown),
			cached: []runtime.Object{shutDown}, live: []runtime.Object{shutDown},
			want: []string{"list pods", "update persistentvolumeclaims web-data []"}},
		{name: "deleted claim of an ephemeral volume's name the pod does not own", claim: claim("web-data", true, Finalizer),
			cached: []runtime.Object{eph}, live: []runtime.Object{eph},
			want: []string{"list pods", "update persistentvolumeclaims web-data []"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, append([]runtime.Object{tc.claim}, tc.cached...), append([]runtime.Object{tc.claim}, tc.live...)...)
			if err := f.c.Sync(context.Background(), ns+"/"+tc.claim.Name); err != nil {
				t.Fatal(err)
			}
			if got := f.actions(); !slices.Equal(got, tc.want) {
				t.Errorf("actions\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestSyncFailures(t *testing.T) {
	// A refused update is an error, retried by the worker.
	f := newFixture(t, []runtime.Object{claim("data", false)}, claim("data", false))
	f.client.PrependReactor("update", "persistentvolumeclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcd is down")
	})
	if err := f.c.Sync(context.Background(), ns+"/data"); err == nil || !strings.Contains(err.Error(), "adding protection finalizer of PersistentVolumeClaim default/data: etcd is down") {
		t.Errorf("Sync: %v", err)
	}
	// A failed live list keeps the finalizer.
	f = newFixture(t, []runtime.Object{claim("data", true, Finalizer)}, claim("data", true, Finalizer))
	f.client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcd is down")
	})
	if err := f.c.Sync(context.Background(), ns+"/data"); err == nil || err.Error() != "live list of pods failed: etcd is down" {
		t.Errorf("Sync: %v", err)
	}
	if got := f.actions(); !slices.Equal(got, []string{"list pods"}) {
		t.Errorf("actions %q", got)
	}
	// A claim that is gone needs nothing.
	f = newFixture(t, nil)
	if err := f.c.Sync(context.Background(), ns+"/gone"); err != nil || len(f.actions()) != 0 {
		t.Errorf("Sync of a missing claim: %v %q", err, f.actions())
	}
}

// TestPodEvents checks which pod events queue the pod's claims.
func TestPodEvents(t *testing.T) {
	running := pod("p", "n1", corev1.PodRunning, "data")
	replaced := pod("p", "n1", corev1.PodRunning, "logs")
	replaced.UID = "uid-new"
	for _, tc := range []struct {
		name     string
		old, cur *corev1.Pod
		deleted  bool
		want     []string
	}{
		{name: "a running pod's update", old: running, cur: running},
		{name: "a finished pod", old: running, cur: pod("p", "n1", corev1.PodSucceeded, "data"), want: []string{"default/data"}},
		{name: "an unscheduled pod", cur: pod("p", "", corev1.PodPending, "data"), want: []string{"default/data"}},
		{name: "a deleted running pod", cur: running, deleted: true, want: []string{"default/data"}},
		{name: "a pod replaced under its name", old: running, cur: replaced, want: []string{"default/data"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			var old any
			if tc.old != nil {
				old = tc.old
			}
			f.c.podChanged(old, tc.cur, tc.deleted)
			var got []string
			for f.c.queue.Len() > 0 {
				k, _ := f.c.queue.Get()
				got = append(got, k)
				f.c.queue.Done(k)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("queued %q, want %q", got, tc.want)
			}
		})
	}
}
