package storageobjectinuseprotection

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/admission"
)

func TestAdmit(t *testing.T) {
	pvc := func(finalizers ...string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Finalizers: finalizers}}
	}
	pv := func(finalizers ...string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "v", Finalizers: finalizers}}
	}
	finalizers := func(o runtime.Object) []string {
		switch x := o.(type) {
		case *corev1.PersistentVolumeClaim:
			return x.Finalizers
		case *corev1.PersistentVolume:
			return x.Finalizers
		case *corev1.ConfigMap:
			return x.Finalizers
		}
		return nil
	}
	for _, tc := range []struct {
		name        string
		resource    string
		subresource string
		op          admission.Operation
		obj         runtime.Object
		want        []string
	}{
		{"new claim", "persistentvolumeclaims", "", admission.Create, pvc(), []string{PVCProtectionFinalizer}},
		{"new claim with other finalizers", "persistentvolumeclaims", "", admission.Create, pvc("x/y"), []string{"x/y", PVCProtectionFinalizer}},
		{"new claim that has it", "persistentvolumeclaims", "", admission.Create, pvc(PVCProtectionFinalizer), []string{PVCProtectionFinalizer}},
		{"new volume", "persistentvolumes", "", admission.Create, pv(), []string{PVProtectionFinalizer}},
		{"new volume that has it", "persistentvolumes", "", admission.Create, pv("a", PVProtectionFinalizer), []string{"a", PVProtectionFinalizer}},
		{"updated claim (finalizer removed by its controller)", "persistentvolumeclaims", "", admission.Update, pvc(), nil},
		{"updated volume", "persistentvolumes", "", admission.Update, pv(), nil},
		{"claim status", "persistentvolumeclaims", "status", admission.Create, pvc(), nil},
		{"another kind", "configmaps", "", admission.Create, &corev1.ConfigMap{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &admission.Attributes{Operation: tc.op, Subresource: tc.subresource, Object: tc.obj,
				Resource: schema.GroupVersionResource{Version: "v1", Resource: tc.resource}}
			if err := (Plugin{}).Admit(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			if got := finalizers(tc.obj); !slices.Equal(got, tc.want) {
				t.Errorf("finalizers %q, want %q", got, tc.want)
			}
		})
	}
}
