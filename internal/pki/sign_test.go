package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"
	"time"
)

func TestSignRequest(t *testing.T) {
	ca, err := LoadOrCreateCA(t.TempDir(), "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "alice", Organization: []string{"devs"}}, DNSNames: []string{"a.example"},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	req, err := x509.ParseCertificateRequest(der)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second)
	parse := func(p []byte) *x509.Certificate {
		t.Helper()
		b, _ := pem.Decode(p)
		if b == nil {
			t.Fatal("not PEM")
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	out, err := ca.SignRequest(req, RequestPolicy{KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, TTL: 24 * time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	c := parse(out)
	if c.Subject.CommonName != "alice" || c.Subject.Organization[0] != "devs" || c.DNSNames[0] != "a.example" || c.IsCA {
		t.Errorf("certificate = %v %v CA %v", c.Subject, c.DNSNames, c.IsCA)
	}
	if !c.NotBefore.Equal(now.Add(-5*time.Minute)) || !c.NotAfter.Equal(now.Add(24*time.Hour-5*time.Minute)) {
		t.Errorf("valid %v to %v, want a day from five minutes before now, minus the backdating", c.NotBefore, c.NotAfter)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("verify: %v", err)
	}
	// Never beyond the CA.
	out, err = ca.SignRequest(req, RequestPolicy{TTL: 100 * 365 * 24 * time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if c := parse(out); !c.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Errorf("NotAfter %v, want the CA's %v", c.NotAfter, ca.Cert.NotAfter)
	}
	// A tampered request is refused.
	req.Signature[0] ^= 0xff
	if _, err := ca.SignRequest(req, RequestPolicy{TTL: time.Hour}); err == nil {
		t.Error("signed a request whose signature does not hold")
	}
}
