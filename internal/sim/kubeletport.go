package sim

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/kubette/kubette/internal/logquery"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The simulated nodes' kubelet API. One HTTPS listener on NodeIP serves every
// node, as the kubelet's port does for its own node: the API server proxies
// pods/log to /containerLogs and pods/exec, attach and portforward to /exec,
// /attach and /portForward. A simulated container runs no process, so its log
// is what the simulator can say truthfully about it (that it started, runs
// nothing and, for a finished one, exited), and a streaming request is answered
// with an error that says the node is simulated.

// followPoll is how often a followed log checks whether its container ended.
const followPoll = 250 * time.Millisecond

// listenKubelet listens on NodeIP:KubeletPort and records the port the nodes
// publish.
func (s *Sim) listenKubelet() (net.Listener, error) {
	addr := net.JoinHostPort(s.cfg.nodeIP.String(), strconv.Itoa(s.cfg.KubeletPort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("failed to listen on the simulated nodes' kubelet port %s: %w", addr, err)
	}
	s.kubeletPort = int32(ln.Addr().(*net.TCPAddr).Port)
	return ln, nil
}

// serveKubelet serves the kubelet API over TLS on ln until ctx is done.
func (s *Sim) serveKubelet(ctx context.Context, ln net.Listener) error {
	tlsCfg := s.cfg.KubeletTLS
	if tlsCfg == nil {
		var err error
		if tlsCfg, err = selfSignedTLS(s.cfg.nodeIP); err != nil {
			_ = ln.Close()
			return err
		}
		s.cfg.Logger.Warn("the simulated nodes' kubelet port has no TLS configuration: it serves a self-signed certificate and accepts no client, so pods/log and exec of simulated pods fail",
			"address", ln.Addr().String())
	}
	tlsCfg = tlsCfg.Clone()
	tlsCfg.ClientAuth = tls.RequireAndVerifyClientCert
	if tlsCfg.MinVersion == 0 {
		tlsCfg.MinVersion = tls.VersionTLS12
	}
	srv := &http.Server{
		Handler:           s.kubeletHandler(),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errCh := make(chan error, 1)
	go func() { errCh <- srv.Serve(tls.NewListener(ln, tlsCfg)) }()
	select {
	case err := <-errCh:
		return fmt.Errorf("simulated kubelet port: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
	}
	if err := <-errCh; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("simulated kubelet port: %w", err)
	}
	return nil
}

// selfSignedTLS is a throwaway serving certificate for ip, with a client CA
// pool that holds nothing (no client is accepted).
func selfSignedTLS(ip netip.Addr) (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("failed to generate the kubelet port's key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()),
		Subject:      pkix.Name{CommonName: "kubette-sim"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{ip.AsSlice()},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("failed to create the kubelet port's certificate: %w", err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		ClientCAs:    x509.NewCertPool(),
	}, nil
}

// kubeletHandler routes the kubelet API paths the API server uses.
func (s *Sim) kubeletHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", s.containerLogs)
	for _, sub := range []string{"exec", "attach"} {
		mux.HandleFunc("/"+sub+"/{namespace}/{pod}/{container}", s.streaming(sub))
		mux.HandleFunc("/"+sub+"/{namespace}/{pod}/{uid}/{container}", s.streaming(sub))
	}
	mux.HandleFunc("/portForward/{namespace}/{pod}", s.streaming("portForward"))
	mux.HandleFunc("/portForward/{namespace}/{pod}/{uid}", s.streaming("portForward"))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("the server could not find the requested resource %s", r.URL.Path))
	})
	return mux
}

// kubeletError is an answer of the kubelet port: a status code and a message.
type kubeletError struct {
	code   int
	reason metav1.StatusReason
	msg    string
}

func (e *kubeletError) Error() string { return e.msg }

func (e *kubeletError) write(w http.ResponseWriter) { writeStatus(w, e.code, e.reason, e.msg) }

// lookup finds a pod of a simulated node of this simulator and, unless
// container is empty, one of its containers.
func (s *Sim) lookup(ns, name, container string) (*podInfo, *containerInfo, bool, *kubeletError) {
	select {
	case <-s.podsSynced:
	default:
		return nil, nil, false, &kubeletError{http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "the simulator is starting: its pod cache has not synced yet"}
	}
	obj, ok, err := s.indexer.GetByKey(ns + "/" + name)
	if err != nil {
		return nil, nil, false, &kubeletError{http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Sprintf("failed to read pod %s/%s from the cache: %v", ns, name, err)}
	}
	p, _ := obj.(*podInfo)
	if !ok || p == nil || p.node == nil || p.node.gone.Load() {
		return nil, nil, false, &kubeletError{http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("pod %q does not exist", name)}
	}
	if container == "" {
		return p, nil, false, nil
	}
	for i := range p.initContainers {
		if p.initContainers[i].name == container {
			return p, &p.initContainers[i], true, nil
		}
	}
	for i := range p.containers {
		if p.containers[i].name == container {
			return p, &p.containers[i], false, nil
		}
	}
	return nil, nil, false, &kubeletError{http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("container %q not found in pod %q", container, name)}
}

// streaming answers exec, attach and port-forward: a simulated pod has no
// process to run a command in, to attach to or to forward a port to.
func (s *Sim) streaming(sub string) http.HandlerFunc {
	what := map[string]string{
		"exec":        "there is no container to run a command in",
		"attach":      "there is no process to attach to",
		"portForward": "nothing listens on its ports",
	}[sub]
	return func(w http.ResponseWriter, r *http.Request) {
		ns, name, ctr := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
		p, _, _, kerr := s.lookup(ns, name, ctr)
		if kerr != nil {
			kerr.write(w)
			return
		}
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest,
			fmt.Sprintf("pod %s/%s runs on simulated node %s (kubette sim), which runs no containers: %s", ns, name, p.node.name, what))
	}
}

// logLine is one line of a simulated container's log.
type logLine struct {
	at   time.Time
	text string
}

// containerLog is what a simulated container has printed by now: a line when
// it started and, once it finished, one when it exited. done reports that it
// will print nothing more.
func containerLog(p *podInfo, c *containerInfo, isInit bool) (lines []logLine, done bool) {
	lines = []logLine{{p.startTime, fmt.Sprintf("[kubette sim] container %s (image %s) of pod %s/%s started on simulated node %s; "+
		"a simulated container runs no process, so it prints nothing of its own", c.name, c.image, p.Namespace, p.Name, p.node.name)}}
	var exited time.Time
	switch {
	case isInit && !c.sidecar:
		exited = p.startTime // init containers complete at once
	case p.phase == corev1.PodSucceeded:
		exited = p.startTime.Add(p.exitAfter).Truncate(time.Second)
	case p.phase == corev1.PodFailed:
		return lines, true
	default:
		return lines, false
	}
	return append(lines, logLine{exited, fmt.Sprintf("[kubette sim] container %s exited with code 0", c.name)}), true
}

// containerLogs serves GET /containerLogs/{namespace}/{pod}/{container}.
func (s *Sim) containerLogs(w http.ResponseWriter, r *http.Request) {
	ns, name, ctr := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	opts, err := logquery.Parse(r.URL.Query(), s.cfg.Clock.Now())
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	p, c, isInit, kerr := s.lookup(ns, name, ctr)
	if kerr != nil {
		kerr.write(w)
		return
	}
	if opts.Previous {
		// A simulated container never restarts.
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("previous terminated container %q in pod %q not found", ctr, name))
		return
	}
	if p.startTime.IsZero() || (p.phase != corev1.PodRunning && p.phase != corev1.PodSucceeded && p.phase != corev1.PodFailed) {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("container %q in pod %q is waiting to start: ContainerCreating", ctr, name))
		return
	}
	all, done := containerLog(p, c, isInit)
	out := &logWriter{opts: opts, w: w, flush: func() { _ = http.NewResponseController(w).Flush() }, remaining: -1}
	if opts.LimitBytes != nil {
		out.remaining = *opts.LimitBytes
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	lines := all
	if opts.TailLines != nil && int64(len(lines)) > *opts.TailLines {
		lines = lines[int64(len(lines))-*opts.TailLines:]
	}
	if !out.write(lines) || done || !opts.Follow {
		return
	}
	sent := len(all) // lines after these are new
	t := s.cfg.Clock.NewTicker(followPoll)
	defer t.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-t.C():
		}
		obj, ok, err := s.indexer.GetByKey(ns + "/" + name)
		now, _ := obj.(*podInfo)
		if err != nil || !ok || now == nil || now.UID != p.UID {
			return // the pod is gone: so is its log
		}
		lines, done := containerLog(now, c, isInit)
		if len(lines) > sent && !out.write(lines[sent:]) {
			return
		}
		sent = len(lines)
		if done {
			return
		}
	}
}

// logWriter writes log lines as the kubelet does: sinceTime filters, an
// RFC 3339 timestamp with nanoseconds before each with timestamps, and the
// output cut at limitBytes.
type logWriter struct {
	opts      logquery.Options
	w         http.ResponseWriter
	flush     func()
	remaining int64 // bytes left under limitBytes; -1: no limit
}

// write writes lines and reports whether more may follow (false once
// limitBytes is reached or the client is gone).
func (l *logWriter) write(lines []logLine) bool {
	defer l.flush()
	for _, ln := range lines {
		if l.opts.SinceTime != nil && ln.at.Before(*l.opts.SinceTime) {
			continue
		}
		var b []byte
		if l.opts.Timestamps {
			b = ln.at.UTC().AppendFormat(b, time.RFC3339Nano)
			b = append(b, ' ')
		}
		b = append(append(b, ln.text...), '\n')
		if l.remaining >= 0 && int64(len(b)) >= l.remaining {
			_, _ = l.w.Write(b[:l.remaining])
			l.remaining = 0
			return false
		}
		if l.remaining > 0 {
			l.remaining -= int64(len(b))
		}
		if _, err := l.w.Write(b); err != nil {
			return false
		}
	}
	return true
}

// writeStatus answers with a metav1.Status error, as the kubelet does.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: msg, Reason: reason, Code: int32(code),
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(st)
}
