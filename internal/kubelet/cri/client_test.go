package cri

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type fakeRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	stopTimeout int64
}

func (f *fakeRuntime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "fake", RuntimeApiVersion: "v1"}, nil
}

func (f *fakeRuntime) RunPodSandbox(_ context.Context, r *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: "sb-" + r.Config.Metadata.Name}, nil
}

func (f *fakeRuntime) StopContainer(_ context.Context, r *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	f.stopTimeout = r.Timeout
	return &runtimeapi.StopContainerResponse{}, nil
}

func (f *fakeRuntime) ExecSync(_ context.Context, r *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	return &runtimeapi.ExecSyncResponse{Stdout: []byte(r.Cmd[0]), ExitCode: 3}, nil
}

type fakeImages struct {
	runtimeapi.UnimplementedImageServiceServer
}

func (fakeImages) PullImage(_ context.Context, r *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	if r.Image.Image == "missing" {
		return nil, status.Error(codes.NotFound, "no such image")
	}
	return &runtimeapi.PullImageResponse{ImageRef: "sha256:abc"}, nil
}

func serve(t *testing.T) (string, *fakeRuntime) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "c.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	rt := &fakeRuntime{}
	runtimeapi.RegisterRuntimeServiceServer(s, rt)
	runtimeapi.RegisterImageServiceServer(s, fakeImages{})
	go s.Serve(l)
	t.Cleanup(s.Stop)
	return "unix://" + sock, rt
}

func TestClient(t *testing.T) {
	ep, rt := serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, err := c.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p"}}, "")
	if err != nil || id != "sb-p" {
		t.Fatalf("RunPodSandbox = %q, %v", id, err)
	}
	if err := c.StopContainer(ctx, "x", 7); err != nil || rt.stopTimeout != 7 {
		t.Fatalf("StopContainer: %v, timeout %d", err, rt.stopTimeout)
	}
	ref, err := c.PullImage(ctx, &runtimeapi.ImageSpec{Image: "busybox"}, nil, nil)
	if err != nil || ref != "sha256:abc" {
		t.Fatalf("PullImage = %q, %v", ref, err)
	}
	if _, err := c.PullImage(ctx, &runtimeapi.ImageSpec{Image: "missing"}, nil, nil); status.Code(errors.Unwrap(err)) != codes.NotFound {
		t.Fatalf("PullImage(missing) = %v, want NotFound", err)
	}
	out, _, err := c.ExecSync(ctx, "x", []string{"hi"}, time.Second)
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != 3 || string(out) != "hi" {
		t.Fatalf("ExecSync = %q, %v", out, err)
	}
	if _, err := c.ListPodSandbox(ctx, nil); status.Code(errors.Unwrap(err)) != codes.Unimplemented {
		t.Fatalf("ListPodSandbox on a server without it = %v", err)
	}
}

func TestDialRejectsTCP(t *testing.T) {
	if _, err := Dial(context.Background(), "tcp://127.0.0.1:1"); err == nil {
		t.Fatal("Dial(tcp) succeeded")
	}
}

// versionConn is a connection that answers Version and fails every other call.
type versionConn struct{ calls []string }

func (c *versionConn) Invoke(_ context.Context, method string, _, reply any, _ ...grpc.CallOption) error {
	c.calls = append(c.calls, method)
	if v, ok := reply.(*runtimeapi.VersionResponse); ok {
		v.RuntimeName = "in-process"
		return nil
	}
	return status.Error(codes.NotFound, "nothing here")
}

func (c *versionConn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, status.Error(codes.Unimplemented, "no streams")
}

func TestNewOverAConnection(t *testing.T) {
	conn := &versionConn{}
	c, err := New(context.Background(), conn)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if len(conn.calls) != 1 || conn.calls[0] != runtimeapi.RuntimeService_Version_FullMethodName {
		t.Errorf("New called %q, want Version only", conn.calls)
	}
	_, err = c.ContainerStatus(context.Background(), "x", false)
	if status.Code(errors.Unwrap(err)) != codes.NotFound {
		t.Errorf("ContainerStatus over the connection: %v, want its NotFound", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
