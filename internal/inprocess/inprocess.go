// Package inprocess connects clients to an HTTP handler in the same process. The
// components `kubette up` runs beside its API server (controller manager, scheduler,
// kubelet, proxy, DNS, ingress controller) use client-go as they would over the network,
// but a Transport hands each request to the API server's handler chain directly: no
// socket, TLS record or HTTP/2 frame is encoded and decoded on both sides. The request
// still goes through authentication (as the component's own user, carried in the
// request context where no remote client can put it), authorization, admission and
// storage, so what the components see and the trace records is unchanged.
package inprocess

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kubette/kubette/internal/apiserver/filters"
)

// maxBuffered bounds what a handler may write ahead of its reader before Write blocks,
// as a socket's buffers would: a watch whose client stopped reading holds the handler
// instead of growing without bound.
const maxBuffered = 4 << 20

// errBodyClosed is what a handler's Write returns once the client closed the response.
var errBodyClosed = errors.New("in-process response body closed by the client")

// Transport is an http.RoundTripper that serves requests with Handler as User. Requests
// that upgrade the connection (exec, attach, port-forward) are refused: they need a real
// connection and the components never make them.
type Transport struct {
	// Handler serves the requests: the API server's complete handler chain.
	Handler http.Handler
	// User is who the requests authenticate as.
	User *filters.User

	// idle hands an exchange to a worker goroutine waiting for one (see serve).
	idle     chan func()
	idleOnce sync.Once
}

// workerIdleTimeout is how long a worker goroutine waits for its next exchange
// before it ends.
const workerIdleTimeout = 10 * time.Second

// serve runs exchange on a worker goroutine that waited for one, or on a new one
// that waits for the next exchange when done, up to workerIdleTimeout: a handler's
// call chain is deep, and the stack of a goroutine started per request grew by
// copying on every request (the API server's growStack, 1.3 % of `kubette up`'s CPU
// while its scheduler binds at 5000 nodes), where a worker's stack is grown already.
// The workers are as many as the exchanges at the busiest moment, and end when idle.
func (t *Transport) serve(exchange func()) {
	t.idleOnce.Do(func() { t.idle = make(chan func()) })
	select {
	case t.idle <- exchange:
	default:
		go t.worker(exchange)
	}
}

// worker runs exchanges until none came for workerIdleTimeout.
func (t *Transport) worker(exchange func()) {
	timer := time.NewTimer(workerIdleTimeout)
	defer timer.Stop()
	for {
		exchange()
		timer.Reset(workerIdleTimeout)
		select {
		case exchange = <-t.idle:
		case <-timer.C:
			return
		}
	}
}

type userKey struct{}

// Authenticator authenticates requests made through a Transport as the Transport's user.
// Requests from anywhere else carry no such user, so it passes them on.
type Authenticator struct{}

// Authenticate returns the user a Transport put in the request's context.
func (Authenticator) Authenticate(req *http.Request) (*filters.User, bool, error) {
	u, ok := req.Context().Value(userKey{}).(*filters.User)
	if !ok || u == nil {
		return nil, false, nil
	}
	return u, true, nil
}

// RoundTrip runs the handler on a goroutine of its own (see serve) and returns once
// the handler has written its status line; the body then streams as the handler
// writes (and flushes), which is what a watch needs. Closing the body cancels the
// handler's context.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.EqualFold(req.Header.Get("Connection"), "upgrade") || req.Header.Get("Upgrade") != "" {
		closeBody(req)
		return nil, fmt.Errorf("in-process %s %s: connection upgrades need a network connection", req.Method, req.URL.Path)
	}
	ctx, cancel := context.WithCancel(req.Context())
	in := req.Clone(context.WithValue(ctx, userKey{}, t.User))
	in.RequestURI = req.URL.RequestURI()
	in.RemoteAddr = "127.0.0.1:0"
	in.Host = req.URL.Host
	if in.Body == nil {
		in.Body = http.NoBody
	}
	w := newResponseWriter(cancel)
	t.serve(func() {
		defer cancel()
		defer closeBody(in)
		defer w.finish()
		defer func() {
			if p := recover(); p != nil {
				// As net/http: a handler that panics loses its connection, here its body.
				w.abort(fmt.Errorf("in-process handler for %s %s panicked: %v", req.Method, req.URL.Path, p))
			}
		}()
		t.Handler.ServeHTTP(w, in)
	})
	select {
	case <-w.ready:
	case <-req.Context().Done():
		// The handler sees its context cancelled and ends; its output is dropped.
		w.closeBody()
		return nil, fmt.Errorf("in-process %s %s: %w", req.Method, req.URL.Path, req.Context().Err())
	}
	return w.response(req), nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// responseWriter is the handler's side of one exchange and the client's body at once:
// the handler appends to buf, the client reads from it.
type responseWriter struct {
	header http.Header
	cancel context.CancelFunc
	ready  chan struct{} // closed once the status is known

	mu       sync.Mutex
	cond     sync.Cond
	code     int
	sent     http.Header // the header as it was when the status was written
	buf      bytes.Buffer
	done     bool  // the handler returned
	closed   bool  // the client closed the body
	abortErr error // the handler panicked
}

func newResponseWriter(cancel context.CancelFunc) *responseWriter {
	w := &responseWriter{header: http.Header{}, cancel: cancel, ready: make(chan struct{})}
	w.cond.L = &w.mu
	return w
}

// Header is the header the handler fills before writing the status.
func (w *responseWriter) Header() http.Header { return w.header }

// WriteHeader fixes the status and the header; later calls are ignored, as are
// informational statuses.
func (w *responseWriter) WriteHeader(code int) {
	if code < 200 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeHeaderLocked(code)
}

func (w *responseWriter) writeHeaderLocked(code int) {
	if w.sent != nil {
		return
	}
	w.code = code
	w.sent = w.header.Clone()
	close(w.ready)
}

// Write appends to the body, waiting while the client is far behind.
func (w *responseWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeHeaderLocked(http.StatusOK)
	for w.buf.Len() > maxBuffered && !w.closed {
		w.cond.Wait()
	}
	if w.closed {
		return 0, errBodyClosed
	}
	n, _ := w.buf.Write(p)
	w.cond.Broadcast()
	return n, nil
}

// Flush sends the status if it was not yet; written bytes are readable at once anyway.
func (w *responseWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeHeaderLocked(http.StatusOK)
}

func (w *responseWriter) finish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeHeaderLocked(http.StatusOK)
	w.done = true
	w.cond.Broadcast()
}

func (w *responseWriter) abort(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent == nil {
		// Nothing was sent: the client gets a 500 with the reason.
		w.header = http.Header{"Content-Type": []string{"text/plain; charset=utf-8"}}
		w.writeHeaderLocked(http.StatusInternalServerError)
		w.buf.WriteString(err.Error())
		return
	}
	w.abortErr = err
}

// closeBody is the client's Close: the handler's writes fail from now on and its
// context is cancelled.
func (w *responseWriter) closeBody() {
	w.mu.Lock()
	w.closed = true
	w.buf.Reset()
	w.cond.Broadcast()
	w.mu.Unlock()
	w.cancel()
}

func (w *responseWriter) response(req *http.Request) *http.Response {
	w.mu.Lock()
	code, header := w.code, w.sent
	length := int64(-1)
	if w.done && w.abortErr == nil {
		length = int64(w.buf.Len())
	}
	w.mu.Unlock()
	if length >= 0 {
		header.Set("Content-Length", strconv.FormatInt(length, 10))
	}
	return &http.Response{
		Status: strconv.Itoa(code) + " " + http.StatusText(code), StatusCode: code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: header, Body: body{w}, ContentLength: length, Request: req,
	}
}

// body is the client's reader of a responseWriter.
type body struct{ w *responseWriter }

// Read returns what the handler wrote, waiting for more until the handler returns.
func (b body) Read(p []byte) (int, error) {
	w := b.w
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.buf.Len() == 0 && !w.done && !w.closed {
		w.cond.Wait()
	}
	switch {
	case w.closed:
		return 0, errBodyClosed
	case w.buf.Len() > 0:
		n, _ := w.buf.Read(p)
		w.cond.Broadcast()
		return n, nil
	case w.abortErr != nil:
		return 0, w.abortErr
	default:
		return 0, io.EOF
	}
}

// Close ends the exchange: see responseWriter.closeBody.
func (b body) Close() error {
	b.w.closeBody()
	return nil
}
