// Package credentials gives each controller of a controller manager the identity of its
// own ServiceAccount, as upstream's --use-service-account-credentials: the manager's
// credentials only create the ServiceAccounts kube-system/<client name> and request
// their tokens; every controller then calls the API with its ServiceAccount's token, so
// the default policy's system:controller:<client name> roles decide what it may do.
package credentials

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/oauth2"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// Namespace is where the controllers' ServiceAccounts live.
const Namespace = "kube-system"

// tokenSeconds is the lifetime asked for each token (upstream's controller tokens last
// an hour); a token is renewed once 80% of it passed, as the kubelet renews its own.
const tokenSeconds = 3600

// ServiceAccounts returns a function for controller.ManagerOptions.ControllerConfig:
// the client configuration of base (its server and CA, none of its credentials) that
// authenticates as ServiceAccount kube-system/<client name>. The ServiceAccount is
// created when missing; tokens come from the TokenRequest API through base's
// credentials and are renewed before they expire, for as long as ctx lasts.
func ServiceAccounts(ctx context.Context, base *rest.Config) (func(clientName string) (*rest.Config, error), error) {
	client, err := kubernetes.NewForConfig(base)
	if err != nil {
		return nil, fmt.Errorf("service account credentials: %w", err)
	}
	return func(name string) (*rest.Config, error) {
		if err := ensureServiceAccount(ctx, client, name); err != nil {
			return nil, err
		}
		src := &tokenSource{ctx: ctx, client: client, name: name, now: time.Now}
		first, err := src.Token()
		if err != nil {
			return nil, err
		}
		cfg := rest.AnonymousClientConfig(base)
		cfg.WrapTransport = transport.TokenSourceWrapTransport(oauth2.ReuseTokenSource(first, src))
		return cfg, nil
	}, nil
}

// ensureServiceAccount creates kube-system/name unless it exists.
func ensureServiceAccount(ctx context.Context, c kubernetes.Interface, name string) error {
	_, err := c.CoreV1().ServiceAccounts(Namespace).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get service account %s/%s: %w", Namespace, name, err)
	}
	_, err = c.CoreV1().ServiceAccounts(Namespace).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create service account %s/%s: %w", Namespace, name, err)
	}
	return nil
}

// tokenSource requests a token of one ServiceAccount. Its tokens' Expiry is the renewal
// point (80% of the lifetime), which oauth2.ReuseTokenSource acts on.
type tokenSource struct {
	ctx    context.Context
	client kubernetes.Interface
	name   string
	now    func() time.Time
}

// Token requests a new token.
func (s *tokenSource) Token() (*oauth2.Token, error) {
	ttl := int64(tokenSeconds)
	issued := s.now()
	tr, err := s.client.CoreV1().ServiceAccounts(Namespace).CreateToken(s.ctx, s.name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("request a token for service account %s/%s: %w", Namespace, s.name, err)
	}
	lifetime := tr.Status.ExpirationTimestamp.Sub(issued)
	if lifetime <= 0 {
		lifetime = time.Duration(ttl) * time.Second
	}
	return &oauth2.Token{AccessToken: tr.Status.Token, TokenType: "Bearer", Expiry: issued.Add(lifetime * 8 / 10)}, nil
}
