package prober

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubette/kubette/internal/kubelet/cri"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// hostPort splits an httptest server's address.
func hostPort(t *testing.T, raw string) (string, int) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	h, p, _ := net.SplitHostPort(u.Host)
	n, _ := strconv.Atoi(p)
	return h, n
}

func TestHTTPProbe(t *testing.T) {
	var mu sync.Mutex
	var seen http.Header
	var seenHost string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
	t.Cleanup(other.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen, seenHost = r.Header.Clone(), r.Host
		mu.Unlock()
		switch r.URL.Path {
		case "/ok":
			_, _ = w.Write([]byte(strings.Repeat("x", 20000)))
		case "/fail":
			w.WriteHeader(500)
		case "/notfound":
			w.WriteHeader(404)
		case "/redirect-local":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/redirect-away":
			http.Redirect(w, r, strings.Replace(other.URL, "127.0.0.1", "localhost", 1)+"/ok", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/slow":
			time.Sleep(3 * time.Second)
		case "/query":
			if r.URL.RawQuery != "a=b" {
				w.WriteHeader(400)
			}
		}
	}))
	t.Cleanup(srv.Close)
	host, port := hostPort(t, srv.URL)
	m := New(Config{KubeVersion: "1.32"})
	c := &v1.Container{Name: "c", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}}

	tests := []struct {
		name, path string
		port       intstr.IntOrString
		headers    []v1.HTTPHeader
		timeout    time.Duration
		success    bool
		warning    bool
		output     string
		err        string
	}{
		{name: "ok", path: "/ok", port: intstr.FromInt32(int32(port)), success: true},
		{name: "named port", path: "/ok", port: intstr.FromString("http"), success: true},
		{name: "number as string", path: "/ok", port: intstr.FromString(strconv.Itoa(port)), success: true},
		{name: "unknown port name", path: "/ok", port: intstr.FromString("nope"), err: "port nope not found"},
		{name: "bad port", path: "/ok", port: intstr.FromInt32(70000), err: "invalid port number: 70000"},
		{name: "500", path: "/fail", port: intstr.FromInt32(int32(port)), output: "HTTP probe failed with statuscode: 500"},
		{name: "404", path: "/notfound", port: intstr.FromInt32(int32(port)), output: "HTTP probe failed with statuscode: 404"},
		{name: "local redirect followed", path: "/redirect-local", port: intstr.FromInt32(int32(port)), success: true},
		{name: "redirect to another host", path: "/redirect-away", port: intstr.FromInt32(int32(port)), success: true, warning: true, output: "Probe terminated redirects, Response body: "},
		{name: "redirect loop", path: "/loop", port: intstr.FromInt32(int32(port)), output: "stopped after 10 redirects"},
		{name: "query kept", path: "/query?a=b", port: intstr.FromInt32(int32(port)), success: true},
		{name: "timeout", path: "/slow", port: intstr.FromInt32(int32(port)), timeout: 200 * time.Millisecond, output: "context deadline exceeded"},
		{name: "headers", path: "/ok", port: intstr.FromInt32(int32(port)), success: true,
			headers: []v1.HTTPHeader{{Name: "X-Custom", Value: "v"}, {Name: "Host", Value: "example.test"}, {Name: "User-Agent", Value: "mine"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 5 * time.Second
			}
			r := m.probeHTTP(context.Background(), &v1.HTTPGetAction{Path: tt.path, Port: tt.port, HTTPHeaders: tt.headers}, c, host, timeout)
			if tt.err != "" {
				if r.err == nil || !strings.Contains(r.err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", r.err, tt.err)
				}
				return
			}
			if r.err != nil || r.success != tt.success || r.warning != tt.warning || !strings.Contains(r.output, tt.output) {
				t.Fatalf("result = %+v, want success=%v warning=%v output~%q", r, tt.success, tt.warning, tt.output)
			}
		})
	}
	// The last request was "headers".
	mu.Lock()
	if seen.Get("X-Custom") != "v" || seen.Get("User-Agent") != "mine" || seenHost != "example.test" {
		t.Errorf("headers = %v host %q", seen, seenHost)
	}
	mu.Unlock()
	// Defaults on a plain request.
	m.probeHTTP(context.Background(), &v1.HTTPGetAction{Path: "/ok", Port: intstr.FromInt32(int32(port))}, c, host, 5*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if seen.Get("User-Agent") != "kube-probe/1.32" || seen.Get("Accept") != "*/*" {
		t.Errorf("default headers = %v", seen)
	}
}

func TestHTTPProbeTLSAndRefused(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	host, port := hostPort(t, srv.URL)
	m := New(Config{})
	c := &v1.Container{Name: "c"}
	if r := m.probeHTTP(context.Background(), &v1.HTTPGetAction{Scheme: v1.URISchemeHTTPS, Port: intstr.FromInt32(int32(port))}, c, host, 5*time.Second); !r.success {
		t.Fatalf("https probe: %+v", r)
	}
	closed := poll.FreePort(t) // nothing listens on it
	r := m.probeHTTP(context.Background(), &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(int32(closed))}, c, "127.0.0.1", 5*time.Second)
	want := `Get "http://127.0.0.1:` + strconv.Itoa(closed) + `/healthz": dial tcp 127.0.0.1:` + strconv.Itoa(closed) + `: connect: connection refused`
	if r.success || r.output != want {
		t.Fatalf("refused: %+v, want output %q", r, want)
	}
}

func TestTCPProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if r := probeTCP(context.Background(), "127.0.0.1", l.Addr().(*net.TCPAddr).Port, 5*time.Second); !r.success {
		t.Fatalf("open port: %+v", r)
	}
	closed := poll.FreePort(t) // nothing listens on it
	r := probeTCP(context.Background(), "127.0.0.1", closed, 5*time.Second)
	want := "dial tcp 127.0.0.1:" + strconv.Itoa(closed) + ": connect: connection refused"
	if r.success || r.output != want {
		t.Fatalf("closed port: %+v, want %q", r, want)
	}
}

// fakeRunner answers ExecSync from a function and counts calls per container.
type fakeRunner struct {
	mu    sync.Mutex
	calls map[string]int
	fn    func(containerID string, cmd []string) ([]byte, error)
}

func (f *fakeRunner) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[id+" "+strings.Join(cmd, " ")]++
	fn := f.fn
	f.mu.Unlock()
	out, err := fn(id, cmd)
	return out, []byte(""), err
}

func (f *fakeRunner) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[key]
}

func TestExecProbe(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		err     error
		success bool
		output  string
		errored bool
	}{
		{name: "exit 0", out: "fine", success: true, output: "fine"},
		{name: "exit 1", out: "broken\n", err: &cri.ExitError{Code: 1}, output: "broken\n"},
		{name: "timeout", err: context.DeadlineExceeded, output: `command "check --now" timed out`},
		{name: "runtime error", err: errors.New("container not found"), errored: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(Config{Runner: &fakeRunner{fn: func(string, []string) ([]byte, error) { return []byte(tt.out), tt.err }}})
			r := m.probeExec(context.Background(), "id", []string{"check", "--now"}, time.Second)
			if (r.err != nil) != tt.errored || r.success != tt.success || r.output != tt.output {
				t.Fatalf("result = %+v", r)
			}
		})
	}
	if r := New(Config{}).probeExec(context.Background(), "id", []string{"x"}, time.Second); r.err == nil {
		t.Fatal("exec without a runner did not error")
	}
}

func TestGRPCProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("db", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	port := l.Addr().(*net.TCPAddr).Port

	if r := probeGRPC(context.Background(), "127.0.0.1", port, "", 5*time.Second); !r.success {
		t.Fatalf("serving: %+v", r)
	}
	if r := probeGRPC(context.Background(), "127.0.0.1", port, "db", 5*time.Second); r.success || r.output != `service unhealthy (responded with "NOT_SERVING")` {
		t.Fatalf("not serving: %+v", r)
	}
	plain := grpc.NewServer()
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = plain.Serve(l2) }()
	t.Cleanup(plain.Stop)
	if r := probeGRPC(context.Background(), "127.0.0.1", l2.Addr().(*net.TCPAddr).Port, "", 5*time.Second); r.success || !strings.Contains(r.output, "does not implement the grpc health protocol") {
		t.Fatalf("no health service: %+v", r)
	}
}

func TestNetworkProbesNeedAPodIP(t *testing.T) {
	m := New(Config{})
	c := &v1.Container{Name: "c"}
	for name, p := range map[string]*v1.Probe{
		"http": {ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(80)}}},
		"tcp":  {ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(80)}}},
		"grpc": {ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 80}}},
	} {
		if r := m.runProbe(context.Background(), withDefaults(p), c, "id", ""); !errors.Is(r.err, errNoPodIP) {
			t.Errorf("%s without a pod IP: %+v", name, r)
		}
	}
}
