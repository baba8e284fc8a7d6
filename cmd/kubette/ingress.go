package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/ingress"
)

func newIngress() *cobra.Command {
	var kubeconfig, dataDir, nginxBin, listen, publishIP, className, logLevel, workers, endpointUpdates string
	var httpPort, httpsPort int
	var ensureClass, defaultClass bool
	cmd := &cobra.Command{
		Use:   "ingress",
		Short: "Run the Ingress controller: Ingresses become an nginx configuration, nginx is run and reloaded",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger(logLevel)
			if err != nil {
				return err
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
			c, err := ingress.New(ingress.Options{
				Client: client, DataDir: dataDir, NginxBinary: nginxBin, HTTPPort: httpPort, HTTPSPort: httpsPort,
				ListenAddress: listen, PublishIP: publishIP, ClassName: className, DefaultClass: defaultClass,
				WorkerProcesses: workers, EndpointUpdates: endpointUpdates, Logger: logger,
			})
			if err != nil {
				return err
			}
			if ensureClass {
				if err := c.EnsureClass(cmd.Context()); err != nil {
					return err
				}
			}
			return c.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the controller")
	cmd.Flags().StringVar(&dataDir, "data-dir", "/var/lib/kubette", "state directory; nginx runs from DATA-DIR/ingress")
	cmd.Flags().StringVar(&nginxBin, "nginx", "nginx", "the nginx binary")
	cmd.Flags().IntVar(&httpPort, "http-port", 80, "port nginx serves HTTP on")
	cmd.Flags().IntVar(&httpsPort, "https-port", 443, "port nginx serves HTTPS on")
	cmd.Flags().StringVar(&listen, "listen-address", "", "address nginx binds (default: every address)")
	cmd.Flags().StringVar(&publishIP, "publish-ip", "", "address written into the Ingresses' status (default: the default-route interface's IPv4)")
	cmd.Flags().StringVar(&className, "class", ingress.DefaultClassName, "name of the IngressClass --ensure-class creates")
	cmd.Flags().BoolVar(&ensureClass, "ensure-class", true, "create the IngressClass when it does not exist")
	cmd.Flags().BoolVar(&defaultClass, "default-class", false, "mark a created IngressClass as the cluster's default")
	cmd.Flags().StringVar(&workers, "worker-processes", "auto", "nginx worker_processes")
	cmd.Flags().StringVar(&endpointUpdates, "endpoint-updates", ingress.EndpointsAuto,
		"how endpoint changes reach nginx: lua (through nginx's Lua module, no reload), reload, or auto (lua when the module works)")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}
