package cri

import (
	"context"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Images is what the server needs of the image store (runtime/image.Store).
type Images interface {
	Pull(ctx context.Context, ref string, opts PullOptions) (Image, error)
	Get(ref string) (Image, error)
	List() []Image
	Remove(ref string) error
	Mount(imageID, containerDir, writableDir string) (rootfs string, err error)
	Unmount(containerDir string) error
	Usage() (usedBytes, inodes uint64, err error)
}

// Containers is what the server needs of the low-level runtime (runtime/runc.Runtime).
type Containers interface {
	Create(ctx context.Context, id, bundleDir, logPath string) error
	Start(ctx context.Context, id string) error
	State(ctx context.Context, id string) (ContainerState, error)
	Kill(ctx context.Context, id string, sig syscall.Signal) error
	Delete(ctx context.Context, id string) error
	Exec(ctx context.Context, id string, cmd []string, timeout time.Duration) (stdout, stderr []byte, exitCode int, err error)
	List(ctx context.Context) ([]string, error)
	// ReopenLog makes the container's shim reopen its log file (not in docs/node.md's
	// contract; runtime/runc offers it for CRI ReopenContainerLog).
	ReopenLog(ctx context.Context, id string) error
	// SetupPodNamespaces makes what a pod's containers share in its sandbox directory: the
	// IPC namespace and /dev/shm (ipc), the pid namespace (pid, shareProcessNamespace).
	SetupPodNamespaces(dir string, ipc, pid bool) (PodNamespaces, error)
	// StopPodNamespaces ends the pod's pid namespace; RemovePodNamespaces removes them all.
	StopPodNamespaces(ns PodNamespaces) error
	RemovePodNamespaces(ns PodNamespaces) error
}

// Network is what the server needs of the pod network (runtime/network.Manager).
type Network interface {
	SetPodCIDR(cidr string) error
	Ready() error
	Setup(ctx context.Context, pod Pod) (NetworkResult, error)
	Teardown(ctx context.Context, sandboxID string) error
	Status(sandboxID string) (NetworkResult, error)
}

// Streaming is the streaming server (runtime/streaming.Server): it checks a streaming request
// and returns the single-use URL that serves it.
type Streaming interface {
	GetExec(*runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error)
	GetAttach(*runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error)
	GetPortForward(*runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error)
}
