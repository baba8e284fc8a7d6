// Command kubette is a Kubernetes-compatible orchestrator in one binary: each
// subcommand runs one component, and `kubette up` runs them all.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubette/kubette/internal/apiserver"
	"github.com/kubette/kubette/internal/cluster"
	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/credentials"
	"github.com/kubette/kubette/internal/controllermanager"
	"github.com/kubette/kubette/internal/controlplane"
	"github.com/kubette/kubette/internal/hostcheck"
	"github.com/kubette/kubette/internal/logging"
	"github.com/kubette/kubette/internal/metrics/scraper"
	"github.com/kubette/kubette/internal/pki"
	"github.com/kubette/kubette/internal/proxy"
	"github.com/kubette/kubette/internal/runtime"
	"github.com/kubette/kubette/internal/serviceaccount"
	"github.com/kubette/kubette/internal/trace"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Until a command builds its logger from --log-level (newLogger), what libraries log
	// (klog of client-go, the log package) comes out in the one format at info.
	logging.Route(logging.New(os.Stderr, slog.LevelInfo))
	if err := newRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "kubette",
		Short:         "A Kubernetes-compatible orchestrator in one binary",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newUp(), newAPIServer(), newControllerManager(), newScheduler(), newSim(), newVersion(), newShim(), newRuntime(), newImage(), newKubelet(), newDown(), newProxy(), newIngress(), newDNS(), newTrace(), newWhy())
	return root
}

func defaultDataDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/kubette"
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".kubette")
	}
	return ".kubette"
}

// controlPlaneFlags are the flags `up` and `apiserver` share.
type controlPlaneFlags struct {
	dataDir, bind, etcdServers, tokenFile, logLevel, authzModes string
	serviceIPRange, nodePortRange                               string
	port, traceCapacity, gcPercent                              int
	controllers, componentsOverTLS, anonymousAuth               bool
	eventTTL, metricResolution                                  time.Duration
	saIssuer, saJWKSURI                                         string
	saMaxTokenExpiration                                        time.Duration
	disableAdmissionPlugins                                     []string
	node                                                        nodeFlags
	audit                                                       auditFlags
}

// nodeFlags are `up`'s flags for running this machine as a node.
type nodeFlags struct {
	enabled                     bool
	name, podCIDR, runc, bridge string
	kubeletPort                 int32
	dnsPort                     int
	cniPluginDirs               []string
	insecureRegistries          []string
	ingress                     bool
	httpPort, httpsPort         int
	runtimeEvents               bool
	proxyMode                   string
	cmd                         *cobra.Command // to tell a flag the user set from its default
}

func (n *nodeFlags) register(cmd *cobra.Command) {
	n.cmd = cmd
	cmd.Flags().BoolVar(&n.enabled, "node", os.Geteuid() == 0, "run this machine as a node too: the built-in container runtime and the kubelet (needs root, runc and the CNI plugins)")
	cmd.Flags().StringVar(&n.name, "node-name", "", "the Node's name (default: the host name)")
	cmd.Flags().StringVar(&n.podCIDR, "pod-cidr", cluster.DefaultPodCIDR, "the node's pod address range")
	cmd.Flags().Int32Var(&n.kubeletPort, "kubelet-port", 10250, "the kubelet's HTTPS port (logs)")
	cmd.Flags().IntVar(&n.dnsPort, "dns-port", 53, "port of the cluster DNS server on the node's address (pods reach it as the kube-dns Service: port 53 of the 10th address of --service-cluster-ip-range, 10.96.0.10 by default)")
	cmd.Flags().StringVar(&n.runc, "runc", "runc", "the OCI runtime binary (runc or crun)")
	cmd.Flags().StringVar(&n.bridge, "bridge", "kubette0", "name of the pods' bridge")
	cmd.Flags().StringVar(&n.proxyMode, "proxy-mode", proxy.ModeIPTables, "the service proxy's mode: iptables or nftables (one nft table, verdict maps; needs the nft tool); starting one removes the other's rules")
	cmd.Flags().StringSliceVar(&n.cniPluginDirs, "cni-plugin-dirs", hostcheck.DefaultCNIPluginDirs(), "directories holding the CNI plugins")
	cmd.Flags().Var(insecureRegistryFlag{&n.insecureRegistries}, "insecure-registry", insecureRegistryUsage)
	cmd.Flags().BoolVar(&n.runtimeEvents, "runtime-events", true, "the runtime records each pod's steps (CNI ADD, runc create, start, kill, delete) as Events, which kubette trace draws")
	cmd.Flags().BoolVar(&n.ingress, "ingress", os.Geteuid() == 0 && hostcheck.Binary("nginx") != "", "run the ingress controller, which drives nginx (default: as root when nginx is installed)")
	cmd.Flags().IntVar(&n.httpPort, "ingress-http-port", 80, "port nginx serves Ingresses on over HTTP")
	cmd.Flags().IntVar(&n.httpsPort, "ingress-https-port", 443, "port nginx serves Ingresses on over HTTPS")
}

// ingressConfig returns the ingress controller's configuration, nil when it is off.
func (n *nodeFlags) ingressConfig() *cluster.IngressConfig {
	if !n.ingress {
		// Off by default only because nginx is missing: say so rather than leave Ingresses
		// silently unserved.
		if n.enabled && os.Geteuid() == 0 && n.cmd != nil && !n.cmd.Flags().Changed("ingress") {
			fmt.Fprintf(os.Stderr, "kubette: no ingress controller: %v (or --ingress=false to say none is wanted)\n",
				hostcheck.Error([]hostcheck.Requirement{hostcheck.NginxRequirement("")}))
		}
		return nil
	}
	return &cluster.IngressConfig{HTTPPort: n.httpPort, HTTPSPort: n.httpsPort, NginxBinary: hostcheck.Binary("nginx")}
}

// config returns the node configuration, nil when the node is off.
func (n *nodeFlags) config() *cluster.NodeConfig {
	if !n.enabled {
		return nil
	}
	return &cluster.NodeConfig{
		Name: n.name, PodCIDR: n.podCIDR, KubeletPort: n.kubeletPort, DNSPort: n.dnsPort,
		Runtime: runtime.Config{Runc: n.runc, Bridge: n.bridge, CNIPluginDirs: n.cniPluginDirs,
			InsecureRegistries: n.insecureRegistries},
		NoRuntimeEvents: !n.runtimeEvents,
		ProxyMode:       n.proxyMode,
	}
}

func (f *controlPlaneFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.dataDir, "data-dir", defaultDataDir(), "directory for etcd data, certificates and the admin kubeconfig")
	cmd.Flags().IntVar(&f.port, "port", 6443, "HTTPS port of the API server")
	cmd.Flags().StringVar(&f.bind, "bind-address", "0.0.0.0", "address the API server listens on")
	cmd.Flags().StringVar(&f.etcdServers, "etcd-servers", "", "comma-separated URLs of an external etcd cluster (default: embedded etcd under --data-dir)")
	cmd.Flags().StringVar(&f.tokenFile, "token-auth-file", "", "static bearer tokens, one per line: token,user,uid,\"group1,group2\"")
	cmd.Flags().BoolVar(&f.anonymousAuth, "anonymous-auth", true, "serve requests without credentials as system:anonymous (the default policy lets it read health and version only); false refuses them with 401")
	cmd.Flags().StringVar(&f.authzModes, "authorization-mode", "", "comma-separated authorizers after system:masters, in order: Node, RBAC, AlwaysAllow (default: Node,RBAC)")
	cmd.Flags().StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	cmd.Flags().StringVar(&f.serviceIPRange, "service-cluster-ip-range", apiserver.DefaultServiceClusterIPRange, "CIDR of Service cluster IPs (IPv4); the first address goes to the kubernetes Service")
	cmd.Flags().StringVar(&f.nodePortRange, "service-node-port-range", apiserver.DefaultServiceNodePortRange, "range of Service node ports, FROM-TO inclusive")
	cmd.Flags().IntVar(&f.traceCapacity, "trace-capacity", trace.DefaultCapacity, "trace records the API server keeps per resource for kubette trace and the /ui/ page; 0 turns tracing off")
	cmd.Flags().BoolVar(&f.componentsOverTLS, "components-over-tls", false, "components in this process (controllers, scheduler, kubelet, proxy, DNS, ingress) reach the API server over HTTPS with client certificates, as separate processes do; by default they call its handler in-process, skipping TLS and HTTP/2 on both ends")
	cmd.Flags().DurationVar(&f.eventTTL, "event-ttl", time.Hour, "how long an Event lives after its last write, as upstream's --event-ttl: etcd deletes it then (through leases shared by the Events of a minute); 0 keeps Events until they are deleted")
	cmd.Flags().StringVar(&f.saIssuer, "service-account-issuer", serviceaccount.DefaultIssuer, "issuer of ServiceAccount tokens (their iss claim and the API server's audience), served for OIDC discovery at /.well-known/openid-configuration when it is an https URL")
	cmd.Flags().StringVar(&f.saJWKSURI, "service-account-jwks-uri", "", "jwks_uri of the OIDC discovery document (default: https://ADVERTISE-ADDRESS:PORT/openid/v1/jwks)")
	cmd.Flags().DurationVar(&f.saMaxTokenExpiration, "service-account-max-token-expiration", 0, "longest lifetime of a requested ServiceAccount token (0: no limit beyond 2^32 seconds)")
	cmd.Flags().StringSliceVar(&f.disableAdmissionPlugins, "disable-admission-plugins", nil, "admission plugins to turn off, comma-separated (e.g. ServiceAccount for an API server without the controller manager, which creates each namespace's default ServiceAccount)")
	cmd.Flags().DurationVar(&f.metricResolution, "metric-resolution", scraper.DefaultResolution, "how often the resource metrics API (metrics.k8s.io, kubectl top) scrapes the kubelets, as metrics-server's --metric-resolution; usage is the CPU rate between the last two scrapes")
	f.audit.register(cmd)
	cmd.Flags().IntVar(&f.gcPercent, "gc-percent", defaultGCPercent, "Go garbage collector target (as GOGC): heap growth in percent over the live heap before a collection; higher spends less CPU on collection and more memory; negative turns collection off. Without the flag, a GOGC environment variable wins")
}

// defaultGCPercent is the control plane's garbage collector target, Go's own: a small
// cluster should stay light. For scheduling throughput, 200 is worth its memory: the API
// server spent 3–28 % less CPU per bound pod in bench/scheduler --nodes 5000 --pods-first
// (less in each of 5 paired runs; mean of 8 runs each, load 6–12: 1.14 → 0.97 ms), for a
// peak RSS about 220 MB higher (~510 → ~730 MB).
const defaultGCPercent = 100

// setGCPercent applies --gc-percent unless it was left out and GOGC is set.
func (f *controlPlaneFlags) setGCPercent(cmd *cobra.Command) {
	if _, env := os.LookupEnv("GOGC"); env && !cmd.Flags().Changed("gc-percent") {
		return
	}
	debug.SetGCPercent(f.gcPercent)
}

func (f *controlPlaneFlags) config() (cluster.Config, error) {
	logger, err := newLogger(f.logLevel)
	if err != nil {
		return cluster.Config{}, err
	}
	cfg := cluster.Config{
		Config: controlplane.Config{
			DataDir: f.dataDir, Port: f.port, BindAddress: f.bind, TokenAuthFile: f.tokenFile,
			ServiceClusterIPRange: f.serviceIPRange, ServiceNodePortRange: f.nodePortRange,
			TraceCapacity: f.traceCapacity, ComponentsOverTLS: f.componentsOverTLS, EventTTL: f.eventTTL,
			ServiceAccountIssuer: f.saIssuer, ServiceAccountJWKSURI: f.saJWKSURI, ServiceAccountMaxTokenExpiration: f.saMaxTokenExpiration,
			DisableAdmissionPlugins: f.disableAdmissionPlugins,
			MetricResolution:        f.metricResolution,
			Audit:                   f.audit.config(),
			Logger:                  logger,
		},
		ControllerManager: f.controllers,
		Scheduler:         f.controllers,
	}
	if f.controllers {
		cfg.Node = f.node.config()
		cfg.Ingress = f.node.ingressConfig()
	}
	if f.traceCapacity <= 0 {
		cfg.TraceCapacity = -1 // off
	}
	if f.metricResolution <= 0 {
		return cluster.Config{}, fmt.Errorf("--metric-resolution: %v is not positive", f.metricResolution)
	}
	if f.eventTTL < 0 {
		return cluster.Config{}, fmt.Errorf("--event-ttl: %v is negative", f.eventTTL)
	}
	if f.etcdServers != "" {
		cfg.EtcdServers = strings.Split(f.etcdServers, ",")
	}
	cfg.DisableAnonymousAuth = !f.anonymousAuth
	if f.authzModes != "" {
		cfg.AuthorizationModes = strings.Split(f.authzModes, ",")
	}
	return cfg, nil
}

func runControlPlane(ctx context.Context, f *controlPlaneFlags, what string) error {
	cfg, err := f.config()
	if err != nil {
		return err
	}
	cp, err := cluster.Start(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Printf("kubette %s ready in %d ms at %s\n", what, cp.ReadyAfter.Milliseconds(), cp.URL)
	fmt.Printf("kubeconfig: %s\n", cp.Kubeconfig)
	fmt.Printf("try: kubectl --kubeconfig %s get namespaces\n", cp.Kubeconfig)
	err = cp.Wait()
	fmt.Println("kubette stopped")
	return err
}

func newUp() *cobra.Command {
	f := &controlPlaneFlags{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a whole cluster on this machine (embedded etcd, the API server, the controller manager and the scheduler)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.controllers = true
			f.setGCPercent(cmd)
			return runControlPlane(cmd.Context(), f, "cluster")
		},
	}
	f.register(cmd)
	f.node.register(cmd)
	return cmd
}

func newAPIServer() *cobra.Command {
	f := &controlPlaneFlags{}
	cmd := &cobra.Command{
		Use:   "apiserver",
		Short: "Run the API server (embedded etcd unless --etcd-servers is given)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.setGCPercent(cmd)
			return runControlPlane(cmd.Context(), f, "apiserver")
		},
	}
	f.register(cmd)
	return cmd
}

func newControllerManager() *cobra.Command {
	var kubeconfig, controllers, identity, rootCAFile, logLevel, signingCert, signingKey string
	var leaderElect, saCredentials bool
	var workers int
	var signingDuration time.Duration
	cmd := &cobra.Command{
		Use:   "controller-manager",
		Short: "Run the controllers (Deployment, ReplicaSet, garbage collector, namespace, ...) against an API server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger(logLevel)
			if err != nil {
				return err
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("load kubeconfig: %w", err)
			}
			o := controller.ManagerOptions{Config: cfg, LeaderElect: leaderElect, Identity: identity, Workers: workers,
				Logger: logger}
			if saCredentials {
				if o.ControllerConfig, err = credentials.ServiceAccounts(cmd.Context(), cfg); err != nil {
					return err
				}
			}
			if rootCAFile != "" {
				if o.RootCA, err = os.ReadFile(rootCAFile); err != nil {
					return fmt.Errorf("--root-ca-file: %w", err)
				}
			}
			if controllers != "" {
				o.Enabled = strings.Split(controllers, ",")
			}
			if (signingCert == "") != (signingKey == "") {
				return errors.New("--cluster-signing-cert-file and --cluster-signing-key-file go together")
			}
			if signingCert != "" {
				if o.ClusterSigning, err = pki.LoadCAFiles(signingCert, signingKey); err != nil {
					return fmt.Errorf("cluster signing CA: %w", err)
				}
			}
			o.ClusterSigningDuration = signingDuration
			return controllermanager.Run(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the controller manager (e.g. DATA_DIR/controller-manager.kubeconfig)")
	cmd.Flags().BoolVar(&saCredentials, "use-service-account-credentials", true, "run each controller as its ServiceAccount kube-system/<controller>, with tokens requested with the kubeconfig's credentials, so that its default role decides what it may do (as kubeadm sets upstream's flag); false runs every controller with the kubeconfig's credentials")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	cmd.Flags().BoolVar(&leaderElect, "leader-elect", true, "run only while holding the kube-system/kube-controller-manager Lease")
	cmd.Flags().StringVar(&identity, "identity", "", "leader election identity (default: hostname and a random suffix)")
	cmd.Flags().StringVar(&controllers, "controllers", "", "comma-separated controllers to run (default: all)")
	cmd.Flags().IntVar(&workers, "workers", 5, "workers per controller")
	cmd.Flags().StringVar(&rootCAFile, "root-ca-file", "", "CA bundle published to every namespace as ConfigMap kube-root-ca.crt (default: the kubeconfig's certificate authority)")
	cmd.Flags().StringVar(&signingCert, "cluster-signing-cert-file", "", "CA certificate (PEM) the built-in CSR signers issue from (e.g. DATA_DIR/pki/ca.crt); none: CSRs are not signed")
	cmd.Flags().StringVar(&signingKey, "cluster-signing-key-file", "", "the key (PEM) of --cluster-signing-cert-file")
	cmd.Flags().DurationVar(&signingDuration, "cluster-signing-duration", 365*24*time.Hour, "the longest certificate the CSR signers issue")
	_ = cmd.MarkFlagRequired("kubeconfig")
	return cmd
}

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Println(cluster.Version.GitVersion)
		},
	}
}
