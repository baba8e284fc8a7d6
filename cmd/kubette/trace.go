package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubette/kubette/internal/trace"
)

// newTrace is `kubette trace KIND/NAME`: the sequence diagram of what the cluster did
// for an object and everything it caused.
func newTrace() *cobra.Command {
	var kubeconfig, namespace, format string
	var all, normalize bool
	cmd := &cobra.Command{
		Use:   "trace KIND/NAME",
		Short: "Draw what the cluster did for an object (and what it caused) as a sequence diagram",
		Long: "trace follows a Deployment, ReplicaSet or Pod through owner references, a Service to its\n" +
			"EndpointSlices and Endpoints, or an Ingress to its backend Services and theirs; reads the API\n" +
			"server's records of the requests, storage writes and watch events about them and the Events\n" +
			"components reported (the kubelet's container steps, the proxy's RulesSynced, the ingress\n" +
			"controller's Sync and RELOAD), and prints a Mermaid sequenceDiagram (or a numbered text\n" +
			"timeline, or an SVG).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kindName, name, ok := strings.Cut(args[0], "/")
			if !ok || name == "" {
				return fmt.Errorf("want KIND/NAME, e.g. deployment/web, got %q", args[0])
			}
			kind, err := trace.ParseKind(kindName)
			if err != nil {
				return err
			}
			if _, err := trace.Renderer(format); err != nil {
				return fmt.Errorf("--format: %w", err)
			}
			client, err := clusterClient(kubeconfig)
			if err != nil {
				return err
			}
			in, err := trace.Collect(cmd.Context(), client, kind, namespace, name)
			if err != nil {
				return err
			}
			out, err := trace.Draw(in, trace.DrawOptions{Format: format, All: all, Normalize: normalize})
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), out)
			return err
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default $KUBECONFIG, else DATA_DIR/admin.kubeconfig)")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "the object's namespace")
	cmd.Flags().StringVar(&format, "format", "mermaid", "mermaid, text or svg")
	cmd.Flags().BoolVar(&all, "all", false, "show every record (reads, Event writes, every watch delivery) and fold nothing")
	cmd.Flags().BoolVar(&normalize, "normalize", false, "replace generated names, UIDs, times and revisions by stable ones")
	return cmd
}
