package authorizer

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/apiserver/filters"
)

// impersonators allows alice to impersonate anything, and carol only the user bob and
// the group devs.
var impersonators = Func(func(_ context.Context, a Attributes) (Decision, string, error) {
	if a.Verb != "impersonate" {
		return NoOpinion, "", nil
	}
	switch a.User.Name {
	case "alice":
		return Allow, "", nil
	case "carol":
		if (a.Resource == "users" && a.Name == "bob") || (a.Resource == "groups" && a.Name == "devs") {
			return Allow, "", nil
		}
	}
	return NoOpinion, "", nil
})

func TestImpersonation(t *testing.T) {
	var seen *filters.User
	h := WithImpersonation(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, _ = filters.UserFrom(r.Context())
		if r.Header.Get("Impersonate-User") != "" {
			t.Error("impersonation headers reach the handler")
		}
	}), impersonators)
	cases := []struct {
		name    string
		caller  string
		headers map[string][]string
		code    int
		user    string
		groups  string
		extra   string
		message string
	}{
		{name: "no headers", caller: "bob", code: 200, user: "bob"},
		{name: "user", caller: "alice", headers: map[string][]string{"Impersonate-User": {"bob"}}, code: 200, user: "bob", groups: "system:authenticated"},
		{name: "user and groups", caller: "alice", headers: map[string][]string{"Impersonate-User": {"bob"}, "Impersonate-Group": {"a", "b"}}, code: 200, user: "bob", groups: "a,b,system:authenticated"},
		{name: "service account gets its groups", caller: "alice", headers: map[string][]string{"Impersonate-User": {"system:serviceaccount:ns:app"}}, code: 200,
			user: "system:serviceaccount:ns:app", groups: "system:serviceaccounts,system:serviceaccounts:ns,system:authenticated"},
		{name: "anonymous", caller: "alice", headers: map[string][]string{"Impersonate-User": {"system:anonymous"}}, code: 200, user: "system:anonymous", groups: "system:unauthenticated"},
		{name: "unauthenticated group given", caller: "alice", headers: map[string][]string{"Impersonate-User": {"x"}, "Impersonate-Group": {"system:unauthenticated"}}, code: 200, user: "x", groups: "system:unauthenticated"},
		{name: "extra and uid", caller: "alice", headers: map[string][]string{"Impersonate-User": {"bob"}, "Impersonate-Extra-Scopes": {"view", "edit"}, "Impersonate-Uid": {"42"}}, code: 200,
			user: "bob", groups: "system:authenticated", extra: "scopes=view,edit"},
		{name: "forbidden user", caller: "bob", headers: map[string][]string{"Impersonate-User": {"alice"}}, code: 403,
			message: `users "alice" is forbidden: User "bob" cannot impersonate resource "users" in API group "" at the cluster scope`},
		{name: "allowed user, forbidden group", caller: "carol", headers: map[string][]string{"Impersonate-User": {"bob"}, "Impersonate-Group": {"devs", "system:masters"}}, code: 403,
			message: `groups "system:masters" is forbidden: User "carol" cannot impersonate resource "groups" in API group "" at the cluster scope`},
		{name: "forbidden service account", caller: "carol", headers: map[string][]string{"Impersonate-User": {"system:serviceaccount:kube-system:x"}}, code: 403,
			message: `serviceaccounts "x" is forbidden: User "carol" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "kube-system"`},
		{name: "forbidden extra", caller: "carol", headers: map[string][]string{"Impersonate-User": {"bob"}, "Impersonate-Extra-Scopes": {"all"}}, code: 403,
			message: `userextras.authentication.k8s.io "all" is forbidden: User "carol" cannot impersonate resource "userextras/scopes" in API group "authentication.k8s.io" at the cluster scope`},
		{name: "group without user", caller: "alice", headers: map[string][]string{"Impersonate-Group": {"a"}}, code: 500, message: "without impersonating a user"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seen = nil
			req := httptest.NewRequest("GET", "/api/v1/pods", nil)
			for k, vs := range tc.headers {
				for _, v := range vs {
					req.Header.Add(k, v)
				}
			}
			req = req.WithContext(filters.WithUser(req.Context(), &filters.User{Name: tc.caller, Groups: []string{"system:authenticated"}}))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.code {
				t.Fatalf("code %d, want %d: %s", rec.Code, tc.code, rec.Body)
			}
			if tc.code != 200 {
				var st metav1.Status
				if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(st.Message, tc.message) {
					t.Fatalf("message %q, want %q", st.Message, tc.message)
				}
				return
			}
			if seen == nil || seen.Name != tc.user {
				t.Fatalf("user %+v, want %s", seen, tc.user)
			}
			if tc.groups != "" && strings.Join(seen.Groups, ",") != tc.groups {
				t.Fatalf("groups %v, want %s", seen.Groups, tc.groups)
			}
			if tc.extra != "" {
				k, v, _ := strings.Cut(tc.extra, "=")
				if strings.Join(seen.Extra[k], ",") != v || seen.UID != "42" {
					t.Fatalf("extra %v uid %q", seen.Extra, seen.UID)
				}
			}
		})
	}
}
