package main

import (
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/cluster"
	"github.com/kubette/kubette/internal/proxy"
	"github.com/kubette/kubette/internal/proxy/nftables"
)

func newProxy() *cobra.Command {
	var kubeconfig, nodeName, serviceCIDR, clusterCIDR, logLevel, mode string
	var nodeIPs []string
	var minSync, syncPeriod time.Duration
	var rejectUnrouted, cleanup bool
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "Run the service proxy: Services and EndpointSlices become iptables (or nftables) rules on this node",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger(logLevel)
			if err != nil {
				return err
			}
			if cleanup {
				if err := proxy.Cleanup(cmd.Context(), proxy.ExecRunner{}); err != nil {
					return err
				}
				return nftables.Cleanup(cmd.Context(), nftables.ExecRunner{})
			}
			if kubeconfig == "" {
				return fmt.Errorf("--kubeconfig is required")
			}
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("build client: %w", err)
			}
			if nodeName == "" {
				if nodeName, err = os.Hostname(); err != nil {
					return fmt.Errorf("--node-name not given and no hostname: %w", err)
				}
			}
			o := proxy.Options{
				Client: client, NodeName: nodeName, ServiceCIDR: serviceCIDR, ClusterCIDR: clusterCIDR,
				RejectUnroutedPodCIDR: rejectUnrouted, Mode: mode, MinSyncPeriod: minSync, SyncPeriod: syncPeriod, Logger: logger,
			}
			for _, s := range nodeIPs {
				a, err := netip.ParseAddr(s)
				if err != nil {
					return fmt.Errorf("--node-ip %q: %w", s, err)
				}
				o.NodeIPs = append(o.NodeIPs, a)
			}
			p, err := proxy.New(o)
			if err != nil {
				return err
			}
			return p.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the proxy")
	cmd.Flags().StringVar(&nodeName, "node-name", "", "this node's name (default: the hostname)")
	cmd.Flags().StringVar(&serviceCIDR, "service-cidr", "10.96.0.0/12", "the ClusterIP range; packets to it that were not DNATed are rejected locally")
	cmd.Flags().StringVar(&clusterCIDR, "cluster-cidr", cluster.DefaultClusterCIDR, "the pod range: ClusterIP traffic from outside it is masqueraded")
	cmd.Flags().StringSliceVar(&nodeIPs, "node-ip", nil, "addresses NodePorts answer on (default: every local address but 127.0.0.0/8)")
	cmd.Flags().DurationVar(&minSync, "min-sync-period", proxy.DefaultMinSyncPeriod, "least time between two syncs of the rules")
	cmd.Flags().DurationVar(&syncPeriod, "sync-period", time.Hour, "time between full syncs, which compare every rule with iptables-save and rewrite what differs")
	cmd.Flags().BoolVar(&rejectUnrouted, "reject-unrouted-pod-cidr", true, "reject packets to the Nodes' pod CIDRs (inside the cluster CIDR) that no local route serves (pods of simulated nodes); the rest of the cluster CIDR is not touched")
	cmd.Flags().StringVar(&mode, "mode", proxy.ModeIPTables, "iptables or nftables (one nft table with verdict maps, applied with nft -f; needs the nft tool); starting one mode removes the other's rules")
	cmd.Flags().BoolVar(&cleanup, "cleanup", false, "remove every chain, jump and nftables table the proxy installed (either mode), then exit")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}
