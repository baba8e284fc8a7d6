package serviceaccount

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/filters"
)

// Getter reads current objects of the cluster (the API server's watch caches).
type Getter interface {
	Get(ctx context.Context, gr schema.GroupResource, namespace, name string) (runtime.Object, error)
}

// The resources the authenticator and TokenRequest read.
var (
	serviceAccountsResource = schema.GroupResource{Resource: "serviceaccounts"}
	podsResource            = schema.GroupResource{Resource: "pods"}
	secretsResource         = schema.GroupResource{Resource: "secrets"}
	nodesResource           = schema.GroupResource{Resource: "nodes"}
)

// InvalidSinceLabel marks a legacy token Secret whose token no longer authenticates (set by
// upstream's legacy token cleaner).
const InvalidSinceLabel = "kubernetes.io/legacy-token-invalid-since"

// Authenticator authenticates ServiceAccount bearer tokens (a filters.Authenticator): the
// token must verify, and its ServiceAccount and bound object must still exist with the UIDs
// the token names, so that deleting either revokes it.
type Authenticator struct {
	verifier *Verifier
	objects  Getter
	now      func() time.Time
}

// NewAuthenticator returns an authenticator of the tokens v verifies, looking objects up
// with objects. now is the clock (time.Now when nil).
func NewAuthenticator(v *Verifier, objects Getter, now func() time.Time) *Authenticator {
	if now == nil {
		now = time.Now
	}
	return &Authenticator{verifier: v, objects: objects, now: now}
}

// Authenticate reads the request's bearer token. A token of another issuer (or none) is not
// this authenticator's (ok false, no error).
func (a *Authenticator) Authenticate(req *http.Request) (*filters.User, bool, error) {
	h := req.Header.Get("Authorization")
	token, found := strings.CutPrefix(h, "Bearer ")
	if !found {
		return nil, false, nil
	}
	token = strings.TrimSpace(token)
	if !a.verifier.Recognizes(token) {
		return nil, false, nil
	}
	u, _, err := a.AuthenticateToken(req.Context(), token, nil)
	if err != nil {
		return nil, false, err
	}
	return u, true, nil
}

// AuthenticateToken returns the user of token and the audiences (of those asked, the API
// server's when none are) it is valid for. ErrNotOurs for a token of another issuer.
func (a *Authenticator) AuthenticateToken(ctx context.Context, token string, audiences []string) (*filters.User, []string, error) {
	v, err := a.verifier.Verify(token, audiences)
	if err != nil {
		return nil, nil, err
	}
	var u *filters.User
	if v.Legacy {
		u, err = a.checkLegacy(ctx, token, v.Claims)
	} else {
		u, err = a.checkBound(ctx, v.Claims)
	}
	if err != nil {
		return nil, nil, err
	}
	return u, v.Audiences, nil
}

// checkBound looks up the objects a bound token names, as upstream's validator.
func (a *Authenticator) checkBound(ctx context.Context, c *Claims) (*filters.User, error) {
	k := c.Kubernetes
	deletedBefore := a.now().Add(-Leeway)
	sa, err := a.serviceAccount(ctx, k.Namespace, k.ServiceAccount.Name)
	if err != nil {
		return nil, err
	}
	if string(sa.UID) != k.ServiceAccount.UID {
		return nil, fmt.Errorf("service account UID (%s) does not match claim (%s)", sa.UID, k.ServiceAccount.UID)
	}
	if deletedSince(sa.DeletionTimestamp, deletedBefore) {
		return nil, fmt.Errorf("service account %s/%s has been deleted", k.Namespace, k.ServiceAccount.Name)
	}
	u := &filters.User{Name: Username(k.Namespace, k.ServiceAccount.Name), UID: string(sa.UID), Groups: append(Groups(k.Namespace), "system:authenticated")}
	extra := map[string][]string{}
	if ref := k.Secret; ref != nil {
		obj, err := a.objects.Get(ctx, secretsResource, k.Namespace, ref.Name)
		s, ok := obj.(*corev1.Secret)
		if err != nil || !ok {
			return nil, errors.New("service account token has been invalidated")
		}
		if string(s.UID) != ref.UID {
			return nil, fmt.Errorf("secret UID (%s) does not match service account secret ref claim (%s)", s.UID, ref.UID)
		}
		if deletedSince(s.DeletionTimestamp, deletedBefore) {
			return nil, errors.New("service account token has been invalidated")
		}
	}
	if ref := k.Pod; ref != nil {
		obj, err := a.objects.Get(ctx, podsResource, k.Namespace, ref.Name)
		p, ok := obj.(*corev1.Pod)
		if err != nil || !ok {
			return nil, errors.New("service account token has been invalidated")
		}
		if string(p.UID) != ref.UID {
			return nil, fmt.Errorf("pod UID (%s) does not match service account pod ref claim (%s)", p.UID, ref.UID)
		}
		if deletedSince(p.DeletionTimestamp, deletedBefore) {
			return nil, errors.New("service account token has been invalidated")
		}
		if ref.Name != "" && ref.UID != "" {
			extra[ExtraPodName] = []string{ref.Name}
			extra[ExtraPodUID] = []string{ref.UID}
		}
	}
	if ref := k.Node; ref != nil {
		if k.Pod == nil {
			// A token bound to the node itself: the node must still be there.
			obj, err := a.objects.Get(ctx, nodesResource, "", ref.Name)
			n, ok := obj.(*corev1.Node)
			if err != nil || !ok {
				return nil, errors.New("service account token has been invalidated")
			}
			if string(n.UID) != ref.UID {
				return nil, fmt.Errorf("node UID (%s) does not match service account node ref claim (%s)", n.UID, ref.UID)
			}
			if deletedSince(n.DeletionTimestamp, deletedBefore) {
				return nil, errors.New("service account token has been invalidated")
			}
		}
		if ref.Name != "" {
			extra[ExtraNodeName] = []string{ref.Name}
			if ref.UID != "" {
				extra[ExtraNodeUID] = []string{ref.UID}
			}
		}
	}
	if c.ID != "" {
		extra[ExtraCredentialID] = []string{"JTI=" + c.ID}
	}
	if len(extra) > 0 {
		u.Extra = extra
	}
	return u, nil
}

// checkLegacy checks a Secret-based token against its Secret, as upstream's legacy
// validator: the Secret must hold this very token.
func (a *Authenticator) checkLegacy(ctx context.Context, token string, c *Claims) (*filters.User, error) {
	obj, err := a.objects.Get(ctx, secretsResource, c.LegacyNamespace, c.LegacySecret)
	s, ok := obj.(*corev1.Secret)
	if err != nil || !ok {
		return nil, errors.New("token has been invalidated")
	}
	if s.DeletionTimestamp != nil {
		return nil, errors.New("token has been invalidated")
	}
	if subtle.ConstantTimeCompare(s.Data[corev1.ServiceAccountTokenKey], []byte(token)) == 0 {
		return nil, errors.New("token does not match server's copy")
	}
	sa, err := a.serviceAccount(ctx, c.LegacyNamespace, c.LegacyName)
	if err != nil {
		return nil, err
	}
	if sa.DeletionTimestamp != nil {
		return nil, fmt.Errorf("ServiceAccount %s/%s has been deleted", c.LegacyNamespace, c.LegacyName)
	}
	if string(sa.UID) != c.LegacyUID {
		return nil, fmt.Errorf("ServiceAccount UID (%s) does not match claim (%s)", sa.UID, c.LegacyUID)
	}
	if s.Labels[InvalidSinceLabel] != "" {
		return nil, fmt.Errorf("the token in secret %s/%s for service account %s/%s has been marked invalid", c.LegacyNamespace, c.LegacySecret, c.LegacyNamespace, c.LegacyName)
	}
	return &filters.User{Name: Username(c.LegacyNamespace, c.LegacyName), UID: c.LegacyUID,
		Groups: append(Groups(c.LegacyNamespace), "system:authenticated")}, nil
}

func (a *Authenticator) serviceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	obj, err := a.objects.Get(ctx, serviceAccountsResource, namespace, name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("service account %s/%s not found", namespace, name)
		}
		return nil, fmt.Errorf("get service account %s/%s: %w", namespace, name, err)
	}
	sa, ok := obj.(*corev1.ServiceAccount)
	if !ok {
		return nil, fmt.Errorf("service account %s/%s: unexpected %T", namespace, name, obj)
	}
	return sa, nil
}

func deletedSince(ts *metav1.Time, before time.Time) bool {
	return ts != nil && ts.Time.Before(before)
}
