package apiserver

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// What the admission webhooks (package admission/webhook) need of the server beyond
// Get and List: the versions of a resource, conversion between them, and decoding
// a webhook's patched object as a request body is decoded.

// Versions lists the served versions of a group-resource.
func (s *Server) Versions(gr schema.GroupResource) []string {
	var out []string
	for _, r := range s.table.All() {
		if r.GroupVersion.Group == gr.Group && r.Plural == gr.Resource {
			out = append(out, r.GroupVersion.Version)
		}
	}
	return out
}

// Convert returns obj as an object of resource gvr: a custom object converted to
// that version; a built-in object only to its own version.
func (s *Server) Convert(ctx context.Context, obj runtime.Object, gvr schema.GroupVersionResource) (runtime.Object, error) {
	r, ok := s.table.Lookup(gvr.GroupVersion(), gvr.Resource)
	if !ok {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), "")
	}
	if _, custom := obj.(*unstructured.Unstructured); custom && r.Custom != nil {
		return s.convertCustom(ctx, r, obj, gvr.Version)
	}
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Version == "" || gvk.GroupVersion() == r.GroupVersion {
		return obj, nil
	}
	return nil, fmt.Errorf("no conversion of %T to %s", obj, gvr)
}

// Decode decodes the JSON of an object of resource gvr as a request's body (unknown
// fields dropped; a custom object pruned by its schema).
func (s *Server) Decode(gvr schema.GroupVersionResource, data []byte) (runtime.Object, error) {
	r, ok := s.table.Lookup(gvr.GroupVersion(), gvr.Resource)
	if !ok {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), "")
	}
	gvk := r.GroupVersionKind()
	if r.Custom != nil {
		u := &unstructured.Unstructured{}
		if _, err := s.decodeCustom(data, mimeJSON, gvk, u, "Ignore"); err != nil {
			return nil, err
		}
		return u, nil
	}
	obj := r.New()
	if _, err := s.decodeInto(data, mimeJSON, gvk, obj, "Ignore"); err != nil {
		return nil, err
	}
	return obj, nil
}
