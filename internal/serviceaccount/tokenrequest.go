package serviceaccount

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubette/kubette/internal/apiserver/filters"
)

// TokenRequestKind is the kind of serviceaccounts/token bodies.
var TokenRequestKind = authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")

// TokenRequests serves the TokenRequest API (POST serviceaccounts/NAME/token), as upstream's
// TokenREST.
type TokenRequests struct {
	// Issuer signs the tokens.
	Issuer *Issuer
	// Objects reads the ServiceAccount and the bound object.
	Objects Getter
	// APIAudiences are the audiences of a request that names none (the API server's).
	APIAudiences []string
	// MaxExpirationSeconds, when positive, caps a token's lifetime
	// (--service-account-max-token-expiration).
	MaxExpirationSeconds int64
	// ExtendExpiration issues the admission plugin's pod tokens (WarnOnlyExpirationSeconds
	// for the API audiences) for a year with the warnafter claim, as upstream's
	// --service-account-extend-token-expiration (on by default).
	ExtendExpiration bool
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Create issues a token for ServiceAccount namespace/name from a TokenRequest.
func (r *TokenRequests) Create(ctx context.Context, namespace, name string, obj runtime.Object) (runtime.Object, error) {
	req, ok := obj.(*authenticationv1.TokenRequest)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a TokenRequest: %T", obj))
	}
	if namespace == "" {
		return nil, apierrors.NewBadRequest("namespace is required")
	}
	gk := TokenRequestKind.GroupKind()
	if req.Name != "" && req.Name != name {
		return nil, apierrors.NewInvalid(gk, name, field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), req.Name, "must match the service account name if specified")})
	}
	if req.Namespace != "" && req.Namespace != namespace {
		return nil, apierrors.NewInvalid(gk, name, field.ErrorList{field.Invalid(field.NewPath("metadata", "namespace"), req.Namespace, "must match the service account namespace if specified")})
	}
	saObj, err := r.Objects.Get(ctx, serviceAccountsResource, namespace, name)
	if err != nil {
		return nil, err
	}
	sa, ok := saObj.(*corev1.ServiceAccount)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("service account %s/%s: unexpected %T", namespace, name, saObj))
	}
	if len(req.Spec.Audiences) == 0 {
		req.Spec.Audiences = append([]string{}, r.APIAudiences...)
	}
	if req.Spec.ExpirationSeconds == nil {
		exp := int64(DefaultExpirationSeconds)
		req.Spec.ExpirationSeconds = &exp
	}
	req.Name, req.Namespace = sa.Name, sa.Namespace
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	nowTime := now()
	req.CreationTimestamp = metav1.NewTime(nowTime)
	req.Status = authenticationv1.TokenRequestStatus{}
	if errs := validateTokenRequest(req); len(errs) > 0 {
		return nil, apierrors.NewInvalid(gk, "", errs)
	}

	var b Binding
	if ref := req.Spec.BoundObjectRef; ref != nil {
		var uid string
		gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
		switch {
		case gvk.Group == "" && gvk.Kind == "Pod":
			obj, err := r.Objects.Get(ctx, podsResource, namespace, ref.Name)
			if err != nil {
				return nil, err
			}
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				return nil, apierrors.NewInternalError(fmt.Errorf("pod %s/%s: unexpected %T", namespace, ref.Name, obj))
			}
			if name != pod.Spec.ServiceAccountName {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("cannot bind token for serviceaccount %q to pod running with different serviceaccount name.", name))
			}
			b.Pod, uid = pod, string(pod.UID)
			if nodeName := pod.Spec.NodeName; nodeName != "" {
				obj, err := r.Objects.Get(ctx, nodesResource, "", nodeName)
				switch node, ok := obj.(*corev1.Node); {
				case apierrors.IsNotFound(err):
					b.Node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
				case err != nil:
					return nil, apierrors.NewInternalError(err)
				case ok:
					b.Node = node
				}
			}
		case gvk.Group == "" && gvk.Kind == "Node":
			obj, err := r.Objects.Get(ctx, nodesResource, "", ref.Name)
			if err != nil {
				return nil, err
			}
			node, ok := obj.(*corev1.Node)
			if !ok {
				return nil, apierrors.NewInternalError(fmt.Errorf("node %s: unexpected %T", ref.Name, obj))
			}
			b.Node, uid = node, string(node.UID)
		case gvk.Group == "" && gvk.Kind == "Secret":
			obj, err := r.Objects.Get(ctx, secretsResource, namespace, ref.Name)
			if err != nil {
				return nil, err
			}
			secret, ok := obj.(*corev1.Secret)
			if !ok {
				return nil, apierrors.NewInternalError(fmt.Errorf("secret %s/%s: unexpected %T", namespace, ref.Name, obj))
			}
			b.Secret, uid = secret, string(secret.UID)
		default:
			return nil, apierrors.NewBadRequest(fmt.Sprintf("cannot bind token to object of type %s", gvk.String()))
		}
		if ref.UID != "" && string(ref.UID) != uid {
			return nil, apierrors.NewConflict(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, ref.Name,
				fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
		}
	}
	if r.MaxExpirationSeconds > 0 && *req.Spec.ExpirationSeconds > r.MaxExpirationSeconds {
		max := r.MaxExpirationSeconds
		req.Spec.ExpirationSeconds = &max
	}
	exp, warnAfter := *req.Spec.ExpirationSeconds, int64(0)
	if r.ExtendExpiration && b.Pod != nil && exp == WarnOnlyExpirationSeconds && subset(req.Spec.Audiences, r.APIAudiences) {
		warnAfter, exp = exp, ExtendedExpirationSeconds
	}
	tok, _, err := r.Issuer.BoundToken(sa, b, req.Spec.Audiences, exp, warnAfter)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to generate token: %w", err))
	}
	out := req.DeepCopy()
	out.Status = authenticationv1.TokenRequestStatus{
		Token:               tok,
		ExpirationTimestamp: metav1.NewTime(nowTime.Add(time.Duration(*out.Spec.ExpirationSeconds) * time.Second)),
	}
	return out, nil
}

// validateTokenRequest checks a TokenRequest's lifetime, as upstream's validation.
func validateTokenRequest(tr *authenticationv1.TokenRequest) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec", "expirationSeconds")
	switch exp := *tr.Spec.ExpirationSeconds; {
	case exp < MinExpirationSeconds:
		errs = append(errs, field.Invalid(p, exp, "may not specify a duration less than 10 minutes"))
	case exp > MaxExpirationSeconds:
		errs = append(errs, field.Invalid(p, exp, "may not specify a duration larger than 2^32 seconds"))
	}
	return errs
}

func subset(a, of []string) bool {
	for _, x := range a {
		found := false
		for _, y := range of {
			if x == y {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// TokenReviews serves TokenReview (authentication.k8s.io/v1): whether a token authenticates,
// as whom and for which audiences.
type TokenReviews struct {
	// ServiceAccounts authenticates ServiceAccount tokens.
	ServiceAccounts *Authenticator
	// Others, when set, authenticates other bearer tokens (the static token file); their
	// tokens are valid for any audience.
	Others filters.Authenticator
	// APIAudiences are the audiences of a review that names none.
	APIAudiences []string
}

// Create reviews the token of a TokenReview.
func (r *TokenReviews) Create(ctx context.Context, namespace, _ string, obj runtime.Object) (runtime.Object, error) {
	review, ok := obj.(*authenticationv1.TokenReview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a TokenReview: %T", obj))
	}
	if namespace != "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("namespace is not allowed on this type: %v", namespace))
	}
	if review.Spec.Token == "" {
		return nil, apierrors.NewBadRequest("token is required for TokenReview in authentication")
	}
	auds := review.Spec.Audiences
	if len(auds) == 0 {
		auds = r.APIAudiences
	}
	review.Status = authenticationv1.TokenReviewStatus{}
	u, gotAuds, err := r.ServiceAccounts.AuthenticateToken(ctx, review.Spec.Token, auds)
	if errors.Is(err, ErrNotOurs) {
		u, gotAuds, err = nil, nil, errors.New("invalid bearer token")
		if r.Others != nil {
			req, rerr := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
			if rerr != nil {
				return nil, apierrors.NewInternalError(rerr)
			}
			req.Header.Set("Authorization", "Bearer "+review.Spec.Token)
			var ok bool
			u, ok, err = r.Others.Authenticate(req)
			if err == nil && !ok {
				err = errors.New("invalid bearer token")
			}
			if err == nil {
				gotAuds = auds
				if !hasString(u.Groups, "system:authenticated") {
					u = &filters.User{Name: u.Name, UID: u.UID, Groups: append(append([]string{}, u.Groups...), "system:authenticated"), Extra: u.Extra}
				}
			}
		}
	}
	if err != nil {
		review.Status.Error = err.Error()
		return review, nil
	}
	review.Status.Authenticated = true
	review.Status.User = authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: append([]string{}, u.Groups...), Extra: map[string]authenticationv1.ExtraValue{}}
	for k, v := range u.Extra {
		review.Status.User.Extra[k] = append(authenticationv1.ExtraValue{}, v...)
	}
	review.Status.Audiences = gotAuds
	return review, nil
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
