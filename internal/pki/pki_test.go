package pki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestCAIssuesVerifiableCertsAndReloads(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(dir, "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.LoadOrIssue(dir, "srv", CertSpec{CommonName: "srv", DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "localhost", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Fatalf("serving cert does not verify: %v", err)
	}
	// A second start reuses the same CA and certificate.
	again, err := LoadOrCreateCA(dir, "test-ca")
	if err != nil || !again.Cert.Equal(ca.Cert) {
		t.Fatalf("CA not reloaded: %v", err)
	}
	certPEM2, _, err := again.LoadOrIssue(dir, "srv", CertSpec{CommonName: "srv", DNSNames: []string{"localhost"}, Server: true})
	if err != nil || string(certPEM2) != string(certPEM) {
		t.Fatalf("certificate reissued without need: %v", err)
	}
	// A new name forces a new certificate.
	certPEM3, _, err := again.LoadOrIssue(dir, "srv", CertSpec{CommonName: "srv", DNSNames: []string{"localhost", "kubernetes"}, Server: true})
	if err != nil || string(certPEM3) == string(certPEM) {
		t.Fatalf("certificate not reissued for a new name: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "ca.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("ca.key mode: %v %v", fi.Mode(), err)
	}
}

// A stored certificate of another usage or common name is not reused for a spec: a kubelet's
// client and serving certificates must never be taken for each other.
func TestLoadOrIssueReissuesForAnotherUsage(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(dir, "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	serving := CertSpec{CommonName: "system:node:n1", DNSNames: []string{"n1"}, Server: true}
	client := CertSpec{CommonName: "system:node:n1", Client: true}
	first, _, err := ca.LoadOrIssue(dir, "kubelet", serving)
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := ca.LoadOrIssue(dir, "kubelet", client)
	if err != nil {
		t.Fatal(err)
	}
	if string(first) == string(second) {
		t.Fatal("a serving certificate was reused for a client spec")
	}
	third, _, err := ca.LoadOrIssue(dir, "kubelet", client)
	if err != nil {
		t.Fatal(err)
	}
	if string(third) != string(second) {
		t.Error("a matching client certificate was issued again instead of reused")
	}
	other := CertSpec{CommonName: "system:node:n2", Client: true}
	if fourth, _, _ := ca.LoadOrIssue(dir, "kubelet", other); string(fourth) == string(third) {
		t.Error("a certificate for another common name was reused")
	}
}
