package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/dns"
)

func newDNS() *cobra.Command {
	var kubeconfig, addr, zone, resolvConf, logLevel string
	var upstreams []string
	var ttl uint32
	cmd := &cobra.Command{
		Use:   "dns",
		Short: "Run the cluster DNS server: Services and EndpointSlices become records of the cluster zone; other names are forwarded",
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
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("build client: %w", err)
			}
			o := dns.Options{
				Client: client, Addr: addr, Zone: zone, TTL: ttl, ResolvConf: resolvConf,
				Logger: logger,
			}
			if cmd.Flags().Changed("upstream") {
				o.Upstreams = append([]string{}, upstreams...)
			}
			s, err := dns.New(o)
			if err != nil {
				return err
			}
			return s.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the DNS server")
	cmd.Flags().StringVar(&addr, "addr", dns.DefaultAddr, "UDP and TCP address to serve on")
	cmd.Flags().StringVar(&zone, "zone", dns.DefaultZone, "the cluster domain")
	cmd.Flags().Uint32Var(&ttl, "ttl", dns.DefaultTTL, "TTL in seconds of the cluster's records and negative answers")
	cmd.Flags().StringSliceVar(&upstreams, "upstream", nil, "resolvers (host[:port]) for names outside the zone (default: the nameservers of --resolv-conf); --upstream= forwards nothing")
	cmd.Flags().StringVar(&resolvConf, "resolv-conf", dns.DefaultResolvConf, "resolv.conf whose nameservers are the upstreams when --upstream is not given")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	_ = cmd.MarkFlagRequired("kubeconfig")
	return cmd
}
