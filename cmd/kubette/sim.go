package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubette/kubette/internal/logging"
	"github.com/kubette/kubette/internal/pki"
	"github.com/kubette/kubette/internal/sim"
)

func newSim() *cobra.Command {
	var (
		kubeconfig, cpu, memory, pods, storage, logLevel string
		dataDir, certFile, keyFile, clientCAFile         string
		labels, taints                                   []string
		o                                                sim.Options
	)
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run simulated nodes whose pods go through their lifecycle without containers (for scale tests)",
		Long: `Registers --nodes Node objects as a kubelet would, keeps their Leases and Ready condition
fresh, and moves pods bound to them to Running (with a pod IP from the node's pod CIDR) and,
once deleted, away after their grace period (at most --max-deletion-grace). Runs until
SIGTERM; the nodes stay behind unless --cleanup is given.

Every node has --node-ip (loopback by default) as its InternalIP and the simulator's own HTTPS
port as its kubelet port: 'kubectl logs' of a simulated pod shows what its containers did (they
run no process), and exec, attach and port-forward answer that the node is simulated. The port's
certificate is issued from DATA_DIR/pki/ca.key, the CA of a control plane on this machine,
unless --tls-cert-file is given.`,
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
			o.Logger = logger.With(logging.ComponentKey, "sim")
			if o.KubeletTLS, err = simKubeletTLS(dataDir, cmd.Flags().Changed("data-dir"), o.NodeIP, certFile, keyFile, clientCAFile, logger); err != nil {
				return err
			}
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
	f.StringVar(&o.NodeIP, "node-ip", sim.DefaultNodeIP, "InternalIP of every node, where the simulator serves their kubelet port: an address of this machine")
	f.IntVar(&o.KubeletPort, "kubelet-port", 0, "the nodes' kubelet port (default: a free port)")
	f.StringVar(&dataDir, "data-dir", defaultDataDir(), "data directory of the control plane on this machine, whose pki/ca.key issues the kubelet port's certificate")
	f.StringVar(&certFile, "tls-cert-file", "", "the kubelet port's serving certificate (PEM), for --node-ip")
	f.StringVar(&keyFile, "tls-private-key-file", "", "the kubelet port's serving key (PEM)")
	f.StringVar(&clientCAFile, "client-ca-file", "", "CA that signs the API server's kubelet client certificate (default DATA_DIR/pki/ca.crt)")
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

// simKubeletTLS is the TLS configuration of the simulated nodes' kubelet port: the given
// certificate, or one issued for nodeIP by the cluster's CA in DATA_DIR/pki. Without either,
// when --data-dir was not given, the port runs without one (the simulator says so) rather
// than the simulator refusing to start.
func simKubeletTLS(dataDir string, dataDirSet bool, nodeIP, certFile, keyFile, clientCAFile string, log *slog.Logger) (*tls.Config, error) {
	pkiDir := filepath.Join(dataDir, "pki")
	if clientCAFile == "" {
		clientCAFile = filepath.Join(pkiDir, "ca.crt")
	}
	caPEM, err := os.ReadFile(clientCAFile)
	if err != nil {
		if certFile == "" && !dataDirSet && errors.Is(err, fs.ErrNotExist) {
			log.Warn("no cluster CA found: the simulated nodes' kubelet port cannot serve the API server (give --data-dir, or --tls-cert-file, --tls-private-key-file and --client-ca-file)", "caFile", clientCAFile)
			return nil, nil
		}
		return nil, fmt.Errorf("client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("client CA %s holds no certificate", clientCAFile)
	}
	if certFile != "" || keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("kubelet port certificate: %w", err)
		}
		return &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool}, nil
	}
	ca, err := pki.LoadCA(pkiDir)
	if err != nil {
		return nil, fmt.Errorf("kubelet port certificate: give --tls-cert-file and --tls-private-key-file, or a DATA_DIR/pki with the cluster's CA (ca.crt, ca.key): %w", err)
	}
	ip := net.ParseIP(nodeIP)
	if ip == nil {
		return nil, fmt.Errorf("--node-ip %q is not an IP address", nodeIP)
	}
	certPEM, keyPEM, err := ca.LoadOrIssue(pkiDir, "sim-kubelet-serving", pki.CertSpec{
		CommonName: "kubette-sim", DNSNames: []string{"localhost"}, IPs: []net.IP{ip}, Server: true,
	})
	if err != nil {
		return nil, fmt.Errorf("kubelet port certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("kubelet port certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool}, nil
}

func flagOf(name corev1.ResourceName) string {
	if name == corev1.ResourceEphemeralStorage {
		return "ephemeral-storage"
	}
	return string(name)
}
