package controlplane

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/apiserver"
	"github.com/kubette/kubette/internal/apiserver/flowcontrol/bootstrap"
)

// flowControlResync is how often the APF bootstrap configuration is checked again, as
// upstream's priority-and-fairness-config-producer post-start hook.
const flowControlResync = time.Minute

// ensureFlowControlConfig creates upstream's mandatory and suggested FlowSchemas and
// PriorityLevelConfigurations (package bootstrap), retrying each second until readyCtx
// ends, then keeps them every minute until ctx ends.
func ensureFlowControlConfig(ctx, readyCtx context.Context, srv *apiserver.Server, log *slog.Logger) error {
	client, err := kubernetes.NewForConfig(srv.LoopbackConfig())
	if err != nil {
		return fmt.Errorf("loopback client: %w", err)
	}
	fc := client.FlowcontrolV1()
	for {
		err = bootstrap.Ensure(readyCtx, fc)
		if err == nil {
			break
		}
		select {
		case <-readyCtx.Done():
			return fmt.Errorf("ensure the API priority and fairness configuration: %w", err)
		case <-time.After(time.Second):
		}
	}
	go func() {
		t := time.NewTicker(flowControlResync)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := bootstrap.Ensure(ctx, fc); err != nil && ctx.Err() == nil {
					log.Warn("API priority and fairness configuration", "err", err)
				}
			}
		}
	}()
	return nil
}
