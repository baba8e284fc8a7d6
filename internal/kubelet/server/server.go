// Package server is the kubelet's HTTPS port: /healthz,
// /containerLogs/{namespace}/{pod}/{container}, which the API server's pods/log proxies to,
// the resource usage at /metrics/resource and /stats/summary (served by the StatsHandlers),
// and the streaming endpoints /exec, /attach and /portForward that pods/exec, pods/attach and
// pods/portforward proxy to. It reads the CRI log files the runtime writes (see ParseLine) and
// streams them as `kubectl logs` shows them; for a streaming session it asks the runtime (CRI
// Exec, Attach, PortForward) for a URL and proxies the client's upgraded connection to it.
// Clients must present a certificate signed by the cluster CA.
package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LogLocator maps a pod's container to its CRI log file: the current attempt's, or with
// previous the last terminated one (the attempt the pod's status names as the container's
// last termination, as upstream). The kubelet core implements it.
//
// Errors wrapping ErrPodNotFound or ErrContainerNotFound answer 404; one wrapping
// ErrNoPreviousContainer answers 400 with upstream's message; any other error answers 400
// with its text (e.g. `container "c" in pod "p" is waiting to start: ContainerCreating`).
type LogLocator interface {
	ContainerLogs(namespace, pod, container string, previous bool) (path string, err error)
}

// RunningChecker may be implemented by a LogLocator to end a follow as soon as the container
// exited, rather than when a newer attempt's log appears or the container is gone.
type RunningChecker interface {
	ContainerRunning(namespace, pod, container string) bool
}

// Errors a LogLocator returns (wrapped) to say what does not exist.
var (
	ErrPodNotFound         = errors.New("pod not found")
	ErrContainerNotFound   = errors.New("container not found")
	ErrNoPreviousContainer = errors.New("no previous terminated container")
)

// StatsHandlers serves the kubelet's resource usage (internal/kubelet/stats.Provider).
type StatsHandlers interface {
	// MetricsHandler serves GET /metrics/resource (Prometheus format).
	MetricsHandler() http.Handler
	// SummaryHandler serves GET /stats/summary (the stats/v1alpha1 Summary as JSON).
	SummaryHandler() http.Handler
}

// Config configures the kubelet's server.
type Config struct {
	// Addr is the listen address, e.g. ":10250".
	Addr string
	// TLS holds the serving certificate and the client CAs; clients must present a
	// certificate (RequireAndVerifyClientCert is enforced).
	TLS *tls.Config
	// Logs finds containers' log files.
	Logs LogLocator
	// Streams serves exec, attach and port-forward through the CRI runtime (nil: those
	// endpoints answer 501).
	Streams Streamer
	// Stats serves /metrics/resource and /stats/summary (nil: those paths answer 404).
	Stats StatsHandlers
	// Logger receives the server's logs (default slog.Default()).
	Logger *slog.Logger
	// Now returns the current time (default time.Now); sinceSeconds is relative to it.
	Now func() time.Time
}

// Server is the kubelet's HTTPS server. Create it with New; Run serves until ctx is done.
type Server struct {
	cfg Config
	mux *http.ServeMux
}

// New validates cfg and builds the server.
func New(cfg Config) (*Server, error) {
	if cfg.Logs == nil {
		return nil, errors.New("kubelet server: a LogLocator is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	s.mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", s.containerLogs)
	s.registerStreams()
	if cfg.Stats != nil {
		s.mux.Handle("GET /metrics/resource", cfg.Stats.MetricsHandler())
		s.mux.Handle("GET /stats/summary", cfg.Stats.SummaryHandler())
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("the server could not find the requested resource %s", r.URL.Path))
	})
	return s, nil
}

// Handler returns the server's routes (without TLS; tests and Run wrap it).
func (s *Server) Handler() http.Handler { return s.mux }

// Run listens on cfg.Addr with TLS and serves until ctx is done.
func (s *Server) Run(ctx context.Context) error {
	if s.cfg.TLS == nil {
		return errors.New("kubelet server: a TLS config is required")
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("kubelet server: listen on %s: %w", s.cfg.Addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves TLS on ln until ctx is done, then closes it.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	tlsCfg := s.cfg.TLS.Clone()
	tlsCfg.ClientAuth = tls.RequireAndVerifyClientCert
	if tlsCfg.MinVersion == 0 {
		tlsCfg.MinVersion = tls.VersionTLS12
	}
	srv := &http.Server{
		Handler:           s.mux,
		TLSConfig:         tlsCfg,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errCh := make(chan error, 1)
	go func() { errCh <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-errCh:
		return fmt.Errorf("kubelet server: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
	}
	if err := <-errCh; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("kubelet server: %w", err)
	}
	return nil
}

// containerLogs serves GET /containerLogs/{namespace}/{pod}/{container}.
//
// Following ends when the client goes away, when LimitBytes is reached, or once the file is
// finished: the locator then names another file for the container (a newer attempt started),
// or says the pod or container is gone, or (when it implements RunningChecker) says the
// container is not running. What was written up to then is sent first. A previous attempt's
// file is finished from the start.
func (s *Server) containerLogs(w http.ResponseWriter, r *http.Request) {
	ns, pod, ctr := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	opts, err := ParseLogOptions(r.URL.Query(), s.cfg.Now())
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	path, err := s.cfg.Logs.ContainerLogs(ns, pod, ctr, opts.Previous)
	switch {
	case errors.Is(err, ErrPodNotFound):
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("pod %q does not exist", pod))
		return
	case errors.Is(err, ErrContainerNotFound):
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("container %q not found in pod %q", ctr, pod))
		return
	case errors.Is(err, ErrNoPreviousContainer):
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("previous terminated container %q in pod %q not found", ctr, pod))
		return
	case err != nil:
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	rc := http.NewResponseController(w)
	st := &logStream{
		opts:  opts,
		out:   w,
		flush: func() { _ = rc.Flush() },
		finished: func() bool {
			if opts.Previous {
				return true
			}
			now, err := s.cfg.Logs.ContainerLogs(ns, pod, ctr, false)
			if err != nil || now != path {
				return true
			}
			if rcheck, ok := s.cfg.Logs.(RunningChecker); ok {
				return !rcheck.ContainerRunning(ns, pod, ctr)
			}
			return false
		},
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	if err := st.copyLog(r.Context(), path); err != nil {
		// The status line is sent; all that is left is to say so in the log and end the body.
		s.cfg.Logger.Warn("container logs", "namespace", ns, "pod", pod, "container", ctr, "err", err)
	}
}

// writeStatus answers with a metav1.Status error.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: msg, Reason: reason, Code: int32(code),
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(st)
}
