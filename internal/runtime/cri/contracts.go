package cri

import (
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/kubette/kubette/internal/runtime/image"
	"github.com/kubette/kubette/internal/runtime/network"
	"github.com/kubette/kubette/internal/runtime/oci"
	"github.com/kubette/kubette/internal/runtime/runc"
)

// The types of the consumer interfaces are those of docs/node.md: aliases of the real
// packages' types, so the concrete types satisfy Images, Containers and Network.

// Image is an image in the store.
type Image = image.Image

// Auth is a registry credential.
type Auth = image.Auth

// PullOptions configures a pull.
type PullOptions = image.PullOptions

// ErrImageNotFound is the image store's not-found error.
var ErrImageNotFound = image.ErrNotFound

// ContainerState is what the low-level runtime reports.
type ContainerState = runc.State

// PodNamespaces are what a pod's containers share besides the network (runc.PodNamespaces).
type PodNamespaces = runc.PodNamespaces

// PIDHolder is the process holding a pod's shared pid namespace (runc.PIDHolder).
type PIDHolder = runc.PIDHolder

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
