// Package cluster is the composition root of `kubette up`: the control plane
// (etcd, certificates, the API server) and, in the same process, the controller
// manager, the scheduler and the other components, each talking to the API server with its own
// identity: in-process through the API server's handler chain (package inprocess), or over
// HTTPS with its client certificate when controlplane.Config.ComponentsOverTLS is set.
package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/kubette/kubette/internal/apiserver"
	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controllermanager"
	"github.com/kubette/kubette/internal/controlplane"
	"github.com/kubette/kubette/internal/hostcheck"
	"github.com/kubette/kubette/internal/scheduler"
)

// Config configures a whole cluster on this machine.
type Config struct {
	controlplane.Config
	// ControllerManager runs the controller manager in this process.
	ControllerManager bool
	// Scheduler runs the scheduler in this process.
	Scheduler bool
	// Node, when set, makes this machine a node: the built-in runtime and the kubelet.
	Node *NodeConfig
	// Ingress, when set, runs the ingress controller, which drives nginx.
	Ingress *IngressConfig
}

// Start brings up the control plane and the enabled components; everything stops when
// ctx is done, components first. Wait on the returned control plane for the end.
func Start(ctx context.Context, cfg Config) (*controlplane.ControlPlane, error) {
	if cfg.Node != nil {
		// Refuse before anything starts, naming what is missing.
		if err := CheckNode(*cfg.Node); err != nil {
			return nil, fmt.Errorf("this machine cannot run pods: %w (run with --node=false for a control plane only)", err)
		}
	}
	if cfg.Ingress != nil {
		nginx := cfg.Ingress.NginxBinary
		if nginx == "" {
			nginx = hostcheck.Binary("nginx")
		} else if st, err := os.Stat(nginx); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			nginx = "" // the one named is not there
		}
		if err := hostcheck.Error([]hostcheck.Requirement{hostcheck.NginxRequirement(nginx)}); err != nil {
			return nil, fmt.Errorf("the ingress controller cannot run: %w (run with --ingress=false for none)", err)
		}
	}
	var components sync.WaitGroup
	cfg.Config.BeforeShutdown = components.Wait
	cp, err := controlplane.Start(ctx, cfg.Config)
	if err != nil {
		return nil, err
	}
	if cfg.ControllerManager {
		restCfg, err := cp.ComponentConfig("controller-manager", "system:kube-controller-manager")
		if err != nil {
			return nil, fmt.Errorf("controller manager credentials: %w", err)
		}
		log := cfg.Logger.With("component", "controller-manager")
		components.Add(1)
		go func() {
			defer components.Done()
			campaign(ctx, log, func(ctx context.Context) error {
				return controllermanager.Run(ctx, controller.ManagerOptions{Config: restCfg, RootCA: cp.CA().CertPEM,
					ClusterSigning: cp.CA(), LeaderElect: true, Logger: log,
					ControllerConfig: cp.ServiceAccountConfig})
			})
		}()
	}
	if cfg.Scheduler {
		restCfg, err := cp.ComponentConfig("scheduler", "system:kube-scheduler")
		if err != nil {
			return nil, fmt.Errorf("scheduler credentials: %w", err)
		}
		log := cfg.Logger.With("component", "scheduler")
		components.Add(1)
		go func() {
			defer components.Done()
			campaign(ctx, log, func(ctx context.Context) error {
				return scheduler.RunWithLeaderElection(ctx, restCfg, scheduler.Options{LeaderElect: true, Logger: log})
			})
		}()
	}
	run := func(name string, f func(context.Context) error) {
		components.Add(1)
		go func() {
			defer components.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				cfg.Logger.Error(name+" stopped", "err", err)
			}
		}()
	}
	if cfg.Node != nil {
		if err := startNode(ctx, cp, cfg.DataDir, cfg.ServiceCIDR(), *cfg.Node, cfg.Logger, run); err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
	}
	if cfg.Ingress != nil {
		if err := startIngress(ctx, cp, cfg.DataDir, *cfg.Ingress, cfg.Logger, run); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

// campaign runs a leader-elected component until ctx is done. Upstream's controller
// manager and scheduler exit when they lose their lease (to another instance, or after
// failing to renew it in time) and their supervisor starts them again to campaign anew;
// inside `up` this loop is that supervisor, waiting a little longer after each failure.
func campaign(ctx context.Context, log *slog.Logger, run func(context.Context) error) {
	wait := time.Second
	for {
		start := time.Now()
		err := run(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > time.Minute {
			wait = time.Second // it led for a while: this is no crash loop
		}
		log.Error("stopped; campaigning for the lease again", "err", err, "after", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// ServiceCIDR is the service range the API server allocates from: the proxy guards it,
// and its 10th address is the cluster DNS Service's.
func (c Config) ServiceCIDR() string {
	if c.ServiceClusterIPRange == "" {
		return apiserver.DefaultServiceClusterIPRange
	}
	return c.ServiceClusterIPRange
}

// Version is the Kubernetes version kubette reports.
var Version = controlplane.Version
