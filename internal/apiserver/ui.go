package apiserver

import (
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/trace"
)

// UIPath is where the server serves its web page: the objects of a namespace and, for
// one of them, its live sequence diagram (a user reaches it through `kubectl proxy`,
// as the old dashboard, at http://127.0.0.1:8001/ui/).
const UIPath = "/ui/"

// uiTracePath serves a diagram: kind, namespace, name, format (svg, mermaid or text),
// all and download parameters.
const uiTracePath = UIPath + "api/trace"

//go:embed ui
var uiAssets embed.FS

// uiCSP keeps the page to its own origin: it loads nothing from the network but its own
// files and the API.
const uiCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// ui serves UIPath. It sits behind the server's authentication and authorization, like
// every other path; the diagrams are collected by the same code as `kubette trace`
// (trace.Collect, trace.Draw) through a client whose requests go straight to the
// server's handler as the user who asked for the page, authorized as theirs would be.
type ui struct {
	s      *Server
	next   http.Handler
	assets http.Handler
	// client reads through loopback; made on first use.
	client func() (kubernetes.Interface, error)
}

// withUI serves UIPath and hands every other request to next. authz, when not nil,
// authorizes the reads the page's diagrams make on the user's behalf.
func (s *Server) withUI(next http.Handler, authz authorizer.Authorizer) http.Handler {
	var inner http.Handler = http.HandlerFunc(s.route)
	if authz != nil {
		inner = authorizer.WithAuthorization(inner, authz)
	}
	return &ui{
		s: s, next: next,
		// Request paths (/ui/x) are the embedded files' paths (ui/x).
		assets: http.FileServerFS(uiAssets),
		client: sync.OnceValues(func() (kubernetes.Interface, error) {
			return kubernetes.NewForConfigAndClient(&rest.Config{Host: "http://kubette-apiserver.invalid", UserAgent: "kubette-ui", QPS: -1},
				&http.Client{Transport: loopback{handler: inner}})
		}),
	}
}

// ServeHTTP serves the page, its files and its diagrams.
func (u *ui) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	p := req.URL.Path
	if p != "/ui" && !strings.HasPrefix(p, UIPath) {
		u.next.ServeHTTP(w, req)
		return
	}
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		u.s.writeError(w, req, apierrors.NewMethodNotSupported(schema.GroupResource{}, strings.ToLower(req.Method)))
		return
	}
	w.Header().Set("Content-Security-Policy", uiCSP)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	switch {
	case p == "/ui":
		// Relative, so that a proxy's prefix (kubectl proxy --api-prefix) is kept.
		w.Header().Set("Location", "ui/")
		w.WriteHeader(http.StatusMovedPermanently)
	case p == uiTracePath:
		u.serveTrace(w, req)
	case strings.HasPrefix(p, UIPath+"api/"):
		u.s.writeError(w, req, apierrors.NewGenericServerResponse(http.StatusNotFound, "get", schema.GroupResource{}, "", "the server could not find the requested resource", 0, false))
	default:
		w.Header().Set("Cache-Control", "no-cache")
		u.assets.ServeHTTP(w, req)
	}
}

// serveTrace answers uiTracePath with the diagram of one object, with an ETag that
// changes only when the diagram does: a request naming the current one in
// If-None-Match gets 304 Not Modified, and the page has nothing to redraw.
func (u *ui) serveTrace(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	namespace, name := q.Get("namespace"), q.Get("name")
	if namespace == "" || name == "" {
		u.s.writeError(w, req, apierrors.NewBadRequest("namespace and name are required"))
		return
	}
	kind, err := trace.ParseKind(q.Get("kind"))
	if err != nil {
		u.s.writeError(w, req, apierrors.NewBadRequest(err.Error()))
		return
	}
	opts := trace.DrawOptions{Format: q.Get("format"), All: q.Get("all") == "true" || q.Get("all") == "1"}
	if opts.Format == "" {
		opts.Format = "svg"
	}
	if _, err := trace.Renderer(opts.Format); err != nil {
		u.s.writeError(w, req, apierrors.NewBadRequest(err.Error()))
		return
	}
	if u.s.tracer == nil {
		u.s.writeError(w, req, errTraceOff())
		return
	}
	client, err := u.client()
	if err != nil {
		u.s.writeError(w, req, apierrors.NewInternalError(fmt.Errorf("ui client: %w", err)))
		return
	}
	in, err := trace.Collect(req.Context(), client, kind, namespace, name)
	if err != nil {
		u.s.writeError(w, req, collectError(err))
		return
	}
	out, err := trace.Draw(in, opts)
	if err != nil {
		u.s.writeError(w, req, apierrors.NewInternalError(err))
		return
	}
	// The diagram's own hash: reads and other records the diagram leaves out change nothing.
	h := fnv.New64a()
	_, _ = h.Write([]byte(out))
	etag := `"` + strconv.FormatUint(h.Sum64(), 16) + "-" + opts.Format + `"`
	w.Header().Set("ETag", etag)
	w.Header().Set("Cache-Control", "no-cache")
	if etagMatch(req.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	ext := map[string]string{"svg": "svg", "mermaid": "mmd", "text": "txt"}[opts.Format]
	if opts.Format == "svg" {
		w.Header().Set("Content-Type", "image/svg+xml")
	} else {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	if q.Get("download") != "" {
		w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", strings.ToLower(kind)+"-"+name+"."+ext))
	}
	if req.Method == http.MethodHead {
		return
	}
	_, _ = w.Write([]byte(out))
}

// collectError keeps the API's answer (404 for a missing object, 403 for a refused
// read) with the context Collect gave it; anything else is an internal error.
func collectError(err error) error {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		st := se.Status()
		st.Message = err.Error()
		return &apierrors.StatusError{ErrStatus: st}
	}
	return apierrors.NewInternalError(err)
}

// etagMatch reports whether an If-None-Match header names etag (or is *).
func etagMatch(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}
