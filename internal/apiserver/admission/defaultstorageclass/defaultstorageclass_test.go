package defaultstorageclass

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/apiserver/admission"
)

type classes []runtime.Object

func (c classes) List(context.Context, schema.GroupResource, string) ([]runtime.Object, error) {
	return c, nil
}

func class(name string, age time.Duration, annotations map[string]string) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations,
		CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-age))}}
}

func TestAdmit(t *testing.T) {
	def := map[string]string{IsDefaultAnnotation: "true"}
	beta := map[string]string{BetaIsDefaultAnnotation: "true"}
	for _, tc := range []struct {
		name    string
		classes classes
		pvc     *corev1.PersistentVolumeClaim
		want    *string
	}{
		{"no default", classes{class("a", 0, nil)}, &corev1.PersistentVolumeClaim{}, nil},
		{"the default", classes{class("a", 0, nil), class("b", time.Hour, def)}, &corev1.PersistentVolumeClaim{}, ptr.To("b")},
		{"the newest of two defaults", classes{class("old", time.Hour, def), class("new", time.Minute, beta)}, &corev1.PersistentVolumeClaim{}, ptr.To("new")},
		{"by name among equally new", classes{class("z", 0, def), class("m", 0, def)}, &corev1.PersistentVolumeClaim{}, ptr.To("m")},
		{"an explicit empty class stays", classes{class("b", 0, def)},
			&corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("")}}, ptr.To("")},
		{"the beta annotation counts as a class", classes{class("b", 0, def)},
			&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{corev1.BetaStorageClassAnnotation: "x"}}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &admission.Attributes{Operation: admission.Create, Resource: schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, Object: tc.pvc}
			if err := New(tc.classes).Admit(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			got := tc.pvc.Spec.StorageClassName
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Fatalf("storageClassName %v, want %v", ptr.Deref(got, "<nil>"), ptr.Deref(tc.want, "<nil>"))
			}
		})
	}
}
