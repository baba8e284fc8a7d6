package kubelet

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RuntimeService is the part of the CRI runtime service the kubelet uses. Its methods have the
// shapes of k8s.io/cri-api/pkg/apis.RuntimeService, so the CRI fakes in
// k8s.io/cri-api/pkg/apis/testing and the gRPC client in internal/kubelet/cri both satisfy it.
type RuntimeService interface {
	// Status reports whether the runtime and its network are ready.
	Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error)

	// RunPodSandbox creates and starts a pod sandbox and returns its ID.
	RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error)
	// StopPodSandbox stops a sandbox and force-stops its remaining containers.
	StopPodSandbox(ctx context.Context, podSandboxID string) error
	// RemovePodSandbox removes a sandbox and its containers.
	RemovePodSandbox(ctx context.Context, podSandboxID string) error
	// PodSandboxStatus returns a sandbox's status (its IPs among it).
	PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error)
	// ListPodSandbox lists sandboxes matching filter (nil: all).
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)

	// CreateContainer creates a container in a sandbox and returns its ID.
	CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
	// StartContainer starts a created container.
	StartContainer(ctx context.Context, containerID string) error
	// StopContainer stops a container, waiting up to timeout seconds before killing it.
	StopContainer(ctx context.Context, containerID string, timeout int64) error
	// RemoveContainer removes a container.
	RemoveContainer(ctx context.Context, containerID string) error
	// ListContainers lists containers matching filter (nil: all).
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	// ContainerStatus returns a container's status.
	ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	// ExecSync runs cmd in a container and returns its output (probes use it).
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout, stderr []byte, err error)
}

// ImageService is the part of the CRI image service the kubelet uses, with the shapes of
// k8s.io/cri-api/pkg/apis.ImageManagerService.
type ImageService interface {
	// ImageStatus returns the image's status; its Image is nil when the image is not present.
	ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error)
	// PullImage pulls an image and returns its reference (ID).
	PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, podSandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
}

// VolumeManager materialises a pod's volumes on the node and turns its containers'
// volumeMounts into CRI mounts.
type VolumeManager interface {
	// Setup materialises the pod's volumes (idempotent; a later call updates their contents);
	// allocatable is the node's, the default of downwardAPI limits a container does not set.
	Setup(ctx context.Context, pod *v1.Pod, allocatable v1.ResourceList) error
	Mounts(pod *v1.Pod, c *v1.Container) ([]*runtimeapi.Mount, error) // CRI mounts for a container's volumeMounts
	TearDown(ctx context.Context, uid types.UID) error                // after the pod is gone
}

// ProbeManager runs the liveness, readiness and startup probes of the pods' containers.
type ProbeManager interface {
	Update(pod *v1.Pod, status *v1.PodStatus) // (re)start/stop probe workers for the pod's current containers
	Remove(uid types.UID)
	Ready(uid types.UID, container string) bool   // readiness (true when no readiness probe)
	Started(uid types.UID, container string) bool // startup (true when no startup probe)
	Results() <-chan ProbeResult                  // changes only; you re-sync the pod; Liveness failure → restart it
}

// ProbeResult is a change in a probe's outcome for one container.
type ProbeResult struct {
	UID         types.UID
	Container   string
	ContainerID string // the runtime's ID (no "kubette://" prefix)
	Kind        string // "liveness"|"readiness"|"startup"
	Success     bool
}

// Probe kinds of ProbeResult.Kind.
const (
	ProbeLiveness  = "liveness"
	ProbeReadiness = "readiness"
	ProbeStartup   = "startup"
)
