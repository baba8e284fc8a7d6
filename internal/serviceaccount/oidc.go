package serviceaccount

import (
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
)

// The OIDC discovery paths, as upstream's.
const (
	OpenIDConfigPath = "/.well-known/openid-configuration"
	JWKSPath         = "/openid/v1/jwks"
)

// discoveryMaxAge is how long clients may cache the documents (upstream's static keys).
const discoveryMaxAge = 3600

// Discovery serves the OIDC discovery document and the JWKS of the issuer, so that relying
// parties outside the cluster can verify its tokens.
type Discovery struct {
	config []byte
	keys   []byte
}

// openIDMetadata is the discovery document; upstream fills the fields OIDC requires.
type openIDMetadata struct {
	Issuer        string   `json:"issuer"`
	JWKSURI       string   `json:"jwks_uri"`
	ResponseTypes []string `json:"response_types_supported"`
	SubjectTypes  []string `json:"subject_types_supported"`
	SigningAlgs   []string `json:"id_token_signing_alg_values_supported"`
}

// NewDiscovery builds the documents of issuer (an https URL without query or fragment) whose
// keys are served at jwksURI (https).
func NewDiscovery(issuer, jwksURI string, keys []*rsa.PublicKey) (*Discovery, error) {
	iss, err := url.Parse(issuer)
	if err != nil {
		return nil, fmt.Errorf("service account issuer %q: %w", issuer, err)
	}
	switch {
	case iss.Scheme != "https":
		return nil, fmt.Errorf("issuer URL must use https scheme, got: %s", issuer)
	case iss.RawQuery != "":
		return nil, fmt.Errorf("issuer URL may not include a query, got: %s", issuer)
	case iss.Fragment != "":
		return nil, fmt.Errorf("issuer URL may not include a fragment, got: %s", issuer)
	}
	if u, err := url.Parse(jwksURI); err != nil {
		return nil, fmt.Errorf("service account JWKS URI %q: %w", jwksURI, err)
	} else if u.Scheme != "https" {
		return nil, fmt.Errorf("jwksURI requires https scheme, parsed as: %v", u.String())
	}
	if len(keys) == 0 {
		return nil, errors.New("no keys provided for validating keyset")
	}
	set := JWKS{Keys: []JWK{}}
	for _, k := range keys {
		jwk, err := publicJWK(k)
		if err != nil {
			return nil, err
		}
		set.Keys = append(set.Keys, jwk)
	}
	d := &Discovery{}
	if d.config, err = json.Marshal(openIDMetadata{
		Issuer: issuer, JWKSURI: jwksURI,
		ResponseTypes: []string{"id_token"}, SubjectTypes: []string{"public"}, SigningAlgs: []string{"RS256"},
	}); err != nil {
		return nil, fmt.Errorf("encode OIDC discovery document: %w", err)
	}
	if d.keys, err = json.Marshal(set); err != nil {
		return nil, fmt.Errorf("encode JWKS: %w", err)
	}
	return d, nil
}

// ConfigHandler serves /.well-known/openid-configuration.
func (d *Discovery) ConfigHandler() http.Handler { return serveDoc(d.config, "application/json") }

// KeysHandler serves /openid/v1/jwks.
func (d *Discovery) KeysHandler() http.Handler { return serveDoc(d.keys, "application/jwk-set+json") }

func serveDoc(doc []byte, contentType string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Cache-Control", fmt.Sprintf("public, max-age=%d", discoveryMaxAge))
		if req.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(doc)
	})
}
