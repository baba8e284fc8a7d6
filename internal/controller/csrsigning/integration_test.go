package csrsigning_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/csrapproving"
	"github.com/kubette/kubette/internal/controller/csrsigning"
	"github.com/kubette/kubette/internal/controllermanager"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

func newRequest(t *testing.T, subject pkix.Name) (csrPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: subject}, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// waitFor waits until the named CSR satisfies cond and returns it.
func waitFor(t *testing.T, c kubernetes.Interface, name, what string, cond func(*certificatesv1.CertificateSigningRequest) error) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	var got *certificatesv1.CertificateSigningRequest
	poll.Until(t, name+" "+what, func() error {
		csr, err := c.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := cond(csr); err != nil {
			return err
		}
		got = csr
		return nil
	})
	return got
}

func issued(csr *certificatesv1.CertificateSigningRequest) error {
	if len(csr.Status.Certificate) == 0 {
		return fmt.Errorf("no certificate yet (conditions %v)", csr.Status.Conditions)
	}
	return nil
}

// TestSignsApprovedRequests runs the signer and the approver in the controller manager
// against a real API server: an approved kube-apiserver-client CSR gets a certificate
// from the cluster CA with which the API server takes its holder for the CSR's subject;
// a kubelet client CSR is approved by the approver and signed; a kubelet-serving CSR
// whose subject is not a node's fails; an unapproved or foreign-signer CSR is not signed.
func TestSignsApprovedRequests(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c := env.Client
	ctx := context.Background()
	cfg, err := env.ComponentConfig("controller-manager", "system:kube-controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	runErr := make(chan error, 1)
	wg.Go(func() {
		runErr <- controllermanager.Run(runCtx, controller.ManagerOptions{
			Config: cfg, ControllerConfig: env.ServiceAccountConfig, RootCA: env.CA().CertPEM, ClusterSigning: env.CA(), Enabled: []string{csrsigning.Name, csrapproving.Name},
		})
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if err := <-runErr; err != nil {
			t.Errorf("controller manager: %v", err)
		}
	})
	csrs := c.CertificatesV1().CertificateSigningRequests()
	hour := int32(3600)
	create := func(name, signer string, subject pkix.Name, usages ...certificatesv1.KeyUsage) []byte {
		t.Helper()
		req, key := newRequest(t, subject)
		_, err := csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       certificatesv1.CertificateSigningRequestSpec{Request: req, SignerName: signer, Usages: usages, ExpirationSeconds: &hour},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		return key
	}
	approve := func(name string) {
		t.Helper()
		csr, err := csrs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test", Message: "approved by the test",
		})
		if _, err := csrs.UpdateApproval(ctx, name, csr, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("approve %s: %v", name, err)
		}
	}

	// A client certificate for alice in group devs.
	key := create("alice", certificatesv1.KubeAPIServerClientSignerName, pkix.Name{CommonName: "alice", Organization: []string{"devs"}},
		certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth)
	create("pending", certificatesv1.KubeAPIServerClientSignerName, pkix.Name{CommonName: "bob"}, certificatesv1.UsageClientAuth)
	create("foreign", "example.com/signer", pkix.Name{CommonName: "carol"}, certificatesv1.UsageClientAuth)
	approve("foreign")
	approve("alice")
	csr := waitFor(t, c, "alice", "issued", issued)
	block, _ := pem.Decode(csr.Status.Certificate)
	if block == nil {
		t.Fatalf("certificate is not PEM: %q", csr.Status.Certificate)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: env.CA().Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("certificate does not verify against the cluster CA: %v", err)
	}
	// Valid from five minutes before the signing (clock skew) for the hour asked for.
	if d := cert.NotAfter.Sub(cert.NotBefore); d != time.Hour+5*time.Minute {
		t.Errorf("certificate lasts %v, want the hour asked for and 5m of backdating", d)
	}
	userCfg := rest.AnonymousClientConfig(env.Config)
	userCfg.CertData, userCfg.KeyData = csr.Status.Certificate, key
	uc, err := kubernetes.NewForConfig(userCfg)
	if err != nil {
		t.Fatal(err)
	}
	who, err := uc.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("self subject review with the issued certificate: %v", err)
	}
	if u := who.Status.UserInfo; u.Username != "alice" || len(u.Groups) == 0 || u.Groups[0] != "devs" {
		t.Errorf("the API server sees %+v, want alice in devs", u)
	}

	// The admin (system:masters) may have kubelet client certificates approved.
	create("node-client", certificatesv1.KubeAPIServerClientKubeletSignerName, pkix.Name{CommonName: "system:node:n1", Organization: []string{"system:nodes"}},
		certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth)
	csr = waitFor(t, c, "node-client", "approved and issued", issued)
	if len(csr.Status.Conditions) == 0 || csr.Status.Conditions[0].Type != certificatesv1.CertificateApproved || csr.Status.Conditions[0].Reason != csrapproving.Reason {
		t.Errorf("node-client conditions = %+v, want AutoApproved", csr.Status.Conditions)
	}

	// A kubelet-serving request not for a node fails the signer's check.
	create("bad-serving", certificatesv1.KubeletServingSignerName, pkix.Name{CommonName: "system:node:n1"},
		certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth)
	approve("bad-serving")
	csr = waitFor(t, c, "bad-serving", "failed", func(csr *certificatesv1.CertificateSigningRequest) error {
		if !csrsigning.HasCondition(csr, certificatesv1.CertificateFailed) {
			return errors.New("not failed yet")
		}
		return nil
	})
	for _, cond := range csr.Status.Conditions {
		if cond.Type == certificatesv1.CertificateFailed && (cond.Reason != csrsigning.FailureReason || cond.Message != "subject organization is not system:nodes") {
			t.Errorf("failure condition = %+v", cond)
		}
	}
	if len(csr.Status.Certificate) != 0 {
		t.Error("a failed request has a certificate")
	}

	// Neither the unapproved nor the foreign-signer CSR is signed, and the approver leaves
	// the one that is not a kubelet's pending.
	for _, name := range []string{"pending", "foreign"} {
		got, err := csrs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Status.Certificate) != 0 {
			t.Errorf("%s was signed", name)
		}
		if name == "pending" && len(got.Status.Conditions) != 0 {
			t.Errorf("pending has conditions %v", got.Status.Conditions)
		}
	}
}
