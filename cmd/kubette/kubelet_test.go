package main

import (
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubette/kubette/internal/pki"
)

func TestKubeletTLSUsesTheClusterCA(t *testing.T) {
	// A client CA of the API server's, but no cluster CA in the data dir: no CA of its own.
	other := t.TempDir()
	if _, err := pki.LoadOrCreateCA(other, "kubette-ca"); err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	_, _, err := kubeletTLS(dataDir, "node-a", "", "", filepath.Join(other, "ca.crt"))
	if err == nil || !strings.Contains(err.Error(), "--tls-cert-file") {
		t.Fatalf("kubeletTLS without a cluster CA = %v, want an error naming --tls-cert-file", err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "pki", "ca.key")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a CA was made in the data dir: %v", err)
	}

	// With the cluster's CA in DATA_DIR/pki the serving certificate is issued by it.
	ca, err := pki.LoadOrCreateCA(filepath.Join(dataDir, "pki"), "kubette-ca")
	if err != nil {
		t.Fatal(err)
	}
	cert, pool, err := kubeletTLS(dataDir, "node-a", "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool()}); err != nil {
		t.Errorf("serving certificate not issued by the cluster CA: %v", err)
	}
	if pool == nil {
		t.Error("no client CA pool")
	}
}
