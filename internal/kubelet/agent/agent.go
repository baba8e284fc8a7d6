// Package agent composes the kubelet's parts into the node agent that `kubette kubelet` and
// `kubette up` run: the CRI client, the pod workers (internal/kubelet) with their volume and
// probe managers, node registration with its Lease and status (nodestatus), and the kubelet's
// HTTPS port for logs, exec, attach, port-forward and resource usage (server, stats). It reaches the container
// runtime only over CRI.
package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubette/kubette/internal/controlplane"
	"github.com/kubette/kubette/internal/kubelet"
	"github.com/kubette/kubette/internal/kubelet/cri"
	"github.com/kubette/kubette/internal/kubelet/nodestatus"
	"github.com/kubette/kubette/internal/kubelet/prober"
	"github.com/kubette/kubette/internal/kubelet/server"
	"github.com/kubette/kubette/internal/kubelet/stats"
	"github.com/kubette/kubette/internal/kubelet/volume"
)

// DefaultPort is the kubelet's HTTPS port, as upstream's.
const DefaultPort = 10250

// Config configures the node agent.
type Config struct {
	// NodeName is this node's name (required).
	NodeName string
	// RestConfig reaches the API server with the node's credentials (required).
	RestConfig *rest.Config
	// DataDir holds kubelet/ (pod volumes) and logs/pods/ (container logs).
	DataDir string
	// CRIEndpoint is the runtime's socket, "unix:///path" (default: DATA_DIR/cri.sock).
	CRIEndpoint string
	// CRIConn, when set, is used instead of CRIEndpoint: it returns a connection to the
	// runtime in this process once it is up (`kubette up`: runtime.Local.Conn).
	CRIConn func(ctx context.Context) (grpc.ClientConnInterface, error)
	// PodCIDR is set on the Node when it has none; the runtime gets the Node's.
	PodCIDR string
	// Address and Port are where the kubelet's HTTPS server listens (default ":10250").
	Address string
	Port    int32
	// ServingCert is the kubelet's serving certificate; ClientCAs verify the API server's
	// client certificate on the kubelet's port (required).
	ServingCert tls.Certificate
	ClientCAs   *x509.CertPool
	// Addresses returns the node's addresses (default: nodestatus.DefaultAddresses).
	Addresses func() []v1.NodeAddress
	// ClusterDNS are the nameservers of pods with dnsPolicy ClusterFirst (the kube-dns
	// Service's ClusterIP); empty: pods use the host's resolvers.
	ClusterDNS []string
	// AllowedUnsafeSysctls are the sysctls (or prefixes ending in "*") pods may set beyond
	// the safe ones (kubelet.Config.AllowedUnsafeSysctls).
	AllowedUnsafeSysctls []string
	// Labels and Taints are given to the Node at registration.
	Labels map[string]string
	Taints []v1.Taint
	// Logger logs (default slog.Default()).
	Logger *slog.Logger
}

// Run runs the node agent until ctx is done. Containers keep running after it returns: a
// later Run adopts them.
func Run(ctx context.Context, cfg Config) error {
	if cfg.NodeName == "" || cfg.RestConfig == nil {
		return errors.New("node agent: NodeName and RestConfig are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.DataDir == "" {
		cfg.DataDir = "/var/lib/kubette"
	}
	if cfg.CRIEndpoint == "" {
		cfg.CRIEndpoint = "unix://" + filepath.Join(cfg.DataDir, "cri.sock")
	}
	if cfg.Port == 0 {
		cfg.Port = DefaultPort
	}
	if cfg.Addresses == nil {
		name := cfg.NodeName
		cfg.Addresses = func() []v1.NodeAddress { return nodestatus.DefaultAddresses(name) }
	}
	restCfg := rest.CopyConfig(cfg.RestConfig)
	restCfg.ContentType = "application/vnd.kubernetes.protobuf"
	restCfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	restCfg.QPS, restCfg.Burst = 50, 100
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("node agent: API client: %w", err)
	}
	rt, err := connectRuntime(ctx, cfg, cfg.Logger)
	if err != nil {
		return fmt.Errorf("node agent: %w", err)
	}
	if rt == nil {
		return nil // stopped while waiting for the runtime
	}
	defer rt.Close()

	events := record.NewBroadcaster(record.WithContext(ctx))
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer events.Shutdown()
	recorder := events.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kubelet", Host: cfg.NodeName})

	log := cfg.Logger
	probes := prober.New(prober.Config{Runner: rt, Recorder: recorder, Logger: log.With("part", "prober"), KubeVersion: kubeMinor()})
	volumes := volume.New(volume.Config{RootDir: filepath.Join(cfg.DataDir, "kubelet"), Client: client, Logger: log.With("part", "volumes")})
	kl, err := kubelet.New(kubelet.Config{
		NodeName:   cfg.NodeName,
		Client:     client,
		Runtime:    rt,
		Images:     rt,
		Volumes:    volumes,
		Probes:     probes,
		HTTPHooks:  probes,
		RootDir:    filepath.Join(cfg.DataDir, "kubelet"),
		LogDir:     filepath.Join(cfg.DataDir, "logs", "pods"),
		Logger:     log,
		Recorder:   recorder,
		ClusterDNS: cfg.ClusterDNS,

		AllowedUnsafeSysctls: cfg.AllowedUnsafeSysctls,
	})
	if err != nil {
		return fmt.Errorf("node agent: %w", err)
	}
	ns, err := nodestatus.New(nodestatus.Config{
		NodeName:    cfg.NodeName,
		Client:      client,
		PodCIDR:     cfg.PodCIDR,
		KubeletPort: cfg.Port,
		Addresses:   cfg.Addresses,
		Labels:      cfg.Labels,
		Taints:      cfg.Taints,
		Runtime:     func(ctx context.Context) error { return runtimeReady(ctx, rt) },
		Logger:      log.With("part", "nodestatus"),
		DataDir:     cfg.DataDir,
	})
	if err != nil {
		return fmt.Errorf("node agent: %w", err)
	}
	usage, err := stats.New(stats.Config{NodeName: cfg.NodeName, Runtime: rt,
		Node: stats.CgroupNode("/sys/fs/cgroup", "/proc", cfg.DataDir)})
	if err != nil {
		return fmt.Errorf("node agent: %w", err)
	}
	srv, err := server.New(server.Config{
		Addr: net.JoinHostPort(cfg.Address, strconv.Itoa(int(cfg.Port))),
		TLS: &tls.Config{
			Certificates: []tls.Certificate{cfg.ServingCert},
			ClientCAs:    cfg.ClientCAs,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS12,
		},
		Logs:    kl,
		Streams: rt,
		Stats:   usage,
		Logger:  log.With("part", "server"),
	})
	if err != nil {
		return fmt.Errorf("node agent: %w", err)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	run := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("%s: %w", name, err)
				cancel()
			}
		}()
	}
	run("prober", func(ctx context.Context) error { probes.Run(ctx); return nil })
	run("kubelet", kl.Run)
	run("node status", ns.Run)
	run("kubelet server", srv.Run)
	run("pod CIDR", func(ctx context.Context) error { return syncPodCIDR(ctx, client, rt, cfg.NodeName, log) })
	<-ctx.Done()
	wg.Wait()
	close(errs)
	return errors.Join(collect(errs)...)
}

func collect(ch <-chan error) []error {
	var out []error
	for err := range ch {
		out = append(out, err)
	}
	return out
}

// connectRuntime connects to the CRI runtime, waiting for it to come up (it may start beside
// the kubelet): through cfg.CRIConn when set, else cfg.CRIEndpoint's socket. It returns nil,
// nil when ctx ends first.
func connectRuntime(ctx context.Context, cfg Config, log *slog.Logger) (*cri.Client, error) {
	if cfg.CRIConn == nil {
		return dialRuntime(ctx, cfg.CRIEndpoint, log)
	}
	conn, err := cfg.CRIConn(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil
		}
		return nil, fmt.Errorf("connect to the container runtime: %w", err)
	}
	rt, err := cri.New(ctx, conn)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil
		}
		return nil, fmt.Errorf("connect to the container runtime: %w", err)
	}
	return rt, nil
}

// dialRuntime dials the runtime's socket until it answers (nil, nil when ctx ends first).
func dialRuntime(ctx context.Context, endpoint string, log *slog.Logger) (*cri.Client, error) {
	start := time.Now()
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		rt, err := cri.Dial(ctx, endpoint)
		if err == nil {
			return rt, nil
		}
		if time.Since(start) > 10*time.Second {
			log.Warn("waiting for the container runtime", "endpoint", endpoint, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(wait):
		}
	}
}

// runtimeReady asks the runtime whether it and its network are ready.
func runtimeReady(ctx context.Context, rt *cri.Client) error {
	st, err := rt.Status(ctx, false)
	if err != nil {
		return fmt.Errorf("container runtime is down: %w", err)
	}
	var notReady []error
	for _, c := range st.GetStatus().GetConditions() {
		if !c.Status {
			notReady = append(notReady, fmt.Errorf("container runtime %s is false: %s: %s", c.Type, c.Reason, c.Message))
		}
	}
	return errors.Join(notReady...)
}

// syncPodCIDR hands the Node's pod CIDR to the runtime (CRI UpdateRuntimeConfig) as soon as
// the Node has one, and again whenever it changes.
func syncPodCIDR(ctx context.Context, client kubernetes.Interface, rt *cri.Client, nodeName string, log *slog.Logger) error {
	var applied string
	for {
		wait := 10 * time.Second
		node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		switch {
		case err != nil:
			wait = time.Second
		case node.Spec.PodCIDR == "":
			wait = time.Second
		case node.Spec.PodCIDR != applied:
			cidr := node.Spec.PodCIDR
			if len(node.Spec.PodCIDRs) > 1 {
				cidr = node.Spec.PodCIDRs[0] + "," + node.Spec.PodCIDRs[1]
			}
			if err := rt.UpdateRuntimeConfig(ctx, &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: cidr}}); err != nil {
				log.Info("runtime does not take the pod CIDR yet", "podCIDR", cidr, "err", err)
				wait = time.Second
				break
			}
			applied = node.Spec.PodCIDR
			log.Info("pod CIDR handed to the runtime", "podCIDR", cidr)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// kubeMinor is "<major>.<minor>" of the Kubernetes version kubette reports, for probes'
// User-Agent.
func kubeMinor() string { return controlplane.Version.Major + "." + controlplane.Version.Minor }
