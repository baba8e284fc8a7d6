package registry

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubette/kubette/internal/apiserver/filters"
)

func testCSRPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "alice"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func csrResource(t *testing.T) *Resource {
	t.Helper()
	for _, r := range Builtin() {
		if r.Kind == "CertificateSigningRequest" {
			return r
		}
	}
	t.Fatal("no CertificateSigningRequest in Builtin()")
	return nil
}

func newCSR(t *testing.T) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "c1", ResourceVersion: "1"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: testCSRPEM(t), SignerName: "example.com/signer",
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}
}

func errOn(errs field.ErrorList, path string) bool {
	for _, e := range errs {
		if e.Field == path {
			return true
		}
	}
	return false
}

func TestCSRCreateRecordsRequesterAndDropsStatus(t *testing.T) {
	r := csrResource(t)
	c := newCSR(t)
	c.Spec.Username, c.Spec.Groups = "mallory", []string{"system:masters"}
	c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
	ctx := filters.WithUser(context.Background(), &filters.User{Name: "bob", UID: "u1", Groups: []string{"dev"}, Extra: map[string][]string{"k": {"v"}}})
	r.PrepareForCreateIn(ctx, c)
	if c.Spec.Username != "bob" || c.Spec.UID != "u1" || len(c.Spec.Groups) != 1 || c.Spec.Groups[0] != "dev" || c.Spec.Extra["k"][0] != "v" {
		t.Errorf("requester = %q %q %v %v, want bob u1 [dev] k=v", c.Spec.Username, c.Spec.UID, c.Spec.Groups, c.Spec.Extra)
	}
	if len(c.Status.Conditions) != 0 {
		t.Errorf("conditions = %v, want none", c.Status.Conditions)
	}
	if errs := r.Validate(c); len(errs) != 0 {
		t.Errorf("valid CSR: %v", errs)
	}
}

func TestCSRValidation(t *testing.T) {
	r := csrResource(t)
	cases := []struct {
		name   string
		change func(c *certificatesv1.CertificateSigningRequest)
		field  string
	}{
		{"bad PEM", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = []byte("not pem") }, "spec.request"},
		{"wrong PEM type", func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}})
		}, "spec.request"},
		{"no signer", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "" }, "spec.signerName"},
		{"unqualified signer", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "signer" }, "spec.signerName"},
		{"one-label domain", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "example/signer" }, "spec.signerName"},
		{"legacy signer", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "kubernetes.io/legacy-unknown" }, "spec.signerName"},
		{"no usages", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Usages = nil }, "spec.usages"},
		{"unknown usage", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Usages = []certificatesv1.KeyUsage{"flying"} }, "spec.usages[0]"},
		{"duplicate usage", func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth, certificatesv1.UsageClientAuth}
		}, "spec.usages[1]"},
		{"short expiration", func(c *certificatesv1.CertificateSigningRequest) { s := int32(599); c.Spec.ExpirationSeconds = &s }, "spec.expirationSeconds"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCSR(t)
			tc.change(c)
			if errs := r.Validate(c); !errOn(errs, tc.field) {
				t.Errorf("errors %v, want one on %s", errs, tc.field)
			}
		})
	}
}

func approved(reason string) certificatesv1.CertificateSigningRequestCondition {
	return certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: reason}
}

func TestCSRApprovalAndStatus(t *testing.T) {
	r := csrResource(t)
	old := newCSR(t)

	// The main resource may not approve, nor change the spec (it is kept).
	upd := old.DeepCopy()
	upd.Status.Conditions = append(upd.Status.Conditions, approved("x"))
	upd.Spec.SignerName = "example.com/other"
	out := r.UpdateThrough("", upd, old).(*certificatesv1.CertificateSigningRequest)
	if out.Spec.SignerName != "example.com/signer" || len(out.Status.Conditions) != 0 {
		t.Errorf("main update wrote signer %q conditions %v", out.Spec.SignerName, out.Status.Conditions)
	}

	// Status may not add Approved.
	upd = old.DeepCopy()
	upd.Status.Conditions = append(upd.Status.Conditions, approved("x"))
	out = r.UpdateThrough("status", upd, old).(*certificatesv1.CertificateSigningRequest)
	if errs := r.ValidateUpdate("status", out, old); !errOn(errs, "status.conditions") {
		t.Errorf("status adding Approved: %v, want forbidden", errs)
	}

	// Approval adds it, with times filled; the certificate it carries is dropped.
	upd = old.DeepCopy()
	upd.Status.Conditions = append(upd.Status.Conditions, approved("x"))
	upd.Status.Certificate = []byte("junk")
	out = r.UpdateThrough(SubApproval, upd, old).(*certificatesv1.CertificateSigningRequest)
	if errs := r.ValidateUpdate(SubApproval, out, old); len(errs) != 0 {
		t.Fatalf("approval: %v", errs)
	}
	if len(out.Status.Certificate) != 0 || out.Status.Conditions[0].LastUpdateTime.IsZero() || out.Status.Conditions[0].LastTransitionTime.IsZero() {
		t.Errorf("approval wrote %+v", out.Status)
	}
	approvedCSR := out

	// Denied as well: exclusive.
	upd = approvedCSR.DeepCopy()
	upd.Status.Conditions = append(upd.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue})
	out = r.UpdateThrough(SubApproval, upd, approvedCSR).(*certificatesv1.CertificateSigningRequest)
	if errs := r.ValidateUpdate(SubApproval, out, approvedCSR); !errOn(errs, "status.conditions[1].type") {
		t.Errorf("approved and denied: %v, want exclusive", errs)
	}
	// Removing Approved is forbidden.
	upd = approvedCSR.DeepCopy()
	upd.Status.Conditions = nil
	out = r.UpdateThrough(SubApproval, upd, approvedCSR).(*certificatesv1.CertificateSigningRequest)
	if errs := r.ValidateUpdate(SubApproval, out, approvedCSR); !errOn(errs, "status.conditions") {
		t.Errorf("removing Approved: %v, want forbidden", errs)
	}

	// Status sets only PEM certificates, once; the approval stays as it was.
	upd = approvedCSR.DeepCopy()
	upd.Status.Certificate = []byte("junk")
	out = r.UpdateThrough("status", upd, approvedCSR).(*certificatesv1.CertificateSigningRequest)
	if errs := r.ValidateUpdate("status", out, approvedCSR); !errOn(errs, "status.certificate") {
		t.Errorf("junk certificate: %v, want invalid", errs)
	}
	upd = approvedCSR.DeepCopy()
	upd.Status.Conditions[0].Reason = "changed"
	upd.Status.Certificate = selfSigned(t)
	out = r.UpdateThrough("status", upd, approvedCSR).(*certificatesv1.CertificateSigningRequest)
	if errs := r.ValidateUpdate("status", out, approvedCSR); len(errs) != 0 {
		t.Fatalf("certificate through status: %v", errs)
	}
	if out.Status.Conditions[0].Reason != "x" {
		t.Errorf("status changed the approval's reason to %q", out.Status.Conditions[0].Reason)
	}
	// The main resource may not set it.
	upd = approvedCSR.DeepCopy()
	upd.Status.Certificate = selfSigned(t)
	if errs := r.ValidateUpdate("", upd, approvedCSR); !errOn(errs, "status.certificate") {
		t.Errorf("certificate through the main resource: %v, want forbidden", errs)
	}
	issued := out
	upd = issued.DeepCopy()
	upd.Status.Certificate = selfSigned(t)
	out = r.UpdateThrough("status", upd, issued).(*certificatesv1.CertificateSigningRequest)
	if errs := r.ValidateUpdate("status", out, issued); !errOn(errs, "status.certificate") || !strings.Contains(errs.ToAggregate().Error(), "existing certificate") {
		t.Errorf("replacing the certificate: %v, want forbidden", errs)
	}
}

func selfSigned(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: bigOne(), Subject: pkix.Name{CommonName: "x"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func bigOne() *big.Int { return big.NewInt(1) }
