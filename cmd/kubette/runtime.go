package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/cluster"
	"github.com/kubette/kubette/internal/runtime"
	"github.com/kubette/kubette/internal/runtime/streaming"
)

func newRuntime() *cobra.Command {
	var cfg runtime.Config
	var logLevel, kubeconfig string
	cmd := &cobra.Command{
		Use:   "runtime",
		Short: "Run the built-in container runtime: CRI on unix://DATA_DIR/cri.sock (images, runc containers, CNI pod network)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger(logLevel)
			if err != nil {
				return err
			}
			cfg.Logger = logger
			cfg.Version = cluster.Version.GitVersion
			if kubeconfig != "" {
				rc, err := restConfig(kubeconfig)
				if err != nil {
					return err
				}
				if cfg.Client, err = kubernetes.NewForConfig(rc); err != nil {
					return fmt.Errorf("runtime client: %w", err)
				}
			}
			return runtime.Run(cmd.Context(), cfg)
		},
	}
	cmd.Flags().StringVar(&cfg.DataDir, "data-dir", defaultDataDir(), "directory for images, containers, sandboxes and the CRI socket")
	cmd.Flags().StringVar(&cfg.Runc, "runc", "runc", "the OCI runtime binary (runc or crun)")
	cmd.Flags().StringSliceVar(&cfg.CNIPluginDirs, "cni-plugin-dirs", []string{"/usr/lib/cni", "/opt/cni/bin"}, "directories holding the CNI plugins")
	cmd.Flags().StringVar(&cfg.Bridge, "bridge", "kubette0", "name of the pods' bridge")
	cmd.Flags().StringVar(&cfg.StreamAddr, "streaming-address", streaming.DefaultAddr, "where the streaming server (exec, attach, port-forward) listens; the kubelet of this machine proxies to it")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig whose user records the pods' runtime steps (CNI ADD, runc create, start, kill, delete) as Events; none: no Events, no API server needed")
	cmd.Flags().StringVar(&cfg.NodeName, "node-name", "", "the node the Events report (default: the host name)")
	cmd.Flags().Var(insecureRegistryFlag{&cfg.InsecureRegistries}, "insecure-registry", insecureRegistryUsage)
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}
