package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubette/kubette/internal/sim"
)

func newSim() *cobra.Command {
	var (
		kubeconfig, cpu, memory, pods, storage, logLevel string
		labels, taints                                   []string
		o                                                sim.Options
	)
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run simulated nodes whose pods go through their lifecycle without containers (for scale tests)",
		Long: `Registers --nodes Node objects as a kubelet would, keeps their Leases and Ready condition
fresh, and moves pods bound to them to Running (with a pod IP from the node's pod CIDR) and,
once deleted, away after their grace period (at most --max-deletion-grace). Runs until
SIGTERM; the nodes stay behind unless --cleanup is given.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger(logLevel)
			if err != nil {
				return err
			}
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			o.Capacity = corev1.ResourceList{}
			for name, v := range map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory,
				corev1.ResourcePods: pods, corev1.ResourceEphemeralStorage: storage} {
				q, err := resource.ParseQuantity(v)
				if err != nil {
					return fmt.Errorf("--%s: %w", flagOf(name), err)
				}
				o.Capacity[name] = q
			}
			o.Labels = map[string]string{}
			for _, l := range labels {
				k, v, err := sim.ParseLabel(l)
				if err != nil {
					return fmt.Errorf("--label: %w", err)
				}
				o.Labels[k] = v
			}
			for _, t := range taints {
				taint, err := sim.ParseTaint(t)
				if err != nil {
					return fmt.Errorf("--taint: %w", err)
				}
				o.Taints = append(o.Taints, taint)
			}
			o.Logger = logger
			s, err := sim.New(cfg, o)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			start := time.Now()
			go func() {
				select {
				case <-s.Ready():
					fmt.Printf("kubette sim: %d nodes registered in %d ms\n", o.Nodes, time.Since(start).Milliseconds())
				case <-ctx.Done():
				}
			}()
			return s.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig to reach the API server (e.g. DATA_DIR/admin.kubeconfig)")
	f.IntVar(&o.Nodes, "nodes", 0, "number of simulated nodes")
	f.StringVar(&o.NamePrefix, "name-prefix", sim.DefaultNamePrefix, "node names are PREFIX0, PREFIX1, …")
	f.StringVar(&cpu, "cpu", "32", "cpu capacity of each node")
	f.StringVar(&memory, "memory", "256Gi", "memory capacity of each node")
	f.StringVar(&pods, "pods", "110", "pod capacity of each node")
	f.StringVar(&storage, "ephemeral-storage", "100Gi", "ephemeral-storage capacity of each node")
	f.IntVar(&o.Zones, "zones", 0, "spread nodes round-robin over this many zones (topology.kubernetes.io/zone=sim-zone-N)")
	f.StringArrayVar(&labels, "label", nil, "label of every node, key=value (repeatable)")
	f.StringArrayVar(&taints, "taint", nil, "taint of every node, key=value:Effect or key:Effect (repeatable)")
	f.StringVar(&o.PodCIDRBase, "pod-cidr", sim.DefaultPodCIDRBase, "range carved into one pod CIDR per node")
	f.IntVar(&o.NodeCIDRMaskSize, "node-cidr-mask-size", sim.DefaultNodeCIDRMaskSize, "prefix length of each node's pod CIDR")
	f.StringVar(&o.NodeIPBase, "node-ip-range", sim.DefaultNodeIPBase, "range the nodes' InternalIPs come from")
	f.DurationVar(&o.LeaseDuration, "lease-duration", sim.DefaultLeaseDuration, "leaseDurationSeconds of each node Lease")
	f.DurationVar(&o.LeaseRenewInterval, "lease-renew-interval", 0, "how often each Lease is renewed (default lease-duration/4)")
	f.DurationVar(&o.StatusInterval, "status-interval", sim.DefaultStatusInterval, "how often each node's conditions get a fresh heartbeat time")
	f.Float64Var(&o.HeartbeatQPS, "heartbeat-qps", 0, "ceiling of Lease renewals plus status updates per second over all nodes (default 250, raised so that each Lease is renewed twice per lease duration)")
	f.IntVar(&o.Workers, "workers", sim.DefaultWorkers, "pods (and, at start, nodes) handled at once")
	f.DurationVar(&o.MaxDeletionGrace, "max-deletion-grace", sim.DefaultMaxDeletionGrace, "longest a deleted pod stays Terminating (negative: its whole grace period)")
	f.BoolVar(&o.Cleanup, "cleanup", false, "delete the nodes and their Leases on exit")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	_ = cmd.MarkFlagRequired("kubeconfig")
	_ = cmd.MarkFlagRequired("nodes")
	return cmd
}

func flagOf(name corev1.ResourceName) string {
	if name == corev1.ResourceEphemeralStorage {
		return "ephemeral-storage"
	}
	return string(name)
}
