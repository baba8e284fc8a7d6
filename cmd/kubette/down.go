package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/kubette/kubette/internal/kubelet/volume"
	"github.com/kubette/kubette/internal/proxy"
	"github.com/kubette/kubette/internal/proxy/nftables"
	"github.com/kubette/kubette/internal/runtime"
)

func newDown() *cobra.Command {
	var cfg runtime.Config
	var logLevel string
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop and remove every container, sandbox, mount and pod network device kubette made on this machine",
		Long: `Stop and remove everything the node left behind: 'kubette up' leaves pods running when it stops
(the next 'up' adopts them); 'kubette down' stops every container of DATA_DIR, unmounts their root
filesystems and the pods' tmpfs volumes, removes their network namespaces, veths and rules, deletes
the bridge, and removes the service proxy's iptables chains and nftables table. Stop 'up'
first, or its kubelet starts the pods again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger(logLevel)
			if err != nil {
				return err
			}
			cfg.Logger = logger
			if err := runtime.Down(cmd.Context(), cfg); err != nil {
				return fmt.Errorf("down: %w", err)
			}
			// The pods' tmpfs volumes (secrets, projected, memory emptyDirs), once no container uses them.
			if err := volume.New(volume.Config{RootDir: filepath.Join(cfg.DataDir, "kubelet")}).TearDownAll(cmd.Context()); err != nil {
				return fmt.Errorf("down: %w", err)
			}
			if err := proxy.Cleanup(cmd.Context(), proxy.ExecRunner{}); err != nil {
				return fmt.Errorf("down: %w", err)
			}
			if err := nftables.Cleanup(cmd.Context(), nftables.ExecRunner{}); err != nil {
				return fmt.Errorf("down: %w", err)
			}
			fmt.Println("kubette down: every container and pod network of", cfg.DataDir, "removed")
			return nil
		},
	}
	cmd.Flags().StringVar(&cfg.DataDir, "data-dir", defaultDataDir(), "the data directory of the cluster to take down")
	cmd.Flags().StringVar(&cfg.Runc, "runc", "runc", "the OCI runtime binary (runc or crun)")
	cmd.Flags().StringVar(&logLevel, "log-level", "warn", "debug, info, warn or error")
	cmd.Flags().StringVar(&cfg.Bridge, "bridge", "", "name of the pods' bridge (default: the one the cluster's runtime recorded in DATA_DIR, else kubette0)")
	return cmd
}
