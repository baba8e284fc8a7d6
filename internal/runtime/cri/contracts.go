package cri

import (
	"errors"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/kubette/kubette/internal/runtime/network"
	"github.com/kubette/kubette/internal/runtime/oci"
	"github.com/kubette/kubette/internal/runtime/runc"
)

// The types of the consumer interfaces are those of docs/node.md: aliases of the real
// packages' types, so the concrete types satisfy Images, Containers and Network.

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

// ContainerState is what the low-level runtime reports.
type ContainerState = runc.State

// RuncStatus is "created", "running" or "stopped".
type RuncStatus = runc.Status

// PortMapping is a host port of a pod.
type PortMapping = network.PortMapping

// Pod is what the network needs to set up a sandbox.
type Pod = network.Pod

// NetworkResult is a sandbox's network.
type NetworkResult = network.Result

// SpecInput is the input of the OCI spec generator.
type SpecInput = oci.Input

// SpecFunc builds an OCI spec (oci.Spec, or a wrapper that fills the runtime's limits).
type SpecFunc func(in SpecInput) (*specs.Spec, error)
