package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubette/kubette/internal/kubelet/agent"
	"github.com/kubette/kubette/internal/kubelet/nodestatus"
	"github.com/kubette/kubette/internal/kubelet/server"
	"github.com/kubette/kubette/internal/pki"
	"github.com/kubette/kubette/internal/runtime"
)

func newKubelet() *cobra.Command {
	var (
		kubeconfig, dataDir, endpoint, nodeName, podCIDR, logLevel string
		certFile, keyFile, clientCAFile                            string
		port                                                       int32
		unsafeSysctls                                              []string
	)
	cmd := &cobra.Command{
		Use:   "kubelet",
		Short: "Run the kubelet: register this node and run the pods bound to it through a CRI runtime",
		Long: `Run the kubelet. It registers the Node, keeps its Lease and status fresh, runs the pods bound
to it through the CRI runtime at --container-runtime-endpoint (default: kubette's built-in runtime,
started with 'kubette runtime'; containerd's socket works too), and serves container logs on its
HTTPS port. Without --tls-cert-file it issues its serving certificate from DATA_DIR/pki/ca.key, the
CA of a control plane on this machine.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(logLevel)
			if err != nil {
				return err
			}
			restCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("--kubeconfig: %w", err)
			}
			if nodeName == "" {
				if nodeName, err = os.Hostname(); err != nil {
					return fmt.Errorf("node name: %w", err)
				}
			}
			serving, clientCAs, err := kubeletTLS(dataDir, nodeName, certFile, keyFile, clientCAFile)
			if err != nil {
				return err
			}
			if endpoint == "" {
				endpoint = "unix://" + runtime.SocketPath(dataDir)
			}
			return agent.Run(cmd.Context(), agent.Config{
				NodeName: nodeName, RestConfig: restCfg, DataDir: dataDir, CRIEndpoint: endpoint,
				PodCIDR: podCIDR, Port: port, ServingCert: serving, ClientCAs: clientCAs, Logger: log,
				AllowedUnsafeSysctls: unsafeSysctls,
			})
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig with the node's credentials (e.g. DATA_DIR/kubelet.kubeconfig written by 'kubette up')")
	cmd.Flags().StringVar(&dataDir, "data-dir", defaultDataDir(), "directory for pod volumes and container logs")
	cmd.Flags().StringVar(&endpoint, "container-runtime-endpoint", "", "CRI endpoint, unix:///path (default: unix://DATA_DIR/cri.sock, the built-in runtime; containerd: unix:///run/containerd/containerd.sock)")
	cmd.Flags().StringVar(&nodeName, "node-name", "", "the Node's name (default: the host name)")
	cmd.Flags().StringVar(&podCIDR, "pod-cidr", "", "pod address range set on the Node when it has none")
	cmd.Flags().Int32Var(&port, "port", agent.DefaultPort, "HTTPS port for logs")
	cmd.Flags().StringVar(&certFile, "tls-cert-file", "", "serving certificate (PEM)")
	cmd.Flags().StringVar(&keyFile, "tls-private-key-file", "", "serving key (PEM)")
	cmd.Flags().StringVar(&clientCAFile, "client-ca-file", "", "CA that signs the API server's client certificate (default DATA_DIR/pki/ca.crt)")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	cmd.Flags().StringSliceVar(&unsafeSysctls, "allowed-unsafe-sysctls", nil, "unsafe sysctls or sysctl patterns (ending in *) pods may set beyond the safe ones, comma-separated; each must be namespaced (kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.*, net.*)")
	_ = cmd.MarkFlagRequired("kubeconfig")
	return cmd
}

// kubeletTLS loads the kubelet's serving certificate and the CA that verifies its clients,
// issuing the certificate with the cluster's CA in DATA_DIR/pki when no files are given.
func kubeletTLS(dataDir, nodeName, certFile, keyFile, clientCAFile string) (tls.Certificate, *x509.CertPool, error) {
	pkiDir := filepath.Join(dataDir, "pki")
	if clientCAFile == "" {
		clientCAFile = filepath.Join(pkiDir, "ca.crt")
	}
	caPEM, err := os.ReadFile(clientCAFile)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return tls.Certificate{}, nil, fmt.Errorf("client CA %s holds no certificate", clientCAFile)
	}
	if certFile != "" || keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return tls.Certificate{}, nil, fmt.Errorf("serving certificate: %w", err)
		}
		return cert, pool, nil
	}
	// The serving certificate is issued by the cluster's CA, which the API server trusts when it
	// proxies logs and exec: a CA made here would not be it.
	ca, err := pki.LoadCA(pkiDir)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("serving certificate: give --tls-cert-file and --tls-private-key-file, or a DATA_DIR/pki with the cluster's CA (ca.crt, ca.key): %w", err)
	}
	var ips []net.IP
	for _, a := range nodestatus.DefaultAddresses(nodeName) {
		if a.Type == v1.NodeInternalIP {
			if ip := net.ParseIP(a.Address); ip != nil {
				ips = append(ips, ip)
			}
		}
	}
	cert, err := server.LoadOrIssueServing(ca, pkiDir, nodeName, ips)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("serving certificate: %w", err)
	}
	return cert, pool, nil
}
