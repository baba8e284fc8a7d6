package nginx

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Control talks to the control server of a rendered configuration over its
// unix socket (ControlSocket). Every request uses a new connection, so that
// after a reload it reaches a worker of the newest generation once the old
// ones stopped accepting.
type Control struct {
	// Socket is the control server's unix socket.
	Socket string
}

// StatusError is an answer of the control server other than 200.
type StatusError struct {
	Path   string
	Code   int
	Answer string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("nginx control %s: %d %s", e.Path, e.Code, strings.TrimSpace(e.Answer))
}

func (c Control) client() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", c.Socket)
		},
	}}
}

func (c Control) do(ctx context.Context, method, path string, body []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://nginx-control"+path, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("nginx control %s: %w", path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "text/plain")
		req.ContentLength = int64(len(body))
	}
	resp, err := c.client().Do(req)
	if err != nil {
		return "", fmt.Errorf("nginx control %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("nginx control %s: read answer: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", &StatusError{Path: path, Code: resp.StatusCode, Answer: string(b)}
	}
	return string(b), nil
}

func (c Control) get(ctx context.Context, path string) (string, error) {
	return c.do(ctx, http.MethodGet, path, nil)
}

// ConfigID asks which configuration a worker serves (see ConfigID).
func (c Control) ConfigID(ctx context.Context) (string, error) {
	s, err := c.get(ctx, "/kubette/config")
	return strings.TrimSpace(s), err
}

// PutBackends replaces every backend's endpoints (text in the BackendsText
// format) and returns how many backends nginx now holds.
func (c Control) PutBackends(ctx context.Context, text []byte) (int, error) {
	if text == nil {
		text = []byte{}
	}
	s, err := c.do(ctx, http.MethodPut, "/kubette/backends", text)
	if err != nil {
		return 0, err
	}
	n, ok := strings.CutPrefix(strings.TrimSpace(s), "ok ")
	count, err := strconv.Atoi(n)
	if !ok || err != nil {
		return 0, fmt.Errorf("nginx control /kubette/backends: unexpected answer %q", s)
	}
	return count, nil
}

// Backend returns the endpoints nginx holds for one backend (as sent).
func (c Control) Backend(ctx context.Context, name string) (string, error) {
	s, err := c.get(ctx, "/kubette/backend?name="+name)
	return strings.TrimRight(s, "\n"), err
}
