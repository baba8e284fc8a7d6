// Package testenv starts a real control plane (embedded etcd and the API server
// over HTTPS with client certificates) on loopback for integration tests, and
// hands out client-go configurations for it.
package testenv

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubette/kubette/internal/apiserver/admission/serviceaccount"
	"github.com/kubette/kubette/internal/controlplane"
	"github.com/kubette/kubette/internal/metrics/scraper"
	"github.com/kubette/kubette/internal/pki"
)

// Options tune the environment.
type Options struct {
	// MaxWatchTimeout caps each watch request, to exercise client resumption.
	MaxWatchTimeout time.Duration
	// ServiceAccountAdmission runs the ServiceAccount admission plugin, which (as in
	// upstream's integration tests) is off by default: without the controller manager no
	// namespace has the default ServiceAccount it requires of every pod.
	ServiceAccountAdmission bool
	// Audit configures the API server's audit log.
	Audit controlplane.AuditConfig
	// MetricsSource, when set, is where the resource metrics scraper reads each node's
	// /metrics/resource (a fake kubelet); MetricResolution how often (0: 15s).
	MetricsSource    scraper.Source
	MetricResolution time.Duration
	// DataDir holds etcd's data and the certificates (default t.TempDir()): a test that
	// restarts the control plane (Env.Stop, then Start again) passes the same one.
	DataDir string
}

// Env is a running control plane.
type Env struct {
	// Config is an admin client configuration with high client-side rate limits.
	Config *rest.Config
	// Client is a typed clientset built from Config.
	Client kubernetes.Interface
	// Kubeconfig is the admin kubeconfig path.
	Kubeconfig string

	cp   *controlplane.ControlPlane
	stop func()
}

// Stop stops the control plane and waits for it, failing the test if it stopped with
// an error; the end of the test stops it otherwise. Stopping twice is stopping once.
func (e *Env) Stop() { e.stop() }

// ComponentConfig is the client configuration of a component running in the test's
// process as user (e.g. system:kube-controller-manager): in-process, as `kubette up`
// gives its components (see controlplane.ControlPlane.ComponentConfig).
func (e *Env) ComponentConfig(name, user string, groups ...string) (*rest.Config, error) {
	return e.cp.ComponentConfig(name, user, groups...)
}

// ServiceAccountConfig is the client configuration of a component running in the test's
// process as the ServiceAccount kube-system/<name>, as `kubette up` gives each controller
// (see controlplane.ControlPlane.ServiceAccountConfig).
func (e *Env) ServiceAccountConfig(name string) (*rest.Config, error) {
	return e.cp.ServiceAccountConfig(name)
}

// CA is the cluster's certificate authority: the API server trusts the kubelets' serving
// certificates it issued, and kubelets trust the API server's client certificate it issued.
func (e *Env) CA() *pki.CA { return e.cp.CA() }

// Start brings up a control plane in t.TempDir() that stops when the test ends.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	// A listener of its own on a free port: choosing a port and binding it later raced with
	// the other tests' listeners (and embedded etcd's).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatalf("listen: %v", err)
	}
	dir := opts.DataDir
	if dir == "" {
		dir = t.TempDir()
	}
	cp, err := controlplane.Start(ctx, controlplane.Config{
		DataDir: dir, Listener: ln, UnsafeNoFsync: true,
		MaxWatchTimeout:         opts.MaxWatchTimeout,
		Logger:                  slog.New(slog.NewTextHandler(io.Discard, nil)),
		DisableAdmissionPlugins: disabledPlugins(opts),
		Audit:                   opts.Audit,
		MetricsSource:           opts.MetricsSource,
		MetricResolution:        opts.MetricResolution,
	})
	if err != nil {
		cancel()
		_ = ln.Close()
		t.Fatalf("start control plane: %v", err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := cp.Wait(); err != nil {
				t.Errorf("control plane stopped with: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	cfg, err := clientcmd.BuildConfigFromFlags("", cp.Kubeconfig)
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	return &Env{Config: cfg, Client: client, Kubeconfig: cp.Kubeconfig, cp: cp, stop: stop}
}

// disabledPlugins are the admission plugins the environment leaves out.
func disabledPlugins(opts Options) []string {
	if opts.ServiceAccountAdmission {
		return nil
	}
	return []string{serviceaccount.Name}
}
