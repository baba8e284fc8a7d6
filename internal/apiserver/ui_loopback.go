package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// loopback is an http.RoundTripper that serves client-go's requests with the server's
// own handler, in this goroutine, as the user in the request's context (the user who
// asked for the /ui/ page, put there by the authentication filter; none when the server
// runs without authentication). It only reads: the
// page changes nothing. Its requests are not recorded in the trace: the page watching
// a flow is not part of it.
type loopback struct {
	handler http.Handler
}

// untracedKey marks a request whose handling must not be recorded (see traceEnd).
type untracedKey struct{}

func untraced(ctx context.Context) bool { return ctx.Value(untracedKey{}) != nil }

// RoundTrip serves req with the handler.
func (l loopback) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	if req.Method != http.MethodGet {
		return nil, fmt.Errorf("ui client: %s %s: the page only reads", req.Method, req.URL.Path)
	}
	in := req.Clone(context.WithValue(req.Context(), untracedKey{}, true))
	in.RequestURI = req.URL.RequestURI()
	in.Body = http.NoBody
	w := &memoryResponse{header: http.Header{}}
	l.handler.ServeHTTP(w, in)
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.header.Set("Content-Length", strconv.Itoa(w.body.Len()))
	return &http.Response{
		Status: strconv.Itoa(w.code) + " " + http.StatusText(w.code), StatusCode: w.code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.header, Body: io.NopCloser(&w.body), ContentLength: int64(w.body.Len()), Request: req,
	}, nil
}

// memoryResponse is a ResponseWriter that keeps the response in memory.
type memoryResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (m *memoryResponse) Header() http.Header { return m.header }

func (m *memoryResponse) WriteHeader(code int) {
	if m.code == 0 {
		m.code = code
	}
}

func (m *memoryResponse) Write(p []byte) (int, error) {
	if m.code == 0 {
		m.code = http.StatusOK
	}
	return m.body.Write(p)
}
