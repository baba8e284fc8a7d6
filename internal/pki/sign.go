package pki

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"
)

// RequestPolicy is how SignRequest turns a certificate request into a certificate.
type RequestPolicy struct {
	// KeyUsage and ExtKeyUsage are the certificate's usages.
	KeyUsage    x509.KeyUsage
	ExtKeyUsage []x509.ExtKeyUsage
	// TTL is how long the certificate is valid from Now.
	TTL time.Duration
	// Now is the time of signing (zero: time.Now()).
	Now time.Time
}

// backdate is how far before the signing a certificate starts being valid, for clocks a
// little behind; a certificate shorter than shortLived does not end earlier for it.
const (
	backdate   = 5 * time.Minute
	shortLived = 8 * time.Hour
)

// SignRequest signs a certificate for the subject, names and public key of a
// certificate request (whose signature must hold), valid for p.TTL but never beyond the
// CA itself, and returns it in PEM form. It is how the CSR signers issue certificates.
func (ca *CA) SignRequest(req *x509.CertificateRequest, p RequestPolicy) ([]byte, error) {
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("verify certificate request signature: %w", err)
	}
	now := p.Now
	if now.IsZero() {
		now = time.Now()
	}
	if !now.Before(ca.Cert.NotAfter) {
		return nil, fmt.Errorf("the signer has expired: NotAfter=%v", ca.Cert.NotAfter)
	}
	if p.TTL <= 0 {
		return nil, errors.New("a certificate needs a positive duration")
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               req.Subject,
		DNSNames:              req.DNSNames,
		IPAddresses:           req.IPAddresses,
		EmailAddresses:        req.EmailAddresses,
		URIs:                  req.URIs,
		KeyUsage:              p.KeyUsage,
		ExtKeyUsage:           p.ExtKeyUsage,
		BasicConstraintsValid: true,
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(p.TTL - backdate),
	}
	if p.TTL < shortLived {
		tmpl.NotAfter = now.Add(p.TTL)
	}
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, req.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("sign certificate for %s: %w", req.Subject.CommonName, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// LoadCAFiles reads a CA certificate and its key from the two PEM files (the controller
// manager's --cluster-signing-cert-file and --cluster-signing-key-file).
func LoadCAFiles(certFile, keyFile string) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("read CA certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("read CA key: %w", err)
	}
	return parseCA(certPEM, keyPEM)
}
