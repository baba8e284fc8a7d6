package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubette/kubette/internal/why"
)

// newWhy is `kubette why KIND/NAME`: why a pod is pending or not ready, why a
// Service gets no traffic, why a Deployment's pods are not ready.
func newWhy() *cobra.Command {
	var kubeconfig, namespace, output string
	cmd := &cobra.Command{
		Use:   "why KIND/NAME",
		Short: "Explain why a pod is pending or not ready, or why a Service gets no traffic",
		Long: "why reads the object and the cluster through the API server. For a pending pod it runs the\n" +
			"scheduler's filter plugins (the default profile) against every node and names each rejection;\n" +
			"for a pod that is not ready it shows the container states, crash logs, failing probes, readiness\n" +
			"gates and the node; for a Service the pods its selector misses and why, unready pods and missing\n" +
			"target ports. KIND is pod (po), service (svc) or deployment (deploy).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kindName, name, ok := strings.Cut(args[0], "/")
			if !ok || name == "" {
				return fmt.Errorf("want KIND/NAME, e.g. pod/web, got %q", args[0])
			}
			kind, err := why.ParseKind(kindName)
			if err != nil {
				return err
			}
			if output != "text" && output != "json" {
				return fmt.Errorf("--output %q: want text or json", output)
			}
			client, err := clusterClient(kubeconfig)
			if err != nil {
				return err
			}
			r, err := why.Explain(cmd.Context(), client, kind, namespace, name)
			if err != nil {
				return err
			}
			out := why.Text(r)
			if output == "json" {
				if out, err = why.JSON(r); err != nil {
					return err
				}
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), out)
			return err
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default $KUBECONFIG, else DATA_DIR/admin.kubeconfig)")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "the object's namespace")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}
