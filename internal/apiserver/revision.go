package apiserver

import "k8s.io/apimachinery/pkg/runtime/schema"

// Revision returns the revision the watch cache of a resource has caught up to, or 0
// when the resource has no cache (or is unknown): readers that index what List returns
// (the RBAC authorizer) rebuild their index when it moves.
func (s *Server) Revision(gr schema.GroupResource) int64 {
	r, err := s.resourceFor(gr)
	if err != nil {
		return 0
	}
	if c := s.cacheFor(r); c != nil {
		return c.Revision()
	}
	return 0
}
