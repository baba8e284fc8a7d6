// Package streaming is the built-in runtime's CRI streaming server: the HTTP endpoint behind
// CRI Exec, Attach and PortForward. The CRI server hands the kubelet a URL with a single-use
// token (GetExec, GetAttach, GetPortForward); the kubelet proxies the client's SPDY or
// WebSocket upgrade to it, and the server (k8s.io/cri-streaming, the kubelet's own) runs the
// session through the Runtime here: runc exec, the shim's attach socket, and a TCP connection
// dialled inside the pod's network namespace.
package streaming

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	cristreaming "k8s.io/cri-streaming/pkg/streaming"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"

	"github.com/kubette/kubette/internal/runtime/runc"
	"github.com/kubette/kubette/internal/streamproxy"
)

// DefaultAddr is where the server listens unless told otherwise: loopback (only the kubelet
// of this machine proxies to it), any free port.
const DefaultAddr = "127.0.0.1:0"

// Containers is what the server needs of the low-level runtime (runtime/runc.Runtime).
type Containers interface {
	ExecStream(ctx context.Context, id string, cmd []string, o runc.StreamOptions) (exitCode int, err error)
	Attach(ctx context.Context, id string, o runc.AttachOptions) error
}

// Config configures a Server.
type Config struct {
	// Addr is the listen address (default DefaultAddr).
	Addr string
	// Containers runs execs and attaches.
	Containers Containers
	// NetNS returns the network namespace path of a sandbox ("" for the host's network).
	NetNS func(sandboxID string) (string, error)
	// Logger logs (default: discard).
	Logger *slog.Logger
}

// Server is the streaming server. It is listening once Listen returns, so the URLs it hands
// out are valid at once; Serve serves them.
type Server struct {
	cfg Config
	ln  net.Listener
	cri cristreaming.Server
}

// Listen validates cfg and listens on cfg.Addr.
func Listen(cfg Config) (*Server, error) {
	if cfg.Containers == nil || cfg.NetNS == nil {
		return nil, errors.New("streaming: Containers and NetNS are required")
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("streaming: listen on %s: %w", cfg.Addr, err)
	}
	sc := cristreaming.DefaultConfig
	sc.Addr = ln.Addr().String()
	sc.BaseURL = &url.URL{Scheme: "http", Host: ln.Addr().String()}
	srv, err := cristreaming.NewServer(sc, &criRuntime{cfg: cfg})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("streaming: %w", err)
	}
	return &Server{cfg: cfg, ln: ln, cri: srv}, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// GetExec validates an exec request and returns its single-use URL.
func (s *Server) GetExec(req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return s.cri.GetExec(req)
}

// GetAttach validates an attach request and returns its single-use URL.
func (s *Server) GetAttach(req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return s.cri.GetAttach(req)
}

// GetPortForward validates a port-forward request and returns its single-use URL.
func (s *Server) GetPortForward(req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return s.cri.GetPortForward(req)
}

// Close closes the listener of a server that is not serving (Serve closes it itself).
func (s *Server) Close() error { return s.ln.Close() }

// Serve serves until ctx ends, then closes the listener and every open session.
func (s *Server) Serve(ctx context.Context) error {
	hs := &http.Server{
		Handler:           s.cri,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errCh := make(chan error, 1)
	// Sessions end with the server's close: a graceful one, so that their last bytes arrive.
	go func() { errCh <- hs.Serve(streamproxy.Listener(s.ln)) }()
	select {
	case err := <-errCh:
		return fmt.Errorf("streaming server: %w", err)
	case <-ctx.Done():
	}
	// Sessions are hijacked connections: Close ends them, Shutdown would not.
	_ = hs.Close()
	if err := <-errCh; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("streaming server: %w", err)
	}
	return nil
}

// criRuntime runs the sessions (cri-streaming's Runtime).
type criRuntime struct{ cfg Config }

var _ cristreaming.Runtime = (*criRuntime)(nil)

// exitError is a non-zero exit code in the shape cri-streaming reports to the client.
func exitError(code int) error {
	return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", code), Code: code}
}

// Exec runs cmd in the container; a non-zero exit code is an ExitError the client sees as the
// command's exit code.
func (r *criRuntime) Exec(ctx context.Context, containerID string, cmd []string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	o := runc.StreamOptions{Stdin: in, TTY: tty}
	// Typed nils (a nil io.WriteCloser in an io.Writer) must stay untyped nils.
	if out != nil {
		o.Stdout = out
	}
	if errOut != nil {
		o.Stderr = errOut
	}
	if tty && resize != nil {
		stop := make(chan struct{})
		defer close(stop)
		o.Resize = termSizes(resize, stop)
	}
	code, err := r.cfg.Containers.ExecStream(ctx, containerID, cmd, o)
	if err != nil {
		return err
	}
	if code != 0 {
		return exitError(code)
	}
	return nil
}

// termSizes relays the client's terminal sizes as runc's until stop is closed.
func termSizes(resize <-chan remotecommand.TerminalSize, stop <-chan struct{}) <-chan runc.TermSize {
	sizes := make(chan runc.TermSize)
	go func() {
		for {
			select {
			case <-stop:
				return
			case sz, ok := <-resize:
				if !ok {
					return
				}
				select {
				case sizes <- runc.TermSize{Width: sz.Width, Height: sz.Height}:
				case <-stop:
					return
				}
			}
		}
	}()
	return sizes
}

// Attach streams a running container's output (and stdin, when it takes stdin) until the
// container exits or the client goes away. For a container with a terminal (CRI tty) the
// output is the terminal's, as stdout, and the client's terminal sizes are set on it.
func (r *criRuntime) Attach(ctx context.Context, containerID string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	o := runc.AttachOptions{Stdin: in}
	if out != nil {
		o.Stdout = out
	}
	if errOut != nil {
		o.Stderr = errOut
	}
	if tty && resize != nil {
		stop := make(chan struct{})
		defer close(stop)
		o.Resize = termSizes(resize, stop)
	}
	return r.cfg.Containers.Attach(ctx, containerID, o)
}

// PortForward connects stream to port on the loopback of the sandbox's network namespace
// (the host's for host-network sandboxes), as containerd does: 127.0.0.1 first, then ::1.
func (r *criRuntime) PortForward(ctx context.Context, sandboxID string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	if port <= 0 || port > 65535 {
		return fmt.Errorf("port forward into sandbox %s: invalid port %d", sandboxID, port)
	}
	path, err := r.cfg.NetNS(sandboxID)
	if err != nil {
		return fmt.Errorf("port forward into sandbox %s: %w", sandboxID, err)
	}
	conn, err := dialIn(ctx, path, port)
	if err != nil {
		return fmt.Errorf("port forward into sandbox %s: %w", sandboxID, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// The client's end of its data: the pod's side of the connection sees EOF.
		_, _ = io.Copy(conn, stream)
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	_, err = io.Copy(stream, conn)
	// The pod closed (or reset) the connection: the session's stream ends, which also ends
	// the copy towards the pod.
	stream.Close()
	conn.Close()
	wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
		return fmt.Errorf("port forward into sandbox %s, port %d: %w", sandboxID, port, err)
	}
	return nil
}

// dialIn dials port on loopback inside the network namespace at path ("" = this one).
func dialIn(ctx context.Context, path string, port int32) (net.Conn, error) {
	var d net.Dialer
	dial := func() (net.Conn, error) {
		conn, err4 := d.DialContext(ctx, "tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
		if err4 == nil {
			return conn, nil
		}
		conn, err6 := d.DialContext(ctx, "tcp6", net.JoinHostPort("::1", strconv.Itoa(int(port))))
		if err6 == nil {
			return conn, nil
		}
		return nil, fmt.Errorf("dial port %d: %w", port, err4)
	}
	if path == "" {
		return dial()
	}
	var conn net.Conn
	// The socket belongs to the namespace it was created in: it stays there once the thread
	// has switched back.
	err := ns.WithNetNSPath(path, func(ns.NetNS) error {
		var err error
		conn, err = dial()
		return err
	})
	if err != nil {
		return nil, err
	}
	return conn, nil
}
