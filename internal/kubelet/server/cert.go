package server

import (
	"crypto/tls"
	"fmt"
	"net"

	"github.com/kubette/kubette/internal/pki"
)

// LoadOrIssueServing returns the kubelet's serving certificate, dir/kubelet-serving.crt and
// dir/kubelet-serving.key (apart from the kubelet's client certificate, dir/kubelet.crt), issuing it from ca when absent or when it lacks a name or address:
// CN system:node:<nodeName> (group system:nodes), DNS names nodeName and localhost,
// addresses ips and 127.0.0.1.
func LoadOrIssueServing(ca *pki.CA, dir, nodeName string, ips []net.IP) (tls.Certificate, error) {
	spec := pki.CertSpec{
		CommonName:   "system:node:" + nodeName,
		Organization: []string{"system:nodes"},
		DNSNames:     []string{nodeName, "localhost"},
		IPs:          append(append([]net.IP{}, ips...), net.IPv4(127, 0, 0, 1)),
		Server:       true,
	}
	certPEM, keyPEM, err := ca.LoadOrIssue(dir, "kubelet-serving", spec)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("kubelet serving certificate for %s: %w", nodeName, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("load kubelet serving certificate: %w", err)
	}
	return cert, nil
}
