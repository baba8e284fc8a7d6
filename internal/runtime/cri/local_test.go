package cri

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestLocalConn drives the server through the generated clients over the in-process
// connection, as `kubette up`'s kubelet does, and checks what the socket would give too:
// status codes, copies on both sides, the end of a context, refusal after Close.
func TestLocalConn(t *testing.T) {
	e := newEnv(t)
	conn := e.srv.LocalConn()
	rs, is := runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)

	v, err := rs.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil || v.RuntimeName != "kubette" || v.RuntimeVersion != "v0.0.0-test" {
		t.Fatalf("Version = %v, %v", v, err)
	}
	imgs, err := is.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil || len(imgs.Images) != 1 {
		t.Fatalf("ListImages = %v, %v", imgs, err)
	}

	sbCfg := sandboxConfig("web", map[string]string{"app": "web"})
	sbCfg.LogDirectory = t.TempDir()
	sb, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	// The server holds a copy of the request: changing it afterwards changes nothing there.
	sbCfg.Labels["app"] = "changed"
	st, err := rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.PodSandboxId})
	if err != nil {
		t.Fatalf("PodSandboxStatus: %v", err)
	}
	if got := st.Status.Labels["app"]; got != "web" {
		t.Errorf("the sandbox's label after the caller changed its request: %q, want web", got)
	}
	// The caller holds a copy of the response: changing it changes nothing in the server.
	st.Status.Labels["app"] = "mine"
	st2, err := rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.PodSandboxId})
	if err != nil || st2.Status.Labels["app"] != "web" {
		t.Errorf("the sandbox's label after the caller changed a response: %v, %v", st2.GetStatus().GetLabels(), err)
	}

	created, err := rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId,
		Config: containerConfig("app", nil), SandboxConfig: sbCfg})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if _, err := rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: created.ContainerId}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	cs, err := rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: created.ContainerId})
	if err != nil || cs.Status.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("ContainerStatus = %v, %v", cs, err)
	}

	// Errors arrive as the socket's client would see them.
	_, err = rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: "nope"})
	wantCode(t, err, codes.NotFound)
	_, err = rs.Exec(ctx, &runtimeapi.ExecRequest{})
	wantCode(t, err, codes.Unimplemented)
	_, err = rs.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	wantCode(t, err, codes.Unimplemented)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = rs.Version(cctx, &runtimeapi.VersionRequest{})
	wantCode(t, err, codes.Canceled)
	dctx, dcancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer dcancel()
	_, err = rs.Version(dctx, &runtimeapi.VersionRequest{})
	wantCode(t, err, codes.DeadlineExceeded)

	if err := conn.Close(time.Second); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, err = rs.Version(ctx, &runtimeapi.VersionRequest{})
	wantCode(t, err, codes.Unavailable)
}

func TestLocalConnStatusOfPlainErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code codes.Code
	}{
		{context.Canceled, codes.Canceled},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
		{proto.Error, codes.Unknown},
	} {
		if got := asStatus(tc.err); status.Code(got) != tc.code || !strings.Contains(got.Error(), tc.err.Error()) {
			t.Errorf("asStatus(%v) = %v, want code %v with its text", tc.err, got, tc.code)
		}
	}
}
