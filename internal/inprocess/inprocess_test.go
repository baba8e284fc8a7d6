package inprocess

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubette/kubette/internal/apiserver/filters"
)

func client(h http.Handler, user string) *http.Client {
	return &http.Client{Transport: &Transport{Handler: h, User: &filters.User{Name: user}}}
}

func TestRequestReachesHandlerAsUser(t *testing.T) {
	h := filters.WithAuthentication(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := filters.UserFrom(r.Context())
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-User", u.Name)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.RequestURI(), b)
	}), filters.Union{Authenticator{}, filters.X509Authenticator{}})
	resp, err := client(h, "system:kube-scheduler").Post("https://127.0.0.1:6443/api/v1/pods?x=1", "text/plain", strings.NewReader("body"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 201 || resp.Header.Get("X-User") != "system:kube-scheduler" || string(b) != "POST /api/v1/pods?x=1 body" {
		t.Fatalf("got %d user %q body %q", resp.StatusCode, resp.Header.Get("X-User"), b)
	}
	if resp.ContentLength != int64(len(b)) && resp.ContentLength != -1 {
		t.Errorf("ContentLength %d for %d bytes", resp.ContentLength, len(b))
	}
}

func TestRemoteRequestsGetNoUser(t *testing.T) {
	req, _ := http.NewRequest("GET", "https://127.0.0.1/", nil)
	if u, ok, err := (Authenticator{}).Authenticate(req); ok || u != nil || err != nil {
		t.Fatalf("a request without the transport's context authenticated: %v %v %v", u, ok, err)
	}
}

func TestStreamingAndCancelOnClose(t *testing.T) {
	stopped := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(w, "event %d\n", i); err != nil {
				stopped <- err
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				stopped <- r.Context().Err()
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	resp, err := client(h, "u").Get("https://x/watch")
	if err != nil {
		t.Fatal(err)
	}
	if resp.ContentLength != -1 {
		t.Errorf("a streaming response has ContentLength %d", resp.ContentLength)
	}
	r := bufio.NewReader(resp.Body)
	for i := range 3 {
		line, err := r.ReadString('\n')
		if err != nil || line != fmt.Sprintf("event %d\n", i) {
			t.Fatalf("line %d: %q %v", i, line, err)
		}
	}
	resp.Body.Close()
	select {
	case err := <-stopped:
		if err == nil {
			t.Fatal("handler stopped without an error")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("closing the body did not stop the handler")
	}
}

func TestSlowReaderBlocksWriter(t *testing.T) {
	wrote := make(chan int, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 1<<20)
		n := 0
		for n < 2*maxBuffered {
			if _, err := w.Write(chunk); err != nil {
				break
			}
			n += len(chunk)
		}
		wrote <- n
	})
	resp, err := client(h, "u").Get("https://x/big")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-wrote:
		t.Fatalf("the handler wrote %d bytes with nobody reading", n)
	case <-time.After(100 * time.Millisecond):
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || n != 2*maxBuffered {
		t.Fatalf("read %d bytes, %v", n, err)
	}
	resp.Body.Close()
}

func TestPanicBecomes500(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic("boom") })
	resp, err := client(h, "u").Get("https://x/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 500 || !strings.Contains(string(b), "boom") {
		t.Fatalf("got %d %q", resp.StatusCode, b)
	}
}

func TestPanicAfterHeaderBreaksBody(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("partial"))
		panic("late")
	})
	resp, err := client(h, "u").Get("https://x/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err == nil || !strings.Contains(err.Error(), "late") {
		t.Fatalf("body read error %v, want the panic", err)
	}
}

func TestUpgradeRefused(t *testing.T) {
	req, _ := http.NewRequest("GET", "https://x/exec", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "SPDY/3.1")
	if _, err := (&Transport{Handler: http.NotFoundHandler()}).RoundTrip(req); err == nil {
		t.Fatal("an upgrade went through")
	}
}

func TestCancelledBeforeHeader(t *testing.T) {
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		close(release)
	})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "https://x/", nil)
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	_, err := (&Transport{Handler: h}).RoundTrip(req)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	select {
	case <-release:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler's context was not cancelled")
	}
}

// goroutineID is the number runtime.Stack prints for the calling goroutine.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := strings.Fields(string(buf))
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

// TestWorkersServeRequestsInTurn sends requests one after another, then several at
// once: each gets its own answer; requests that follow finished ones are served by
// the same worker goroutine; a handler that panics leaves its worker usable.
func TestWorkersServeRequestsInTurn(t *testing.T) {
	var (
		mu      sync.Mutex
		workers = map[string]int{}
	)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		workers[goroutineID()]++
		mu.Unlock()
		if r.URL.Path == "/panic" {
			panic("boom")
		}
		fmt.Fprint(w, r.URL.Path)
	})
	c := client(h, "u")
	get := func(path string) (int, string, error) {
		resp, err := c.Get("http://in-process" + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	for i := range 50 {
		if code, body, err := get(fmt.Sprintf("/r%d", i)); err != nil || code != 200 || body != fmt.Sprintf("/r%d", i) {
			t.Fatalf("request %d: %d %q %v", i, code, body, err)
		}
	}
	if code, _, _ := get("/panic"); code != http.StatusInternalServerError {
		t.Fatalf("panic: %d", code)
	}
	if code, body, err := get("/after"); err != nil || code != 200 || body != "/after" {
		t.Fatalf("after the panic: %d %q %v", code, body, err)
	}
	mu.Lock()
	// A worker is idle again just after its handler returned, which the client may
	// see first (and send the next request to a new worker): some reuse, not all.
	if len(workers) >= 52 {
		t.Fatalf("52 sequential requests ran on %d goroutines", len(workers))
	}
	mu.Unlock()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if code, body, err := get(fmt.Sprintf("/p%d", i)); err != nil || code != 200 || body != fmt.Sprintf("/p%d", i) {
				t.Errorf("parallel request %d: %d %q %v", i, code, body, err)
			}
		})
	}
	wg.Wait()
}
