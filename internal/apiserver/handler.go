package apiserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/filters"
	"github.com/kubette/kubette/internal/registry"
	"github.com/kubette/kubette/internal/trace"
)

// Handler returns the server's HTTP handler behind the filter chain: panic recovery,
// authentication and authorization (when auth is non-nil), then routing (the /ui/ page
// first, see withUI).
func (s *Server) Handler(auth filters.Authenticator, authz filters.Authorizer) http.Handler {
	if auth == nil {
		authz = nil
	} else if authz == nil {
		authz = filters.AuthenticatedAuthorizer{}
	}
	h := s.withUI(http.HandlerFunc(s.route), authz)
	if auth != nil {
		h = filters.WithAuthorization(h, authz)
		h = filters.WithAuthentication(h, auth)
	}
	return filters.WithPanicRecovery(h, s.log)
}

// route dispatches a request that passed the filters.
func (s *Server) route(w http.ResponseWriter, req *http.Request) {
	path := req.URL.Path
	switch {
	case path == "/healthz" || path == "/livez" || strings.HasPrefix(path, "/livez/") || strings.HasPrefix(path, "/healthz/"):
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
		return
	case path == "/readyz" || strings.HasPrefix(path, "/readyz/"):
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !s.ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("[-]watch-caches not ready\nreadyz check failed"))
			return
		}
		_, _ = w.Write([]byte("ok"))
		return
	case path == "/version":
		w.Header().Set("Content-Type", mimeJSON)
		_ = json.NewEncoder(w).Encode(s.cfg.Version)
		return
	case path == "/metrics":
		s.metrics.handler().ServeHTTP(w, req)
		return
	case strings.HasPrefix(path, "/debug/pprof/"):
		// As upstream's --profiling (on by default): behind authentication and authorization.
		servePprof(w, req)
		return
	case path == trace.Endpoint:
		s.serveTrace(w, req)
		return
	case strings.HasPrefix(path, "/openapi/"):
		if s.docs.serve(w, req) {
			return
		}
	case path == "/api" || path == "/api/" || path == "/apis" || path == "/apis/" || path == "/api/v1" || path == "/api/v1/" ||
		(strings.HasPrefix(path, "/apis/") && strings.Count(strings.Trim(path, "/"), "/") <= 2):
		if s.serveDiscovery(w, req) {
			return
		}
	}
	q := req.URL.Query()
	ri, ok := s.parseResourcePath(req.Method, path, q.Get("watch") == "true" || q.Get("watch") == "1")
	if !ok {
		s.writeError(w, req, apierrors.NewGenericServerResponse(http.StatusNotFound, "", schemaGroupResource(), "", "the server could not find the requested resource", 0, false))
		return
	}
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
	req, tw := s.traceBegin(req, ri)
	s.serveResource(rec, req, ri)
	s.metrics.observe(ri, rec.code, start)
	s.traceEnd(req, ri, tw, rec.code, start)
}

// serveResource runs the verb handler for a resource request.
func (s *Server) serveResource(w http.ResponseWriter, req *http.Request, ri *requestInfo) {
	growStack(len(ri.verb))
	r := ri.res
	if !verbAllowed(r, ri.verb) {
		s.writeError(w, req, apierrors.NewMethodNotSupported(r.GroupResource(), ri.verb))
		return
	}
	if r.Kind == "SelfSubjectReview" {
		s.handleSelfSubjectReview(w, req, ri)
		return
	}
	if ri.subresource != "" && !r.HasSubresource(ri.subresource) {
		s.writeError(w, req, apierrors.NewNotFound(r.GroupResource(), ri.name))
		return
	}
	if r.Namespaced && ri.namespace == "" && ri.name != "" {
		s.writeError(w, req, apierrors.NewNotFound(r.GroupResource(), ri.name))
		return
	}
	switch ri.subresource {
	case "scale":
		switch ri.verb {
		case "get":
			s.handleGetScale(w, req, ri)
		case "update":
			s.handleUpdate(w, req, ri)
		case "patch":
			s.handlePatch(w, req, ri)
		default:
			s.writeError(w, req, apierrors.NewMethodNotSupported(r.GroupResource(), ri.verb))
		}
		return
	case "binding":
		if ri.verb != "create" {
			s.writeError(w, req, apierrors.NewMethodNotSupported(r.GroupResource(), ri.verb))
			return
		}
		s.handleBinding(w, req, ri)
		return
	case "log":
		s.handlePodLog(w, req, ri)
		return
	case subresourceExec, subresourceAttach, subresourcePortForward:
		s.handlePodConnect(w, req, ri)
		return
	case "finalize":
		if ri.verb != "update" {
			s.writeError(w, req, apierrors.NewMethodNotSupported(r.GroupResource(), ri.verb))
			return
		}
	}
	switch ri.verb {
	case "get":
		s.handleGet(w, req, ri)
	case "list":
		s.handleList(w, req, ri)
	case "watch":
		s.handleWatch(w, req, ri)
	case "create":
		if ri.subresource != "" {
			s.writeError(w, req, apierrors.NewMethodNotSupported(r.GroupResource(), ri.verb))
			return
		}
		s.handleCreate(w, req, ri)
	case "update":
		s.handleUpdate(w, req, ri)
	case "patch":
		s.handlePatch(w, req, ri)
	case "delete":
		s.handleDelete(w, req, ri)
	case "deletecollection":
		s.handleDeleteCollection(w, req, ri)
	default:
		s.writeError(w, req, apierrors.NewMethodNotSupported(r.GroupResource(), ri.verb))
	}
}

func verbAllowed(r *registry.Resource, verb string) bool {
	if len(r.Verbs) == 0 {
		return true
	}
	for _, v := range r.Verbs {
		if v == verb {
			return true
		}
	}
	return false
}

// handleSelfSubjectReview answers `kubectl auth whoami`: who the server thinks the caller is.
func (s *Server) handleSelfSubjectReview(w http.ResponseWriter, req *http.Request, ri *requestInfo) {
	data, err := readBody(req)
	if err != nil {
		s.writeError(w, req, err)
		return
	}
	review := &authenticationv1.SelfSubjectReview{}
	if len(data) > 0 {
		if _, err := s.decodeInto(data, bodyMediaType(req), ri.res.GroupVersionKind(), review, "Ignore"); err != nil {
			s.writeError(w, req, err)
			return
		}
	}
	if u, ok := filters.UserFrom(req.Context()); ok {
		review.Status.UserInfo = authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: append(append([]string{}, u.Groups...), "system:authenticated")}
	}
	review.CreationTimestamp = metav1.NewTime(s.cfg.Now().Truncate(time.Second))
	setServedTypeMeta(ri.res, review)
	s.writeObject(w, req, http.StatusCreated, review)
}

// statusRecorder remembers the response code for metrics and keeps streaming working.
type statusRecorder struct {
	http.ResponseWriter
	code        int
	wroteHeader bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wroteHeader {
		r.code, r.wroteHeader = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

// Flush forwards to the underlying writer so watches stream.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func schemaGroupResource() schema.GroupResource { return schema.GroupResource{} }
