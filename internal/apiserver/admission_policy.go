package apiserver

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// KindResource returns the resource serving kind gvk (the param kinds of
// ValidatingAdmissionPolicies: any served kind, custom resources included) and whether
// it is namespaced; ok is false when no served resource has the kind.
func (s *Server) KindResource(gvk schema.GroupVersionKind) (gr schema.GroupResource, namespaced, ok bool) {
	r, ok := s.table.ForKind(gvk)
	if !ok {
		return schema.GroupResource{}, false, false
	}
	return schema.GroupResource{Group: r.GroupVersion.Group, Resource: r.Plural}, r.Namespaced, true
}
