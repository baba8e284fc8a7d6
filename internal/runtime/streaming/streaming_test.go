package streaming_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubette/kubette/internal/testenv/forward"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubette/kubette/internal/runtime"
	"github.com/kubette/kubette/internal/runtime/runc"
	"github.com/kubette/kubette/internal/testenv/needs"
	"github.com/kubette/kubette/internal/testenv/testimage"
)

func TestMain(m *testing.M) {
	runc.MaybeRunShim() // the test binary is the containers' shim
	os.Exit(m.Run())
}

// cri is a running runtime (runtime.Run) and its CRI client.
type cri struct {
	rs  runtimeapi.RuntimeServiceClient
	is  runtimeapi.ImageServiceClient
	sb  string
	cfg *runtimeapi.PodSandboxConfig
}

// startRuntime runs the whole runtime on a data directory of its own, with one ready sandbox;
// everything is removed at cleanup.
func startRuntime(t *testing.T) *cri {
	needs.Root(t)
	runcBin := needs.Binary(t, "runc", "runc")
	pluginDir := needs.CNIPlugins(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dataDir, err := os.MkdirTemp("", "kstr") // short: the socket path is limited
	if err != nil {
		t.Fatal(err)
	}
	cfg := runtime.Config{DataDir: dataDir, Runc: runcBin, Shim: []string{exe}, CNIPluginDirs: []string{pluginDir}, Bridge: "kstr0"}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runtime.Run(ctx, cfg) }()
	conn, err := grpc.NewClient("unix://"+runtime.SocketPath(dataDir), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.WaitForReady(true)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer dcancel()
		if err := runtime.Down(dctx, cfg); err != nil {
			t.Errorf("Down: %v", err)
		}
		if err := os.RemoveAll(dataDir); err != nil {
			t.Errorf("remove data dir: %v", err)
		}
	})
	c := &cri{rs: runtimeapi.NewRuntimeServiceClient(conn), is: runtimeapi.NewImageServiceClient(conn)}
	cctx := callCtx(t)
	// Outside the service range and the cluster range (a kubette proxy of an e2e test rejects those).
	if _, err := c.rs.UpdateRuntimeConfig(cctx, &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: &runtimeapi.RuntimeConfig{
		NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: "10.89.83.0/24"}}}); err != nil {
		t.Fatal(err)
	}
	c.cfg = &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "pod", Namespace: "default", Uid: "uid-streaming"},
		Hostname: "pod", LogDirectory: dataDir + "/logs/pod",
	}
	sb, err := c.rs.RunPodSandbox(cctx, &runtimeapi.RunPodSandboxRequest{Config: c.cfg})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	c.sb = sb.PodSandboxId
	return c
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// run pulls image, creates and starts a container.
func (c *cri) run(t *testing.T, cfg *runtimeapi.ContainerConfig) string {
	t.Helper()
	ctx := callCtx(t)
	if _, err := c.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: cfg.Image}); err != nil {
		t.Fatalf("PullImage: %v", err)
	}
	cfg.LogPath = cfg.Metadata.Name + "/0.log"
	resp, err := c.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: c.sb, Config: cfg, SandboxConfig: c.cfg})
	if err != nil {
		t.Fatalf("CreateContainer %s: %v", cfg.Metadata.Name, err)
	}
	if _, err := c.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: resp.ContainerId}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	return resp.ContainerId
}

// stream runs a remote command session (exec or attach) over SPDY, as the kubelet's proxy
// would relay kubectl's.
func stream(ctx context.Context, t *testing.T, rawURL string, o remotecommand.StreamOptions) error {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{}, http.MethodPost, u)
	if err != nil {
		t.Fatal(err)
	}
	return ex.StreamWithContext(ctx, o)
}

// syncBuffer is a bytes.Buffer safe for one writer and a polling reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// sizes is a TerminalSizeQueue of one size.
type sizes chan remotecommand.TerminalSize

func (s sizes) Next() *remotecommand.TerminalSize {
	sz, ok := <-s
	if !ok {
		return nil
	}
	return &sz
}

func TestStreaming(t *testing.T) {
	c := startRuntime(t)
	registry := testimage.Registry(t)
	testimage.Push(t, registry, "busybox:v1", testimage.Busybox(t))
	testimage.Push(t, registry, "http:v1", testimage.HTTPServer(t))
	busybox := &runtimeapi.ImageSpec{Image: registry + "/busybox:v1"}
	ctx := callCtx(t)

	sleeper := c.run(t, &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "sleeper"}, Image: busybox, Command: []string{"sleep", "1000"}})

	t.Run("exec", func(t *testing.T) {
		resp, err := c.rs.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: sleeper[:12], Cmd: []string{"sh", "-c", "cat; cat /etc/hostname; echo oops >&2; exit 3"},
			Stdin: true, Stdout: true, Stderr: true})
		if err != nil {
			t.Fatalf("Exec: %v", err)
		}
		var out, errOut bytes.Buffer
		err = stream(ctx, t, resp.Url, remotecommand.StreamOptions{Stdin: strings.NewReader("hi\n"), Stdout: &out, Stderr: &errOut})
		var exit interface{ ExitStatus() int }
		if !errors.As(err, &exit) || exit.ExitStatus() != 3 {
			t.Errorf("exec error = %v, want exit code 3", err)
		}
		if out.String() != "hi\npod\n" || errOut.String() != "oops\n" {
			t.Errorf("exec stdout %q, stderr %q; want \"hi\\npod\\n\", \"oops\\n\"", out.String(), errOut.String())
		}
		// The URL is single-use.
		if err := stream(ctx, t, resp.Url, remotecommand.StreamOptions{Stdout: &out}); err == nil {
			t.Error("a second session on the same exec URL succeeded")
		}
		// No stream at all is refused before a URL exists.
		if _, err := c.rs.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: sleeper, Cmd: []string{"true"}}); err == nil {
			t.Error("Exec without stdin, stdout and stderr: want an error")
		}
	})

	t.Run("exec with a terminal", func(t *testing.T) {
		resp, err := c.rs.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: sleeper, Cmd: []string{"sh", "-c", "while read l; do [ \"$l\" = q ] && exit 0; stty size; done"},
			Stdin: true, Stdout: true, Tty: true})
		if err != nil {
			t.Fatalf("Exec: %v", err)
		}
		q := make(sizes, 1)
		q <- remotecommand.TerminalSize{Width: 77, Height: 22}
		defer close(q)
		inR, inW := io.Pipe()
		defer inW.Close()
		var out syncBuffer
		done := make(chan error, 1)
		go func() {
			done <- stream(ctx, t, resp.Url, remotecommand.StreamOptions{Stdin: inR, Stdout: &out, Tty: true, TerminalSizeQueue: q})
		}()
		// The size reaches the process's terminal asynchronously: ask until it has it.
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(out.String(), "22 77") {
			if time.Now().After(deadline) {
				t.Fatalf("tty exec output %q, want the size 22 77", out.String())
			}
			if _, err := io.WriteString(inW, "size\n"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if _, err := io.WriteString(inW, "q\n"); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("tty exec: %v", err)
		}
	})

	t.Run("attach", func(t *testing.T) {
		talker := c.run(t, &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "talker"}, Image: busybox,
			Command: []string{"sh", "-c", "while read l; do echo got $l; echo err $l >&2; done"}, Stdin: true, StdinOnce: true})
		resp, err := c.rs.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: talker, Stdin: true, Stdout: true, Stderr: true})
		if err != nil {
			t.Fatalf("Attach: %v", err)
		}
		var out, errOut bytes.Buffer
		if err := stream(ctx, t, resp.Url, remotecommand.StreamOptions{Stdin: strings.NewReader("a\nb\n"), Stdout: &out, Stderr: &errOut}); err != nil {
			t.Fatalf("attach session: %v", err)
		}
		if out.String() != "got a\ngot b\n" || errOut.String() != "err a\nerr b\n" {
			t.Errorf("attach stdout %q, stderr %q", out.String(), errOut.String())
		}
	})

	t.Run("port-forward", func(t *testing.T) {
		c.run(t, &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "server"}, Image: &runtimeapi.ImageSpec{Image: registry + "/http:v1"}})
		// Wait for the server to listen (a refused forwarded connection ends client-go's
		// forwarding): it answers on the pod IP from the host.
		sbs, err := c.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: c.sb})
		if err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Timeout: 5 * time.Second}
		deadline := time.Now().Add(60 * time.Second)
		for {
			if _, err := get(client, "http://"+sbs.Status.Network.GetIp()+":8080/"); err == nil {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("the server does not answer on the pod IP: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		resp, err := c.rs.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: c.sb})
		if err != nil {
			t.Fatalf("PortForward: %v", err)
		}
		u, err := url.Parse(resp.Url)
		if err != nil {
			t.Fatal(err)
		}
		fw := forward.Start(t, forward.SPDYDialer(t, &rest.Config{}, u), "8080")
		body, err := get(client, fmt.Sprintf("http://127.0.0.1:%d/", fw.Local))
		if err != nil || !strings.Contains(body, "hostname=pod") {
			t.Fatalf("GET through the forwarded port: %v, %q (forwarder: %s)", err, body, fw.Logs())
		}
	})
}

func get(client *http.Client, u string) (string, error) {
	resp, err := client.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
