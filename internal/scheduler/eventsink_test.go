package scheduler

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// TestEventSinkPosts creates Events through the sink's posters from many goroutines,
// then after the sink's context ended (on the caller's goroutine): each reaches the
// server once as a POST to its namespace's events, and Create returns the Event it
// was given (client-go's broadcaster discards the result) or the server's error.
func TestEventSinkPosts(t *testing.T) {
	var (
		mu    sync.Mutex
		posts = map[string]int{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ev := &eventsv1.Event{}
		if err := runtime.DecodeInto(scheme.Codecs.UniversalDecoder(), body, ev); err != nil || r.Method != http.MethodPost {
			http.Error(w, fmt.Sprintf("%s: %v", r.Method, err), http.StatusBadRequest)
			return
		}
		if ev.Name == "refused" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"no"}`)
			return
		}
		mu.Lock()
		posts[r.URL.Path+" "+ev.Name]++
		mu.Unlock()
		ev.ResourceVersion = "7"
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(runtime.EncodeOrDie(scheme.Codecs.LegacyCodec(eventsv1.SchemeGroupVersion), ev)))
	}))
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sink := newEventSink(ctx, cs.EventsV1())
	create := func(name string) error {
		in := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		out, err := sink.Create(context.Background(), in)
		if err == nil && out != in {
			return fmt.Errorf("created %s/%s: got %p back, want the Event posted (%p)", out.Namespace, out.Name, out, in)
		}
		return err
	}
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if err := create(fmt.Sprintf("e%d", i)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := create("refused"); err == nil || !strings.Contains(err.Error(), "no") {
		t.Fatalf("refused Event: err %v", err)
	}
	if _, err := sink.Create(context.Background(), &eventsv1.Event{}); err == nil {
		t.Fatal("an Event without namespace was accepted")
	}
	cancel()
	sink.wait()
	if err := create("after"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(posts) != n+1 || posts["/apis/events.k8s.io/v1/namespaces/ns/events after"] != 1 {
		t.Fatalf("posts %v", posts)
	}
	for k, c := range posts {
		if c != 1 {
			t.Fatalf("%s posted %d times", k, c)
		}
	}
}
