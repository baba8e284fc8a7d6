package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/kubette/kubette/internal/apiserver/admission"
	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/apiserver/filters"
	"github.com/kubette/kubette/internal/inprocess"
	"github.com/kubette/kubette/internal/registry"
	"github.com/kubette/kubette/internal/trace"
)

// Handler returns the server's HTTP handler behind the filter chain: panic recovery,
// authentication, the audit log (Config.Audit), impersonation, priority and fairness,
// and authorization (when auth is non-nil), then routing (the /ui/ page first, see
// withUI).
func (s *Server) Handler(auth filters.Authenticator, authz authorizer.Authorizer) http.Handler {
	if auth == nil {
		authz = nil
	} else if authz == nil {
		authz = authorizer.Authenticated{}
	}
	h := s.withUI(http.HandlerFunc(s.route), authz)
	if auth != nil {
		h = authorizer.WithAuthorization(h, authz)
		h = s.withFlowControl(h)
		h = authorizer.WithImpersonation(h, authz)
		h = s.cfg.Audit.WithAudit(h, s.auditJSON)
		h = filters.WithAuthenticationFailed(h, auth, s.cfg.Audit.WithFailedAuthentication(filters.Unauthorized{}))
	} else {
		h = s.cfg.Audit.WithAudit(h, s.auditJSON)
	}
	h = filters.WithPanicRecovery(h, s.log)
	s.chain.Store(&h)
	return h
}

// LoopbackConfig is a client configuration whose requests go to the server's handler
// chain in this process (the last one Handler built; the bare routes before that) as
// system:apiserver in system:masters, as upstream's loopback client: for admission
// plugins and controllers inside the server that write through the API.
func (s *Server) LoopbackConfig() *rest.Config {
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if c := s.chain.Load(); c != nil {
			(*c).ServeHTTP(w, req)
			return
		}
		s.route(w, req)
	})
	return &rest.Config{Host: "http://kubette-apiserver.loopback", QPS: -1, Transport: &inprocess.Transport{Handler: h,
		User: &filters.User{Name: "system:apiserver", Groups: []string{"system:masters", "system:authenticated"}}}}
}

// HandlePath serves a non-resource path with h, behind authentication and authorization
// like every path: for documents of no kind, such as the service account issuer's OIDC
// discovery. It must be called before the server serves (from Config.Extend).
func (s *Server) HandlePath(path string, h http.Handler) {
	if s.paths == nil {
		s.paths = map[string]http.Handler{}
	}
	s.paths[path] = h
}

// route dispatches a request that passed the filters.
func (s *Server) route(w http.ResponseWriter, req *http.Request) {
	path := req.URL.Path
	if h, ok := s.paths[path]; ok {
		h.ServeHTTP(w, req)
		return
	}
	switch {
	case path == "/healthz" || path == "/livez" || path == "/readyz" ||
		strings.HasPrefix(path, "/healthz/") || strings.HasPrefix(path, "/livez/") || strings.HasPrefix(path, "/readyz/"):
		s.serveHealth(w, req, strings.SplitN(strings.TrimPrefix(path, "/"), "/", 2)[0])
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
	case strings.HasPrefix(path, "/apis/") && s.serveAggregated(w, req):
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
		s.writeError(w, req, errPathNotFound())
		return
	}
	start := time.Now()
	ctx, warnings := admission.WithWarnings(req.Context())
	req = req.WithContext(ctx)
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK, warnings: warnings}
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
	if a, ok := s.actionFor(ri); ok {
		s.handleAction(w, req, ri, a)
		return
	}
	if ri.subresource != "" && !r.HasSubresource(ri.subresource) {
		// As upstream, where no route matches: the path, not the object, is unknown.
		s.writeError(w, req, errPathNotFound())
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
	case subresourceProxy:
		s.handleProxy(w, req, ri)
		return
	}
	if ri.subresource != "" && !r.SubresourceServes(ri.subresource, ri.verb) {
		s.writeError(w, req, apierrors.NewMethodNotSupported(r.GroupResource(), ri.verb))
		return
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

// statusRecorder remembers the response code for metrics and keeps streaming working.
// It also sends the admission plugins' warnings as Warning headers.
type statusRecorder struct {
	http.ResponseWriter
	code        int
	wroteHeader bool
	warnings    *admission.Warnings
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wroteHeader {
		r.code, r.wroteHeader = code, true
		warn(r.ResponseWriter, r.warnings.List())
	}
	r.ResponseWriter.WriteHeader(code)
}

// Write sends the header first, as http.ResponseWriter does, so that warnings go out.
func (r *statusRecorder) Write(b []byte) (int, error) {
	if !r.wroteHeader {
		r.WriteHeader(http.StatusOK)
	}
	return r.ResponseWriter.Write(b)
}

// Flush forwards to the underlying writer so watches stream.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// errPathNotFound is upstream's answer to a path no route serves: 404 "the server could not
// find the requested resource", with empty details.
func errPathNotFound() error {
	return apierrors.NewGenericServerResponse(http.StatusNotFound, "", schema.GroupResource{}, "", "", 0, false)
}

// auditJSON decodes a protobuf body as JSON for the audit log.
func (s *Server) auditJSON(body []byte, _ string) ([]byte, error) {
	obj, gvk, err := s.codecs.proto.Decode(body, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decode protobuf for the audit log: %w", err)
	}
	obj.GetObjectKind().SetGroupVersionKind(*gvk)
	return json.Marshal(obj)
}
