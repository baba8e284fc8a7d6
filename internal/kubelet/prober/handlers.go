package prober

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// maxRespBodyLength is how much of an HTTP probe's response body is read (upstream's 10 KiB).
const maxRespBodyLength = 10 << 10

// maxRedirects is how many redirects an HTTP probe follows (as Go's and upstream's client).
const maxRedirects = 10

// errNoPodIP errors a network probe of a pod whose IP the kubelet does not know yet, rather
// than letting an empty host dial the node's own loopback.
var errNoPodIP = errors.New("the pod has no IP yet")

// result is the outcome of one probe attempt. err is set when the probe could not be run at
// all (a bad port, no exec runner): upstream's "errored" outcome.
type result struct {
	success bool
	warning bool // succeeded with a warning (a redirect to another host not followed)
	output  string
	err     error
}

// runProbe runs one attempt of p against a container instance.
func (m *Manager) runProbe(ctx context.Context, p *v1.Probe, c *v1.Container, containerID, podIP string) result {
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	switch {
	case p.Exec != nil:
		return m.probeExec(ctx, containerID, p.Exec.Command, timeout)
	case p.HTTPGet != nil:
		return m.probeHTTP(ctx, p.HTTPGet, c, podIP, timeout)
	case p.TCPSocket != nil:
		port, err := resolvePort(p.TCPSocket.Port, c)
		if err != nil {
			return result{err: err}
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = podIP
		}
		if host == "" {
			return result{err: errNoPodIP}
		}
		return probeTCP(ctx, host, port, timeout)
	case p.GRPC != nil:
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		if podIP == "" {
			return result{err: errNoPodIP}
		}
		return probeGRPC(ctx, podIP, int(p.GRPC.Port), service, timeout)
	}
	return result{err: errors.New("probe has no handler")}
}

// resolvePort returns a probe's port: a number, a named port of the container, or a number
// written as a string, as upstream.
func resolvePort(port intstr.IntOrString, c *v1.Container) (int, error) {
	p := -1
	switch port.Type {
	case intstr.Int:
		p = port.IntValue()
	case intstr.String:
		found := false
		for _, cp := range c.Ports {
			if cp.Name == port.StrVal {
				p, found = int(cp.ContainerPort), true
				break
			}
		}
		if !found {
			n, err := strconv.Atoi(port.StrVal)
			if err != nil {
				return -1, fmt.Errorf("port %s not found", port.StrVal)
			}
			p = n
		}
	}
	if p > 0 && p < 65536 {
		return p, nil
	}
	return p, fmt.Errorf("invalid port number: %v", p)
}

// probeExec runs cmd in the container: exit 0 succeeds, another exit fails with the output,
// a timeout fails, and any other error is an errored probe.
func (m *Manager) probeExec(ctx context.Context, containerID string, cmd []string, timeout time.Duration) result {
	if m.cfg.Runner == nil {
		return result{err: errors.New("exec probes are not supported: no exec runner")}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout+time.Second)
	defer cancel()
	stdout, stderr, err := m.cfg.Runner.ExecSync(ctx, containerID, cmd, timeout)
	out := string(stdout) + string(stderr)
	if err == nil {
		return result{success: true, output: out}
	}
	var exit interface{ ExitStatus() int }
	if errors.As(err, &exit) {
		if exit.ExitStatus() == 0 {
			return result{success: true, output: out}
		}
		return result{output: out}
	}
	if errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded {
		return result{output: fmt.Sprintf("command %q timed out", strings.Join(cmd, " "))}
	}
	return result{err: err}
}

// probeTCP connects to host:port within timeout.
func probeTCP(ctx context.Context, host string, port int, timeout time.Duration) result {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return result{output: err.Error()}
	}
	_ = conn.Close()
	return result{success: true}
}

// probeHTTP sends the probe's GET: 200–399 succeeds (a redirect to another host is not
// followed and succeeds with a warning), anything else fails with the status code.
func (m *Manager) probeHTTP(ctx context.Context, g *v1.HTTPGetAction, c *v1.Container, podIP string, timeout time.Duration) result {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := m.httpGetRequest(ctx, g, c, podIP, "probe")
	if err != nil {
		return result{err: err}
	}
	client, done := httpGetClient()
	defer done()
	res, err := client.Do(req)
	if err != nil {
		return result{output: err.Error()}
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxRespBodyLength))
	if err != nil {
		return result{output: err.Error()}
	}
	if res.StatusCode >= http.StatusOK && res.StatusCode < http.StatusBadRequest {
		if res.StatusCode >= http.StatusMultipleChoices {
			return result{success: true, warning: true, output: fmt.Sprintf("Probe terminated redirects, Response body: %v", string(body))}
		}
		return result{success: true, output: string(body)}
	}
	return result{output: fmt.Sprintf("HTTP probe failed with statuscode: %d", res.StatusCode)}
}

// httpGetRequest builds the GET of an httpGet action, a probe's or a lifecycle hook's: its
// scheme, host (podIP when it names none), port (a number, a named port of the container or
// a number written as a string), path and query, and headers, with User-Agent
// kube-<agent>/<KubeVersion> and Accept */* unless the action sets them, as upstream.
func (m *Manager) httpGetRequest(ctx context.Context, g *v1.HTTPGetAction, c *v1.Container, podIP, agent string) (*http.Request, error) {
	port, err := resolvePort(g.Port, c)
	if err != nil {
		return nil, err
	}
	host := g.Host
	if host == "" {
		host = podIP
	}
	if host == "" {
		return nil, errNoPodIP
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	u, err := url.Parse(g.Path)
	if err != nil {
		u = &url.URL{Path: g.Path}
	}
	u.Scheme = scheme
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		ua := "kube-" + agent
		if m.cfg.KubeVersion != "" {
			ua += "/" + m.cfg.KubeVersion
		}
		req.Header.Set("User-Agent", ua)
	}
	if _, ok := req.Header["Accept"]; !ok {
		req.Header.Set("Accept", "*/*")
	}
	return req, nil
}

// httpGetClient returns the client probes and hooks send with — no proxy, no keep-alive,
// certificates not verified, redirects followed on the same host only (at most
// maxRedirects) — and the function that closes its connections.
func httpGetClient() (*http.Client, func()) {
	transport := &http.Transport{
		Proxy:             nil,
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as upstream: probes and hooks do not verify the container's certificate
	}
	client := &http.Client{
		Transport: transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			if req.URL.Hostname() != via[0].URL.Hostname() {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
	return client, transport.CloseIdleConnections
}

// probeGRPC asks the gRPC health service of host:port about service.
func probeGRPC(ctx context.Context, host string, port int, service string, timeout time.Duration) result {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUserAgent("kube-probe"))
	if err != nil {
		return result{output: fmt.Sprintf("error: failed to connect service %q: %+v", addr, err)}
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		switch status.Code(err) {
		case codes.Unimplemented:
			return result{output: fmt.Sprintf("error: this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", status.Convert(err).Message())}
		case codes.DeadlineExceeded:
			return result{output: fmt.Sprintf("timeout: health rpc did not complete within %v", timeout)}
		}
		return result{output: fmt.Sprintf("error: health rpc probe failed: %+v", err)}
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return result{output: fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus().String())}
	}
	return result{success: true}
}

// event records an event on the container of a pod, as the kubelet's container events.
func (m *Manager) event(pod *v1.Pod, c *v1.Container, eventType, reason, message string) {
	m.log.Info("probe", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "reason", reason, "message", message)
	if m.cfg.Recorder == nil {
		return
	}
	var ref runtime.Object = &v1.ObjectReference{
		Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion, FieldPath: containerFieldPath(pod, c.Name),
	}
	m.cfg.Recorder.Event(ref, eventType, reason, message)
}

// containerFieldPath is the fieldPath of a container in its pod.
func containerFieldPath(pod *v1.Pod, name string) string {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return fmt.Sprintf("spec.initContainers{%s}", name)
		}
	}
	return fmt.Sprintf("spec.containers{%s}", name)
}
