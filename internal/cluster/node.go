package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/controlplane"
	"github.com/kubette/kubette/internal/hostcheck"
	"github.com/kubette/kubette/internal/kubelet/agent"
	"github.com/kubette/kubette/internal/kubelet/nodestatus"
	"github.com/kubette/kubette/internal/kubelet/server"
	"github.com/kubette/kubette/internal/proxy"
	"github.com/kubette/kubette/internal/rbacpolicy"
	"github.com/kubette/kubette/internal/runtime"
)

// NodeConfig makes this machine a node of the cluster: the built-in runtime and the kubelet.
type NodeConfig struct {
	// Name is the Node's name (default: the host name).
	Name string
	// PodCIDR is the node's pod address range (default 10.244.0.0/24).
	PodCIDR string
	// KubeletPort is the kubelet's HTTPS port (default 10250).
	KubeletPort int32
	// DNSPort is where the cluster DNS server listens on the node's address (default 53);
	// pods reach it through the kube-dns Service.
	DNSPort int
	// Runtime configures the built-in runtime; its DataDir is the cluster's.
	Runtime runtime.Config
	// NoRuntimeEvents keeps the runtime from recording each pod's steps as Events (by
	// default it does, with its own client certificate: runtime/steps).
	NoRuntimeEvents bool
	// ProxyMode is the service proxy's mode: proxy.ModeIPTables (default) or
	// proxy.ModeNFTables.
	ProxyMode string
}

// RuntimeUser is the user (client certificate common name) of a node's runtime, as
// system:node:<node> is its kubelet's.
func RuntimeUser(node string) string { return "system:kubette-runtime:" + node }

// RuntimeGroup is the group of every node's runtime, which the default policy lets
// record Events (the ClusterRole system:kubette-runtime).
const RuntimeGroup = rbacpolicy.RuntimeGroup

// DefaultPodCIDR is the pod range of the node `up` runs.
const DefaultPodCIDR = "10.244.0.0/24"

// CheckNode returns an error naming what this machine lacks to run pods, and how to install it.
func CheckNode(cfg NodeConfig) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("running pods needs root (the runtime mounts root filesystems and creates network namespaces)")
	}
	// iptables serves the proxy (either mode removes the other's rules) and the portmap plugin.
	return hostcheck.Error(hostcheck.Check(hostcheck.Options{
		Runtime:       cfg.Runtime.Runc,
		CNIPluginDirs: cfg.Runtime.CNIPluginDirs,
		Iptables:      true,
		Nft:           cfg.ProxyMode == proxy.ModeNFTables,
	}))
}

// startNode starts the runtime and the node agent under run, which owns their goroutines.
func startNode(ctx context.Context, cp *controlplane.ControlPlane, dataDir, serviceCIDR string, cfg NodeConfig, log *slog.Logger, run func(name string, f func(context.Context) error)) error {
	if cfg.Name == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("node name: %w", err)
		}
		cfg.Name = h
	}
	if cfg.PodCIDR == "" {
		cfg.PodCIDR = DefaultPodCIDR
	}
	if cfg.KubeletPort == 0 {
		cfg.KubeletPort = agent.DefaultPort
	}
	if err := CheckNode(cfg); err != nil {
		return err
	}
	rtCfg := cfg.Runtime
	rtCfg.DataDir = dataDir
	rtCfg.Version = Version.GitVersion
	rtCfg.Logger = log.With("component", "runtime")
	restCfg, err := cp.ComponentConfig("kubelet", "system:node:"+cfg.Name, "system:nodes")
	if err != nil {
		return fmt.Errorf("kubelet credentials: %w", err)
	}
	if !cfg.NoRuntimeEvents {
		// The runtime reports its steps of each pod as Events, under its own name per node
		// (the trace's runtime/<node>).
		rtRest, err := cp.ComponentConfig("runtime", RuntimeUser(cfg.Name), RuntimeGroup)
		if err != nil {
			return fmt.Errorf("runtime credentials: %w", err)
		}
		rtRest.ContentType, rtRest.AcceptContentTypes = "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf,application/json"
		if rtCfg.Client, err = kubernetes.NewForConfig(rtRest); err != nil {
			return fmt.Errorf("runtime client: %w", err)
		}
		rtCfg.NodeName = cfg.Name
	}
	addrs := nodestatus.DefaultAddresses(cfg.Name)
	var ips []net.IP
	for _, a := range addrs {
		if a.Type == v1.NodeInternalIP {
			if ip := net.ParseIP(a.Address); ip != nil {
				ips = append(ips, ip)
			}
		}
	}
	serving, err := server.LoadOrIssueServing(cp.CA(), cp.PKIDir(), cfg.Name, ips)
	if err != nil {
		return fmt.Errorf("kubelet serving certificate: %w", err)
	}
	if err := startProxy(ctx, cp, cfg.Name, serviceCIDR, cfg.ProxyMode, log, run); err != nil {
		return err
	}
	var clusterDNS []string
	if len(ips) > 0 {
		if cfg.DNSPort == 0 {
			cfg.DNSPort = 53
		}
		dnsIP, err := DNSServiceIP(serviceCIDR)
		if err != nil {
			return fmt.Errorf("cluster DNS: %w", err)
		}
		if err := startDNS(ctx, cp, dnsIP, ips[0].String(), cfg.DNSPort, log, run); err != nil {
			return err
		}
		clusterDNS = []string{dnsIP}
	} else {
		log.Warn("no node address for the cluster DNS server: pods get the host's resolvers")
	}
	// The kubelet reaches the runtime in this process directly (runtime.Local), not through
	// the socket, which other clients (kubette image, crictl) still use.
	rtCfg.Local = runtime.NewLocal()
	run("runtime", func(ctx context.Context) error { return runtime.Run(ctx, rtCfg) })
	run("kubelet", func(ctx context.Context) error {
		return agent.Run(ctx, agent.Config{
			NodeName:    cfg.Name,
			RestConfig:  restCfg,
			DataDir:     dataDir,
			CRIEndpoint: "unix://" + runtime.SocketPath(dataDir),
			CRIConn:     rtCfg.Local.Conn,
			PodCIDR:     cfg.PodCIDR,
			Port:        cfg.KubeletPort,
			ServingCert: serving,
			ClientCAs:   cp.CA().Pool(),
			ClusterDNS:  clusterDNS,
			Logger:      log.With("component", "kubelet"),
		})
	})
	return nil
}
