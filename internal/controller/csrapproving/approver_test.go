package csrapproving

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubette/kubette/internal/controller"
)

func kubeletCSR(t *testing.T, name, user string, groups ...string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:n1", Organization: []string{"system:nodes"}},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			Username:   user, Groups: groups,
		},
	}
}

// approverFor builds an approver over a fake clientset holding csr; sar answers
// SubjectAccessReviews (nil: the API serves none).
func approverFor(t *testing.T, csr *certificatesv1.CertificateSigningRequest, sar func(*authorizationv1.SubjectAccessReview) bool) (*Approver, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(csr)
	client.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if sar == nil {
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}, "")
		}
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		r.Status.Allowed = sar(r)
		return true, r, nil
	})
	inf := informers.NewSharedInformerFactory(client, 0)
	a, err := New(controller.Deps{Client: client, Informers: inf})
	if err != nil {
		t.Fatal(err)
	}
	if err := inf.Certificates().V1().CertificateSigningRequests().Informer().GetIndexer().Add(csr); err != nil {
		t.Fatal(err)
	}
	return a, client
}

func approvalMessage(t *testing.T, client *fake.Clientset, name string) string {
	t.Helper()
	got, err := client.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range got.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved && c.Reason == Reason {
			return c.Message
		}
	}
	return ""
}

func TestApprovesWithoutSubjectAccessReviews(t *testing.T) {
	cases := []struct {
		name, user string
		groups     []string
		want       string
	}{
		{"self", "system:node:n1", []string{"system:nodes"}, recognizers[0].message},
		{"bootstrap", "system:bootstrap:abcdef", []string{"system:bootstrappers"}, recognizers[1].message},
		{"other node", "system:node:n2", []string{"system:nodes"}, ""},
		{"nobody", "mallory", []string{"system:authenticated"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, client := approverFor(t, kubeletCSR(t, "c", tc.user, tc.groups...), nil)
			err := a.Sync(context.Background(), "c")
			if tc.want == "" {
				if !errors.Is(err, errNotAllowed) {
					t.Errorf("Sync = %v, want not allowed", err)
				}
			} else if err != nil {
				t.Fatalf("Sync: %v", err)
			}
			if got := approvalMessage(t, client, "c"); got != tc.want {
				t.Errorf("approval = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAsksSubjectAccessReviews(t *testing.T) {
	var asked []string
	allow := func(r *authorizationv1.SubjectAccessReview) bool {
		ra := r.Spec.ResourceAttributes
		asked = append(asked, ra.Subresource)
		return r.Spec.User == "system:bootstrap:abcdef" && ra.Subresource == "nodeclient" && ra.Verb == "create" &&
			ra.Group == "certificates.k8s.io" && ra.Resource == "certificatesigningrequests"
	}
	a, client := approverFor(t, kubeletCSR(t, "c", "system:bootstrap:abcdef", "system:bootstrappers"), allow)
	if err := a.Sync(context.Background(), "c"); err != nil {
		t.Fatal(err)
	}
	if got := approvalMessage(t, client, "c"); got != recognizers[1].message {
		t.Errorf("approval = %q", got)
	}
	if len(asked) != 1 || asked[0] != "nodeclient" {
		t.Errorf("asked %v, want nodeclient only (the CN is not the requester)", asked)
	}

	// Denied by the reviews, though the group would have sufficed without them.
	a, client = approverFor(t, kubeletCSR(t, "d", "system:node:n1", "system:nodes"), func(*authorizationv1.SubjectAccessReview) bool { return false })
	if err := a.Sync(context.Background(), "d"); !errors.Is(err, errNotAllowed) {
		t.Errorf("Sync = %v, want not allowed", err)
	}
	if got := approvalMessage(t, client, "d"); got != "" {
		t.Errorf("approved: %q", got)
	}
}

func TestLeavesOtherRequests(t *testing.T) {
	csr := kubeletCSR(t, "c", "system:node:n1", "system:nodes")
	csr.Spec.SignerName = certificatesv1.KubeAPIServerClientSignerName
	a, client := approverFor(t, csr, nil)
	if err := a.Sync(context.Background(), "c"); err != nil {
		t.Fatal(err)
	}
	if got := approvalMessage(t, client, "c"); got != "" {
		t.Errorf("approved a %s CSR", csr.Spec.SignerName)
	}
}
