package filters

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func status(t *testing.T, rec *httptest.ResponseRecorder) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatalf("body is not a Status: %v: %s", err, rec.Body.String())
	}
	return st
}

func TestPanicBecomes500AndServerLives(t *testing.T) {
	h := WithPanicRecovery(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic("boom") }), slog.New(slog.NewTextHandler(io.Discard, nil)))
	for i := 0; i < 2; i++ {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/pods", nil))
		if rec.Code != 500 {
			t.Fatalf("code %d, want 500", rec.Code)
		}
		if st := status(t, rec); st.Kind != "Status" || st.Reason != metav1.StatusReasonInternalError || st.Code != 500 {
			t.Fatalf("status %+v", st)
		}
	}
}

func TestTokenAuthentication(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(path, []byte("secret-token,alice,1001,\"dev,ops\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := LoadTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var seen *User
	h := http.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, _ = UserFrom(r.Context())
	}))
	h = WithAuthentication(h, Union{X509Authenticator{}, tokens})

	cases := []struct {
		name, path, auth string
		code             int
	}{
		{"valid token", "/api/v1/pods", "Bearer secret-token", 200},
		{"wrong token", "/api/v1/pods", "Bearer nope", 401},
		{"no credentials", "/api/v1/pods", "", 401},
		{"healthz without anonymous", "/healthz", "", 401},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seen = nil
			req := httptest.NewRequest("GET", tc.path, nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.code {
				t.Fatalf("code %d, want %d: %s", rec.Code, tc.code, rec.Body.String())
			}
			if tc.code == 401 {
				if st := status(t, rec); st.Reason != metav1.StatusReasonUnauthorized || st.Code != 401 {
					t.Fatalf("status %+v", st)
				}
			}
			if tc.name == "valid token" && (seen == nil || seen.Name != "alice" || len(seen.Groups) != 3 || seen.Groups[2] != AllAuthenticated) {
				t.Fatalf("user %+v", seen)
			}
		})
	}
}

// TestAnonymousFallback: a request without credentials is system:anonymous in
// system:unauthenticated only; bad or unrecognised credentials are still 401.
func TestAnonymousFallback(t *testing.T) {
	tokens := NewTokenAuthenticator(map[string]*User{"good": {Name: "alice"}})
	var seen *User
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen, _ = UserFrom(r.Context()) })
	for name, auth := range map[string]Authenticator{
		"with tokens":            Union{X509Authenticator{}, tokens},
		"no token authenticator": Union{X509Authenticator{}},
	} {
		h := WithAuthentication(inner, AnonymousFallback{auth})
		for _, tc := range []struct {
			header string
			code   int
			user   string
		}{{"", 200, Anonymous}, {"Basic Zm9vOmJhcg==", 200, Anonymous}, {"Bearer nope", 401, ""}} {
			seen = nil
			req := httptest.NewRequest("GET", "/api", nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.code {
				t.Fatalf("%s, %q: code %d, want %d", name, tc.header, rec.Code, tc.code)
			}
			if tc.user != "" && (seen == nil || seen.Name != tc.user || len(seen.Groups) != 1 || seen.Groups[0] != AllUnauthenticated) {
				t.Fatalf("%s, %q: user %+v, want %s in %s only", name, tc.header, seen, tc.user, AllUnauthenticated)
			}
		}
	}
}

func TestBadTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(path, []byte("only-a-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTokenFile(path); err == nil {
		t.Fatal("want an error for a line without user and uid")
	}
}
