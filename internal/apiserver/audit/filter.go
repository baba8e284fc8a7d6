package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/apiserver/filters"
)

// HeaderAuditID is the request and response header with the request's audit ID, as upstream's.
const HeaderAuditID = "Audit-Id"

// Limits on the bodies kept for an event: a larger body is left out of it.
const (
	maxObjectBytes = 3 << 20  // etcd's request limit, about the largest object
	maxStatusBytes = 64 << 10 // an error's Status
)

// Auditor is the audit filter's policy and sink.
type Auditor struct {
	policy *Policy
	sink   Sink
	now    func() time.Time
}

// New returns an auditor that logs to sink what policy selects.
func New(policy *Policy, sink Sink) *Auditor {
	return &Auditor{policy: policy, sink: sink, now: time.Now}
}

// Decoder turns a body of a media type the filter cannot read itself (protobuf) into
// JSON, for the logged request and response objects.
type Decoder func(body []byte, contentType string) ([]byte, error)

// WithAudit logs the requests to next that the policy selects; the authenticated user
// must be in the request context. dec, when set, reads protobuf bodies. A nil Auditor
// returns next.
func (a *Auditor) WithAudit(next http.Handler, dec Decoder) http.Handler {
	if a == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		u, _ := filters.UserFrom(req.Context())
		attrs := authorizer.RequestAttributes(req, u)
		cfg := a.policy.Evaluate(attrs)
		id := auditID(req)
		w.Header().Set(HeaderAuditID, string(id))
		if cfg.Level == LevelNone {
			next.ServeHTTP(w, req)
			return
		}
		r := &run{a: a, cfg: cfg, rec: &filters.AuditRecord{}, ev: a.newEvent(req, id, cfg.Level, attrs, u),
			longRunning: longRunning(attrs), dec: dec}
		r.emit(StageRequestReceived)
		if cfg.Level.AtLeast(LevelRequest) || (attrs.Verb == "create" && r.ev.ObjectRef != nil && r.ev.ObjectRef.Name == "") {
			if req.Body != nil && req.Body != http.NoBody {
				r.reqBody = &capture{limit: maxObjectBytes}
				req.Body = &teeBody{ReadCloser: req.Body, c: r.reqBody}
			}
		}
		req = req.WithContext(filters.WithAuditRecord(req.Context(), r.rec))
		rw := &responseWriter{ResponseWriter: w, r: r}
		completed := false
		defer func() {
			if completed {
				return
			}
			p := recover()
			if p == nil {
				return // runtime.Goexit, not a panic
			}
			r.panicked(p)
			panic(p)
		}()
		next.ServeHTTP(rw, req)
		completed = true
		r.complete(req)
	})
}

// WithFailedAuthentication logs the requests that failed answers (those without valid
// credentials), as upstream: one event at stage ResponseStarted whose status message
// names the credentials tried. A nil Auditor returns failed.
func (a *Auditor) WithFailedAuthentication(failed http.Handler) http.Handler {
	if a == nil {
		return failed
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		attrs := authorizer.RequestAttributes(req, nil)
		cfg := a.policy.Evaluate(attrs)
		id := auditID(req)
		w.Header().Set(HeaderAuditID, string(id))
		if cfg.Level == LevelNone {
			failed.ServeHTTP(w, req)
			return
		}
		r := &run{a: a, cfg: cfg, rec: &filters.AuditRecord{}, ev: a.newEvent(req, id, cfg.Level, attrs, nil)}
		rw := &codeRecorder{ResponseWriter: w, code: http.StatusOK}
		failed.ServeHTTP(rw, req)
		r.ev.ResponseStatus = &metav1.Status{Code: int32(rw.code), Message: authMethods(req)}
		r.emit(StageResponseStarted)
	})
}

func auditID(req *http.Request) types.UID {
	if id := req.Header.Get(HeaderAuditID); id != "" && len(id) <= 64 {
		return types.UID(id)
	}
	return types.UID(uuid.NewString())
}

func (a *Auditor) newEvent(req *http.Request, id types.UID, level Level, attrs authorizer.Attributes, u *filters.User) Event {
	ev := Event{
		TypeMeta:                 metav1.TypeMeta{APIVersion: APIVersion, Kind: KindEvent},
		Level:                    level,
		AuditID:                  id,
		RequestURI:               req.RequestURI,
		Verb:                     attrs.Verb,
		SourceIPs:                sourceIPs(req),
		UserAgent:                req.UserAgent(),
		RequestReceivedTimestamp: metav1.NewMicroTime(a.now()),
	}
	if ev.RequestURI == "" {
		ev.RequestURI = req.URL.RequestURI()
	}
	if u != nil {
		ev.User = userInfo(u)
	}
	if attrs.ResourceRequest {
		ev.ObjectRef = &ObjectReference{Resource: attrs.Resource, Namespace: attrs.Namespace, Name: attrs.Name,
			APIGroup: attrs.APIGroup, APIVersion: attrs.APIVersion, Subresource: attrs.Subresource}
	}
	return ev
}

func userInfo(u *filters.User) authnv1.UserInfo {
	ui := authnv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
	if len(u.Extra) > 0 {
		ui.Extra = make(map[string]authnv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			ui.Extra[k] = v
		}
	}
	return ui
}

// sourceIPs are the addresses of X-Forwarded-For, X-Real-Ip and the connection, in that
// order and without repeats, as upstream's.
func sourceIPs(req *http.Request) []string {
	var ips []string
	add := func(s string) {
		ip := net.ParseIP(strings.TrimSpace(s))
		if ip == nil {
			return
		}
		v := ip.String()
		for _, x := range ips {
			if x == v {
				return
			}
		}
		ips = append(ips, v)
	}
	if xff := req.Header.Get("X-Forwarded-For"); xff != "" {
		for _, p := range strings.Split(xff, ",") {
			add(p)
		}
	}
	if xr := req.Header.Get("X-Real-Ip"); xr != "" {
		add(xr)
	}
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		host = req.RemoteAddr
	}
	add(host)
	return ips
}

// longRunning reports whether a request streams (upstream's long-running check): its
// event at ResponseStarted is written when the response starts.
func longRunning(a authorizer.Attributes) bool {
	if a.Verb == "watch" || a.Verb == "proxy" {
		return true
	}
	switch a.Subresource {
	case "attach", "exec", "proxy", "log", "portforward":
		return true
	}
	return false
}

func authMethods(req *http.Request) string {
	var m []string
	if _, _, ok := req.BasicAuth(); ok {
		m = append(m, "basic")
	}
	if f := strings.Fields(req.Header.Get("Authorization")); len(f) > 1 && strings.EqualFold(f[0], "bearer") {
		m = append(m, "bearer")
	}
	if req.URL.Query().Get("access_token") != "" {
		m = append(m, "access_token")
	}
	if req.TLS != nil && len(req.TLS.PeerCertificates) > 0 {
		m = append(m, "x509")
	}
	if len(m) == 0 {
		return "Authentication failed, no credentials provided"
	}
	return "Authentication failed, attempted: " + strings.Join(m, ", ")
}

// run is one audited request.
type run struct {
	a           *Auditor
	cfg         RequestConfig
	rec         *filters.AuditRecord
	longRunning bool
	reqBody     *capture
	dec         Decoder

	mu      sync.Mutex
	ev      Event
	code    int
	started bool
	resBody *capture
	resType string
}

// emit writes a copy of the event at stage.
func (r *run) emit(stage Stage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.emitLocked(stage)
}

func (r *run) emitLocked(stage Stage) {
	if r.cfg.omits(stage) {
		return
	}
	e := r.ev
	if e.ObjectRef != nil {
		ref := *e.ObjectRef // complete fills it in later
		e.ObjectRef = &ref
	}
	e.Stage = stage
	if stage == StageRequestReceived {
		e.StageTimestamp = e.RequestReceivedTimestamp
	} else {
		e.StageTimestamp = metav1.NewMicroTime(r.a.now())
	}
	ann, imp := r.rec.Read()
	e.Annotations = ann
	if imp != nil {
		ui := userInfo(imp)
		e.ImpersonatedUser = &ui
	}
	r.a.sink.Process(&e)
}

// start records the response code; for long-running requests it writes the event at
// ResponseStarted.
func (r *run) start(code int, contentType string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return
	}
	r.started, r.code = true, code
	r.ev.ResponseStatus = &metav1.Status{Code: int32(code)}
	switch {
	case !r.readable(contentType):
	case r.cfg.Level.AtLeast(LevelRequestResponse) && !r.longRunning:
		r.resBody = &capture{limit: maxObjectBytes}
	case code >= 300:
		r.resBody = &capture{limit: maxStatusBytes}
	}
	r.resType = contentType
	if r.longRunning {
		r.emitLocked(StageResponseStarted)
	}
}

func (r *run) write(b []byte) {
	r.mu.Lock()
	if r.resBody != nil {
		r.resBody.add(b)
	}
	r.mu.Unlock()
}

// complete writes the event at ResponseComplete, with the bodies the level asks for.
func (r *run) complete(req *http.Request) {
	r.start(http.StatusOK, "") // a handler that wrote nothing answered 200
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reqBody != nil && !r.reqBody.over {
		if obj := r.toJSON(r.reqBody.buf.Bytes(), req.Header.Get("Content-Type")); obj != nil {
			r.fillObjectRef(obj)
			if r.cfg.Level.AtLeast(LevelRequest) {
				r.ev.RequestObject = r.objectForLog(obj)
			}
		}
	}
	if r.resBody != nil && !r.resBody.over && r.resBody.buf.Len() > 0 {
		if obj := r.toJSON(r.resBody.buf.Bytes(), r.resType); obj != nil {
			if st := statusOf(obj); st != nil {
				r.ev.ResponseStatus = &metav1.Status{Status: st.Status, Message: st.Message, Reason: st.Reason, Details: st.Details, Code: st.Code}
			}
			if r.cfg.Level.AtLeast(LevelRequestResponse) && !r.longRunning {
				r.ev.ResponseObject = r.objectForLog(obj)
			}
		}
	}
	r.emitLocked(StageResponseComplete)
}

// panicked writes the event at Panic, as upstream: a 500 that quotes the panic.
func (r *run) panicked(p any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ev.ResponseStatus = &metav1.Status{Code: http.StatusInternalServerError, Status: metav1.StatusFailure,
		Reason: metav1.StatusReasonInternalError, Message: fmt.Sprintf("APIServer panic'd: %v", p)}
	r.emitLocked(StagePanic)
}

// fillObjectRef takes the name and namespace of a created object from its body, as
// upstream does from the decoded request object.
func (r *run) fillObjectRef(obj []byte) {
	ref := r.ev.ObjectRef
	if ref == nil || (ref.Name != "" && ref.Namespace != "") {
		return
	}
	var m struct {
		Metadata struct {
			Name      string    `json:"name"`
			Namespace string    `json:"namespace"`
			UID       types.UID `json:"uid"`
		} `json:"metadata"`
	}
	if json.Unmarshal(obj, &m) != nil {
		return
	}
	if ref.Name == "" {
		ref.Name = m.Metadata.Name
	}
	if ref.Namespace == "" {
		ref.Namespace = m.Metadata.Namespace
	}
	if ref.UID == "" {
		ref.UID = m.Metadata.UID
	}
}

func (r *run) objectForLog(obj []byte) json.RawMessage {
	if r.cfg.OmitManagedFields {
		obj = withoutManagedFields(obj)
	}
	return json.RawMessage(obj)
}

// mediaType is a Content-Type without its parameters.
func mediaType(contentType string) string {
	ct, _, _ := strings.Cut(contentType, ";")
	return strings.TrimSpace(ct)
}

// readable reports whether toJSON can read a response of contentType.
func (r *run) readable(contentType string) bool {
	ct := mediaType(contentType)
	return strings.HasSuffix(ct, "json") || (r.dec != nil && strings.HasSuffix(ct, "protobuf"))
}

// toJSON returns a body as compact JSON: JSON and YAML bodies (patches included), and
// protobuf ones through the Decoder; nil for others and for bodies that do not parse.
func (r *run) toJSON(body []byte, contentType string) []byte {
	if len(body) == 0 {
		return nil
	}
	ct := mediaType(contentType)
	var c bytes.Buffer
	switch {
	case strings.HasSuffix(ct, "json") || ct == "":
		if json.Compact(&c, body) != nil {
			return nil
		}
	case strings.HasSuffix(ct, "yaml"):
		j, err := yaml.YAMLToJSON(body)
		if err != nil || json.Compact(&c, j) != nil {
			return nil
		}
	case r.dec != nil && strings.HasSuffix(ct, "protobuf"):
		j, err := r.dec(body, ct)
		if err != nil {
			return nil
		}
		return j
	default:
		return nil
	}
	return c.Bytes()
}

// statusOf decodes a Status response body; nil when the body is another kind.
func statusOf(body []byte) *metav1.Status {
	if !bytes.Contains(body, []byte(`"Status"`)) {
		return nil
	}
	var st metav1.Status
	if json.Unmarshal(body, &st) != nil || st.Kind != "Status" {
		return nil
	}
	return &st
}

// withoutManagedFields drops metadata.managedFields from an object and from the items of
// a list.
func withoutManagedFields(obj []byte) []byte {
	if !bytes.Contains(obj, []byte(`"managedFields"`)) {
		return obj
	}
	var m map[string]any
	if json.Unmarshal(obj, &m) != nil {
		return obj
	}
	strip := func(o any) {
		if om, ok := o.(map[string]any); ok {
			if md, ok := om["metadata"].(map[string]any); ok {
				delete(md, "managedFields")
			}
		}
	}
	strip(m)
	if items, ok := m["items"].([]any); ok {
		for _, it := range items {
			strip(it)
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return obj
	}
	return b
}

// capture keeps the first limit bytes of a body; over is set when there were more.
type capture struct {
	buf   bytes.Buffer
	limit int
	over  bool
}

func (c *capture) add(b []byte) {
	if c.over {
		return
	}
	if c.buf.Len()+len(b) > c.limit {
		c.over = true
		c.buf = bytes.Buffer{}
		return
	}
	c.buf.Write(b)
}

// teeBody copies what the handler reads of the request body.
type teeBody struct {
	io.ReadCloser
	c *capture
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if n > 0 {
		t.c.add(p[:n])
	}
	return n, err
}

// responseWriter tells the run when the response starts and what it says.
type responseWriter struct {
	http.ResponseWriter
	r *run
}

func (w *responseWriter) WriteHeader(code int) {
	w.r.start(code, w.ResponseWriter.Header().Get("Content-Type"))
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	w.r.start(http.StatusOK, w.ResponseWriter.Header().Get("Content-Type"))
	w.r.write(b)
	return w.ResponseWriter.Write(b)
}

// Flush sends what was written so far.
func (w *responseWriter) Flush() {
	w.r.start(http.StatusOK, w.ResponseWriter.Header().Get("Content-Type"))
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack takes over the connection (exec, attach, port-forward): the response has
// started with 101 Switching Protocols.
func (w *responseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.r.start(http.StatusSwitchingProtocols, "")
	}
	return c, rw, err
}

// Unwrap lets http.ResponseController reach the writer below.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// codeRecorder remembers the response code.
type codeRecorder struct {
	http.ResponseWriter
	code int
}

func (c *codeRecorder) WriteHeader(code int) {
	c.code = code
	c.ResponseWriter.WriteHeader(code)
}
