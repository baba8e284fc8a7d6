package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/filters"
	"github.com/kubette/kubette/internal/registry"
	"github.com/kubette/kubette/internal/storage"
)

// Actions are creates the generic store does not serve: reviews computed per request
// and never stored (TokenReview, SubjectAccessReview and its kin, SelfSubjectReview),
// and subresources whose create makes something other than their parent
// (serviceaccounts/token). The generic handler decodes the body into the action's type,
// runs it and answers 201 with what it returns; it knows no kind.

// ActionKey names the resource (and subresource) an action serves.
type ActionKey struct {
	Group       string
	Resource    string
	Subresource string
}

// Action serves POSTs to its resource or subresource.
type Action struct {
	// New returns an empty request body of Kind (the resource's own type when nil).
	New func() runtime.Object
	// Kind is the body's kind, for decoding and the response (the resource's when empty).
	Kind schema.GroupVersionKind
	// Do computes the answer. namespace and name are those of the request path (name is
	// the parent's for a subresource); the user is in ctx (filters.UserFrom), and so are
	// the request's create options (ActionOptionsFrom). A *metav1.Status it returns is
	// the answer as such, as upstream's create handler writes one.
	Do func(ctx context.Context, namespace, name string, obj runtime.Object) (runtime.Object, error)
	// Also are further body kinds the action accepts, each with its empty object (an
	// older version of the body, as policy/v1beta1 Eviction beside policy/v1); Do gets
	// the object of the kind the body names.
	Also map[schema.GroupVersionKind]func() runtime.Object
}

// defaultActions are the actions every server has.
func (s *Server) defaultActions() map[ActionKey]Action {
	return map[ActionKey]Action{
		{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"}: {Do: s.selfSubjectReview},
	}
}

// actionFor returns the action serving the request, if one does.
func (s *Server) actionFor(ri *requestInfo) (Action, bool) {
	a, ok := s.actions[ActionKey{Group: ri.res.GroupVersion.Group, Resource: ri.res.Plural, Subresource: ri.subresource}]
	return a, ok
}

// handleAction serves a POST with its action.
func (s *Server) handleAction(w http.ResponseWriter, req *http.Request, ri *requestInfo, a Action) {
	if ri.verb != "create" {
		s.writeError(w, req, apierrors.NewMethodNotSupported(ri.res.GroupResource(), ri.verb))
		return
	}
	if ri.subresource == "" && ri.name != "" {
		s.writeError(w, req, apierrors.NewMethodNotSupported(ri.res.GroupResource(), ri.verb))
		return
	}
	if !acceptsObject(req) {
		// An action's answer is no stored object: it has no Table or metadata form, and a
		// client accepting only those is refused before anything is done, as upstream.
		s.writeError(w, req, apierrors.NewGenericServerResponse(http.StatusNotAcceptable, ri.verb, ri.res.GroupResource(), "",
			fmt.Sprintf("the resource %s does not support being converted to a Table or PartialObjectMetadata", ri.res.GroupResource()), 0, false))
		return
	}
	gvk := a.Kind
	if gvk.Empty() {
		gvk = ri.res.GroupVersionKind()
	}
	var obj runtime.Object
	if a.New != nil {
		obj = a.New()
	} else {
		obj = ri.res.New()
	}
	data, err := readBody(req)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	if len(data) > 0 {
		if obj, err = s.decodeActionBody(data, bodyMediaType(req), gvk, obj, a.Also); err != nil {
			s.writeError(w, req, err)
			return
		}
	}
	out, err := a.Do(withActionOptions(req), ri.namespace, ri.name, obj)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	if st, ok := out.(*metav1.Status); ok {
		writeActionStatus(s, w, req, st)
		return
	}
	out.GetObjectKind().SetGroupVersionKind(gvk)
	s.writeObject(w, req, http.StatusCreated, out)
}

// selfSubjectReview answers `kubectl auth whoami`: who the server thinks the caller is.
func (s *Server) selfSubjectReview(ctx context.Context, _, _ string, obj runtime.Object) (runtime.Object, error) {
	review, ok := obj.(*authenticationv1.SelfSubjectReview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a SelfSubjectReview: %T", obj))
	}
	if u, ok := filters.UserFrom(ctx); ok {
		review.Status.UserInfo = authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: append([]string{}, u.Groups...)}
		if !hasGroup(u.Groups, "system:authenticated") && u.Name != filters.Anonymous {
			review.Status.UserInfo.Groups = append(review.Status.UserInfo.Groups, "system:authenticated")
		}
		for k, v := range u.Extra {
			if review.Status.UserInfo.Extra == nil {
				review.Status.UserInfo.Extra = map[string]authenticationv1.ExtraValue{}
			}
			review.Status.UserInfo.Extra[k] = append(authenticationv1.ExtraValue{}, v...)
		}
	}
	review.CreationTimestamp = metav1.NewTime(s.cfg.Now().Truncate(time.Second))
	return review, nil
}

// acceptsObject reports whether the request's Accept header takes the object itself
// (not only a Table or PartialObjectMetadata of it).
func acceptsObject(req *http.Request) bool {
	for _, m := range parseAccept(req.Header.Get("Accept")) {
		if m.as == "" {
			return true
		}
	}
	return false
}

func hasGroup(groups []string, g string) bool {
	for _, x := range groups {
		if x == g {
			return true
		}
	}
	return false
}

// Get returns a copy of the current object of a resource (from the watch cache when the
// resource has one, else from storage), or a NotFound API error. A miss in the cache is
// confirmed by storage: the cache may not have seen an object created a moment ago (a
// namespace and the pod created in it next). It is how admission plugins and actions
// read the cluster, as upstream's plugins read their informers.
func (s *Server) Get(ctx context.Context, gr schema.GroupResource, namespace, name string) (runtime.Object, error) {
	r, err := s.resourceFor(gr)
	if err != nil {
		return nil, err
	}
	if c := s.cacheFor(r); c != nil {
		obj, _, ok, err := c.Get(ctx, r.Key(namespace, name))
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		if ok {
			return s.served(ctx, r, obj)
		}
	}
	obj, _, err := s.getFromStorage(ctx, r, namespace, name)
	if err != nil {
		return nil, err
	}
	return s.served(ctx, r, obj)
}

// List returns copies of the current objects of a resource in namespace ("" for all),
// from the watch cache (storage for a resource without one), sorted by key.
func (s *Server) List(ctx context.Context, gr schema.GroupResource, namespace string) ([]runtime.Object, error) {
	r, err := s.resourceFor(gr)
	if err != nil {
		return nil, err
	}
	c := s.cacheFor(r)
	if c == nil {
		return s.storageObjects(ctx, r, namespace)
	}
	items, _, err := c.List(ctx, r.Prefix(namespace), nil)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return s.servedList(ctx, r, items)
}

// ListLive is List read from storage, never from the watch cache: what is there now,
// for a caller that must not act on a cache that has not yet seen an object created a
// moment ago (upstream's quota admission makes such a live lookup when its informer
// shows no quota).
func (s *Server) ListLive(ctx context.Context, gr schema.GroupResource, namespace string) ([]runtime.Object, error) {
	r, err := s.resourceFor(gr)
	if err != nil {
		return nil, err
	}
	return s.storageObjects(ctx, r, namespace)
}

// storageObjects reads every object of r in namespace from storage.
func (s *Server) storageObjects(ctx context.Context, r *registry.Resource, namespace string) ([]runtime.Object, error) {
	res, err := s.cfg.Store.List(ctx, r.Prefix(namespace), storage.ListOptions{})
	if err != nil {
		return nil, s.storageError(r, "", err)
	}
	decode := s.storageDecoder(r)
	out := make([]runtime.Object, 0, len(res.Items))
	for _, kv := range res.Items {
		obj, err := decode(kv.Key, kv.Value, kv.ModRevision)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		out = append(out, obj)
	}
	return s.servedList(ctx, r, out)
}

// servedList returns copies of stored objects, converted (in one conversion request
// for a custom resource's webhook) and stamped.
func (s *Server) servedList(ctx context.Context, r *registry.Resource, items []runtime.Object) ([]runtime.Object, error) {
	conv, err := s.toServedList(ctx, r, items)
	if err != nil {
		return nil, err
	}
	for i, obj := range conv {
		if obj == items[i] {
			obj = obj.DeepCopyObject()
		}
		setServedTypeMeta(r, obj)
		conv[i] = obj
	}
	return conv, nil
}

// resourceFor finds the served resource of a group (its preferred version).
func (s *Server) resourceFor(gr schema.GroupResource) (*registry.Resource, error) {
	for _, r := range s.table.All() {
		if r.GroupVersion.Group == gr.Group && r.Plural == gr.Resource {
			return r, nil
		}
	}
	return nil, apierrors.NewNotFound(gr, "")
}
