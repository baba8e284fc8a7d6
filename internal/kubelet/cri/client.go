// Package cri is the kubelet's client of a CRI runtime: the runtime and image services over
// gRPC on a unix socket (or an in-process connection to kubette's own runtime), with a
// deadline on every call.
package cri

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Per-call deadlines.
const (
	// CallTimeout bounds every call but pulls and container stops.
	CallTimeout = 2 * time.Minute
	// PullTimeout bounds an image pull.
	PullTimeout = 30 * time.Minute
	// maxMsgSize is the largest gRPC message accepted or sent (as the kubelet's 16 MiB).
	maxMsgSize = 16 << 20
)

// Client talks to a CRI runtime. Its methods have the shapes of k8s.io/cri-api/pkg/apis
// RuntimeService and ImageManagerService. It is safe for concurrent use.
type Client struct {
	close   func() error
	runtime runtimeapi.RuntimeServiceClient
	images  runtimeapi.ImageServiceClient
}

// Dial connects to endpoint ("unix:///path/cri.sock") and checks that the runtime answers
// Version. The connection is closed by Close.
func Dial(ctx context.Context, endpoint string) (*Client, error) {
	path, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok || path == "" {
		return nil, fmt.Errorf("dial CRI %q: only unix:///path endpoints are supported", endpoint)
	}
	conn, err := grpc.NewClient("unix://"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)),
	)
	if err != nil {
		return nil, fmt.Errorf("dial CRI %q: %w", endpoint, err)
	}
	c := newClient(conn, conn.Close)
	if _, err := c.Version(ctx, "v1"); err != nil {
		conn.Close()
		return nil, fmt.Errorf("dial CRI %q: %w", endpoint, err)
	}
	return c, nil
}

// New makes a client of an established connection — for `kubette up`'s kubelet, the
// runtime's in-process one — and checks that the runtime answers Version. Close leaves the
// connection to its owner.
func New(ctx context.Context, conn grpc.ClientConnInterface) (*Client, error) {
	c := newClient(conn, func() error { return nil })
	if _, err := c.Version(ctx, "v1"); err != nil {
		return nil, err
	}
	return c, nil
}

func newClient(conn grpc.ClientConnInterface, close func() error) *Client {
	return &Client{close: close, runtime: runtimeapi.NewRuntimeServiceClient(conn), images: runtimeapi.NewImageServiceClient(conn)}
}

// Close closes the connection Dial made.
func (c *Client) Close() error { return c.close() }

func call(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

// Version returns the runtime's name and versions.
func (c *Client) Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error) {
	ctx, cancel := call(ctx, CallTimeout)
	defer cancel()
	r, err := c.runtime.Version(ctx, &runtimeapi.VersionRequest{Version: apiVersion})
	if err != nil {
		return nil, fmt.Errorf("CRI Version: %w", err)
	}
	return r, nil
}

// Status reports the runtime's conditions.
func (c *Client) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	ctx, cancel := call(ctx, CallTimeout)
	defer cancel()
	r, err := c.runtime.Status(ctx, &runtimeapi.StatusRequest{Verbose: verbose})
	if err != nil {
		return nil, fmt.Errorf("CRI Status: %w", err)
	}
	return r, nil
}

// UpdateRuntimeConfig hands the runtime its configuration (the pod CIDR).
func (c *Client) UpdateRuntimeConfig(ctx context.Context, cfg *runtimeapi.RuntimeConfig) error {
	ctx, cancel := call(ctx, CallTimeout)
	defer cancel()
	if _, err := c.runtime.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: cfg}); err != nil {
		return fmt.Errorf("CRI UpdateRuntimeConfig: %w", err)
	}
	return nil
}

// RunPodSandbox creates and starts a sandbox.
func (c *Client) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	ctx, cancel := call(ctx, CallTimeout)
	defer cancel()
	r, err := c.runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: config, RuntimeHandler: runtimeHandler})
	if err != nil {
		return "", fmt.Errorf("CRI RunPodSandbox: %w", err)
	}
	if r.PodSandboxId == "" {
		return "", fmt.Errorf("CRI RunPodSandbox: empty sandbox ID")
	}
	return r.PodSandboxId, nil
}

// StopPodSandbox stops a sandbox.
func (c *Client) StopPodSandbox(ctx context.Context, id string) error {
	ctx, cancel := call(ctx, CallTimeout)
	defer cancel()
	if _, err := c.runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		return fmt.Errorf("CRI StopPodSandbox %s: %w", id, err)
	}
	return nil
}

// RemovePodSandbox removes a sandbox.
func (c *Client) RemovePodSandbox(ctx context.Context, id string) error {
	ctx, cancel := call(ctx, CallTimeout)
	defer cancel()
	if _, err := c.runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		return fmt.Errorf("CRI RemovePodSandbox %s: %w", id, err)
	}
	return nil
}

// PodSandboxStatus returns a sandbox's status.
func (c *Client) PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	ctx, cancel := call(ctx, CallTimeout)
	defer cancel()
	r, err := c.runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: verbose})
	if err != nil {
		return nil, fmt.Errorf("CRI PodSandboxStatus %s: %w", id, err)
	}
	return r, nil
}

// ListPodSandbox lists sandboxes.
func (c *Client) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	ctx, cancel := call(ctx, CallTimeout)
	defer cancel()
	r, err := c.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: filter})
	if err != nil {
		return nil, fmt.Errorf("CRI ListPodSandbox: %w", err)
	}
	return r.Items, nil
}

// CreateContainer creates a container in a sandbox.
func (c *Client) CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	ctx, cancel := call(ctx, CallTimeout)
	defer cancel()
	r, err := c.runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sandboxID, Config: config, SandboxConfig: sandboxConfig})
	if err != nil {
		return "", fmt.Errorf("CRI CreateContainer: %w", err)
	}
	if r.ContainerId == "" {
		return "", fmt.Errorf("CRI CreateContainer: empty container ID")
	}
	return r.ContainerId, nil
}

// StartContainer starts a created container.
func (c *Client) StartContainer(ctx context.Context, id string) error {
	ctx, cancel := call(ctx, CallTimeout)
	defer cancel()
	if _, err := c.runtime.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		return fmt.Errorf("CRI StartContainer %s: %w", id, err)
	}
	return nil
}

// StopContainer stops a container, killing it after timeout seconds; the call's own deadline
// allows for that wait.
func (c *Client) StopContainer(ctx context.Context, id string, timeout int64) error {
	ctx, cancel := call(ctx, CallTimeout+time.Duration(timeout)*time.Second)
	defer cancel()
	if _, err := c.runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: timeout}); err != nil {
		return fmt.Errorf("CRI StopContainer %s: %w", id, err)
	}
	return nil
}

// RemoveContainer removes a container.
func (c *Client) RemoveContainer(ctx context.Context, id string) error {
	ctx, cancel := call(ctx, CallTimeout)
	defer cancel()
	if _, err := c.runtime.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		return fmt.Errorf("CRI RemoveContainer %s: %w", id, err)
	}
	return nil
}

// ListContainers lists containers.
func (c *Client) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	ctx, cancel := call(ctx, CallTimeout)
	defer cancel()
	r, err := c.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: filter})
	if err != nil {
		return nil, fmt.Errorf("CRI ListContainers: %w", err)
	}
	return r.Containers, nil
}

// ListContainerStats lists the stats of the containers matching filter (nil: all).
func (c *Client) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	ctx, cancel := call(ctx, CallTimeout)
	defer cancel()
	r, err := c.runtime.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: filter})
	if err != nil {
		return nil, fmt.Errorf("CRI ListContainerStats: %w", err)
	}
	return r.Stats, nil
}

// ContainerStatus returns a container's status.
func (c *Client) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	ctx, cancel := call(ctx, CallTimeout)
	defer cancel()
	r, err := c.runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: verbose})
	if err != nil {
		return nil, fmt.Errorf("CRI ContainerStatus %s: %w", id, err)
	}
	return r, nil
}

// ExecSync runs cmd in a container. A non-zero exit code is an error, as in the kubelet's
// remote runtime client.
func (c *Client) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (stdout, stderr []byte, err error) {
	d := CallTimeout
	if timeout > 0 {
		d = timeout + 10*time.Second
	}
	ctx, cancel := call(ctx, d)
	defer cancel()
	r, err := c.runtime.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: int64(timeout / time.Second)})
	if err != nil {
		return nil, nil, fmt.Errorf("CRI ExecSync %s: %w", id, err)
	}
	if r.ExitCode != 0 {
		return r.Stdout, r.Stderr, &ExitError{Code: r.ExitCode}
	}
	return r.Stdout, r.Stderr, nil
}

// Exec asks for a streaming exec session and returns the runtime's URL for it.
func (c *Client) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	ctx, cancel := call(ctx, CallTimeout)
	defer cancel()
	r, err := c.runtime.Exec(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("CRI Exec %s: %w", req.GetContainerId(), err)
	}
	return r, nil
}

// Attach asks for a streaming attach session and returns the runtime's URL for it.
func (c *Client) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	ctx, cancel := call(ctx, CallTimeout)
	defer cancel()
	r, err := c.runtime.Attach(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("CRI Attach %s: %w", req.GetContainerId(), err)
	}
	return r, nil
}

// PortForward asks for a port-forward session into a sandbox and returns the runtime's URL
// for it.
func (c *Client) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	ctx, cancel := call(ctx, CallTimeout)
	defer cancel()
	r, err := c.runtime.PortForward(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("CRI PortForward %s: %w", req.GetPodSandboxId(), err)
	}
	return r, nil
}

// ExitError is the error of an ExecSync whose command exited non-zero.
type ExitError struct{ Code int32 }

func (e *ExitError) Error() string { return fmt.Sprintf("command exited with %d", e.Code) }

// ExitStatus returns the exit code.
func (e *ExitError) ExitStatus() int { return int(e.Code) }

// ImageStatus returns an image's status (Image nil when absent).
func (c *Client) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	ctx, cancel := call(ctx, CallTimeout)
	defer cancel()
	r, err := c.images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: image, Verbose: verbose})
	if err != nil {
		return nil, fmt.Errorf("CRI ImageStatus %s: %w", image.GetImage(), err)
	}
	return r, nil
}

// PullImage pulls an image and returns its reference.
func (c *Client) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	ctx, cancel := call(ctx, PullTimeout)
	defer cancel()
	r, err := c.images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: image, Auth: auth, SandboxConfig: sandboxConfig})
	if err != nil {
		return "", fmt.Errorf("CRI PullImage %s: %w", image.GetImage(), err)
	}
	return r.ImageRef, nil
}

// ListImages lists images.
func (c *Client) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	ctx, cancel := call(ctx, CallTimeout)
	defer cancel()
	r, err := c.images.ListImages(ctx, &runtimeapi.ListImagesRequest{Filter: filter})
	if err != nil {
		return nil, fmt.Errorf("CRI ListImages: %w", err)
	}
	return r.Images, nil
}

// RemoveImage removes an image.
func (c *Client) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	ctx, cancel := call(ctx, CallTimeout)
	defer cancel()
	if _, err := c.images.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: image}); err != nil {
		return fmt.Errorf("CRI RemoveImage %s: %w", image.GetImage(), err)
	}
	return nil
}

// ImageFsInfo reports the image filesystem's usage.
func (c *Client) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	ctx, cancel := call(ctx, CallTimeout)
	defer cancel()
	r, err := c.images.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("CRI ImageFsInfo: %w", err)
	}
	return r, nil
}
