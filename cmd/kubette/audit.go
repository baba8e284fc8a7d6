package main

import (
	"github.com/spf13/cobra"

	"github.com/kubette/kubette/internal/apiserver/audit"
	"github.com/kubette/kubette/internal/controlplane"
)

// auditFlags are upstream's --audit-policy-file and --audit-log-* flags.
type auditFlags struct {
	policyFile, path, format    string
	maxAge, maxBackups, maxSize int
	compress                    bool
}

func (a *auditFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&a.policyFile, "audit-policy-file", "", "audit.k8s.io/v1 Policy saying which requests the audit log records and at which level; the audit log is on with both it and --audit-log-path")
	cmd.Flags().StringVar(&a.path, "audit-log-path", "", "file the audit log is written to, one audit.k8s.io/v1 Event per line; - is standard output")
	cmd.Flags().IntVar(&a.maxAge, "audit-log-maxage", 0, "days to keep rotated audit log files (0: no limit)")
	cmd.Flags().IntVar(&a.maxBackups, "audit-log-maxbackup", 0, "rotated audit log files to keep (0: no limit)")
	cmd.Flags().IntVar(&a.maxSize, "audit-log-maxsize", 0, "megabytes at which the audit log file is rotated (0: 100)")
	cmd.Flags().BoolVar(&a.compress, "audit-log-compress", false, "gzip rotated audit log files")
	cmd.Flags().StringVar(&a.format, "audit-log-format", audit.FormatJSON, "format of the audit log: json (one Event object per line) or legacy (one line of text per event)")
}

func (a *auditFlags) config() controlplane.AuditConfig {
	return controlplane.AuditConfig{PolicyFile: a.policyFile, LogConfig: audit.LogConfig{Path: a.path, MaxAge: a.maxAge,
		MaxBackups: a.maxBackups, MaxSize: a.maxSize, Compress: a.compress, Format: a.format}}
}
