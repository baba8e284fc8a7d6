package authorizer

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kubette/kubette/internal/apiserver/filters"
)

func TestRequestAttributes(t *testing.T) {
	cases := []struct {
		method, target string
		want           Attributes
	}{
		{"GET", "/api/v1/pods", Attributes{Verb: "list", ResourceRequest: true, APIVersion: "v1", Resource: "pods"}},
		{"GET", "/api/v1/namespaces/team/pods", Attributes{Verb: "list", ResourceRequest: true, APIVersion: "v1", Resource: "pods", Namespace: "team"}},
		{"GET", "/api/v1/namespaces/team/pods/web", Attributes{Verb: "get", ResourceRequest: true, APIVersion: "v1", Resource: "pods", Namespace: "team", Name: "web"}},
		{"GET", "/api/v1/namespaces/team/pods/web/log", Attributes{Verb: "get", ResourceRequest: true, APIVersion: "v1", Resource: "pods", Subresource: "log", Namespace: "team", Name: "web"}},
		{"POST", "/api/v1/namespaces/team/pods/web/exec", Attributes{Verb: "create", ResourceRequest: true, APIVersion: "v1", Resource: "pods", Subresource: "exec", Namespace: "team", Name: "web"}},
		{"GET", "/api/v1/namespaces/team/pods?watch=true", Attributes{Verb: "watch", ResourceRequest: true, APIVersion: "v1", Resource: "pods", Namespace: "team"}},
		{"GET", "/api/v1/watch/namespaces/team/pods", Attributes{Verb: "watch", ResourceRequest: true, APIVersion: "v1", Resource: "pods", Namespace: "team"}},
		{"GET", "/api/v1/namespaces/team/pods?fieldSelector=metadata.name%3Dweb", Attributes{Verb: "list", ResourceRequest: true, APIVersion: "v1", Resource: "pods", Namespace: "team", Name: "web", FieldSelector: "metadata.name=web"}},
		{"GET", "/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3Dn1", Attributes{Verb: "watch", ResourceRequest: true, APIVersion: "v1", Resource: "pods", FieldSelector: "spec.nodeName=n1"}},
		{"DELETE", "/api/v1/namespaces/team/pods", Attributes{Verb: "deletecollection", ResourceRequest: true, APIVersion: "v1", Resource: "pods", Namespace: "team"}},
		{"DELETE", "/api/v1/namespaces/team/pods/web", Attributes{Verb: "delete", ResourceRequest: true, APIVersion: "v1", Resource: "pods", Namespace: "team", Name: "web"}},
		{"PUT", "/apis/apps/v1/namespaces/team/deployments/web/scale", Attributes{Verb: "update", ResourceRequest: true, APIGroup: "apps", APIVersion: "v1", Resource: "deployments", Subresource: "scale", Namespace: "team", Name: "web"}},
		{"PATCH", "/apis/apps/v1/namespaces/team/deployments/web", Attributes{Verb: "patch", ResourceRequest: true, APIGroup: "apps", APIVersion: "v1", Resource: "deployments", Namespace: "team", Name: "web"}},
		{"GET", "/api/v1/namespaces", Attributes{Verb: "list", ResourceRequest: true, APIVersion: "v1", Resource: "namespaces"}},
		{"GET", "/api/v1/namespaces/team", Attributes{Verb: "get", ResourceRequest: true, APIVersion: "v1", Resource: "namespaces", Namespace: "team", Name: "team"}},
		{"PUT", "/api/v1/namespaces/team/finalize", Attributes{Verb: "update", ResourceRequest: true, APIVersion: "v1", Resource: "namespaces", Subresource: "finalize", Namespace: "team", Name: "team"}},
		{"GET", "/api/v1/nodes/n1/proxy/stats", Attributes{Verb: "get", ResourceRequest: true, APIVersion: "v1", Resource: "nodes", Subresource: "proxy", Name: "n1"}},
		{"GET", "/healthz", Attributes{Verb: "get"}},
		{"GET", "/apis", Attributes{Verb: "get"}},
		{"GET", "/apis/apps/v1", Attributes{Verb: "get"}},
		{"GET", "/api/v1", Attributes{Verb: "get"}},
		{"POST", "/logs", Attributes{Verb: "post"}},
	}
	for _, c := range cases {
		req := httptest.NewRequest(c.method, c.target, nil)
		got := RequestAttributes(req, nil)
		want := c.want
		want.Path = req.URL.Path
		if got != want {
			t.Errorf("%s %s:\n got %+v\nwant %+v", c.method, c.target, got, want)
		}
	}
}

func TestForbidden(t *testing.T) {
	bob := &filters.User{Name: "bob"}
	cases := []struct {
		a      Attributes
		reason string
		want   string
	}{
		{Attributes{User: bob, Verb: "list", ResourceRequest: true, Resource: "secrets", Namespace: "team"}, "",
			`secrets is forbidden: User "bob" cannot list resource "secrets" in API group "" in the namespace "team"`},
		{Attributes{User: bob, Verb: "get", ResourceRequest: true, APIGroup: "apps", Resource: "deployments", Subresource: "scale", Namespace: "team", Name: "web"}, "",
			`deployments.apps "web" is forbidden: User "bob" cannot get resource "deployments/scale" in API group "apps" in the namespace "team"`},
		{Attributes{User: bob, Verb: "list", ResourceRequest: true, Resource: "nodes"}, "",
			`nodes is forbidden: User "bob" cannot list resource "nodes" in API group "" at the cluster scope`},
		{Attributes{Verb: "get", Path: "/metrics"}, "no rule",
			`forbidden: User "system:anonymous" cannot get path "/metrics": no rule`},
	}
	for _, c := range cases {
		err := Forbidden(c.a, c.reason)
		if !apierrors.IsForbidden(err) || err.Error() != c.want {
			t.Errorf("%+v:\n got %v\nwant %s", c.a, err, c.want)
		}
	}
}

func TestUnion(t *testing.T) {
	ctx := context.Background()
	no := Func(func(context.Context, Attributes) (Decision, string, error) { return NoOpinion, "no rule", nil })
	broken := Func(func(context.Context, Attributes) (Decision, string, error) {
		return NoOpinion, "", errors.New("cache not synced")
	})
	deny := Func(func(context.Context, Attributes) (Decision, string, error) { return Deny, "denied", nil })
	masters := &filters.User{Name: "admin", Groups: []string{"system:masters"}}
	if d, _, _ := (Union{PrivilegedGroup("system:masters"), deny}).Authorize(ctx, Attributes{User: masters}); d != Allow {
		t.Errorf("privileged group: %v", d)
	}
	if d, reason, _ := (Union{PrivilegedGroup("system:masters"), no, deny}).Authorize(ctx, Attributes{User: &filters.User{Name: "bob"}}); d != Deny || reason != "denied" {
		t.Errorf("deny after no opinion: %v %q", d, reason)
	}
	d, reason, err := (Union{broken, no}).Authorize(ctx, Attributes{})
	if d != NoOpinion || reason != "no rule" || err == nil {
		t.Errorf("no decision: %v %q %v", d, reason, err)
	}
}

func TestWithAuthorization(t *testing.T) {
	h := WithAuthorization(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), Authenticated{})
	for _, c := range []struct {
		user *filters.User
		path string
		code int
	}{
		{&filters.User{Name: "alice"}, "/api/v1/pods", 200},
		{&filters.User{Name: filters.Anonymous}, "/healthz", 200},
		{&filters.User{Name: filters.Anonymous}, "/api/v1/pods", 403},
	} {
		req := httptest.NewRequest("GET", c.path, nil)
		req = req.WithContext(filters.WithUser(req.Context(), c.user))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.code {
			t.Errorf("%s %s: %d, want %d", c.user.Name, c.path, rec.Code, c.code)
		}
	}
}
