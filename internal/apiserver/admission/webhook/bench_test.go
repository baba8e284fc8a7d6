package webhook

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubette/kubette/internal/apiserver/admission"
)

// benchServer serves a fixed list of configurations.
type benchServer struct{ configs []runtime.Object }

func (b *benchServer) Get(_ context.Context, gr schema.GroupResource, _, name string) (runtime.Object, error) {
	return nil, apierrors.NewNotFound(gr, name)
}
func (b *benchServer) List(_ context.Context, gr schema.GroupResource, _ string) ([]runtime.Object, error) {
	if gr == validatingConfigs {
		return b.configs, nil
	}
	return nil, nil
}
func (b *benchServer) Versions(schema.GroupResource) []string { return []string{"v1"} }
func (b *benchServer) Convert(_ context.Context, obj runtime.Object, _ schema.GroupVersionResource) (runtime.Object, error) {
	return obj, nil
}
func (b *benchServer) Decode(schema.GroupVersionResource, []byte) (runtime.Object, error) {
	return nil, nil
}

// BenchmarkValidateNoMatch is what the validating webhook plugin costs a write that
// no webhook selects: with no configuration, and with ten configurations whose
// rules name another resource (compiled once, matched per request).
func BenchmarkValidateNoMatch(b *testing.B) {
	a := &admission.Attributes{Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Kind: corev1.SchemeGroupVersion.WithKind("Pod"),
		Operation: admission.Create, Namespace: "default", Name: "p", Object: &corev1.Pod{}}
	none := admissionregistrationv1.SideEffectClassNone
	var configs []runtime.Object
	for i := 0; i < 10; i++ {
		configs = append(configs, &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "c" + string(rune('a'+i)), UID: types.UID("u" + string(rune('a'+i))), ResourceVersion: "1"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "x.example.com", SideEffects: &none,
				Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"CREATE"},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}}},
		})
	}
	for _, tc := range []struct {
		name    string
		configs []runtime.Object
	}{{"none", nil}, {"ten-other", configs}} {
		b.Run(tc.name, func(b *testing.B) {
			v := NewValidating(&benchServer{configs: tc.configs}, Options{})
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := v.Validate(ctx, a); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
