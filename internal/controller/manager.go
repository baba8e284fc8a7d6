package controller

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/kubette/kubette/internal/pki"
)

// ManagerOptions configure a controller manager.
type ManagerOptions struct {
	// Config is the client configuration of the controller manager.
	Config *rest.Config
	// Controllers maps names to constructors (normally Registry()).
	Controllers map[string]Constructor
	// ClientNames maps a controller's name to the name its client adds to the
	// User-Agent, as upstream's controller client builder does (default: the
	// controller's name with "-controller").
	ClientNames map[string]string
	// RootCA is the CA bundle (PEM) the controllers publish for pods to verify the API
	// server with (upstream's --root-ca-file); empty means the CA of Config (its CAData,
	// or the file CAFile names), as upstream falls back to its kubeconfig's.
	RootCA []byte
	// ControllerConfig, when set, returns the client configuration of the controller
	// whose client name is given, as upstream's --use-service-account-credentials gives
	// each controller the identity of its ServiceAccount kube-system/<client name> (whose
	// bootstrap role system:controller:<client name> holds just what it needs). Unset,
	// every controller uses Config. The shared informers and leader election always use Config.
	ControllerConfig func(clientName string) (*rest.Config, error)
	// ClusterSigning and ClusterSigningDuration are given to the CSR signers (see Deps).
	ClusterSigning         *pki.CA
	ClusterSigningDuration time.Duration
	// Enabled lists the controllers to run; empty means all.
	Enabled []string
	// Workers is the number of workers per controller (default 5).
	Workers int
	// LeaderElect runs the controllers only while holding the lease.
	LeaderElect bool
	// LeaseNamespace and LeaseName name the Lease (default kube-system/kube-controller-manager).
	LeaseNamespace, LeaseName string
	// Identity is this instance's holder identity (default hostname + a random suffix).
	Identity string
	// KeepLeaseOnStop leaves the lease held when ctx ends instead of releasing it, as a
	// killed process would (tests use it to check a takeover after the lease expires).
	KeepLeaseOnStop bool
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election (defaults 15 s, 10 s, 2 s as upstream).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Logger receives logs.
	Logger *slog.Logger
}

// RunManager runs the enabled controllers until ctx is done; with LeaderElect it first
// acquires the lease and stops everything if the lease is lost.
func RunManager(ctx context.Context, o ManagerOptions) error {
	if o.Workers <= 0 {
		o.Workers = 5
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.LeaseNamespace == "" {
		o.LeaseNamespace = "kube-system"
	}
	if o.LeaseName == "" {
		o.LeaseName = "kube-controller-manager"
	}
	if o.Identity == "" {
		host, _ := os.Hostname()
		o.Identity = host + "_" + string(uuid.NewUUID())
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
	}
	names, err := enabled(o.Controllers, o.Enabled)
	if err != nil {
		return err
	}
	if len(o.RootCA) == 0 && o.Config != nil {
		if o.RootCA, err = configCA(o.Config); err != nil {
			return err
		}
	}
	run := func(ctx context.Context) error { return runControllers(ctx, o, names) }
	if !o.LeaderElect {
		return run(ctx)
	}
	return runWithLease(ctx, o, o.LeaseName, run)
}

// runWithLease calls run while this instance holds the named Lease.
func runWithLease(ctx context.Context, o ManagerOptions, leaseName string, run func(context.Context) error) error {
	deps, _, err := NewDeps(o.Config, "leader-election")
	if err != nil {
		return err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, o.LeaseNamespace, leaseName,
		deps.Client.CoreV1(), deps.Client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: o.Identity, EventRecorder: deps.Recorder(leaseName)})
	if err != nil {
		return fmt.Errorf("leader election lock: %w", err)
	}
	var runErr error
	var wg sync.WaitGroup
	leCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, Name: leaseName, ReleaseOnCancel: !o.KeepLeaseOnStop,
		LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RetryPeriod: o.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				o.Logger.Info("became leader", "lease", o.LeaseNamespace+"/"+leaseName, "identity", o.Identity)
				wg.Add(1)
				defer wg.Done()
				runErr = run(ctx)
			},
			OnStoppedLeading: func() {
				o.Logger.Info("stopped leading", "lease", o.LeaseNamespace+"/"+leaseName, "identity", o.Identity)
				cancel()
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	le.Run(leCtx)
	wg.Wait()
	if ctx.Err() == nil && runErr == nil {
		return fmt.Errorf("lost the lease %s/%s", o.LeaseNamespace, leaseName)
	}
	return runErr
}

// configCA is the CA bundle a client configuration trusts: its CAData, or the contents
// of its CAFile; nil when it has neither (in-process clients, plain HTTP).
func configCA(cfg *rest.Config) ([]byte, error) {
	if len(cfg.CAData) > 0 {
		return cfg.CAData, nil
	}
	if cfg.CAFile == "" {
		return nil, nil
	}
	ca, err := os.ReadFile(cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("read the kubeconfig's certificate authority: %w", err)
	}
	return ca, nil
}

func enabled(all map[string]Constructor, want []string) ([]string, error) {
	if len(want) == 0 {
		for n := range all {
			want = append(want, n)
		}
	}
	for _, n := range want {
		if _, ok := all[n]; !ok {
			return nil, fmt.Errorf("unknown controller %q", n)
		}
	}
	sort.Strings(want)
	return want, nil
}

// runControllers builds every enabled controller on shared informers, starts them and
// blocks until ctx is done. The informers' client adds "shared-informers" to the
// User-Agent and each controller gets a client (and an Event recorder) of its own that
// adds its client name, as upstream's controller manager does: the API server's records
// (kubette trace) tell the controllers apart.
func runControllers(ctx context.Context, o ManagerOptions, names []string) error {
	shared, starter, err := NewDeps(o.Config, "shared-informers")
	if err != nil {
		return err
	}
	starter.ServePodsAsObjects()
	shared.Logger = o.Logger
	shared.RootCA = o.RootCA
	shared.ClusterSigning, shared.ClusterSigningDuration = o.ClusterSigning, o.ClusterSigningDuration
	starters := []*Starter{starter}
	var runners []Runner
	for _, n := range names {
		clientName := o.ClientNames[n]
		if clientName == "" {
			clientName = n + "-controller"
		}
		// Its own clients and Event broadcaster; its informer factories stay empty.
		cfg := o.Config
		if o.ControllerConfig != nil {
			if cfg, err = o.ControllerConfig(clientName); err != nil {
				return fmt.Errorf("credentials of controller %s: %w", n, err)
			}
		}
		own, ownStarter, err := NewDeps(cfg, clientName)
		if err != nil {
			return fmt.Errorf("clients of controller %s: %w", n, err)
		}
		d := shared
		d.Client, d.Config, d.Metadata, d.Recorder = own.Client, own.Config, own.Metadata, own.Recorder
		starters = append(starters, ownStarter)
		r, err := o.Controllers[n](d)
		if err != nil {
			return fmt.Errorf("build controller %s: %w", n, err)
		}
		runners = append(runners, r)
	}
	for _, s := range starters {
		s.Start(ctx)
	}
	var wg sync.WaitGroup
	for i, r := range runners {
		wg.Add(1)
		go func(name string, r Runner) {
			defer wg.Done()
			r.Run(ctx, o.Workers)
		}(names[i], r)
	}
	o.Logger.Info("controllers started", "controllers", names)
	wg.Wait()
	return nil
}
