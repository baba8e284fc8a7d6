package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubette/kubette/internal/streamproxy"
)

// Streamer is what the exec, attach and port-forward endpoints need of the CRI runtime
// (kubelet/cri.Client): find the pod's sandbox and containers by the kubelet's labels, and ask
// for a streaming URL.
type Streamer interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error)
	Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error)
	PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error)
}

// The labels the kubelet puts on sandboxes and containers (as upstream's).
const (
	labelPodName       = "io.kubernetes.pod.name"
	labelPodNamespace  = "io.kubernetes.pod.namespace"
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"
)

// lookupTimeout bounds the CRI calls that find a session's container and URL.
const lookupTimeout = 30 * time.Second

// StreamOptions are the query parameters of /exec and /attach, as the API server sends them:
// input, output, error and tty set to "1".
type StreamOptions struct {
	Stdin, Stdout, Stderr, TTY bool
}

// ParseStreamOptions reads the stream parameters as upstream's kubelet: a terminal has no
// separate stderr, and at least one stream is required.
func ParseStreamOptions(q url.Values) (StreamOptions, error) {
	o := StreamOptions{
		Stdin: q.Get("input") == "1", Stdout: q.Get("output") == "1", Stderr: q.Get("error") == "1", TTY: q.Get("tty") == "1",
	}
	if o.TTY && o.Stderr {
		o.Stderr = false
	}
	if !o.Stdin && !o.Stdout && !o.Stderr {
		return o, errors.New("you must specify at least 1 of stdin, stdout, stderr")
	}
	return o, nil
}

// registerStreams adds the streaming routes: GET and POST (WebSocket clients use GET), with
// or without the pod's UID, as upstream's kubelet.
func (s *Server) registerStreams() {
	for _, p := range []string{"/exec/{namespace}/{pod}/{container}", "/exec/{namespace}/{pod}/{uid}/{container}"} {
		s.mux.HandleFunc(p, s.upgradeOnly(s.exec))
	}
	for _, p := range []string{"/attach/{namespace}/{pod}/{container}", "/attach/{namespace}/{pod}/{uid}/{container}"} {
		s.mux.HandleFunc(p, s.upgradeOnly(s.attach))
	}
	for _, p := range []string{"/portForward/{namespace}/{pod}", "/portForward/{namespace}/{pod}/{uid}"} {
		s.mux.HandleFunc(p, s.upgradeOnly(s.portForward))
	}
}

// upgradeOnly admits upgrade requests by GET and POST, and only when the server has a
// Streamer.
func (s *Server) upgradeOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodPost {
			w.Header().Set("Allow", "GET, POST")
			writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, fmt.Sprintf("%s is not supported on %s", r.Method, r.URL.Path))
			return
		}
		if !httpstream.IsUpgradeRequest(r) {
			// Before any CRI call: a session URL would only go unused.
			writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "Upgrade request required")
			return
		}
		if s.cfg.Streams == nil {
			writeStatus(w, http.StatusNotImplemented, metav1.StatusReasonInternalError, "this kubelet serves no streaming sessions")
			return
		}
		h(w, r)
	}
}

// exec serves /exec/{namespace}/{pod}[/{uid}]/{container}?command=...: it asks the runtime
// for a session URL and proxies the client's upgrade to it.
func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	opts, err := ParseStreamOptions(r.URL.Query())
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	cmd := r.URL.Query()["command"]
	ctx, cancel := context.WithTimeout(r.Context(), lookupTimeout)
	defer cancel()
	id, ok := s.findContainer(ctx, w, r)
	if !ok {
		return
	}
	resp, err := s.cfg.Streams.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: cmd, Tty: opts.TTY,
		Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr})
	if err != nil {
		writeCRIError(w, err)
		return
	}
	s.proxyStream(w, r, resp.GetUrl())
}

// attach serves /attach/{namespace}/{pod}[/{uid}]/{container}.
func (s *Server) attach(w http.ResponseWriter, r *http.Request) {
	opts, err := ParseStreamOptions(r.URL.Query())
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), lookupTimeout)
	defer cancel()
	id, ok := s.findContainer(ctx, w, r)
	if !ok {
		return
	}
	resp, err := s.cfg.Streams.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: id, Tty: opts.TTY,
		Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr})
	if err != nil {
		writeCRIError(w, err)
		return
	}
	s.proxyStream(w, r, resp.GetUrl())
}

// portForward serves /portForward/{namespace}/{pod}[/{uid}]; the ports come in the streams'
// headers (SPDY), or as ?ports= (WebSocket clients).
func (s *Server) portForward(w http.ResponseWriter, r *http.Request) {
	var ports []int32
	if v := r.URL.Query().Get("ports"); v != "" {
		for _, p := range strings.Split(v, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 16)
			if err != nil || n == 0 {
				writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("unable to parse %q as a port: %v", p, err))
				return
			}
			ports = append(ports, int32(n))
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), lookupTimeout)
	defer cancel()
	sb, ok := s.findSandbox(ctx, w, r)
	if !ok {
		return
	}
	resp, err := s.cfg.Streams.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: sb.Id, Port: ports})
	if err != nil {
		writeCRIError(w, err)
		return
	}
	s.proxyStream(w, r, resp.GetUrl())
}

// podLabels selects the pod of the request's path.
func podLabels(r *http.Request) map[string]string {
	l := map[string]string{labelPodNamespace: r.PathValue("namespace"), labelPodName: r.PathValue("pod")}
	if uid := r.PathValue("uid"); uid != "" {
		l[labelPodUID] = uid
	}
	return l
}

// findSandbox returns the pod's ready sandbox (the newest), or answers 404 as upstream
// ("pod does not exist").
func (s *Server) findSandbox(ctx context.Context, w http.ResponseWriter, r *http.Request) (*runtimeapi.PodSandbox, bool) {
	sbs, err := s.cfg.Streams.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: podLabels(r),
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		writeCRIError(w, err)
		return nil, false
	}
	if len(sbs) == 0 {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "pod does not exist")
		return nil, false
	}
	return slices.MaxFunc(sbs, func(a, b *runtimeapi.PodSandbox) int { return compareInt64(a.CreatedAt, b.CreatedAt) }), true
}

// findContainer returns the ID of the running container of the request's path (its newest
// attempt), or answers as upstream: 404 "pod does not exist", 500 `container not found ("c")`.
func (s *Server) findContainer(ctx context.Context, w http.ResponseWriter, r *http.Request) (string, bool) {
	if _, ok := s.findSandbox(ctx, w, r); !ok {
		return "", false
	}
	l := podLabels(r)
	l[labelContainerName] = r.PathValue("container")
	cs, err := s.cfg.Streams.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: l,
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		writeCRIError(w, err)
		return "", false
	}
	if len(cs) == 0 {
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Sprintf("container not found (%q)", r.PathValue("container")))
		return "", false
	}
	return slices.MaxFunc(cs, func(a, b *runtimeapi.Container) int { return compareInt64(a.CreatedAt, b.CreatedAt) }).Id, true
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// writeCRIError answers a failed CRI call with the gRPC status's message, its code mapped as
// upstream's streaming.WriteError.
func writeCRIError(w http.ResponseWriter, err error) {
	code, reason := http.StatusInternalServerError, metav1.StatusReasonInternalError
	msg := err.Error()
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		msg = se.GRPCStatus().Message()
		switch se.GRPCStatus().Code() {
		case codes.NotFound:
			code, reason = http.StatusNotFound, metav1.StatusReasonNotFound
		case codes.InvalidArgument, codes.FailedPrecondition:
			code, reason = http.StatusBadRequest, metav1.StatusReasonBadRequest
		case codes.ResourceExhausted:
			code, reason = http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests
		case codes.Unimplemented:
			code = http.StatusNotImplemented
		}
	}
	writeStatus(w, code, reason, msg)
}

// proxyStream relays the client's upgrade request to the runtime's streaming URL and the
// upgraded connection both ways, as upstream's kubelet does (the redirect mode is gone), with
// apimachinery's upgrade-aware proxy (streamproxy: the runtime's last output is not cut off).
func (s *Server) proxyStream(w http.ResponseWriter, r *http.Request, rawURL string) {
	u, err := url.Parse(rawURL)
	if err != nil {
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Sprintf("runtime streaming URL %q: %v", rawURL, err))
		return
	}
	streamproxy.Handler(u, nil, streamResponder{s}).ServeHTTP(w, r)
}

// streamResponder answers a proxy failure.
type streamResponder struct{ s *Server }

func (sr streamResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	sr.s.cfg.Logger.Warn("streaming proxy", "path", r.URL.Path, "err", err)
	writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, err.Error())
}
