package audit

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/apiserver/filters"
)

// recorder is a Sink that keeps the events, encoded as the log would.
type recorder struct {
	mu     sync.Mutex
	events []map[string]any
	typed  []Event
}

func (r *recorder) Process(ev *Event) {
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		panic(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, m)
	r.typed = append(r.typed, *ev)
}

func (r *recorder) stages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s []string
	for _, e := range r.typed {
		s = append(s, string(e.Stage))
	}
	return s
}

// token authenticates "Bearer admin" as admin (system:masters) and "Bearer alice" as alice.
type token struct{}

func (token) Authenticate(req *http.Request) (*filters.User, bool, error) {
	switch req.Header.Get("Authorization") {
	case "":
		return nil, false, nil
	case "Bearer admin":
		return &filters.User{Name: "admin", UID: "1", Groups: []string{"system:masters"}}, true, nil
	case "Bearer alice":
		return &filters.User{Name: "alice", Groups: []string{"dev"}, Extra: map[string][]string{"k": {"v"}}}, true, nil
	}
	return nil, false, errors.New("invalid token")
}

// chain is the server's order: authentication, audit, impersonation, authorization.
func chain(a *Auditor, h http.Handler) http.Handler {
	z := authorizer.Union{authorizer.PrivilegedGroup("system:masters"), authorizer.Func(
		func(_ context.Context, _ authorizer.Attributes) (authorizer.Decision, string, error) {
			return authorizer.NoOpinion, "no RBAC here", nil
		})}
	h = authorizer.WithAuthorization(h, z)
	h = authorizer.WithImpersonation(h, z)
	h = a.WithAudit(h, nil)
	return filters.WithAuthenticationFailed(h, token{}, a.WithFailedAuthentication(filters.Unauthorized{}))
}

func policy(t *testing.T, doc string) *Policy {
	t.Helper()
	p, _, err := ParsePolicy([]byte("apiVersion: audit.k8s.io/v1\nkind: Policy\n" + doc))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func serve(h http.Handler, method, target, tok, body string, hdr ...string) *httptest.ResponseRecorder {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, r)
	req.RemoteAddr = "10.1.2.3:5555"
	req.Header.Set("User-Agent", "test/1.0")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

const secret = `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s1","namespace":"ns","managedFields":[{"manager":"m"}]},"data":{"k":"c2VjcmV0"}}`

func echo() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(b)
	})
}

func TestEventShapeAtRequestResponse(t *testing.T) {
	rec := &recorder{}
	a := New(policy(t, "rules: [{level: RequestResponse}]"), rec)
	fixed := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	a.now = func() time.Time { return fixed }
	w := serve(chain(a, echo()), "POST", "/api/v1/namespaces/ns/secrets?fieldManager=x", "admin", secret, "X-Forwarded-For", "1.1.1.1, 2.2.2.2")
	if w.Code != http.StatusCreated {
		t.Fatalf("code %d: %s", w.Code, w.Body)
	}
	if got := rec.stages(); strings.Join(got, ",") != "RequestReceived,ResponseComplete" {
		t.Fatalf("stages %v", got)
	}
	id := w.Header().Get("Audit-Id")
	if id == "" {
		t.Fatal("no Audit-Id header")
	}
	ev := rec.events[1]
	want := map[string]any{
		"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "RequestResponse", "auditID": id,
		"stage": "ResponseComplete", "requestURI": "/api/v1/namespaces/ns/secrets?fieldManager=x", "verb": "create",
		"user":      map[string]any{"username": "admin", "uid": "1", "groups": []any{"system:masters", "system:authenticated"}},
		"sourceIPs": []any{"1.1.1.1", "2.2.2.2", "10.1.2.3"}, "userAgent": "test/1.0",
		"objectRef":      map[string]any{"resource": "secrets", "namespace": "ns", "name": "s1", "apiVersion": "v1"},
		"responseStatus": map[string]any{"metadata": map[string]any{}, "code": float64(201)},
		"requestObject":  mustJSON(secret), "responseObject": mustJSON(secret),
		"requestReceivedTimestamp": "2026-01-02T03:04:05.000006Z", "stageTimestamp": "2026-01-02T03:04:05.000006Z",
		"annotations": map[string]any{"authorization.k8s.io/decision": "allow"},
	}
	if g, w := jsonString(ev), jsonString(want); g != w {
		t.Errorf("event\n got %s\nwant %s", g, w)
	}
	if first := rec.events[0]; first["stage"] != "RequestReceived" || first["annotations"] != nil || first["responseStatus"] != nil ||
		first["objectRef"].(map[string]any)["name"] != nil {
		t.Errorf("RequestReceived event: %s", jsonString(first))
	}
}

func TestMetadataLevelLogsNoBodies(t *testing.T) {
	rec := &recorder{}
	a := New(policy(t, "omitStages: [RequestReceived]\nrules: [{level: Metadata}]"), rec)
	serve(chain(a, echo()), "POST", "/api/v1/namespaces/ns/secrets", "admin", secret)
	if len(rec.events) != 1 {
		t.Fatalf("events %v", rec.stages())
	}
	b := jsonString(rec.events[0])
	if strings.Contains(b, "c2VjcmV0") || rec.events[0]["requestObject"] != nil || rec.events[0]["responseObject"] != nil {
		t.Errorf("Metadata event has bodies: %s", b)
	}
	if ref := rec.events[0]["objectRef"].(map[string]any); ref["name"] != "s1" {
		t.Errorf("objectRef %v: the name of a created object comes from its body", ref)
	}
}

func TestRequestLevelAndOmitManagedFields(t *testing.T) {
	rec := &recorder{}
	a := New(policy(t, "omitManagedFields: true\nrules: [{level: Request}]"), rec)
	serve(chain(a, echo()), "POST", "/api/v1/namespaces/ns/secrets", "admin", secret)
	ev := rec.events[len(rec.events)-1]
	if ev["responseObject"] != nil {
		t.Errorf("Request level logged the response")
	}
	obj, _ := ev["requestObject"].(map[string]any)
	md, _ := obj["metadata"].(map[string]any)
	if md == nil || md["managedFields"] != nil || md["name"] != "s1" {
		t.Errorf("requestObject %v: want it without managedFields", obj)
	}
}

func TestForbiddenAndImpersonation(t *testing.T) {
	rec := &recorder{}
	a := New(policy(t, "omitStages: [RequestReceived]\nrules: [{level: Metadata}]"), rec)
	h := chain(a, echo())
	w := serve(h, "GET", "/api/v1/namespaces/ns/secrets/s1", "alice", "")
	if w.Code != http.StatusForbidden {
		t.Fatalf("code %d", w.Code)
	}
	ev := rec.typed[0]
	if ev.ResponseStatus == nil || ev.ResponseStatus.Code != 403 || ev.ResponseStatus.Reason != "Forbidden" ||
		!strings.Contains(ev.ResponseStatus.Message, `User "alice" cannot get resource "secrets"`) {
		t.Errorf("responseStatus %+v", ev.ResponseStatus)
	}
	if ev.Annotations["authorization.k8s.io/decision"] != "forbid" || ev.Annotations["authorization.k8s.io/reason"] != "no RBAC here" {
		t.Errorf("annotations %v", ev.Annotations)
	}
	if ev.User.Extra["k"][0] != "v" {
		t.Errorf("user %+v", ev.User)
	}
	// The policy sees the real user; the event names the impersonated one too.
	serve(h, "GET", "/api/v1/namespaces/ns/secrets/s1", "admin", "", "Impersonate-User", "bob", "Impersonate-Group", "g")
	ev = rec.typed[1]
	if ev.User.Username != "admin" || ev.ImpersonatedUser == nil || ev.ImpersonatedUser.Username != "bob" ||
		strings.Join(ev.ImpersonatedUser.Groups, ",") != "g,system:authenticated" || ev.Annotations["authorization.k8s.io/decision"] != "forbid" {
		t.Errorf("impersonation event %+v", ev)
	}
}

func TestFailedAuthentication(t *testing.T) {
	rec := &recorder{}
	a := New(policy(t, "rules: [{level: Metadata}]"), rec)
	h := chain(a, echo())
	for _, c := range []struct{ tok, msg string }{
		{"", "Authentication failed, no credentials provided"},
		{"wrong", "Authentication failed, attempted: bearer"},
	} {
		rec.typed = nil
		w := serve(h, "GET", "/api/v1/pods", c.tok, "")
		if w.Code != http.StatusUnauthorized || w.Header().Get("Audit-Id") == "" {
			t.Fatalf("code %d, Audit-Id %q", w.Code, w.Header().Get("Audit-Id"))
		}
		if len(rec.typed) != 1 {
			t.Fatalf("events %v", rec.stages())
		}
		ev := rec.typed[0]
		if ev.Stage != StageResponseStarted || ev.ResponseStatus.Code != 401 || ev.ResponseStatus.Message != c.msg || ev.User.Username != "" || ev.Verb != "list" {
			t.Errorf("event %+v", ev)
		}
	}
}

func TestLongRunningResponseStarted(t *testing.T) {
	rec := &recorder{}
	a := New(policy(t, "rules: [{level: RequestResponse}]"), rec)
	var stagesAtFlush string
	h := chain(a, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		stagesAtFlush = strings.Join(rec.stages(), ",")
		_, _ = w.Write([]byte(`{"type":"ADDED","object":{}}`))
	}))
	serve(h, "GET", "/api/v1/pods?watch=true", "admin", "")
	if stagesAtFlush != "RequestReceived,ResponseStarted" {
		t.Errorf("stages while streaming: %s", stagesAtFlush)
	}
	if got := strings.Join(rec.stages(), ","); got != "RequestReceived,ResponseStarted,ResponseComplete" {
		t.Errorf("stages %s", got)
	}
	if last := rec.typed[2]; last.ResponseObject != nil || last.ResponseStatus.Code != 200 {
		t.Errorf("watch event logged the stream or lost the code: %+v", last)
	}
	// A long-running request that writes nothing still gets its ResponseStarted.
	rec.typed = nil
	serve(chain(a, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})), "GET", "/api/v1/namespaces/a/pods/p/log?follow=true", "admin", "")
	if got := strings.Join(rec.stages(), ","); got != "RequestReceived,ResponseStarted,ResponseComplete" {
		t.Errorf("stages %s", got)
	}
}

type hijackable struct {
	*httptest.ResponseRecorder
	hijacked bool
}

func (h *hijackable) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h.hijacked = true
	c1, c2 := net.Pipe()
	_ = c2.Close()
	return c1, nil, nil
}

func TestHijackStartsTheResponse(t *testing.T) {
	rec := &recorder{}
	a := New(policy(t, "omitStages: [RequestReceived]\nrules: [{level: Metadata}]"), rec)
	h := chain(a, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		_ = c.Close()
	}))
	req := httptest.NewRequest("POST", "/api/v1/namespaces/a/pods/p/exec?command=sh", nil)
	req.Header.Set("Authorization", "Bearer admin")
	w := &hijackable{ResponseRecorder: httptest.NewRecorder()}
	h.ServeHTTP(w, req)
	if !w.hijacked {
		t.Fatal("not hijacked")
	}
	if got := strings.Join(rec.stages(), ","); got != "ResponseStarted,ResponseComplete" || rec.typed[0].ResponseStatus.Code != 101 {
		t.Errorf("stages %s, status %+v", got, rec.typed[0].ResponseStatus)
	}
}

func TestPanicStage(t *testing.T) {
	rec := &recorder{}
	a := New(policy(t, "rules: [{level: Metadata}]"), rec)
	h := chain(a, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Errorf("recovered %v, want the handler's panic passed on", p)
			}
		}()
		serve(h, "GET", "/api/v1/pods", "admin", "")
	}()
	if got := strings.Join(rec.stages(), ","); got != "RequestReceived,Panic" {
		t.Fatalf("stages %s", got)
	}
	if st := rec.typed[1].ResponseStatus; st.Code != 500 || st.Message != "APIServer panic'd: boom" || st.Reason != "InternalError" {
		t.Errorf("status %+v", st)
	}
}

func TestNoneAndStatusOfErrors(t *testing.T) {
	rec := &recorder{}
	a := New(policy(t, "rules: [{level: None, nonResourceURLs: ['/healthz*']}, {level: Metadata, omitStages: [RequestReceived]}]"), rec)
	h := chain(a, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/healthz" {
			return
		}
		filters.WriteStatus(w, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "c"))
	}))
	if w := serve(h, "GET", "/healthz", "admin", ""); w.Header().Get("Audit-Id") == "" {
		t.Error("no Audit-Id at level None")
	}
	if len(rec.typed) != 0 {
		t.Fatalf("level None logged %v", rec.stages())
	}
	serve(h, "GET", "/api/v1/namespaces/a/configmaps/c", "admin", "", "Audit-Id", "given-id")
	ev := rec.typed[0]
	if ev.AuditID != "given-id" || ev.ResponseStatus.Code != 404 || ev.ResponseStatus.Reason != "NotFound" || ev.ResponseStatus.Status != "Failure" ||
		ev.ResponseStatus.Details == nil || ev.ResponseStatus.Details.Name != "c" {
		t.Errorf("event %+v status %+v", ev, ev.ResponseStatus)
	}
}

func TestNilAuditor(t *testing.T) {
	var a *Auditor
	h := echo()
	if got := a.WithAudit(h, nil); got == nil {
		t.Fatal("nil handler")
	}
	if w := serve(a.WithAudit(h, nil), "POST", "/api/v1/namespaces/a/configmaps", "", "{}"); w.Code != 201 || w.Header().Get("Audit-Id") != "" {
		t.Errorf("nil auditor: %d %v", w.Code, w.Header())
	}
}

func mustJSON(s string) any {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		panic(err)
	}
	return v
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
