// Package filters holds the HTTP filter chain in front of the API server's
// handlers: panic recovery, authentication (client certificates and bearer
// tokens), authorization and request-size limits. Each filter wraps the next.
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

// publicPaths are served without credentials, as upstream's default RBAC allows them
// for system:unauthenticated.
var publicPaths = map[string]bool{"/healthz": true, "/livez": true, "/readyz": true, "/version": true}

// WithAuthentication rejects requests without valid credentials (401) and stores the
// user in the request context.
func WithAuthentication(next http.Handler, auth Authenticator) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		u, ok, err := auth.Authenticate(req)
		if err != nil || !ok {
			if publicPaths[req.URL.Path] {
				next.ServeHTTP(w, req.WithContext(WithUser(req.Context(), &User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}})))
				return
			}
			WriteStatus(w, apierrors.NewUnauthorized("Unauthorized"))
			return
		}
		next.ServeHTTP(w, req.WithContext(WithUser(req.Context(), u)))
	})
}

// Authorizer decides whether a user may make a request.
type Authorizer interface {
	Authorize(u *User, req *http.Request) (allowed bool, reason string)
}

// AuthenticatedAuthorizer allows every authenticated user. It is the authorizer until
// RBAC exists; anonymous users only reach the public paths.
type AuthenticatedAuthorizer struct{}

// Authorize allows any user that is not anonymous.
func (AuthenticatedAuthorizer) Authorize(u *User, req *http.Request) (bool, string) {
	if u == nil || u.Name == "system:anonymous" {
		return publicPaths[req.URL.Path], "anonymous requests are only allowed for health and version"
	}
	return true, ""
}

// WithAuthorization answers 403 Forbidden when the authorizer refuses.
func WithAuthorization(next http.Handler, a Authorizer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		u, _ := UserFrom(req.Context())
		if ok, reason := a.Authorize(u, req); !ok {
			name := "system:anonymous"
			if u != nil {
				name = u.Name
			}
			WriteStatus(w, apierrors.NewForbidden(metav1SchemeGR, "", fmt.Errorf("User %q cannot %s path %q: %s", name, strings.ToLower(req.Method), req.URL.Path, reason)))
			return
		}
		next.ServeHTTP(w, req)
	})
}

var metav1SchemeGR = metav1.SchemeGroupVersion.WithResource("").GroupResource()

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
