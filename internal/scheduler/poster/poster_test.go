package poster

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

var podsGR = schema.GroupResource{Resource: "pods"}

// newServer starts an HTTP server with handler and returns a clientset for it
// configured as the scheduler's (protobuf, user agent).
func newServer(t *testing.T, handler http.HandlerFunc) *kubernetes.Clientset {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL, UserAgent: "poster-test"}
	cfg.ContentType = runtime.ContentTypeProtobuf
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func newPoster(t *testing.T, rc rest.Interface) *Poster {
	t.Helper()
	p, err := New(rc.(*rest.RESTClient))
	if err != nil {
		t.Fatal(err)
	}
	p.sleep = func(context.Context, time.Duration) error { return nil }
	return p
}

func writeStatus(w http.ResponseWriter, st *metav1.Status) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	data, _ := runtime.Encode(scheme.Codecs.LegacyCodec(metav1.SchemeGroupVersion), st)
	_, _ = w.Write(data)
}

// TestPostBinding: the request is what client-go sends for a binding — POST to
// the pods/binding path, protobuf body of a v1 Binding, the content types and the
// REST client's user agent — and a 201 is a success.
func TestPostBinding(t *testing.T) {
	var got corev1.Binding
	var header http.Header
	var path string
	cs := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		path, header = r.Method+" "+r.URL.Path, r.Header.Clone()
		body, _ := io.ReadAll(r.Body)
		if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, &got); err != nil {
			t.Errorf("decode body: %v", err)
		}
		writeStatus(w, &metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusCreated})
	})
	p := newPoster(t, cs.CoreV1().RESTClient())
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p1", UID: "u1"}, Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}}
	if err := p.Post(context.Background(), Path("ns", "pods", "p1", "binding"), b, nil, podsGR, "p1"); err != nil {
		t.Fatal(err)
	}
	if path != "POST /api/v1/namespaces/ns/pods/p1/binding" {
		t.Errorf("request %q", path)
	}
	if ct := header.Get("Content-Type"); ct != runtime.ContentTypeProtobuf {
		t.Errorf("content type %q", ct)
	}
	if a := header.Get("Accept"); a != "application/vnd.kubernetes.protobuf,application/json" {
		t.Errorf("accept %q", a)
	}
	if ua := header.Get("User-Agent"); ua != "poster-test" {
		t.Errorf("user agent %q", ua)
	}
	if got.Name != "p1" || got.Namespace != "ns" || got.UID != "u1" || got.Target.Name != "n1" || got.Target.Kind != "Node" {
		t.Errorf("binding %+v", got)
	}
}

// TestPostEventDecodesResponse: an events.k8s.io/v1 Event goes to its group's
// path and the created object comes back decoded.
func TestPostEventDecodesResponse(t *testing.T) {
	var path string
	cs := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path
		body, _ := io.ReadAll(r.Body)
		var e eventsv1.Event
		if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, &e); err != nil {
			t.Errorf("decode body: %v", err)
		}
		e.ResourceVersion = "42"
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
		w.WriteHeader(http.StatusCreated)
		info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
		_ = scheme.Codecs.EncoderForVersion(info.Serializer, eventsv1.SchemeGroupVersion).Encode(&e, w)
	})
	p := newPoster(t, cs.EventsV1().RESTClient())
	e := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "e1"}, Reason: "Scheduled", Note: "Successfully assigned"}
	out := &eventsv1.Event{}
	if err := p.Post(context.Background(), Path("ns", "events", "", ""), e, out, schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, ""); err != nil {
		t.Fatal(err)
	}
	if path != "/apis/events.k8s.io/v1/namespaces/ns/events" {
		t.Errorf("path %q", path)
	}
	if out.Name != "e1" || out.ResourceVersion != "42" || out.Note != "Successfully assigned" {
		t.Errorf("decoded %+v", out)
	}
}

// TestPostErrors: a Status body becomes the same StatusError client-go returns
// (a 409 is a conflict, with its message); a body without a Status a generic
// server error with the text (or "unknown" for a non-text body).
func TestPostErrors(t *testing.T) {
	cases := []struct {
		name    string
		handler http.HandlerFunc
		check   func(error) bool
		message string
	}{
		{"status", func(w http.ResponseWriter, _ *http.Request) {
			writeStatus(w, &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusConflict, Reason: metav1.StatusReasonConflict,
				Message: `Operation cannot be fulfilled on pods/binding "p1": pod p1 is already assigned to node "n2"`})
		}, apierrors.IsConflict, `pod p1 is already assigned to node "n2"`},
		{"text", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("  upstream went away\n"))
		}, func(err error) bool { return apierrors.ReasonForError(err) == metav1.StatusReasonInternalError }, "upstream went away"},
		{"binary", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte{1, 2, 3})
		}, apierrors.IsForbidden, "unknown"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := newServer(t, tc.handler)
			p := newPoster(t, cs.CoreV1().RESTClient())
			b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p1"}, Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}}
			err := p.Post(context.Background(), Path("ns", "pods", "p1", "binding"), b, nil, podsGR, "p1")
			if err == nil || !tc.check(err) || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("err %v (reason %q)", err, apierrors.ReasonForError(err))
			}
			// The same request through client-go gives the same error.
			want := cs.CoreV1().RESTClient().Post().Namespace("ns").Resource("pods").Name("p1").SubResource("binding").Body(b).Do(context.Background()).Error()
			if want == nil || err.Error() != want.Error() || apierrors.ReasonForError(err) != apierrors.ReasonForError(want) {
				t.Fatalf("err %q (%s), client-go %q (%s)", err, apierrors.ReasonForError(err), want, apierrors.ReasonForError(want))
			}
		})
	}
}

// TestPostRetriesAfterRetryAfter: a 429 or 5xx with Retry-After is retried (10
// times at most, as client-go), waiting the seconds it names; without the header
// it is not.
func TestPostRetriesAfterRetryAfter(t *testing.T) {
	var calls atomic.Int32
	failures := int32(3)
	cs := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) <= failures {
			w.Header().Set("Retry-After", "2")
			writeStatus(w, &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusTooManyRequests, Reason: metav1.StatusReasonTooManyRequests, Message: "slow down"})
			return
		}
		writeStatus(w, &metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusCreated})
	})
	p := newPoster(t, cs.CoreV1().RESTClient())
	var waits []time.Duration
	p.sleep = func(_ context.Context, d time.Duration) error {
		waits = append(waits, d)
		return nil
	}
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p1"}, Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}}
	if err := p.Post(context.Background(), Path("ns", "pods", "p1", "binding"), b, nil, podsGR, "p1"); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 4 || len(waits) != 3 || waits[0] != 2*time.Second {
		t.Fatalf("%d calls, waits %v", calls.Load(), waits)
	}

	calls.Store(0)
	failures = 100
	err := p.Post(context.Background(), Path("ns", "pods", "p1", "binding"), b, nil, podsGR, "p1")
	if !apierrors.IsTooManyRequests(err) || calls.Load() != maxRetries+1 {
		t.Fatalf("err %v after %d calls", err, calls.Load())
	}
}

// TestNewNeedsHTTPClient: a REST client without an HTTP client cannot post.
func TestNewNeedsHTTPClient(t *testing.T) {
	if _, err := New(&rest.RESTClient{}); err == nil {
		t.Fatal("no error")
	}
}
