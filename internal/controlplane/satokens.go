package controlplane

import (
	"crypto/rsa"
	"fmt"
	"net"
	"net/url"
	"strconv"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubette/kubette/internal/apiserver"
	"github.com/kubette/kubette/internal/apiserver/filters"
	"github.com/kubette/kubette/internal/serviceaccount"
)

// saTokens are the API server's ServiceAccount token machinery: the signing key kept in the
// PKI directory (so every API server sharing the data dir issues and verifies the same
// tokens), the issuer, and the authenticator built once the server exists.
type saTokens struct {
	key       *rsa.PrivateKey
	issuer    *serviceaccount.Issuer
	verifier  *serviceaccount.Verifier
	audiences []string
	// auth is set by extend (it reads the cluster through the server).
	auth *serviceaccount.Authenticator
	// static authenticates the static token file's tokens, for TokenReview (nil without one).
	static filters.Authenticator
}

// newSATokens loads (or creates) the signing key in pkiDir and builds the issuer of cfg.
func newSATokens(cfg Config, pkiDir string) (*saTokens, error) {
	key, err := serviceaccount.LoadOrCreateKey(pkiDir)
	if err != nil {
		return nil, err
	}
	iss := cfg.ServiceAccountIssuer
	if iss == "" {
		iss = serviceaccount.DefaultIssuer
	}
	issuer, err := serviceaccount.NewIssuer(iss, key, nil)
	if err != nil {
		return nil, err
	}
	// As upstream's default --api-audiences: the issuer.
	auds := []string{iss}
	verifier, err := serviceaccount.NewVerifier([]string{iss, serviceaccount.LegacyIssuer}, []*rsa.PublicKey{&key.PublicKey}, auds, nil)
	if err != nil {
		return nil, err
	}
	return &saTokens{key: key, issuer: issuer, verifier: verifier, audiences: auds}, nil
}

// serviceAccountActions are the TokenRequest and TokenReview APIs of s.
func serviceAccountActions(t *saTokens, cfg Config, s *apiserver.Server) map[apiserver.ActionKey]apiserver.Action {
	t.auth = serviceaccount.NewAuthenticator(t.verifier, s, nil)
	requests := &serviceaccount.TokenRequests{Issuer: t.issuer, Objects: s, APIAudiences: t.audiences,
		MaxExpirationSeconds: int64(cfg.ServiceAccountMaxTokenExpiration.Seconds()), ExtendExpiration: true}
	reviews := &serviceaccount.TokenReviews{ServiceAccounts: t.auth, Others: t.static, APIAudiences: t.audiences}
	return map[apiserver.ActionKey]apiserver.Action{
		{Resource: "serviceaccounts", Subresource: "token"}: {
			New:  func() runtime.Object { return &authenticationv1.TokenRequest{} },
			Kind: serviceaccount.TokenRequestKind, Do: requests.Create,
		},
		{Group: "authentication.k8s.io", Resource: "tokenreviews"}: {Do: reviews.Create},
	}
}

// serveIssuerDiscovery serves the OIDC discovery documents of the issuer on s, as upstream
// does when the issuer is an https URL; the JWKS is at --service-account-jwks-uri or, by
// default, at this API server's advertised address.
func serveIssuerDiscovery(t *saTokens, cfg Config, s *apiserver.Server, host string, port int) error {
	if u, err := url.Parse(t.issuer.URL()); err != nil || u.Scheme != "https" {
		cfg.Logger.Info("service account issuer is not an https URL: no OIDC discovery", "issuer", t.issuer.URL())
		return nil
	}
	jwks := cfg.ServiceAccountJWKSURI
	if jwks == "" {
		jwks = (&url.URL{Scheme: "https", Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: serviceaccount.JWKSPath}).String()
	}
	d, err := serviceaccount.NewDiscovery(t.issuer.URL(), jwks, []*rsa.PublicKey{&t.key.PublicKey})
	if err != nil {
		return fmt.Errorf("service account issuer discovery: %w", err)
	}
	s.HandlePath(serviceaccount.OpenIDConfigPath, d.ConfigHandler())
	s.HandlePath(serviceaccount.JWKSPath, d.KeysHandler())
	return nil
}
