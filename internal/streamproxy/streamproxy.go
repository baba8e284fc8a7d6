// Package streamproxy proxies the upgraded connections of exec, attach and port-forward (SPDY
// or WebSocket) to a backend: the API server to the kubelet, the kubelet to the runtime's
// streaming server. It is apimachinery's upgrade-aware proxy with one change to its backend
// connection: once the backend has closed, writes to it are dropped instead of failing; and
// both connections close gracefully (Graceful), so that no reset loses the session's end.
//
// The upgrade-aware proxy copies both directions and ends the session as soon as either copy
// ends. When the backend ends a session it writes its last output and the status, then
// closes; a frame the client sends meanwhile (a stream's close, a ping) then fails to write
// with EPIPE, and ending the session on that would drop the backend's last bytes that are
// still being copied to the client. With the failed write dropped, the session ends when the
// backend's side has been copied to the end (or when the client closes).
package streamproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/proxy"
)

// Handler proxies an upgrade request to location (required: a plain request is refused
// through responder). tlsConfig is used for https locations.
func Handler(location *url.URL, tlsConfig *tls.Config, responder proxy.ErrorResponder) http.Handler {
	dialer := &net.Dialer{Timeout: 30 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &backendConn{Conn: Graceful(c)}, nil
		},
		TLSClientConfig:     tlsConfig,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	h := proxy.NewUpgradeAwareHandler(location, tr, false, true, responder)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(ResponseWriter(w), r) })
}

// backendConn drops writes once the backend has gone (EPIPE, ECONNRESET).
type backendConn struct {
	net.Conn
	gone atomic.Bool
}

func (c *backendConn) Write(p []byte) (int, error) {
	if c.gone.Load() {
		return len(p), nil
	}
	n, err := c.Conn.Write(p)
	if err != nil && (errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)) {
		c.gone.Store(true)
		return len(p), nil
	}
	return n, err
}

// lingerLimit bounds how long a closed connection waits for its peer to finish (see
// graceful).
const lingerLimit = 5 * time.Second

// Graceful returns c with a Close that does not lose the last bytes written: closing a TCP
// connection that still has unread input sends a reset, on which the peer's kernel may discard
// what it has received but not yet handed to the peer (the session's last output and its
// status). Close shuts down the writing side instead (the peer reads to the end, then closes),
// reads and discards what is still coming until the peer closes or lingerLimit passes, and then
// closes c, in the background.
func Graceful(c net.Conn) net.Conn {
	if _, ok := c.(*graceful); ok {
		return c
	}
	return &graceful{Conn: c}
}

type graceful struct {
	net.Conn
	closed atomic.Bool
}

// Close half-closes the connection and closes it once the peer has.
func (g *graceful) Close() error {
	if !g.closed.CompareAndSwap(false, true) {
		return nil
	}
	cw, ok := g.Conn.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return g.Conn.Close()
	}
	go func() {
		_ = g.Conn.SetReadDeadline(time.Now().Add(lingerLimit))
		_, _ = io.Copy(io.Discard, g.Conn)
		_ = g.Conn.Close()
	}()
	return nil
}

// Listener returns ln whose accepted connections close gracefully (Graceful), for a server of
// upgraded sessions.
func Listener(ln net.Listener) net.Listener { return gracefulListener{ln} }

type gracefulListener struct{ net.Listener }

func (l gracefulListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Graceful(c), nil
}

// ResponseWriter returns w whose Hijack hands out the connection wrapped by Graceful (w's
// writers below are reached through Unwrap).
func ResponseWriter(w http.ResponseWriter) http.ResponseWriter { return hijacker{w} }

type hijacker struct{ http.ResponseWriter }

// Hijack takes over the client's connection.
func (h hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	return Graceful(c), rw, nil
}

// Flush flushes the response so far.
func (h hijacker) Flush() { _ = http.NewResponseController(h.ResponseWriter).Flush() }

// Unwrap is the wrapped writer.
func (h hijacker) Unwrap() http.ResponseWriter { return h.ResponseWriter }
