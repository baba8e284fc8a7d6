package serviceaccount

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
)

// The files of the signing key in the PKI directory, named as kubeadm's.
const (
	KeyFile       = "sa.key"
	PublicKeyFile = "sa.pub"
)

// keyBits is the size of a new signing key (kubeadm's).
const keyBits = 2048

// LoadOrCreateKey returns the service account signing key kept in dir (sa.key, PEM), creating
// it (and sa.pub beside it) the first time. Creation is atomic: when two API servers sharing
// the directory start at once, both end with the key that was written first.
func LoadOrCreateKey(dir string) (*rsa.PrivateKey, error) {
	path := filepath.Join(dir, KeyFile)
	if data, err := os.ReadFile(path); err == nil {
		return parsePrivateKey(data)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read service account key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	key, err := rsa.GenerateKey(rand.Reader, keyBits)
	if err != nil {
		return nil, fmt.Errorf("generate service account key: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("encode service account public key: %w", err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	if err := writeOnce(path, keyPEM, 0o600); err != nil {
		if errors.Is(err, os.ErrExist) {
			// Another server won the race: use its key.
			data, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("read service account key: %w", err)
			}
			return parsePrivateKey(data)
		}
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, PublicKeyFile), pubPEM, 0o644); err != nil {
		return nil, fmt.Errorf("write service account public key: %w", err)
	}
	return key, nil
}

// writeOnce writes data to path unless path exists (os.ErrExist then), without ever leaving a
// partial file at path: the data goes to a temporary file that is then linked into place.
func writeOnce(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return os.ErrExist
		}
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// parsePrivateKey reads an RSA key in PEM, PKCS#1 or PKCS#8.
func parsePrivateKey(data []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("service account key: no PEM block")
	}
	switch block.Type {
	case "RSA PRIVATE KEY":
		key, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("service account key: %w", err)
		}
		return key, nil
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("service account key: %w", err)
		}
		key, ok := k.(*rsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("service account key: %T is not an RSA key", k)
		}
		return key, nil
	}
	return nil, fmt.Errorf("service account key: unexpected PEM block %q", block.Type)
}

// KeyID is the key ID of a public key as upstream derives it (the "kid" of tokens and of the
// JWKS): the unpadded base64url of the SHA-256 of its PKIX DER encoding, which does not reveal
// the key.
func KeyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("encode public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// JWK is a public key in JSON Web Key form (RFC 7517), as the JWKS document serves it.
type JWK struct {
	Use string `json:"use"`
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	N   string `json:"n"`
	E   string `json:"e"`
}

// JWKS is a JSON Web Key Set.
type JWKS struct {
	Keys []JWK `json:"keys"`
}

// publicJWK returns the JWK of an RSA public key.
func publicJWK(pub *rsa.PublicKey) (JWK, error) {
	kid, err := KeyID(pub)
	if err != nil {
		return JWK{}, err
	}
	return JWK{
		Use: "sig", Kty: "RSA", Kid: kid, Alg: "RS256",
		N: base64.RawURLEncoding.EncodeToString(pub.N.Bytes()),
		E: base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes()),
	}, nil
}
