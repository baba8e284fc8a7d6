package csrsigning

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
)

func request(t *testing.T, tmpl *x509.CertificateRequest) *x509.CertificateRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	req, err := x509.ParseCertificateRequest(der)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

var (
	nodeSubj    = pkix.Name{CommonName: "system:node:n1", Organization: []string{"system:nodes"}}
	servingUses = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	clientUses  = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}
)

func TestKubeletServingCheck(t *testing.T) {
	cases := []struct {
		name   string
		tmpl   x509.CertificateRequest
		usages []certificatesv1.KeyUsage
		err    string
	}{
		{"ok", x509.CertificateRequest{Subject: nodeSubj, DNSNames: []string{"n1"}, IPAddresses: []net.IP{net.ParseIP("10.0.0.1")}}, servingUses, ""},
		{"wrong organization", x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:n1"}, DNSNames: []string{"n1"}}, servingUses, "subject organization is not system:nodes"},
		{"no names", x509.CertificateRequest{Subject: nodeSubj}, servingUses, "DNS or IP subjectAltName is required"},
		{"email", x509.CertificateRequest{Subject: nodeSubj, DNSNames: []string{"n1"}, EmailAddresses: []string{"a@b.c"}}, servingUses, "Email subjectAltNames are not allowed"},
		{"client usage", x509.CertificateRequest{Subject: nodeSubj, DNSNames: []string{"n1"}}, clientUses, "usages did not match [digital signature key encipherment server auth]"},
		{"not a node", x509.CertificateRequest{Subject: pkix.Name{CommonName: "n1", Organization: []string{"system:nodes"}}, DNSNames: []string{"n1"}}, servingUses, "subject common name does not begin with system:node:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckKubeletServing(request(t, &tc.tmpl), tc.usages)
			if (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
				t.Errorf("err = %v, want %q", err, tc.err)
			}
		})
	}
}

func TestKubeletClientCheck(t *testing.T) {
	cases := []struct {
		name   string
		tmpl   x509.CertificateRequest
		usages []certificatesv1.KeyUsage
		err    string
	}{
		{"ok", x509.CertificateRequest{Subject: nodeSubj}, clientUses, ""},
		{"ok without key encipherment", x509.CertificateRequest{Subject: nodeSubj}, clientUses[:1:1], "usages did not match [client auth digital signature key encipherment]"},
		{"dns name", x509.CertificateRequest{Subject: nodeSubj, DNSNames: []string{"n1"}}, clientUses, "DNS subjectAltNames are not allowed"},
		{"ip", x509.CertificateRequest{Subject: nodeSubj, IPAddresses: []net.IP{net.ParseIP("10.0.0.1")}}, clientUses, "IP subjectAltNames are not allowed"},
		{"two organizations", x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:n1", Organization: []string{"system:nodes", "system:masters"}}}, clientUses, "subject organization is not system:nodes"},
		{"serving usages", x509.CertificateRequest{Subject: nodeSubj}, servingUses, "usages did not match [client auth digital signature key encipherment]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckKubeletClient(request(t, &tc.tmpl), tc.usages)
			if (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
				t.Errorf("err = %v, want %q", err, tc.err)
			}
		})
	}
	noRSA := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	if err := CheckKubeletClient(request(t, &x509.CertificateRequest{Subject: nodeSubj}), noRSA); err != nil {
		t.Errorf("digital signature and client auth: %v", err)
	}
}

func TestAPIServerClientCheck(t *testing.T) {
	req := request(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "alice"}})
	if err := checkAPIServerClient(req, clientUses); err != nil {
		t.Errorf("client usages: %v", err)
	}
	if err := checkAPIServerClient(req, servingUses); err == nil || !strings.Contains(err.Error(), "invalid usage for client certificate: server auth") {
		t.Errorf("server auth: %v", err)
	}
	if err := checkAPIServerClient(req, []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature}); err == nil || !strings.Contains(err.Error(), "missing required usage") {
		t.Errorf("no client auth: %v", err)
	}
	if Signs("kubernetes.io/legacy-unknown") || Signs("example.com/x") || !Signs(certificatesv1.KubeletServingSignerName) {
		t.Error("Signs: legacy-unknown and foreign signers are never signed; kubelet-serving is")
	}
}

func TestDuration(t *testing.T) {
	s := func(n int32) *int32 { return &n }
	year := DefaultDuration
	cases := []struct {
		max  time.Duration
		exp  *int32
		want time.Duration
	}{
		{year, nil, year},
		{year, s(3600), time.Hour},
		{time.Hour, s(7200), time.Hour},
		{year, s(60), 10 * time.Minute},
	}
	for _, c := range cases {
		if got := Duration(c.max, c.exp); got != c.want {
			t.Errorf("Duration(%v, %v) = %v, want %v", c.max, c.exp, got, c.want)
		}
	}
}

func TestKeyUsages(t *testing.T) {
	ku, eku, err := KeyUsages([]certificatesv1.KeyUsage{certificatesv1.UsageServerAuth, certificatesv1.UsageDigitalSignature,
		certificatesv1.UsageClientAuth, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth})
	if err != nil {
		t.Fatal(err)
	}
	if ku != x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment {
		t.Errorf("key usage = %v", ku)
	}
	if !slices.Equal(eku, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}) {
		t.Errorf("ext key usage = %v", eku)
	}
	if _, _, err := KeyUsages([]certificatesv1.KeyUsage{"flying"}); err == nil {
		t.Error("an unknown usage was accepted")
	}
}
