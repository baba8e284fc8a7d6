// Package authorizer decides whether a request may proceed: the attributes of a
// request (who, which verb, on what), the Authorizer interface every authorizer
// implements (RBAC, Node, the system:masters group), their union, and the filter
// that answers 403 in upstream's words when none allows.
package authorizer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/filters"
)

// Attributes describe one request to authorize, as upstream's authorizer.Attributes.
type Attributes struct {
	User *filters.User
	// Verb is get, list, watch, create, update, patch, delete, deletecollection (and
	// impersonate, bind, escalate, use... for checks made by handlers) for resource
	// requests; the lower-case HTTP method (get, post, put, ...) for other paths.
	Verb string
	// ResourceRequest is true for paths under /api/VERSION and /apis/GROUP/VERSION that
	// name a resource; Path is used otherwise.
	ResourceRequest bool
	Path            string
	APIGroup        string
	APIVersion      string
	Resource        string
	Subresource     string
	Namespace       string
	Name            string
	// FieldSelector is the raw field selector of a list, watch or deletecollection (the
	// Node authorizer lets a kubelet list only its own pods, by spec.nodeName).
	FieldSelector string
}

// Decision is an authorizer's answer.
type Decision int

const (
	// NoOpinion lets the next authorizer decide; when none allows, the request is refused.
	NoOpinion Decision = iota
	// Allow admits the request.
	Allow
	// Deny refuses the request at once.
	Deny
)

// Authorizer decides one request. reason explains a Deny or NoOpinion (it is added to
// the 403 message); err reports that the decision could not be made.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (d Decision, reason string, err error)
}

// Func adapts a function to Authorizer.
type Func func(ctx context.Context, a Attributes) (Decision, string, error)

// Authorize calls f.
func (f Func) Authorize(ctx context.Context, a Attributes) (Decision, string, error) {
	return f(ctx, a)
}

// Union asks each authorizer in turn; the first Allow or Deny decides. The reasons of
// the others are joined when none decides.
type Union []Authorizer

// Authorize returns the first decision that is not NoOpinion.
func (u Union) Authorize(ctx context.Context, a Attributes) (Decision, string, error) {
	var reasons []string
	var errs []error
	for _, z := range u {
		d, reason, err := z.Authorize(ctx, a)
		if err != nil {
			errs = append(errs, err)
		}
		if d != NoOpinion {
			return d, reason, nil
		}
		if reason != "" {
			reasons = append(reasons, reason)
		}
	}
	return NoOpinion, strings.Join(reasons, "; "), errors.Join(errs...)
}

// PrivilegedGroup allows every request of members of the group (system:masters), as
// upstream does before consulting RBAC.
type PrivilegedGroup string

// Authorize allows members of the group and has no opinion on others.
func (g PrivilegedGroup) Authorize(_ context.Context, a Attributes) (Decision, string, error) {
	if a.User != nil {
		for _, grp := range a.User.Groups {
			if grp == string(g) {
				return Allow, "", nil
			}
		}
	}
	return NoOpinion, "", nil
}

// AlwaysAllow allows every request (upstream's --authorization-mode=AlwaysAllow).
type AlwaysAllow struct{}

// Authorize allows.
func (AlwaysAllow) Authorize(context.Context, Attributes) (Decision, string, error) {
	return Allow, "", nil
}

// Authenticated allows every user but system:anonymous, whom it allows only the
// public health and version paths. It is the authorizer of a server without RBAC.
type Authenticated struct{}

// Authorize allows any user that is not anonymous.
func (Authenticated) Authorize(_ context.Context, a Attributes) (Decision, string, error) {
	if a.User == nil || a.User.Name == filters.Anonymous {
		if !a.ResourceRequest && filters.PublicPath(a.Path) {
			return Allow, "", nil
		}
		return NoOpinion, "anonymous requests are only allowed for health and version", nil
	}
	return Allow, "", nil
}

// RequestAttributes parses a request's path, method and query into the attributes to
// authorize, as upstream's RequestInfoFactory: it needs no knowledge of which resources
// exist, so unknown resources are authorized (and refused) like known ones.
func RequestAttributes(req *http.Request, u *filters.User) Attributes {
	a := Attributes{User: u, Path: req.URL.Path, Verb: strings.ToLower(req.Method)}
	parts := splitPath(req.URL.Path)
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		a.APIVersion, parts = parts[1], parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		a.APIGroup, a.APIVersion, parts = parts[1], parts[2], parts[3:]
	default:
		return a
	}
	a.ResourceRequest = true
	q := req.URL.Query()
	watch := false
	if parts[0] == "watch" {
		watch, parts = true, parts[1:]
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		a.Namespace = parts[1]
		if len(parts) == 2 || (len(parts) == 3 && (parts[2] == "status" || parts[2] == "finalize")) {
			// The namespace object itself, or its status or finalize subresource.
			a.Resource, a.Name = "namespaces", parts[1]
			if len(parts) == 3 {
				a.Subresource = parts[2]
			}
		} else {
			parts = parts[2:]
		}
	}
	if a.Resource == "" {
		if len(parts) == 0 {
			a.ResourceRequest = false
			return a
		}
		a.Resource = parts[0]
		if len(parts) >= 2 {
			a.Name = parts[1]
		}
		if len(parts) >= 3 {
			a.Subresource = parts[2]
		}
	}
	if a.Resource == "namespaces" && a.Name != "" && a.Subresource == "" {
		// As upstream: GET /api/v1/namespaces/foo is the namespace foo, not a list in it.
		a.Namespace = a.Name
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case watch || q.Get("watch") == "true" || q.Get("watch") == "1":
			a.Verb = "watch"
		case a.Name == "":
			a.Verb = "list"
		default:
			a.Verb = "get"
		}
	case http.MethodPost:
		a.Verb = "create"
	case http.MethodPut:
		a.Verb = "update"
	case http.MethodPatch:
		a.Verb = "patch"
	case http.MethodDelete:
		a.Verb = "delete"
		if a.Name == "" {
			a.Verb = "deletecollection"
		}
	}
	if a.Verb == "list" || a.Verb == "watch" || a.Verb == "deletecollection" {
		a.FieldSelector = q.Get("fieldSelector")
	}
	if (a.Verb == "list" || a.Verb == "watch" || a.Verb == "deletecollection") && a.Name == "" {
		// A list or watch of one object by field selector is authorized as that object,
		// so that rules with resourceNames allow it (as upstream).
		if sel, err := fields.ParseSelector(q.Get("fieldSelector")); err == nil {
			if name, ok := sel.RequiresExactMatch("metadata.name"); ok {
				a.Name = name
			}
		}
	}
	return a
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// ForbiddenMessage is upstream's wording of a refusal, without the reason.
func ForbiddenMessage(a Attributes) string {
	user := filters.Anonymous
	if a.User != nil {
		user = a.User.Name
	}
	if !a.ResourceRequest {
		return fmt.Sprintf("User %q cannot %s path %q", user, a.Verb, a.Path)
	}
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	if a.Namespace == "" {
		return fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", user, a.Verb, resource, a.APIGroup)
	}
	return fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", user, a.Verb, resource, a.APIGroup, a.Namespace)
}

// Forbidden is the 403 error for refused attributes, as upstream's: the resource and
// name of the request, the message, and the authorizer's reason when it gave one.
func Forbidden(a Attributes, reason string) error {
	msg := ForbiddenMessage(a)
	if reason != "" {
		msg += ": " + reason
	}
	gr := schema.GroupResource{Group: a.APIGroup, Resource: a.Resource}
	return apierrors.NewForbidden(gr, a.Name, errors.New(msg))
}

// WithAuthorization refuses requests no authorizer allows, with 403 Forbidden (500 when
// the decision failed and nothing allowed).
func WithAuthorization(next http.Handler, z Authorizer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		u, _ := filters.UserFrom(req.Context())
		a := RequestAttributes(req, u)
		ctx := req.Context()
		d, reason, err := z.Authorize(ctx, a)
		if d == Allow {
			auditDecision(ctx, "allow", reason)
			next.ServeHTTP(w, req)
			return
		}
		if err != nil && d == NoOpinion && reason == "" {
			auditDecision(ctx, "forbid", "internal error")
			filters.WriteStatus(w, apierrors.NewInternalError(fmt.Errorf("authorization: %w", err)))
			return
		}
		auditDecision(ctx, "forbid", reason)
		filters.WriteStatus(w, Forbidden(a, reason))
	})
}

// The audit annotations of the authorization decision, as upstream's.
const (
	DecisionAnnotation = "authorization.k8s.io/decision"
	ReasonAnnotation   = "authorization.k8s.io/reason"
)

// auditDecision records the decision (allow or forbid) and the reason, when there is
// one, for the request's audit event.
func auditDecision(ctx context.Context, decision, reason string) {
	filters.AddAuditAnnotation(ctx, DecisionAnnotation, decision)
	if reason != "" {
		filters.AddAuditAnnotation(ctx, ReasonAnnotation, reason)
	}
}
