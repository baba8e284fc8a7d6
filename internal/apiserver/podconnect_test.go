package apiserver_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubette/kubette/internal/testenv/forward"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	cristreaming "k8s.io/cri-streaming/pkg/streaming"
	crirc "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
	utilexec "k8s.io/utils/exec"

	kubeletserver "github.com/kubette/kubette/internal/kubelet/server"
	"github.com/kubette/kubette/internal/pki"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/needs"
)

// connectRuntime is a CRI runtime of one running container per pod of default (sandbox
// "sb-<pod>", container "<pod>-<name>"), streaming through the real cri-streaming server over
// fake sessions (connectSessions).
type connectRuntime struct{ stream cristreaming.Server }

func (f *connectRuntime) ListPodSandbox(_ context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	if filter.GetLabelSelector()["io.kubernetes.pod.namespace"] != "default" {
		return nil, nil
	}
	return []*runtimeapi.PodSandbox{{Id: "sb-" + filter.GetLabelSelector()["io.kubernetes.pod.name"]}}, nil
}

func (f *connectRuntime) ListContainers(_ context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	l := filter.GetLabelSelector()
	return []*runtimeapi.Container{{Id: l["io.kubernetes.pod.name"] + "-" + l["io.kubernetes.container.name"]}}, nil
}

func (f *connectRuntime) Exec(_ context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return f.stream.GetExec(req)
}

func (f *connectRuntime) Attach(_ context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return f.stream.GetAttach(req)
}

func (f *connectRuntime) PortForward(_ context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return f.stream.GetPortForward(req)
}

// connectSessions: exec prints "<container>: <command>" then echoes stdin to stdout, writes
// "err" to stderr, and exits with the number of arguments beyond the first; attach echoes
// stdin; port-forward prints "<sandbox>:<port> " and echoes.
type connectSessions struct{}

func (connectSessions) Exec(_ context.Context, id string, cmd []string, in io.Reader, out, errOut io.WriteCloser, tty bool, _ <-chan crirc.TerminalSize) error {
	fmt.Fprintf(out, "%s: %s (tty %v)\n", id, strings.Join(cmd, " "), tty)
	if in != nil {
		_, _ = io.Copy(out, in)
	}
	if errOut != nil {
		fmt.Fprint(errOut, "err\n")
	}
	if len(cmd) > 1 {
		return utilexec.CodeExitError{Err: errors.New("exited"), Code: len(cmd) - 1}
	}
	return nil
}

func (connectSessions) Attach(_ context.Context, id string, in io.Reader, out, _ io.WriteCloser, _ bool, _ <-chan crirc.TerminalSize) error {
	fmt.Fprintf(out, "attached to %s\n", id)
	if in != nil {
		_, _ = io.Copy(out, in)
	}
	return nil
}

func (connectSessions) PortForward(_ context.Context, sandbox string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	fmt.Fprintf(stream, "%s:%d ", sandbox, port)
	_, err := io.Copy(stream, stream)
	return err
}

// startConnectEnv runs a control plane and a real kubelet server (node-1) whose runtime is
// connectRuntime.
func startConnectEnv(t *testing.T) *testenv.Env {
	t.Helper()
	env := testenv.Start(t, testenv.Options{})
	ca, err := pki.LoadOrCreateCA(filepath.Join(filepath.Dir(env.Kubeconfig), "pki"), "unused")
	if err != nil {
		t.Fatal(err)
	}
	backend := httptest.NewUnstartedServer(nil)
	cfg := cristreaming.DefaultConfig
	cfg.Addr = backend.Listener.Addr().String()
	cfg.BaseURL = &url.URL{Scheme: "http", Host: cfg.Addr}
	ss, err := cristreaming.NewServer(cfg, connectSessions{})
	if err != nil {
		t.Fatal(err)
	}
	backend.Config.Handler = ss
	backend.Start()
	t.Cleanup(backend.Close)

	cert, err := kubeletserver.LoadOrIssueServing(ca, t.TempDir(), "node-1", []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := kubeletserver.New(kubeletserver.Config{Logs: &cannedLogs{attempts: map[string][]string{}}, Streams: &connectRuntime{stream: ss},
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: ca.Pool()}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("kubelet server: %v", err)
		}
	})
	ctx := ctxT(t)
	n, err := env.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(ln.Addr().(*net.TCPAddr).Port)
	if _, err := env.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		name, node string
		containers []string
	}{{"web", "node-1", []string{"app"}}, {"multi", "node-1", []string{"a", "b"}}, {"pending", "", []string{"app"}}} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: "default"}, Spec: corev1.PodSpec{NodeName: p.node}}
		for _, c := range p.containers {
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: c, Image: "busybox"})
		}
		if _, err := env.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return env
}

func execURL(env *testenv.Env, pod string, o *corev1.PodExecOptions) *url.URL {
	return env.Client.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").Name(pod).SubResource("exec").
		VersionedParams(o, scheme.ParameterCodec).URL()
}

func TestPodExecAttach(t *testing.T) {
	env := startConnectEnv(t)
	ctx := ctxT(t)
	spdyExec := func(u *url.URL, o remotecommand.StreamOptions) error {
		ex, err := remotecommand.NewSPDYExecutor(env.Config, http.MethodPost, u)
		if err != nil {
			t.Fatal(err)
		}
		return ex.StreamWithContext(ctx, o)
	}
	wsExec := func(u *url.URL, o remotecommand.StreamOptions) error {
		ex, err := remotecommand.NewWebSocketExecutor(env.Config, http.MethodGet, u.String())
		if err != nil {
			t.Fatal(err)
		}
		return ex.StreamWithContext(ctx, o)
	}
	for _, proto := range []struct {
		name string
		run  func(*url.URL, remotecommand.StreamOptions) error
	}{{"SPDY", spdyExec}, {"WebSocket", wsExec}} {
		t.Run(proto.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			u := execURL(env, "web", &corev1.PodExecOptions{Command: []string{"sh", "-c", "exit"}, Stdin: true, Stdout: true, Stderr: true})
			err := proto.run(u, remotecommand.StreamOptions{Stdin: strings.NewReader("input\n"), Stdout: &out, Stderr: &errOut})
			var exit interface{ ExitStatus() int }
			if !errors.As(err, &exit) || exit.ExitStatus() != 2 {
				t.Errorf("exec error = %v, want exit code 2", err)
			}
			if out.String() != "web-app: sh -c exit (tty false)\ninput\n" || errOut.String() != "err\n" {
				t.Errorf("exec stdout %q, stderr %q", out.String(), errOut.String())
			}

			out.Reset()
			u = execURL(env, "multi", &corev1.PodExecOptions{Container: "b", Command: []string{"true"}, Stdout: true, TTY: true})
			if err := proto.run(u, remotecommand.StreamOptions{Stdout: &out, Tty: true}); err != nil || out.String() != "multi-b: true (tty true)\n" {
				t.Errorf("tty exec in a named container = %v, %q", err, out.String())
			}

			out.Reset()
			u = env.Client.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").Name("web").SubResource("attach").
				VersionedParams(&corev1.PodAttachOptions{Stdin: true, Stdout: true}, scheme.ParameterCodec).URL()
			if err := proto.run(u, remotecommand.StreamOptions{Stdin: strings.NewReader("typed\n"), Stdout: &out}); err != nil || out.String() != "attached to web-app\ntyped\n" {
				t.Errorf("attach = %v, %q", err, out.String())
			}

			for _, c := range []struct {
				pod  string
				opts *corev1.PodExecOptions
				msg  string
			}{
				{"web", &corev1.PodExecOptions{Command: []string{"true"}}, "you must specify at least 1 of stdin, stdout, stderr"},
				{"web", &corev1.PodExecOptions{Container: "nope", Command: []string{"true"}, Stdout: true}, "container nope is not valid for pod web"},
				{"multi", &corev1.PodExecOptions{Command: []string{"true"}, Stdout: true}, "a container name must be specified for pod multi, choose one of: [a b]"},
				{"pending", &corev1.PodExecOptions{Command: []string{"true"}, Stdout: true}, "pod pending does not have a host assigned"},
				{"nope", &corev1.PodExecOptions{Command: []string{"true"}, Stdout: true}, `pods "nope" not found`},
			} {
				err := proto.run(execURL(env, c.pod, c.opts), remotecommand.StreamOptions{Stdout: io.Discard})
				if err == nil || !strings.Contains(err.Error(), c.msg) {
					t.Errorf("exec %s %+v: %v, want %q", c.pod, c.opts, err, c.msg)
				}
			}
		})
	}
}

func TestPodPortForward(t *testing.T) {
	env := startConnectEnv(t)
	u := env.Client.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").Name("web").SubResource("portforward").URL()
	spdyDialer := forward.SPDYDialer(t, env.Config, u)
	// As kubectl: WebSocket tunnelling first, SPDY when the upgrade fails. (client-go's
	// WebSocket transport reports k8s.io/streaming's UpgradeFailureError.)
	tunnel, err := portforward.NewSPDYOverWebsocketDialer(u, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	fellBack := false
	dialer := portforward.NewFallbackDialer(tunnel, spdyDialer, func(err error) bool {
		fellBack = httpstream.IsUpgradeFailure(err)
		return fellBack
	})
	fw := forward.Start(t, dialer, "8080")
	if !fellBack {
		t.Error("the WebSocket tunnel did not fail as an upgrade failure")
	}
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", fw.Local))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	want := "sb-web:8080 ping"
	got := make([]byte, len(want))
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != want {
		t.Errorf("through the forwarded port: %q, %v; want %q", got, err, want)
	}
}

// TestKubectlExec runs the real kubectl (WebSocket first, as 1.3x does) against the API
// server and the kubelet server: output, stdin and the exit code.
func TestKubectlExec(t *testing.T) {
	kubectl := needs.Binary(t, "kubectl", "kubectl")
	env := startConnectEnv(t)
	ctx := ctxT(t)
	cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", env.Kubeconfig, "-v=4", "exec", "-i", "web", "--", "cat", "-", "x")
	cmd.Stdin = strings.NewReader("piped\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("kubectl exec: %v, want exit code 2", err)
	}
	// kubectl stayed on its WebSocket session: no fallback to SPDY.
	if strings.Contains(stderr.String(), "fallback") {
		t.Errorf("kubectl exec fell back to SPDY:\n%s", stderr.String())
	}
	if string(out) != "web-app: cat - x (tty false)\npiped\n" {
		t.Errorf("kubectl exec output %q", out)
	}
	out, err = exec.CommandContext(ctx, kubectl, "--kubeconfig", env.Kubeconfig, "exec", "web", "-c", "nope", "--", "true").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "container nope is not valid for pod web") {
		t.Errorf("kubectl exec into an unknown container: %v, %s", err, out)
	}
}
