package cri

import (
	"errors"
	"net/netip"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The types below mirror the contracts of docs/node.md. They become aliases of the real
// packages' types (runtime/image, runtime/runc, runtime/network, runtime/oci) once those land,
// so the concrete types satisfy Images, Containers and Network unchanged.

// Image is an image in the store (runtime/image.Image).
type Image struct {
	ID          string
	RepoTags    []string
	RepoDigests []string
	Size        uint64
	Config      ocispec.ImageConfig
}

// Auth is a registry credential (runtime/image.Auth).
type Auth struct{ Username, Password, Auth, IdentityToken, RegistryToken string }

// PullOptions configures a pull (runtime/image.PullOptions).
type PullOptions struct {
	Auth     *Auth
	Insecure func(registry string) bool
}

// ErrImageNotFound is the image store's not-found error (runtime/image.ErrNotFound).
var ErrImageNotFound = errors.New("image not found")

// ContainerState is what the low-level runtime reports (runtime/runc.State).
type ContainerState struct {
	Status                RuncStatus
	Pid                   int
	ExitCode              int
	StartedAt, FinishedAt time.Time
	OOMKilled             bool
	Reason                string
	Message               string
}

// RuncStatus is "created", "running" or "stopped" (runtime/runc.Status).
type RuncStatus string

// PortMapping is a host port of a pod (runtime/network.PortMapping).
type PortMapping struct {
	Protocol                string
	ContainerPort, HostPort int32
	HostIP                  string
}

// Pod is what the network needs to set up a sandbox (runtime/network.Pod).
type Pod struct {
	SandboxID, Namespace, Name, UID string
	Ports                           []PortMapping
}

// NetworkResult is a sandbox's network (runtime/network.Result).
type NetworkResult struct {
	NetNSPath string
	IPs       []netip.Addr
}

// SpecInput is the input of the OCI spec generator (runtime/oci.Input).
type SpecInput struct {
	Container      *runtimeapi.ContainerConfig
	Sandbox        *runtimeapi.PodSandboxConfig
	Image          ocispec.ImageConfig
	Rootfs         string
	NetNSPath      string
	Hostname       string
	CgroupsPath    string
	SandboxFiles   struct{ Hostname, Hosts, ResolvConf string }
	MaxOOMScoreAdj int
}

// SpecFunc builds an OCI spec (runtime/oci.Spec).
type SpecFunc func(in SpecInput) (*specs.Spec, error)
