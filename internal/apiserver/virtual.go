package apiserver

import (
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/registry"
)

// ServeReads makes rd serve get and list of the virtual resource gvr (its
// registry.Resource.Read): for objects computed on request, such as metrics.k8s.io's.
// It must be called before the server serves (from Config.Extend).
func (s *Server) ServeReads(gvr schema.GroupVersionResource, rd registry.Reader) error {
	r, ok := s.table.Lookup(gvr.GroupVersion(), gvr.Resource)
	if !ok || !r.Virtual {
		return fmt.Errorf("apiserver: %s is not a virtual resource of this server", gvr)
	}
	r.Read = rd
	return nil
}

// handleVirtualGet serves get of a virtual resource from its Reader.
func (s *Server) handleVirtualGet(w http.ResponseWriter, req *http.Request, ri *requestInfo) {
	rd, ok := s.virtualReader(w, req, ri.res)
	if !ok {
		return
	}
	obj, err := rd.Get(req.Context(), ri.namespace, ri.name)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	setServedTypeMeta(ri.res, obj)
	s.respondObject(w, req, ri.res, http.StatusOK, obj)
}

// handleVirtualList serves list of a virtual resource from its Reader: every match,
// without a resourceVersion (the objects are computed now) and without pages
// (limit and continue are ignored, as metrics-server's lists do).
func (s *Server) handleVirtualList(w http.ResponseWriter, req *http.Request, ri *requestInfo, ls labels.Selector, fs fields.Selector) {
	rd, ok := s.virtualReader(w, req, ri.res)
	if !ok {
		return
	}
	items, err := rd.List(req.Context(), ri.namespace, ls, fs)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	for _, it := range items {
		setServedTypeMeta(ri.res, it)
	}
	if items == nil {
		items = []runtime.Object{}
	}
	s.respondList(w, req, ri.res, items, 0, "", 0)
}

// virtualReader returns r's Reader, or answers 503 when the server was given none.
func (s *Server) virtualReader(w http.ResponseWriter, req *http.Request, r *registry.Resource) (registry.Reader, bool) {
	if r.Read == nil {
		s.writeError(w, req, apierrors.NewServiceUnavailable(fmt.Sprintf("this API server computes no %s", r.GroupResource())))
		return nil, false
	}
	return r.Read, true
}
