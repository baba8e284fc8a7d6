package controlplane

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/apiserver"
	"github.com/kubette/kubette/internal/rbacpolicy"
)

// ensureDefaultPolicy creates and reconciles the default RBAC policy (package
// rbacpolicy) through the server's loopback client, as upstream's rbac/bootstrap-roles
// post-start hook: until it succeeds (retried each second, as long as ctx lasts) the
// server is not ready.
func ensureDefaultPolicy(ctx context.Context, srv *apiserver.Server, log *slog.Logger) error {
	client, err := kubernetes.NewForConfig(srv.LoopbackConfig())
	if err != nil {
		return fmt.Errorf("loopback client: %w", err)
	}
	policy := rbacpolicy.Default()
	for {
		err := rbacpolicy.Reconcile(ctx, client, policy, log)
		if err == nil {
			return nil
		}
		log.Warn("reconciling the default RBAC policy failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("default RBAC policy: %w", err)
		case <-time.After(time.Second):
		}
	}
}
