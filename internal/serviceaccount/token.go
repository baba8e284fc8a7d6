package serviceaccount

import (
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
)

// Leeway is how far a token's times may be off, as upstream's (go-jose's default): an expired
// token is accepted for this long after its expiry.
const Leeway = time.Minute

// Ref names an object a token is bound to (the serviceaccount, pod, secret and node claims).
type Ref struct {
	Name string `json:"name,omitempty"`
	UID  string `json:"uid,omitempty"`
}

// KubernetesClaims is the private "kubernetes.io" claim of a bound token.
type KubernetesClaims struct {
	Namespace      string `json:"namespace,omitempty"`
	ServiceAccount Ref    `json:"serviceaccount,omitempty"`
	Pod            *Ref   `json:"pod,omitempty"`
	Secret         *Ref   `json:"secret,omitempty"`
	Node           *Ref   `json:"node,omitempty"`
	// WarnAfter is when a token whose expiry the server extended (see ExtendedExpirationSeconds)
	// would have expired: the kubelet refreshes it by this time.
	WarnAfter *int64 `json:"warnafter,omitempty"`
}

// Claims are the claims of a service account token: upstream's registered claims, the
// "kubernetes.io" claim of bound tokens and the flat claims of legacy (Secret) tokens.
type Claims struct {
	jwt.RegisteredClaims
	Kubernetes *KubernetesClaims `json:"kubernetes.io,omitempty"`

	LegacyNamespace string `json:"kubernetes.io/serviceaccount/namespace,omitempty"`
	LegacySecret    string `json:"kubernetes.io/serviceaccount/secret.name,omitempty"`
	LegacyName      string `json:"kubernetes.io/serviceaccount/service-account.name,omitempty"`
	LegacyUID       string `json:"kubernetes.io/serviceaccount/service-account.uid,omitempty"`
}

// Binding is the object a token is bound to: at most one of Pod, Secret or Node (a pod-bound
// token also names the pod's node, as upstream's, when Node is given with Pod).
type Binding struct {
	Pod    *corev1.Pod
	Secret *corev1.Secret
	Node   *corev1.Node
}

// Issuer signs service account tokens.
type Issuer struct {
	url   string
	key   *rsa.PrivateKey
	kid   string
	now   func() time.Time
	newID func() string
}

// NewIssuer returns an issuer of tokens signed with key whose iss claim is url. now is the
// clock (time.Now when nil).
func NewIssuer(url string, key *rsa.PrivateKey, now func() time.Time) (*Issuer, error) {
	if url == "" {
		return nil, errors.New("service account issuer: empty issuer")
	}
	kid, err := KeyID(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	return &Issuer{url: url, key: key, kid: kid, now: now, newID: uuid.NewString}, nil
}

// URL is the issuer's iss claim.
func (i *Issuer) URL() string { return i.url }

// BoundToken returns a token of sa for audiences, valid for expirationSeconds and bound to b.
// warnAfter, when not zero, is the lifetime the client asked for when the server extended the
// expiry (the warnafter claim). It returns the token and its expiry.
func (i *Issuer) BoundToken(sa *corev1.ServiceAccount, b Binding, audiences []string, expirationSeconds, warnAfter int64) (string, time.Time, error) {
	if b.Secret != nil && (b.Pod != nil || b.Node != nil) {
		return "", time.Time{}, errors.New("a token can be bound to one object only")
	}
	now := i.now()
	exp := now.Add(time.Duration(expirationSeconds) * time.Second)
	k := map[string]any{
		"namespace":      sa.Namespace,
		"serviceaccount": Ref{Name: sa.Name, UID: string(sa.UID)},
	}
	switch {
	case b.Pod != nil:
		k["pod"] = Ref{Name: b.Pod.Name, UID: string(b.Pod.UID)}
		if b.Node != nil {
			k["node"] = Ref{Name: b.Node.Name, UID: string(b.Node.UID)}
		}
	case b.Secret != nil:
		k["secret"] = Ref{Name: b.Secret.Name, UID: string(b.Secret.UID)}
	case b.Node != nil:
		k["node"] = Ref{Name: b.Node.Name, UID: string(b.Node.UID)}
	}
	if warnAfter != 0 {
		k["warnafter"] = now.Add(time.Duration(warnAfter) * time.Second).Unix()
	}
	aud := append([]string{}, audiences...)
	claims := jwt.MapClaims{
		"iss":           i.url,
		"sub":           Username(sa.Namespace, sa.Name),
		"aud":           aud,
		"iat":           now.Unix(),
		"nbf":           now.Unix(),
		"exp":           exp.Unix(),
		"jti":           i.newID(),
		"kubernetes.io": k,
	}
	tok, err := i.sign(claims)
	if err != nil {
		return "", time.Time{}, err
	}
	return tok, exp, nil
}

// LegacyToken returns the never-expiring token of a kubernetes.io/service-account-token
// Secret, as upstream's tokens controller writes it (issuer kubernetes/serviceaccount).
func (i *Issuer) LegacyToken(sa *corev1.ServiceAccount, secret *corev1.Secret) (string, error) {
	return i.sign(jwt.MapClaims{
		"iss":                                    LegacyIssuer,
		"sub":                                    Username(sa.Namespace, sa.Name),
		"kubernetes.io/serviceaccount/namespace": sa.Namespace,
		"kubernetes.io/serviceaccount/secret.name":          secret.Name,
		"kubernetes.io/serviceaccount/service-account.name": sa.Name,
		"kubernetes.io/serviceaccount/service-account.uid":  string(sa.UID),
	})
}

// sign signs claims with RS256; the header holds alg and kid only, as upstream's.
func (i *Issuer) sign(claims jwt.MapClaims) (string, error) {
	t := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	delete(t.Header, "typ")
	t.Header["kid"] = i.kid
	s, err := t.SignedString(i.key)
	if err != nil {
		return "", fmt.Errorf("sign service account token: %w", err)
	}
	return s, nil
}

// Verified is what a token that passed Verify says.
type Verified struct {
	Claims *Claims
	// Legacy is true for a Secret-based token (issuer kubernetes/serviceaccount).
	Legacy bool
	// Audiences are the token's audiences that the caller accepts (the API's for a legacy
	// token, which has none).
	Audiences []string
}

// Verifier checks the signature, issuer, audience and times of tokens. It does not look at
// the cluster (see Authenticator).
type Verifier struct {
	issuers   map[string]bool
	keys      map[string]*rsa.PublicKey
	allKeys   []*rsa.PublicKey
	audiences []string
	now       func() time.Time
	// signed keeps the claims of tokens whose signature checked out (signedCache).
	signed *signedCache
}

// NewVerifier returns a verifier of tokens of the given issuers (LegacyIssuer included when
// Secret-based tokens are accepted) signed by one of keys. apiAudiences are the audiences of the
// API server: a token without audience (legacy) gets them, and Verify without audiences
// requires one of them. now is the clock (time.Now when nil).
func NewVerifier(issuers []string, keys []*rsa.PublicKey, apiAudiences []string, now func() time.Time) (*Verifier, error) {
	v := &Verifier{issuers: map[string]bool{}, keys: map[string]*rsa.PublicKey{}, audiences: apiAudiences, now: now, allKeys: keys,
		signed: newSignedCache()}
	if v.now == nil {
		v.now = time.Now
	}
	for _, iss := range issuers {
		v.issuers[iss] = true
	}
	for _, k := range keys {
		kid, err := KeyID(k)
		if err != nil {
			return nil, err
		}
		v.keys[kid] = k
	}
	return v, nil
}

// ErrNotOurs is returned by Verify for a bearer token that is not a JWT of one of the
// verifier's issuers: another authenticator may know it.
var ErrNotOurs = errors.New("not a service account token")

// Recognizes reports whether token looks like a JWT of one of the verifier's issuers (its
// unverified iss claim), as upstream checks before verifying.
func (v *Verifier) Recognizes(token string) bool {
	if c, ok := v.signed.get(token); ok {
		// The same payload, parsed when its signature was checked.
		return v.issuers[c.Issuer]
	}
	return v.recognizes(token)
}

// recognizes is Recognizes from the token's unverified payload.
func (v *Verifier) recognizes(token string) bool {
	if strings.HasPrefix(strings.TrimSpace(token), "{") {
		return false
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return false
	}
	var c struct {
		Issuer string `json:"iss"`
	}
	if json.Unmarshal(payload, &c) != nil {
		return false
	}
	return v.issuers[c.Issuer]
}

// Verify checks token's signature, issuer, times and audience: the token must carry one of
// audiences (the API server's when audiences is empty). ErrNotOurs for a token of another
// issuer; other errors say why the token is refused (for logs and TokenReview, not for 401s).
func (v *Verifier) Verify(token string, audiences []string) (*Verified, error) {
	claims, err := v.signedClaims(token)
	if err != nil {
		return nil, err
	}
	if !v.issuers[claims.Issuer] {
		return nil, fmt.Errorf("token issuer %q is invalid", claims.Issuer)
	}
	out := &Verified{Claims: claims, Legacy: claims.Issuer == LegacyIssuer}
	tokenAuds := []string(claims.Audience)
	if len(tokenAuds) == 0 {
		// Only legacy tokens lack an audience: they are for the API server.
		tokenAuds = v.audiences
	}
	want := audiences
	if len(want) == 0 {
		want = v.audiences
	}
	out.Audiences = intersect(tokenAuds, want)
	if len(out.Audiences) == 0 && len(v.audiences) != 0 {
		return nil, fmt.Errorf("token audiences %q is invalid for the target audiences %q", tokenAuds, want)
	}
	if out.Legacy {
		return out, validateLegacy(claims)
	}
	now := v.now()
	switch {
	case claims.NotBefore != nil && now.Add(Leeway).Before(claims.NotBefore.Time):
		return nil, errors.New("service account token is not valid yet")
	case claims.ExpiresAt != nil && now.Add(-Leeway).After(claims.ExpiresAt.Time):
		return nil, errors.New("service account token has expired")
	case claims.IssuedAt != nil && now.Add(Leeway).Before(claims.IssuedAt.Time):
		return nil, errors.New("service account token is issued in the future")
	}
	k := claims.Kubernetes
	if k == nil || k.Namespace == "" || k.ServiceAccount.Name == "" {
		return nil, errors.New("service account token has no kubernetes.io claims")
	}
	if claims.Subject != Username(k.Namespace, k.ServiceAccount.Name) {
		return nil, errors.New("sub claim is invalid")
	}
	return out, nil
}

// signedClaims returns the claims of token once its signature is checked against the
// verifier's keys (kept in v.signed: the check is made once per token). ErrNotOurs for
// a token of another issuer. The claims are shared by every use of the token: callers
// must not modify them.
func (v *Verifier) signedClaims(token string) (*Claims, error) {
	if c, ok := v.signed.get(token); ok {
		return c, nil
	}
	if !v.recognizes(token) {
		return nil, ErrNotOurs
	}
	claims := &Claims{}
	parser := jwt.NewParser(jwt.WithValidMethods([]string{jwt.SigningMethodRS256.Alg()}), jwt.WithoutClaimsValidation())
	_, err := parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		if kid, _ := t.Header["kid"].(string); kid != "" {
			if k, ok := v.keys[kid]; ok {
				return k, nil
			}
			return nil, errors.New("invalid signature, no keys found")
		}
		set := jwt.VerificationKeySet{}
		for _, k := range v.allKeys {
			set.Keys = append(set.Keys, k)
		}
		return set, nil
	})
	if err != nil {
		return nil, fmt.Errorf("invalid token: %w", err)
	}
	v.signed.put(token, claims)
	return claims, nil
}

// validateLegacy checks the claims of a Secret-based token, as upstream's legacy validator.
func validateLegacy(c *Claims) error {
	switch {
	case c.Subject == "":
		return errors.New("sub claim is missing")
	case c.LegacyNamespace == "":
		return errors.New("namespace claim is missing")
	case c.LegacySecret == "":
		return errors.New("secretName claim is missing")
	case c.LegacyName == "":
		return errors.New("serviceAccountName claim is missing")
	case c.LegacyUID == "":
		return errors.New("serviceAccountUID claim is missing")
	}
	if ns, name, ok := SplitUsername(c.Subject); !ok || ns != c.LegacyNamespace || name != c.LegacyName {
		return errors.New("sub claim is invalid")
	}
	return nil
}

func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		for _, y := range b {
			if x == y {
				out = append(out, x)
				break
			}
		}
	}
	return out
}
