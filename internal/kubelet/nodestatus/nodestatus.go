// Package nodestatus is the kubelet's node agent: it registers the Node (or adopts the one a
// previous kubelet of the same name registered), keeps its Lease in kube-node-lease renewed,
// and reports the node's status — capacity, allocatable, nodeInfo, addresses, the kubelet's
// port and the Ready / MemoryPressure / DiskPressure / PIDPressure conditions — as upstream's
// kubelet does.
package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/controlplane"
)

// ReadyFunc reports whether the container runtime and its network are ready: nil when they
// are, else why not (it becomes the Ready condition's message).
type ReadyFunc func(ctx context.Context) error

// Config configures the node agent.
type Config struct {
	// NodeName is the Node's name (required).
	NodeName string
	// Client talks to the API server (required).
	Client kubernetes.Interface
	// PodCIDR is written to spec.podCIDR(s) when the Node has none.
	PodCIDR string
	// KubeletPort is published as status.daemonEndpoints.kubeletEndpoint.Port.
	KubeletPort int32
	// Addresses returns the node's addresses (default: DefaultAddresses(NodeName)).
	Addresses func() []v1.NodeAddress
	// Labels are added to the Node at registration, besides kubernetes.io/hostname,
	// kubernetes.io/os and kubernetes.io/arch (and their beta twins).
	Labels map[string]string
	// Taints are set on the Node at registration.
	Taints []v1.Taint
	// Runtime reports the runtime's readiness (required).
	Runtime ReadyFunc
	// Logger receives the agent's logs (default slog.Default()).
	Logger *slog.Logger

	// DataDir is the filesystem that ephemeral-storage measures (default /var/lib/kubette).
	DataDir string
	// Version is the kubelet's version (default: kubette's, as `kubette version` prints it).
	Version string
	// RuntimeVersion is status.nodeInfo.containerRuntimeVersion (default "kubette://<version>").
	RuntimeVersion string
	// StatusInterval is how often the status is posted (default 10s, upstream's
	// nodeStatusUpdateFrequency); a change of readiness posts it at once.
	StatusInterval time.Duration
	// ReadyInterval is how often Runtime is asked (default 1s).
	ReadyInterval time.Duration
	// LeaseDuration is the Lease's leaseDurationSeconds (default 40s); it is renewed every
	// quarter of it (10s), as upstream.
	LeaseDuration time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Agent registers the node and keeps its Lease and status fresh. Create it with New.
type Agent struct {
	cfg Config
	log *slog.Logger

	mu   sync.Mutex
	node *v1.Node // the last Node the API server returned
}

// New validates cfg and fills its defaults.
func New(cfg Config) (*Agent, error) {
	switch {
	case cfg.NodeName == "":
		return nil, errors.New("nodestatus: NodeName is required")
	case cfg.Client == nil:
		return nil, errors.New("nodestatus: Client is required")
	case cfg.Runtime == nil:
		return nil, errors.New("nodestatus: Runtime is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Addresses == nil {
		name := cfg.NodeName
		cfg.Addresses = func() []v1.NodeAddress { return DefaultAddresses(name) }
	}
	if cfg.DataDir == "" {
		cfg.DataDir = "/var/lib/kubette"
	}
	if cfg.Version == "" {
		cfg.Version = controlplane.Version.GitVersion
	}
	if cfg.RuntimeVersion == "" {
		cfg.RuntimeVersion = "kubette://" + strings.TrimPrefix(cfg.Version, "v")
	}
	if cfg.StatusInterval <= 0 {
		cfg.StatusInterval = 10 * time.Second
	}
	if cfg.ReadyInterval <= 0 {
		cfg.ReadyInterval = time.Second
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = 40 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Agent{cfg: cfg, log: cfg.Logger.With("node", cfg.NodeName)}, nil
}

// Run registers the node (retrying until it succeeds), then renews the Lease and posts the
// status until ctx is done.
func (a *Agent) Run(ctx context.Context) error {
	if err := retryUntilDone(ctx, func() error {
		if err := a.register(ctx); err != nil {
			a.log.Warn("register node", "err", err)
			return err
		}
		return nil
	}); err != nil {
		return fmt.Errorf("register node %s: %w", a.cfg.NodeName, err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		a.runLease(ctx)
	}()
	go func() {
		defer wg.Done()
		a.runStatus(ctx)
	}()
	wg.Wait()
	return nil
}

// current returns the last Node seen (nil before registration).
func (a *Agent) current() *v1.Node {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.node
}

func (a *Agent) setCurrent(n *v1.Node) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.node = n
}

// retryUntilDone runs f until it succeeds or ctx is done, backing off from 100ms to 7s as upstream's
// registration.
func retryUntilDone(ctx context.Context, f func() error) error {
	delay := 100 * time.Millisecond
	for {
		if err := f(); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 7*time.Second)
	}
}
