// Package serviceaccount issues and verifies ServiceAccount tokens as upstream's: RS256 JWTs
// signed with a key kept in the data dir (sa.key), bound to an audience, a lifetime and a
// pod, secret or node (the TokenRequest API, serviceaccounts/NAME/token), and the legacy
// never-expiring tokens of kubernetes.io/service-account-token Secrets. Its Authenticator
// turns a valid token into the ServiceAccount's user, checking that the ServiceAccount and
// the bound object still exist; TokenReview asks the same question over the API; the OIDC
// discovery documents (/.well-known/openid-configuration, /openid/v1/jwks) publish the
// issuer and its public keys.
package serviceaccount

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/validation"
)

// Upstream's names of ServiceAccount users, groups and user extras.
const (
	// UsernamePrefix starts the user name of a ServiceAccount: system:serviceaccount:NS:NAME.
	UsernamePrefix = "system:serviceaccount:"
	// AllGroup is the group of every ServiceAccount.
	AllGroup = "system:serviceaccounts"
	// GroupPrefix starts the group of a namespace's ServiceAccounts: system:serviceaccounts:NS.
	GroupPrefix = "system:serviceaccounts:"

	// ExtraPodName and the other Extra keys are the user extras of a bound token.
	ExtraPodName      = "authentication.kubernetes.io/pod-name"
	ExtraPodUID       = "authentication.kubernetes.io/pod-uid"
	ExtraNodeName     = "authentication.kubernetes.io/node-name"
	ExtraNodeUID      = "authentication.kubernetes.io/node-uid"
	ExtraCredentialID = "authentication.kubernetes.io/credential-id"

	// LegacyIssuer is the issuer of Secret-based tokens.
	LegacyIssuer = "kubernetes/serviceaccount"
	// DefaultIssuer is the issuer of bound tokens unless --service-account-issuer says
	// otherwise: the in-cluster name of the API server, upstream's common setting.
	DefaultIssuer = "https://kubernetes.default.svc.cluster.local"

	// DefaultExpirationSeconds is a TokenRequest's lifetime when it names none.
	DefaultExpirationSeconds = 3600
	// MinExpirationSeconds and MaxExpirationSeconds bound a TokenRequest's lifetime.
	MinExpirationSeconds = 600
	MaxExpirationSeconds = 1 << 32
	// WarnOnlyExpirationSeconds is the lifetime the ServiceAccount admission plugin asks for
	// its projected tokens: the server issues them for ExtendedExpirationSeconds instead (so
	// that old clients that never reread the file keep working), with the warnafter claim.
	WarnOnlyExpirationSeconds = 60*60 + 7
	// ExtendedExpirationSeconds is the lifetime of extended tokens: a year.
	ExtendedExpirationSeconds = 365 * 24 * 60 * 60
)

// Username is the user name of a ServiceAccount.
func Username(namespace, name string) string { return UsernamePrefix + namespace + ":" + name }

// SplitUsername returns the namespace and name of a ServiceAccount user name; ok is false
// for any other name.
func SplitUsername(username string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(username, UsernamePrefix)
	if !found {
		return "", "", false
	}
	parts := strings.Split(rest, ":")
	if len(parts) != 2 {
		return "", "", false
	}
	if len(validation.ValidateNamespaceName(parts[0], false)) != 0 || len(validation.ValidateServiceAccountName(parts[1], false)) != 0 {
		return "", "", false
	}
	return parts[0], parts[1], true
}

// Groups are the groups of a namespace's ServiceAccounts.
func Groups(namespace string) []string { return []string{AllGroup, GroupPrefix + namespace} }
