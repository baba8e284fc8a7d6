package pvprotection

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
)

func volume(phase corev1.PersistentVolumePhase, deleted bool, finalizers ...string) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1", Finalizers: finalizers},
		Status: corev1.PersistentVolumeStatus{Phase: phase}}
	if deleted {
		pv.DeletionTimestamp = ptr.To(metav1.Now())
	}
	return pv
}

func TestSync(t *testing.T) {
	for _, tc := range []struct {
		name string
		pv   *corev1.PersistentVolume
		want []string
	}{
		{"volume without the finalizer gets it", volume(corev1.VolumeAvailable, false), []string{"update persistentvolumes [kubernetes.io/pv-protection]"}},
		{"volume with the finalizer", volume(corev1.VolumeBound, false, Finalizer), nil},
		{"deleted Bound volume: kept", volume(corev1.VolumeBound, true, Finalizer), nil},
		{"deleted Available volume: the finalizer goes", volume(corev1.VolumeAvailable, true, "a", Finalizer), []string{"update persistentvolumes [a]"}},
		{"deleted Released volume: the finalizer goes", volume(corev1.VolumeReleased, true, Finalizer), []string{"update persistentvolumes []"}},
		{"deleted volume without the finalizer", volume(corev1.VolumeAvailable, true, "a"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(tc.pv)
			f := informers.NewSharedInformerFactory(client, 0)
			c, err := NewController(controller.Deps{Client: client, Informers: f})
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Core().V1().PersistentVolumes().Informer().GetIndexer().Add(tc.pv); err != nil {
				t.Fatal(err)
			}
			if err := c.Sync(context.Background(), "pv1"); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range client.Actions() {
				u := a.(k8stesting.UpdateAction)
				got = append(got, fmt.Sprintf("%s %s %v", a.GetVerb(), a.GetResource().Resource, u.GetObject().(*corev1.PersistentVolume).Finalizers))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("actions %q, want %q", got, tc.want)
			}
		})
	}
}
