package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kubette/kubette/internal/testenv/forward"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	cristreaming "k8s.io/cri-streaming/pkg/streaming"
	crirc "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// fakeRuntime is a CRI runtime with one pod (default/web, sandbox "sb1", container "app" =
// "c1") whose streaming server is the real cri-streaming server over fake sessions.
type fakeRuntime struct {
	stream cristreaming.Server
}

func (f *fakeRuntime) ListPodSandbox(_ context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	l := filter.GetLabelSelector()
	if l[labelPodNamespace] != "default" || l[labelPodName] != "web" || (l[labelPodUID] != "" && l[labelPodUID] != "uid1") {
		return nil, nil
	}
	return []*runtimeapi.PodSandbox{{Id: "sb1", CreatedAt: 1}}, nil
}

func (f *fakeRuntime) ListContainers(_ context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	if filter.GetLabelSelector()[labelContainerName] != "app" {
		return nil, nil
	}
	return []*runtimeapi.Container{{Id: "old", CreatedAt: 1}, {Id: "c1", CreatedAt: 2}}, nil
}

func (f *fakeRuntime) Exec(_ context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if len(req.Cmd) == 0 {
		return nil, status.Error(codes.InvalidArgument, "exec: empty command")
	}
	return f.stream.GetExec(req)
}

func (f *fakeRuntime) Attach(_ context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return f.stream.GetAttach(req)
}

func (f *fakeRuntime) PortForward(_ context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return f.stream.GetPortForward(req)
}

// sessions are the fake sessions: exec runs "echo ARGS" (its exit code is the number of
// arguments), attach copies stdin to stdout, port-forward echoes.
type sessions struct{}

func (sessions) Exec(_ context.Context, id string, cmd []string, in io.Reader, out, _ io.WriteCloser, _ bool, _ <-chan crirc.TerminalSize) error {
	fmt.Fprintf(out, "%s: %s\n", id, strings.Join(cmd, " "))
	if len(cmd) > 1 {
		return utilexec.CodeExitError{Err: errors.New("exit"), Code: len(cmd)}
	}
	return nil
}

func (sessions) Attach(_ context.Context, id string, in io.Reader, out, _ io.WriteCloser, _ bool, _ <-chan crirc.TerminalSize) error {
	_, err := io.Copy(out, in)
	return err
}

func (sessions) PortForward(_ context.Context, sandbox string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	fmt.Fprintf(stream, "%s:%d ", sandbox, port)
	_, err := io.Copy(stream, stream)
	return err
}

func newStreamServer(t *testing.T) string {
	t.Helper()
	backend := httptest.NewUnstartedServer(nil)
	cfg := cristreaming.DefaultConfig
	cfg.Addr = backend.Listener.Addr().String()
	cfg.BaseURL = &url.URL{Scheme: "http", Host: cfg.Addr}
	ss, err := cristreaming.NewServer(cfg, sessions{})
	if err != nil {
		t.Fatal(err)
	}
	backend.Config.Handler = ss
	backend.Start()
	t.Cleanup(backend.Close)

	s, err := New(Config{Logs: &fakeLogs{}, Streams: &fakeRuntime{stream: ss}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	kubelet := httptest.NewServer(s.Handler())
	t.Cleanup(kubelet.Close)
	return kubelet.URL
}

func spdyStream(t *testing.T, rawURL string, o remotecommand.StreamOptions) error {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{}, http.MethodPost, u)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return ex.StreamWithContext(ctx, o)
}

func TestExecAndAttachProxied(t *testing.T) {
	base := newStreamServer(t)

	var out bytes.Buffer
	err := spdyStream(t, base+"/exec/default/web/app?command=sh&command=-c&command=exit+3&output=1", remotecommand.StreamOptions{Stdout: &out})
	var exit interface{ ExitStatus() int }
	if !errors.As(err, &exit) || exit.ExitStatus() != 3 {
		t.Errorf("exec error = %v, want exit code 3", err)
	}
	if out.String() != "c1: sh -c exit 3\n" {
		t.Errorf("exec output %q: want the newest running container c1", out.String())
	}
	out.Reset()
	if err := spdyStream(t, base+"/exec/default/web/uid1/app?command=true&output=1", remotecommand.StreamOptions{Stdout: &out}); err != nil || out.String() != "c1: true\n" {
		t.Errorf("exec with the pod UID = %v, %q", err, out.String())
	}

	out.Reset()
	if err := spdyStream(t, base+"/attach/default/web/app?input=1&output=1", remotecommand.StreamOptions{Stdin: strings.NewReader("hello"), Stdout: &out}); err != nil || out.String() != "hello" {
		t.Errorf("attach = %v, %q; want nil, \"hello\"", err, out.String())
	}
}

func TestStreamErrors(t *testing.T) {
	base := newStreamServer(t)
	for _, tc := range []struct {
		method, path string
		upgrade      bool
		code         int
		msg          string
	}{
		{"POST", "/exec/default/web/app?command=true", true, 400, "you must specify at least 1 of stdin, stdout, stderr"},
		{"POST", "/exec/default/nope/app?command=true&output=1", true, 404, "pod does not exist"},
		{"POST", "/exec/default/web/uid2/app?command=true&output=1", true, 404, "pod does not exist"},
		{"POST", "/exec/default/web/db?command=true&output=1", true, 500, `container not found ("db")`},
		{"POST", "/exec/default/web/app?output=1", true, 400, "exec: empty command"},
		{"PUT", "/exec/default/web/app?command=true&output=1", true, 405, "PUT is not supported"},
		{"POST", "/attach/default/web/app", true, 400, "you must specify at least 1 of stdin, stdout, stderr"},
		{"GET", "/portForward/default/nope", true, 404, "pod does not exist"},
		{"GET", "/portForward/default/web?ports=http", true, 400, `unable to parse "http" as a port`},
	} {
		req, err := http.NewRequest(tc.method, base+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.upgrade {
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "SPDY/3.1")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var st metav1.Status
		_ = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(st.Message, tc.msg) || st.Kind != "Status" {
			t.Errorf("%s %s = %d %+v, want %d %q", tc.method, tc.path, resp.StatusCode, st, tc.code, tc.msg)
		}
	}
	// A plain request where an upgrade is needed.
	resp, err := http.Post(base+"/exec/default/web/app?command=true&output=1", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "Upgrade request required") {
		t.Errorf("exec without upgrade = %d %s, want 400 Upgrade request required", resp.StatusCode, b)
	}
}

func TestPortForwardProxied(t *testing.T) {
	base := newStreamServer(t)
	u, err := url.Parse(base + "/portForward/default/web")
	if err != nil {
		t.Fatal(err)
	}
	fw := forward.Start(t, forward.SPDYDialer(t, &rest.Config{}, u), "8080")
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", fw.Local))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	want := "sb1:8080 ping"
	got := make([]byte, len(want))
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != want {
		t.Errorf("through the forwarded port: %q, %v; want %q", got, err, want)
	}
}
