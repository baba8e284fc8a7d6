package apiserver

import (
	"context"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubette/kubette/internal/apiserver/filters"
	"github.com/kubette/kubette/internal/apiserver/watchcache"
	"github.com/kubette/kubette/internal/registry"
	"github.com/kubette/kubette/internal/storage"
	"github.com/kubette/kubette/internal/trace"
)

// tracer records what the server does for `kubette trace`: every request with the
// storage write it made, and every watch event sent to a watcher (see internal/trace).
// Components' own decisions reach the trace as Events, which are API objects: their
// creation is a recorded request, so no separate endpoint for components is needed.
type tracer struct {
	rec *trace.Recorder
	// resources names each resource as records do (pods, deployments.apps), computed once
	// so that recording builds no strings.
	resources map[*registry.Resource]string
}

// startTrace turns tracing on unless the configuration turns it off (a negative
// TraceCapacity): it creates the recorder and routes storage writes through a wrapper
// that notes them in the request.
func (s *Server) startTrace() {
	if s.cfg.TraceCapacity < 0 {
		return
	}
	t := &tracer{rec: trace.New(trace.Config{Capacity: s.cfg.TraceCapacity, Now: s.cfg.Now}), resources: map[*registry.Resource]string{}}
	for _, r := range s.table.All() {
		t.resources[r] = r.GroupResource().String()
	}
	s.tracer = t
	s.cfg.Store = tracingStore{Store: s.cfg.Store}
}

// Tracer returns the server's trace recorder, nil when tracing is off.
func (s *Server) Tracer() *trace.Recorder {
	if s.tracer == nil {
		return nil
	}
	return s.tracer.rec
}

func (t *tracer) resource(r *registry.Resource) string {
	if name, ok := t.resources[r]; ok {
		return name
	}
	return r.GroupResource().String()
}

// serveTrace answers GET /debug/trace (behind authentication, as /debug/pprof).
func (s *Server) serveTrace(w http.ResponseWriter, req *http.Request) {
	if s.tracer == nil {
		s.writeError(w, req, errTraceOff())
		return
	}
	s.tracer.rec.ServeHTTP(w, req)
}

// errTraceOff is the 404 of the trace endpoints when tracing is off.
func errTraceOff() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound,
		Message: "tracing is off (the API server runs with --trace-capacity=0)"}}
}

// traceWrite is where the storage wrapper notes a request's write.
type traceWrite struct {
	mu  sync.Mutex
	key string
	op  string
	rev int64
}

type traceWriteKey struct{}

var traceWriteVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true}

// traceBegin gives a write request a place for its storage write; reads get none and
// cost nothing here.
func (s *Server) traceBegin(req *http.Request, ri *requestInfo) (*http.Request, *traceWrite) {
	if s.tracer == nil || !traceWriteVerbs[ri.verb] {
		return req, nil
	}
	w := &traceWrite{}
	return req.WithContext(context.WithValue(req.Context(), traceWriteKey{}, w)), w
}

// traceEnd records a finished request.
func (s *Server) traceEnd(req *http.Request, ri *requestInfo, w *traceWrite, code int, start time.Time) {
	if s.tracer == nil || untraced(req.Context()) {
		return
	}
	rec := trace.Record{
		Type: trace.TypeRequest, Time: start, Verb: ri.verb, Method: req.Method, Path: req.URL.Path,
		Resource: s.tracer.resource(ri.res), Kind: ri.res.Kind, Namespace: ri.namespace, Name: ri.name, Subresource: ri.subresource,
		Code: code, Latency: time.Since(start), UserAgent: req.UserAgent(),
	}
	if u, ok := filters.UserFrom(req.Context()); ok {
		rec.User = u.Name
	}
	if w != nil {
		rec.FieldManager = rawQueryValue(req.URL.RawQuery, "fieldManager")
		w.mu.Lock()
		rec.Key, rec.WriteOp, rec.Revision = w.key, w.op, w.rev
		w.mu.Unlock()
		if rec.Name == "" && rec.Key != "" && ri.verb == "create" {
			rec.Name = path.Base(rec.Key) // a generated name
		}
	}
	s.tracer.rec.Add(&rec)
}

// rawQueryValue finds a plain (unescaped) parameter without parsing the whole query.
func rawQueryValue(raw, name string) string {
	for raw != "" {
		var kv string
		kv, raw, _ = strings.Cut(raw, "&")
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// tracingStore notes each successful write in the request's traceWrite.
type tracingStore struct {
	storage.Store
}

func noteWrite(ctx context.Context, key, op string, rev int64) {
	if w, ok := ctx.Value(traceWriteKey{}).(*traceWrite); ok {
		w.mu.Lock()
		w.key, w.op, w.rev = key, op, rev
		w.mu.Unlock()
	}
}

// Create writes through and notes the write.
func (t tracingStore) Create(ctx context.Context, key string, value []byte, opts ...storage.WriteOption) (int64, error) {
	rev, err := t.Store.Create(ctx, key, value, opts...)
	if err == nil {
		noteWrite(ctx, key, "create", rev)
	}
	return rev, err
}

// Update writes through and notes the write.
func (t tracingStore) Update(ctx context.Context, key string, value []byte, expectedRevision int64, opts ...storage.WriteOption) (int64, error) {
	rev, err := t.Store.Update(ctx, key, value, expectedRevision, opts...)
	if err == nil {
		noteWrite(ctx, key, "update", rev)
	}
	return rev, err
}

// Delete writes through and notes the write.
func (t tracingStore) Delete(ctx context.Context, key string, expectedRevision int64) (storage.KeyValue, int64, error) {
	kv, rev, err := t.Store.Delete(ctx, key, expectedRevision)
	if err == nil {
		noteWrite(ctx, key, "delete", rev)
	}
	return kv, rev, err
}

// traceWatcher is who receives a watch's events.
type traceWatcher struct {
	user, userAgent, resource, kind string
}

// traceWatch describes a watch request's watcher for its deliveries (nil when tracing is off).
func (s *Server) traceWatch(req *http.Request, ri *requestInfo) *traceWatcher {
	if s.tracer == nil {
		return nil
	}
	w := &traceWatcher{userAgent: req.UserAgent(), resource: s.tracer.resource(ri.res), kind: ri.res.Kind}
	if u, ok := filters.UserFrom(req.Context()); ok {
		w.user = u.Name
	}
	return w
}

// traceDelivery records an event about to be sent to a watcher (bookmarks are not recorded).
func (s *Server) traceDelivery(w *traceWatcher, ev watchcache.Event) {
	if w == nil || ev.Type == watch.Bookmark {
		return
	}
	m, ok := ev.Object.(metav1.Object)
	if !ok {
		return
	}
	rec := trace.Record{
		Type: trace.TypeDelivery, User: w.user, UserAgent: w.userAgent, Resource: w.resource, Kind: w.kind,
		Namespace: m.GetNamespace(), Name: m.GetName(), UID: string(m.GetUID()), EventType: string(ev.Type), Revision: ev.Revision,
	}
	s.tracer.rec.Add(&rec)
}
