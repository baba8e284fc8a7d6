// Package filters holds the HTTP filter chain in front of the API server's
// handlers: panic recovery, authentication (client certificates and bearer
// tokens) and request-size limits. Each filter wraps the next; authorization is
// package authorizer.
package filters

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// User is an authenticated identity.
type User struct {
	Name   string
	UID    string
	Groups []string
	// Extra holds further facts about the user (a ServiceAccount token's pod, an
	// impersonated user's Impersonate-Extra-* headers).
	Extra map[string][]string
}

// Anonymous is the name of the user of requests without credentials.
const Anonymous = "system:anonymous"

// PublicPath reports whether path is one upstream's default policy serves to anonymous
// users (health and version, through system:public-info-viewer).
func PublicPath(path string) bool {
	switch path {
	case "/healthz", "/livez", "/readyz", "/version":
		return true
	}
	return false
}

// Authenticator identifies the user behind a request. ok is false when the request
// carries no credentials this authenticator understands; err when they are invalid.
type Authenticator interface {
	Authenticate(req *http.Request) (user *User, ok bool, err error)
}

type userKey struct{}

// WithUser returns a context carrying u.
func WithUser(ctx context.Context, u *User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the authenticated user of a request context.
func UserFrom(ctx context.Context) (*User, bool) {
	u, ok := ctx.Value(userKey{}).(*User)
	return u, ok
}

// WriteStatus writes err as a JSON metav1.Status with its HTTP code.
func WriteStatus(w http.ResponseWriter, err error) {
	var se apierrors.APIStatus
	var st metav1.Status
	if errors.As(err, &se) {
		st = se.Status()
	} else {
		st = apierrors.NewInternalError(err).ErrStatus
	}
	st.APIVersion, st.Kind = "v1", "Status"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(&st)
}

// WithAuthentication rejects requests without valid credentials (401) and stores the
// user in the request context. Every user but system:anonymous gets the group
// system:authenticated. Requests without credentials pass only when auth accepts them
// (see AnonymousFallback).
func WithAuthentication(next http.Handler, auth Authenticator) http.Handler {
	return WithAuthenticationFailed(next, auth, Unauthorized{})
}

// Unauthorized answers 401 Unauthorized, as upstream to requests without valid credentials.
type Unauthorized struct{}

// ServeHTTP writes the 401 Status.
func (Unauthorized) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	WriteStatus(w, apierrors.NewUnauthorized("Unauthorized"))
}

// WithAuthenticationFailed is WithAuthentication that serves requests without valid
// credentials with failed (which answers 401; the audit log wraps it).
func WithAuthenticationFailed(next http.Handler, auth Authenticator, failed http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		u, ok, err := auth.Authenticate(req)
		if err != nil || !ok {
			failed.ServeHTTP(w, req)
			return
		}
		if u.Name != Anonymous {
			u = WithAuthenticatedGroup(u)
		}
		next.ServeHTTP(w, req.WithContext(WithUser(req.Context(), u)))
	})
}

// AnonymousFallback authenticates a request that no authenticator of Authenticator
// recognises and that carries no bearer token as system:anonymous in the group
// system:unauthenticated, as upstream's --anonymous-auth (its default): what anonymous
// users may do is then the authorizers' choice (the default policy lets them read only
// health and version). Credentials that fail, and bearer tokens nobody recognises, are
// still refused.
type AnonymousFallback struct{ Authenticator }

// Authenticate returns the wrapped authenticator's answer, or the anonymous user.
func (a AnonymousFallback) Authenticate(req *http.Request) (*User, bool, error) {
	u, ok, err := a.Authenticator.Authenticate(req)
	if err != nil || ok {
		return u, ok, err
	}
	if strings.HasPrefix(req.Header.Get("Authorization"), "Bearer ") {
		return nil, false, errors.New("invalid bearer token")
	}
	return &User{Name: Anonymous, Groups: []string{AllUnauthenticated}}, true, nil
}

// AllAuthenticated is the group of every authenticated user; AllUnauthenticated that of
// anonymous requests.
const (
	AllAuthenticated   = "system:authenticated"
	AllUnauthenticated = "system:unauthenticated"
)

// WithAuthenticatedGroup returns u with the group system:authenticated, which upstream
// gives every authenticated user (bindings to it grant to everyone with credentials). u
// itself is not changed: authenticators may share it between requests.
func WithAuthenticatedGroup(u *User) *User {
	for _, g := range u.Groups {
		if g == AllAuthenticated {
			return u
		}
	}
	c := *u
	c.Groups = append(append(make([]string, 0, len(u.Groups)+1), u.Groups...), AllAuthenticated)
	return &c
}

// WithPanicRecovery turns a panic in a handler into a 500 Status and keeps the server up.
func WithPanicRecovery(next http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				log.Error("panic in handler", "method", req.Method, "path", req.URL.Path, "panic", p)
				WriteStatus(w, apierrors.NewInternalError(fmt.Errorf("%v", p)))
			}
		}()
		next.ServeHTTP(w, req)
	})
}

// X509Authenticator authenticates verified TLS client certificates: the common name is
// the user and the organizations are the groups, as upstream.
type X509Authenticator struct{}

// Authenticate reads the verified client certificate of the connection.
func (X509Authenticator) Authenticate(req *http.Request) (*User, bool, error) {
	if req.TLS == nil || len(req.TLS.VerifiedChains) == 0 || len(req.TLS.VerifiedChains[0]) == 0 {
		return nil, false, nil
	}
	cert := req.TLS.VerifiedChains[0][0]
	if cert.Subject.CommonName == "" {
		return nil, false, errors.New("client certificate has no common name")
	}
	return &User{Name: cert.Subject.CommonName, Groups: append([]string{}, cert.Subject.Organization...)}, true, nil
}

// TokenAuthenticator authenticates static bearer tokens.
type TokenAuthenticator struct {
	tokens map[string]*User
}

// NewTokenAuthenticator returns an authenticator for the given tokens.
func NewTokenAuthenticator(tokens map[string]*User) *TokenAuthenticator {
	return &TokenAuthenticator{tokens: tokens}
}

// LoadTokenFile reads a static token file in upstream's format: token,user,uid,"group1,group2".
func LoadTokenFile(path string) (*TokenAuthenticator, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open token file: %w", err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	records, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("read token file %s: %w", path, err)
	}
	tokens := map[string]*User{}
	for i, rec := range records {
		if len(rec) < 3 || rec[0] == "" || rec[1] == "" {
			return nil, fmt.Errorf("token file %s line %d: want token,user,uid[,groups]", path, i+1)
		}
		u := &User{Name: rec[1], UID: rec[2]}
		if len(rec) > 3 && rec[3] != "" {
			u.Groups = strings.Split(rec[3], ",")
		}
		tokens[rec[0]] = u
	}
	return NewTokenAuthenticator(tokens), nil
}

// Authenticate checks the Authorization: Bearer header.
func (t *TokenAuthenticator) Authenticate(req *http.Request) (*User, bool, error) {
	h := req.Header.Get("Authorization")
	if !strings.HasPrefix(h, "Bearer ") {
		return nil, false, nil
	}
	u, ok := t.tokens[strings.TrimSpace(strings.TrimPrefix(h, "Bearer "))]
	if !ok {
		return nil, false, errors.New("invalid bearer token")
	}
	return u, true, nil
}

// Union tries each authenticator in turn.
type Union []Authenticator

// Authenticate returns the first success; invalid credentials fail the request.
func (u Union) Authenticate(req *http.Request) (*User, bool, error) {
	var errs []error
	for _, a := range u {
		user, ok, err := a.Authenticate(req)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			return user, true, nil
		}
	}
	return nil, false, errors.Join(errs...)
}
