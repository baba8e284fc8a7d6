package main

import (
	"github.com/spf13/cobra"

	"github.com/kubette/kubette/internal/scheduler"
)

func newScheduler() *cobra.Command {
	var kubeconfig, name, identity, logLevel string
	var leaderElect bool
	var percentage int32
	var parallelism int
	cmd := &cobra.Command{
		Use:   "scheduler",
		Short: "Run the scheduler (filter, score and bind pods to nodes) against an API server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger(logLevel)
			if err != nil {
				return err
			}
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			return scheduler.RunWithLeaderElection(cmd.Context(), cfg, scheduler.Options{
				SchedulerName: name, LeaderElect: leaderElect, Identity: identity,
				PercentageOfNodesToScore: percentage, Parallelism: parallelism,
				Logger: logger,
			})
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the scheduler")
	cmd.Flags().BoolVar(&leaderElect, "leader-elect", true, "schedule only while holding the kube-system/kube-scheduler Lease")
	cmd.Flags().StringVar(&identity, "identity", "", "leader election identity (default: hostname and a random suffix)")
	cmd.Flags().StringVar(&name, "scheduler-name", scheduler.DefaultSchedulerName, "schedule the pods whose spec.schedulerName is this")
	cmd.Flags().Int32Var(&percentage, "percentage-of-nodes-to-score", 0, "percentage of the nodes searched for feasible ones (0: adaptive, as upstream)")
	cmd.Flags().IntVar(&parallelism, "parallelism", scheduler.DefaultParallelism, "goroutines that filter and score nodes")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	_ = cmd.MarkFlagRequired("kubeconfig")
	return cmd
}
