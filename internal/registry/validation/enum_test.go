package validation

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidateOptionalEnum(t *testing.T) {
	p := field.NewPath("spec", "policy")
	if errs := validateOptionalEnum[corev1.PreemptionPolicy](nil, p, corev1.PreemptNever); len(errs) != 0 {
		t.Fatalf("unset value: %v", errs)
	}
	if errs := validateOptionalEnum(ptr(corev1.PreemptNever), p, corev1.PreemptLowerPriority, corev1.PreemptNever); len(errs) != 0 {
		t.Fatalf("allowed value: %v", errs)
	}
	errs := validateOptionalEnum(ptr(corev1.PreemptionPolicy("Sometimes")), p, corev1.PreemptLowerPriority, corev1.PreemptNever)
	const want = `spec.policy: Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", "Never"`
	if len(errs) != 1 || errs[0].Error() != want {
		t.Fatalf("got %v, want %q", errs, want)
	}
}

// A mutating webhook with an unknown failure, match and reinvocation policy gets
// one NotSupported error per field, each listing the values in upstream's order.
func TestWebhookPolicyEnums(t *testing.T) {
	none := admissionregistrationv1.SideEffectClassNone
	url := "https://127.0.0.1:8443/hook"
	c := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "c"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "w.example.com",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url},
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			FailurePolicy:           ptr(admissionregistrationv1.FailurePolicyType("Maybe")),
			MatchPolicy:             ptr(admissionregistrationv1.MatchPolicyType("Loose")),
			ReinvocationPolicy:      ptr(admissionregistrationv1.ReinvocationPolicyType("Always")),
		}},
	}
	got := map[string]string{}
	for _, e := range ValidateMutatingWebhookConfiguration(c) {
		got[e.Field] = e.Error()
	}
	want := map[string]string{
		"webhooks[0].failurePolicy":      `webhooks[0].failurePolicy: Unsupported value: "Maybe": supported values: "Fail", "Ignore"`,
		"webhooks[0].matchPolicy":        `webhooks[0].matchPolicy: Unsupported value: "Loose": supported values: "Equivalent", "Exact"`,
		"webhooks[0].reinvocationPolicy": `webhooks[0].reinvocationPolicy: Unsupported value: "Always": supported values: "Never", "IfNeeded"`,
	}
	if len(got) != len(want) {
		t.Fatalf("errors %v, want %v", got, want)
	}
	for f, w := range want {
		if got[f] != w {
			t.Errorf("%s: got %q, want %q", f, got[f], w)
		}
	}
}
