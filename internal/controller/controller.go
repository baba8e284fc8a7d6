// Package controller holds the controller manager: the explicit registry of
// controllers (name → constructor), the shared clients and informers they are
// built from, and the leader-elected loop that runs them. Each controller lives
// in its own package below this one and reaches the cluster only through the API.
package controller

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/record"

	"github.com/kubette/kubette/internal/pki"
)

// Deps are what a controller is built from. Informers are shared: a constructor only
// registers the informers it needs; the manager starts them after every constructor ran.
type Deps struct {
	// Client is a typed clientset of the controller manager (high client-side limits).
	Client kubernetes.Interface
	// Config is the configuration Client was built from (the controller's identity and
	// User-Agent, the same limits, JSON bodies), for the clients a clientset does not
	// hold: the scale subresource of any kind, the metrics APIs. Shared: copy it
	// (rest.CopyConfig) before changing it. Nil in unit tests.
	Config *rest.Config
	// Informers is the shared informer factory for typed resources.
	Informers informers.SharedInformerFactory
	// Metadata is a metadata-only client for any resource (garbage collector, namespace deleter).
	Metadata metadata.Interface
	// MetadataInformers is the shared factory of metadata-only informers.
	MetadataInformers metadatainformer.SharedInformerFactory
	// Discovery lists the served resources.
	Discovery discovery.DiscoveryInterface
	// RESTMapper maps kinds to resources, refreshed from Discovery on a miss.
	RESTMapper *restmapper.DeferredDiscoveryRESTMapper
	// Logger receives the controller's logs (never nil from NewDeps).
	Logger *slog.Logger
	// RootCA is the cluster's CA bundle (PEM) that pods use to verify the API server
	// (the root CA publisher puts it in every namespace); see ManagerOptions.RootCA.
	RootCA []byte
	// ClusterSigning is the CA (with its key) the CSR signers issue certificates from
	// (upstream's --cluster-signing-cert-file and -key-file); nil signs nothing.
	ClusterSigning *pki.CA
	// ClusterSigningDuration is the longest certificate the signers issue (upstream's
	// --cluster-signing-duration); zero means a year.
	ClusterSigningDuration time.Duration
	// Recorder returns an event recorder reporting as the named component
	// (e.g. "deployment-controller"), as upstream controllers do.
	Recorder func(component string) record.EventRecorder
}

// Runner is a built controller.
type Runner interface {
	// Run waits for its informers to sync, then runs workers until ctx is done.
	Run(ctx context.Context, workers int)
}

// Constructor builds one controller from the shared dependencies.
type Constructor func(d Deps) (Runner, error)
