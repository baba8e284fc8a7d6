package apiserver_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/testenv"
)

func csrRequestPEM(t *testing.T, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// TestCertificateSigningRequests drives the CSR API through client-go: a bad request is
// 422 naming spec.request, the requester is the caller, approval goes through its
// subresource only, and discovery lists both subresources.
func TestCertificateSigningRequests(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := ctxT(t)
	csrs := env.Client.CertificatesV1().CertificateSigningRequests()
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "alice"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: []byte("not a PEM"), SignerName: "example.com/test", Username: "someone-else",
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}
	_, err := csrs.Create(ctx, csr, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("bad PEM: %v, want 422", err)
	}
	st := err.(apierrors.APIStatus).Status()
	if st.Details == nil || len(st.Details.Causes) == 0 || st.Details.Causes[0].Field != "spec.request" {
		t.Errorf("bad PEM causes = %+v, want spec.request", st.Details)
	}

	csr.Spec.Request = csrRequestPEM(t, "alice")
	got, err := csrs.Create(ctx, csr, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if got.Spec.Username != "kubernetes-admin" {
		t.Errorf("requester = %q, want kubernetes-admin", got.Spec.Username)
	}

	// The main resource cannot approve.
	got.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test"}}
	upd, err := csrs.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if len(upd.Status.Conditions) != 0 {
		t.Errorf("update of the main resource approved: %v", upd.Status.Conditions)
	}
	got.ResourceVersion = upd.ResourceVersion
	appr, err := csrs.UpdateApproval(ctx, got.Name, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("approve: %v", err)
	}
	if len(appr.Status.Conditions) != 1 || appr.Status.Conditions[0].Type != certificatesv1.CertificateApproved || appr.Status.Conditions[0].LastUpdateTime.IsZero() {
		t.Errorf("approval = %+v", appr.Status.Conditions)
	}
	// Denying an approved CSR is refused.
	appr.Status.Conditions = append(appr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue})
	if _, err := csrs.UpdateApproval(ctx, got.Name, appr, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("deny after approve: %v, want 422", err)
	}

	list, err := csrs.List(ctx, metav1.ListOptions{FieldSelector: "spec.signerName=example.com/test"})
	if err != nil || len(list.Items) != 1 {
		t.Errorf("list by signer = %v, %v; want 1", list, err)
	}
	res, err := env.Client.Discovery().ServerResourcesForGroupVersion("certificates.k8s.io/v1")
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	found := map[string][]string{}
	for _, r := range res.APIResources {
		found[r.Name] = r.Verbs
	}
	for _, n := range []string{"certificatesigningrequests", "certificatesigningrequests/approval", "certificatesigningrequests/status"} {
		if _, ok := found[n]; !ok {
			t.Errorf("discovery lacks %s: %v", n, found)
		}
	}
	if v := found["certificatesigningrequests/approval"]; len(v) != 3 {
		t.Errorf("approval verbs = %v, want get patch update", v)
	}
}
