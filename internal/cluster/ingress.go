package cluster

import (
	"context"
	"fmt"
	"log/slog"

	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/controlplane"
	"github.com/kubette/kubette/internal/ingress"
)

// IngressConfig runs the ingress controller (nginx) in `up`.
type IngressConfig struct {
	// HTTPPort and HTTPSPort are where nginx listens (80 and 443 by default).
	HTTPPort, HTTPSPort int
	// NginxBinary is the nginx executable (default: nginx on PATH).
	NginxBinary string
}

// startIngress creates the IngressClass `nginx` (the default class) and runs the controller.
func startIngress(ctx context.Context, cp *controlplane.ControlPlane, dataDir string, cfg IngressConfig, log *slog.Logger, run func(name string, f func(context.Context) error)) error {
	restCfg, err := cp.ComponentConfig("ingress", "system:kubette-ingress-controller")
	if err != nil {
		return fmt.Errorf("ingress controller credentials: %w", err)
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("ingress controller client: %w", err)
	}
	c, err := ingress.New(ingress.Options{
		Client: client, DataDir: dataDir, NginxBinary: cfg.NginxBinary,
		HTTPPort: cfg.HTTPPort, HTTPSPort: cfg.HTTPSPort, DefaultClass: true,
		Logger: log.With("component", "ingress"),
	})
	if err != nil {
		return fmt.Errorf("ingress controller: %w", err)
	}
	run("ingress controller", func(ctx context.Context) error {
		if err := c.EnsureClass(ctx); err != nil {
			return fmt.Errorf("ingress class: %w", err)
		}
		return c.Run(ctx)
	})
	return nil
}
