package apiserver

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/apiserver/admission"
	"github.com/kubette/kubette/internal/storage/etcd"
)

// labelAdmitter labels every ConfigMap it admits, refuses ConfigMaps whose data holds
// "forbidden" and the delete of ConfigMaps labelled keep=true; it records the operations.
type labelAdmitter struct{ seen []admission.Operation }

func (l *labelAdmitter) Admit(_ context.Context, a *admission.Attributes) error {
	if a.Resource.Resource != "configmaps" {
		return nil
	}
	l.seen = append(l.seen, a.Operation)
	if cm, ok := a.Object.(*corev1.ConfigMap); ok {
		if cm.Labels == nil {
			cm.Labels = map[string]string{}
		}
		cm.Labels["admitted"] = string(a.Operation)
	}
	return nil
}

func (l *labelAdmitter) Validate(_ context.Context, a *admission.Attributes) error {
	if a.Resource.Resource != "configmaps" {
		return nil
	}
	if cm, ok := a.Object.(*corev1.ConfigMap); ok && cm.Data["v"] == "forbidden" {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, errors.New("no forbidden values"))
	}
	if old, ok := a.OldObject.(*corev1.ConfigMap); ok && a.Operation == admission.Delete && old.Labels["keep"] == "true" {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, errors.New("kept"))
	}
	return nil
}

func TestAdmissionChain(t *testing.T) {
	ctx := t.Context()
	plugin := &labelAdmitter{}
	s := startServer(ctx, t, Config{Admission: admission.Chain{{Name: "Label", Impl: plugin}}}, etcd.EmbeddedConfig{UnsafeNoFsync: true})
	cms := s.client.CoreV1().ConfigMaps("default")
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string]string{"v": "1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if cm.Labels["admitted"] != "CREATE" {
		t.Fatalf("create not mutated: %v", cm.Labels)
	}
	cm.Data["v"] = "2"
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil || cm.Labels["admitted"] != "UPDATE" {
		t.Fatalf("update: %v %v", err, cm.Labels)
	}
	cm.Data["v"] = "forbidden"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("refused update: %v", err)
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Data: map[string]string{"v": "forbidden"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("refused create: %v", err)
	}
	if _, err := cms.Get(ctx, "b", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("refused create was stored: %v", err)
	}
	cm.Data["v"] = "3"
	cm.Labels["keep"] = "true"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "a", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("refused delete: %v", err)
	}
	if got, err := cms.Get(ctx, "a", metav1.GetOptions{}); err != nil || got.Data["v"] != "3" {
		t.Fatalf("after refused delete: %v %v", got, err)
	}
}
