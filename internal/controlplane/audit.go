package controlplane

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/kubette/kubette/internal/apiserver/audit"
)

// AuditConfig configures the API server's audit log, as upstream's --audit-policy-file
// and --audit-log-* flags: it is on when both PolicyFile and LogConfig.Path are set.
type AuditConfig struct {
	// PolicyFile is an audit.k8s.io/v1 Policy (YAML or JSON).
	PolicyFile string
	// LogConfig is the log file, its rotation and format.
	audit.LogConfig
}

// openAudit loads the policy and starts the log writer. stop ends the writer after
// writing what is buffered and waits for it; it must be called after the HTTP server
// has stopped, so that the last requests are logged. Without a policy file or a log path
// the auditor is nil (no audit log).
func openAudit(ctx context.Context, cfg AuditConfig, log *slog.Logger) (a *audit.Auditor, stop func(), err error) {
	nop := func() {}
	if cfg.PolicyFile == "" || cfg.Path == "" {
		if cfg.PolicyFile != "" || cfg.Path != "" {
			log.Warn("no audit log: it needs both --audit-policy-file and --audit-log-path")
		}
		return nil, nop, nil
	}
	policy, warnings, err := audit.LoadPolicyFile(cfg.PolicyFile)
	if err != nil {
		return nil, nop, fmt.Errorf("--audit-policy-file: %w", err)
	}
	for _, w := range warnings {
		log.Warn("audit policy contains errors, decoded leniently", "file", cfg.PolicyFile, "err", w)
	}
	// The writer outlives ctx: it stops once the server has served its last request.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l, err := audit.NewLog(wctx, cfg.LogConfig, log)
	if err != nil {
		cancel()
		return nil, nop, fmt.Errorf("--audit-log-path: %w", err)
	}
	return audit.New(policy, l), func() { cancel(); <-l.Done() }, nil
}
