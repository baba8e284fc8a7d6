package admissioncel

import (
	"context"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apiserver/pkg/authentication/user"
	upstream "k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/apiserver/filters"
)

// The CEL authorizer library (k8s.io/apiserver/pkg/cel/library) asks an authorizer of
// upstream's interface about a user of upstream's interface; these adapters put the
// API server's own authorizer and users behind them.

// userInfo is u as the library's user.
func userInfo(u *filters.User) user.Info {
	if u == nil {
		return &user.DefaultInfo{}
	}
	return &user.DefaultInfo{Name: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra}
}

// authorizerAdapter answers the library's checks with the server's authorizer.
type authorizerAdapter struct{ z authorizer.Authorizer }

var _ upstream.UnconditionalAuthorizer = authorizerAdapter{}

// Authorize converts the library's attributes and decision.
func (a authorizerAdapter) Authorize(ctx context.Context, attrs upstream.Attributes) (upstream.Decision, string, error) {
	at := authorizer.Attributes{
		Verb: attrs.GetVerb(), ResourceRequest: attrs.IsResourceRequest(), Path: attrs.GetPath(),
		APIGroup: attrs.GetAPIGroup(), APIVersion: attrs.GetAPIVersion(), Resource: attrs.GetResource(),
		Subresource: attrs.GetSubresource(), Namespace: attrs.GetNamespace(), Name: attrs.GetName(),
	}
	if u := attrs.GetUser(); u != nil {
		at.User = &filters.User{Name: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: u.GetExtra()}
	}
	if reqs, err := attrs.GetFieldSelector(); err == nil && len(reqs) > 0 {
		parts := make([]string, 0, len(reqs))
		for _, r := range reqs {
			op := "="
			if r.Operator == selection.NotEquals {
				op = "!="
			}
			parts = append(parts, r.Field+op+r.Value)
		}
		at.FieldSelector = strings.Join(parts, ",")
	}
	d, reason, err := a.z.Authorize(ctx, at)
	switch d {
	case authorizer.Allow:
		return upstream.DecisionAllow, reason, err
	case authorizer.Deny:
		return upstream.DecisionDeny, reason, err
	}
	return upstream.DecisionNoOpinion, reason, err
}

// requestResource is the resource of a request, for authorizer.requestResource.
type requestResource struct{ r *admissionv1.AdmissionRequest }

func (r requestResource) GetName() string      { return r.r.Name }
func (r requestResource) GetNamespace() string { return r.r.Namespace }
func (r requestResource) GetSubresource() string {
	if r.r.RequestResource != nil {
		return r.r.RequestSubResource
	}
	return r.r.SubResource
}
func (r requestResource) GetResource() schema.GroupVersionResource {
	if rr := r.r.RequestResource; rr != nil {
		return schema.GroupVersionResource{Group: rr.Group, Version: rr.Version, Resource: rr.Resource}
	}
	return schema.GroupVersionResource{Group: r.r.Resource.Group, Version: r.r.Resource.Version, Resource: r.r.Resource.Resource}
}
