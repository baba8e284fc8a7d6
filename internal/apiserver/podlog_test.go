package apiserver_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kubeletserver "github.com/kubette/kubette/internal/kubelet/server"
	"github.com/kubette/kubette/internal/pki"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/needs"
)

// cannedLogs is a LogLocator over CRI log files by "ns/pod/container" (attempts, oldest first).
type cannedLogs struct {
	mu       sync.Mutex
	attempts map[string][]string
}

func (c *cannedLogs) set(key string, paths ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.attempts[key] = paths
}

func (c *cannedLogs) ContainerLogs(ns, pod, ctr string, previous bool) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	paths, ok := c.attempts[ns+"/"+pod+"/"+ctr]
	switch {
	case !ok:
		return "", fmt.Errorf("%s/%s/%s: %w", ns, pod, ctr, kubeletserver.ErrContainerNotFound)
	case previous && len(paths) < 2:
		return "", fmt.Errorf("%s/%s/%s: %w", ns, pod, ctr, kubeletserver.ErrNoPreviousContainer)
	case previous:
		return paths[len(paths)-2], nil
	}
	return paths[len(paths)-1], nil
}

var logT0 = time.Date(2026, 5, 6, 7, 8, 9, 500, time.UTC)

// appendCRI appends full stdout lines to a CRI log file, the i-th at logT0 + first+i seconds.
func appendCRI(t *testing.T, path string, first int, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i, l := range lines {
		e := kubeletserver.Entry{Time: logT0.Add(time.Duration(first+i) * time.Second), Stream: "stdout", Log: []byte(l)}
		if _, err := f.Write(kubeletserver.AppendLine(nil, e)); err != nil {
			t.Fatal(err)
		}
	}
}

type logEnv struct {
	env  *testenv.Env
	logs *cannedLogs
	dir  string
}

// startLogEnv runs a control plane and a kubelet server (the real one, over canned logs) on
// loopback with a serving certificate from the cluster CA, registered as node-1.
func startLogEnv(t *testing.T) *logEnv {
	t.Helper()
	env := testenv.Start(t, testenv.Options{})
	ca, err := pki.LoadOrCreateCA(filepath.Join(filepath.Dir(env.Kubeconfig), "pki"), "unused")
	if err != nil {
		t.Fatal(err)
	}
	e := &logEnv{env: env, logs: &cannedLogs{attempts: map[string][]string{}}, dir: t.TempDir()}
	e.kubelet(t, "node-1", ca, ca)
	return e
}

// kubelet serves e.logs as node's kubelet with a serving certificate from servingCA, accepting
// clients of clientCA, and registers the Node with its address and port.
func (e *logEnv) kubelet(t *testing.T, node string, servingCA, clientCA *pki.CA) {
	t.Helper()
	cert, err := kubeletserver.LoadOrIssueServing(servingCA, t.TempDir(), node, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := kubeletserver.New(kubeletserver.Config{Logs: e.logs, TLS: &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: clientCA.Pool()}})
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
	n, err := e.env.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: node}, {Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(ln.Addr().(*net.TCPAddr).Port)
	if _, err := e.env.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (e *logEnv) pod(t *testing.T, name, node string, containers ...string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{NodeName: node}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "busybox"})
	}
	if _, err := e.env.Client.CoreV1().Pods("default").Create(ctxT(t), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestPodLogs(t *testing.T) {
	e := startLogEnv(t)
	ctx := ctxT(t)
	prev, cur := filepath.Join(e.dir, "0.log"), filepath.Join(e.dir, "1.log")
	appendCRI(t, prev, 0, "before the restart")
	appendCRI(t, cur, 10, "one", "two", "three")
	e.logs.set("default/web/app", prev, cur)
	e.logs.set("default/multi/a", cur)
	e.pod(t, "web", "node-1", "app")
	e.pod(t, "multi", "node-1", "a", "b")
	e.pod(t, "pending", "", "app")
	e.pod(t, "lost", "node-gone", "app")

	pods := e.env.Client.CoreV1().Pods("default")
	ok := []struct {
		name string
		pod  string
		opts corev1.PodLogOptions
		want string
	}{
		{"plain", "web", corev1.PodLogOptions{}, "one\ntwo\nthree\n"},
		{"tail", "web", corev1.PodLogOptions{TailLines: ptr.To[int64](1)}, "three\n"},
		{"timestamps", "web", corev1.PodLogOptions{Timestamps: true, TailLines: ptr.To[int64](1)}, logT0.Add(12*time.Second).Format(time.RFC3339Nano) + " three\n"},
		{"sinceTime", "web", corev1.PodLogOptions{SinceTime: ptr.To(metav1.NewTime(logT0.Add(11 * time.Second)))}, "two\nthree\n"},
		{"limitBytes", "web", corev1.PodLogOptions{LimitBytes: ptr.To[int64](6)}, "one\ntw"},
		{"previous", "web", corev1.PodLogOptions{Previous: true}, "before the restart\n"},
		{"a named container", "multi", corev1.PodLogOptions{Container: "a"}, "one\ntwo\nthree\n"},
		{"an unscheduled pod has no log yet", "pending", corev1.PodLogOptions{}, ""},
	}
	for _, c := range ok {
		got, err := pods.GetLogs(c.pod, &c.opts).DoRaw(ctx)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}

	bad := []struct {
		name string
		pod  string
		opts corev1.PodLogOptions
		code int32
		msg  string
	}{
		{"negative tail", "web", corev1.PodLogOptions{TailLines: ptr.To[int64](-1)}, 422, `PodLogOptions "web" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0`},
		{"zero limit", "web", corev1.PodLogOptions{LimitBytes: ptr.To[int64](0)}, 422, `PodLogOptions "web" is invalid: limitBytes: Invalid value: 0: must be greater than 0`},
		{"both since", "web", corev1.PodLogOptions{SinceSeconds: ptr.To[int64](5), SinceTime: ptr.To(metav1.NewTime(logT0))}, 422, "PodLogOptions \"web\" is invalid: []: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified"},
		{"no container named", "multi", corev1.PodLogOptions{}, 400, "a container name must be specified for pod multi, choose one of: [a b]"},
		{"unknown container", "web", corev1.PodLogOptions{Container: "nope"}, 400, "container nope is not valid for pod web"},
		{"no previous attempt", "multi", corev1.PodLogOptions{Container: "a", Previous: true}, 400, `previous terminated container "a" in pod "multi" not found`},
		{"the kubelet does not know the container", "multi", corev1.PodLogOptions{Container: "b"}, 404, `container "b" not found in pod "multi"`},
		{"no such pod", "nope", corev1.PodLogOptions{}, 404, `pods "nope" not found`},
		{"no such node", "lost", corev1.PodLogOptions{}, 404, `nodes "node-gone" not found`},
	}
	for _, c := range bad {
		_, err := pods.GetLogs(c.pod, &c.opts).Stream(ctx) // as kubectl: Stream decodes a Status, DoRaw does not
		var st apierrors.APIStatus
		if err == nil || !errors.As(err, &st) {
			t.Errorf("%s: err %v, want a Status", c.name, err)
			continue
		}
		if s := st.Status(); s.Code != c.code || s.Message != c.msg {
			t.Errorf("%s: %d %q, want %d %q", c.name, s.Code, s.Message, c.code, c.msg)
		}
	}
	// A value that does not parse at all is a bad request.
	_, err := e.env.Client.CoreV1().RESTClient().Get().Namespace("default").Resource("pods").Name("web").SubResource("log").Param("tailLines", "x").Stream(ctx)
	if !apierrors.IsBadRequest(err) {
		t.Errorf("tailLines=x: %v, want BadRequest", err)
	}
}

func TestPodLogsFollow(t *testing.T) {
	e := startLogEnv(t)
	ctx := ctxT(t)
	first, second := filepath.Join(e.dir, "0.log"), filepath.Join(e.dir, "1.log")
	appendCRI(t, first, 0, "hello")
	e.logs.set("default/web/app", first)
	e.pod(t, "web", "node-1", "app")

	stream, err := e.env.Client.CoreV1().Pods("default").GetLogs("web", &corev1.PodLogOptions{Follow: true}).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	r := bufio.NewReader(stream)
	for i, want := range []string{"hello\n", "world\n"} {
		if i == 1 {
			appendCRI(t, first, 1, "world") // written after the stream began: it must arrive as it is written
		}
		got, err := r.ReadString('\n')
		if err != nil || got != want {
			t.Fatalf("line %d: %q, %v; want %q", i, got, err, want)
		}
	}
	appendCRI(t, first, 2, "bye")
	appendCRI(t, second, 0, "restarted")
	e.logs.set("default/web/app", first, second)
	rest, err := io.ReadAll(r)
	if err != nil || string(rest) != "bye\n" {
		t.Fatalf("after a restart: %q, %v; want the old attempt's last line and the end", rest, err)
	}
}

func TestKubectlLogs(t *testing.T) {
	kubectl := needs.Binary(t, "kubectl", "kubectl")
	e := startLogEnv(t)
	prev, cur := filepath.Join(e.dir, "0.log"), filepath.Join(e.dir, "1.log")
	appendCRI(t, prev, 0, "old")
	appendCRI(t, cur, 10, "one", "two", "three")
	e.logs.set("default/web/app", prev, cur)
	e.logs.set("default/multi/a", cur)
	e.pod(t, "web", "node-1", "app")
	e.pod(t, "multi", "node-1", "a", "b")

	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", e.env.Kubeconfig}, args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	cases := []struct {
		args []string
		want string
		fail bool
	}{
		{[]string{"logs", "web"}, "one\ntwo\nthree\n", false},
		{[]string{"logs", "web", "--tail=2"}, "two\nthree\n", false},
		{[]string{"logs", "web", "--tail=1", "--timestamps"}, logT0.Add(12*time.Second).Format(time.RFC3339Nano) + " three\n", false},
		{[]string{"logs", "web", "-p"}, "old\n", false},
		{[]string{"logs", "multi", "-c", "a", "--limit-bytes=3"}, "one", false},
		{[]string{"logs", "web", "-c", "nope"}, "error: container nope is not valid for pod web\n", true},
		{[]string{"logs", "multi", "-c", "a", "-p"}, "Error from server (BadRequest): previous terminated container \"a\" in pod \"multi\" not found\n", true},
	}
	for _, c := range cases {
		got, err := run(c.args...)
		if (err != nil) != c.fail || got != c.want {
			t.Errorf("kubectl %s: %q (err %v), want %q (fail %v)", strings.Join(c.args, " "), got, err, c.want, c.fail)
		}
	}

	// kubectl logs -f streams until the container's log is finished (a newer attempt appears).
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", e.env.Kubeconfig, "logs", "-f", "--tail=1", "web")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	if got, err := r.ReadString('\n'); err != nil || got != "three\n" {
		t.Fatalf("kubectl logs -f: first line %q, %v", got, err)
	}
	appendCRI(t, cur, 13, "four")
	if got, err := r.ReadString('\n'); err != nil || got != "four\n" {
		t.Fatalf("kubectl logs -f: streamed line %q, %v", got, err)
	}
	next := filepath.Join(e.dir, "2.log")
	appendCRI(t, next, 20, "restarted")
	e.logs.set("default/web/app", prev, cur, next)
	rest, _ := io.ReadAll(r)
	if err := cmd.Wait(); err != nil || len(rest) != 0 {
		t.Fatalf("kubectl logs -f after the restart: %q, %v", rest, err)
	}
}

func TestPodLogsChecksKubeletCertificate(t *testing.T) {
	e := startLogEnv(t)
	ctx := ctxT(t)
	foreign, err := pki.LoadOrCreateCA(t.TempDir(), "foreign")
	if err != nil {
		t.Fatal(err)
	}
	clusterCA, err := pki.LoadOrCreateCA(filepath.Join(filepath.Dir(e.env.Kubeconfig), "pki"), "unused")
	if err != nil {
		t.Fatal(err)
	}
	e.kubelet(t, "node-2", foreign, clusterCA) // an impostor: its serving certificate is not the cluster's
	path := filepath.Join(e.dir, "0.log")
	appendCRI(t, path, 0, "secret")
	e.logs.set("default/web/app", path)
	e.pod(t, "web", "node-2", "app")
	pods := e.env.Client.CoreV1().Pods("default")
	if _, err := pods.GetLogs("web", &corev1.PodLogOptions{}).Stream(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a kubelet with a foreign certificate: err %v, want a certificate error", err)
	}
	got, err := pods.GetLogs("web", &corev1.PodLogOptions{InsecureSkipTLSVerifyBackend: true}).DoRaw(ctx)
	if err != nil || string(got) != "secret\n" {
		t.Fatalf("insecureSkipTLSVerifyBackend: %q, %v", got, err)
	}
}
