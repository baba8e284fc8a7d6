package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/kubette/kubette/internal/inprocess/objwatch"
)

// RunWithLeaderElection runs a scheduler against the API server of cfg until ctx
// is done: it builds clients without a client-side rate limit, the informers and
// the event recorder from cfg (o.Client, o.Informers and o.Recorder are ignored),
// starts the informers at once, and schedules — with
// o.LeaderElect, only while holding the Lease (kube-system/kube-scheduler by
// default). Losing the lease is an error, as upstream (whose process then exits).
func RunWithLeaderElection(ctx context.Context, cfg *rest.Config, o Options) error {
	c := rest.CopyConfig(cfg)
	// No client-side rate limit: the binds in flight bound the scheduler's requests
	// (one binding and one Event per pod), and a limiter costs every request a
	// formatted message and a URL template for its latency metric (1.5 % of `up`'s
	// CPU while binding at 5000 nodes, where the limit of 5000/s never delayed one).
	c.QPS, c.Burst, c.RateLimiter = -1, 0, nil
	c = rest.AddUserAgent(c, "kubette-scheduler")
	// Protobuf, as upstream's components: strict JSON decoding was a third of a bind's server CPU.
	pc := rest.CopyConfig(c)
	pc.ContentType, pc.AcceptContentTypes = "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf,application/json"
	client, err := kubernetes.NewForConfig(pc)
	if err != nil {
		return fmt.Errorf("scheduler clientset: %w", err)
	}
	if o.SchedulerName == "" {
		o.SchedulerName = DefaultSchedulerName
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	factory := informers.NewSharedInformerFactory(client, 0)
	// The factory is the scheduler's own: its node informer can drop managedFields too.
	// In `kubette up`'s process the pod and node watches are served as objects, each
	// copied for this informer (package objwatch), instead of encoded and decoded.
	ow, _ := objwatch.ForConfig(pc) // pc: the user agent client-go's watch would send
	factory.InformerFor(&corev1.Node{}, nodeInformerWith(ow))
	factory.InformerFor(&corev1.Pod{}, podInformerWith(ow))
	sink := newEventSink(ctx, client.EventsV1())
	defer func() {
		cancel()
		sink.wait()
	}()
	broadcaster := events.NewBroadcaster(sink)
	o.Client, o.Informers = client, factory
	o.Recorder = broadcaster.NewRecorder(scheme.Scheme, o.SchedulerName)

	sched, err := New(ctx, o)
	if err != nil {
		return err
	}
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return fmt.Errorf("start event recording: %w", err)
	}
	defer broadcaster.Shutdown()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer cancel() // runs before Shutdown: informers stop first

	if !o.LeaderElect {
		return sched.Run(ctx)
	}
	// A separate client, so that scheduling traffic never delays lease renewals.
	leClient, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "kubette-scheduler-leader-election"))
	if err != nil {
		return fmt.Errorf("leader election clientset: %w", err)
	}
	return runWithLease(ctx, leClient, o, sched.Run)
}

// runWithLease calls run while this instance holds the Lease.
func runWithLease(ctx context.Context, client kubernetes.Interface, o Options, run func(context.Context) error) error {
	if o.LeaseNamespace == "" {
		o.LeaseNamespace = "kube-system"
	}
	if o.LeaseName == "" {
		o.LeaseName = "kube-scheduler"
	}
	if o.Identity == "" {
		host, _ := os.Hostname()
		o.Identity = host + "_" + string(uuid.NewUUID())
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, o.LeaseNamespace, o.LeaseName,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: o.Identity})
	if err != nil {
		return fmt.Errorf("leader election lock: %w", err)
	}
	leCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The elector starts OnStartedLeading on a goroutine of its own: mu and stopped
	// make sure run is either waited for or never started once le.Run returned.
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		stopped bool
		runErr  error
		led     bool
	)
	lease := o.LeaseNamespace + "/" + o.LeaseName
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, Name: o.LeaseName, ReleaseOnCancel: true,
		LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RetryPeriod: o.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				mu.Lock()
				if stopped {
					mu.Unlock()
					return
				}
				wg.Add(1)
				led = true
				mu.Unlock()
				defer wg.Done()
				logger.Info("became leader", "lease", lease, "identity", o.Identity)
				err := run(ctx)
				mu.Lock()
				runErr = err
				mu.Unlock()
			},
			OnStoppedLeading: func() {
				logger.Info("stopped leading", "lease", lease, "identity", o.Identity)
				cancel()
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	le.Run(leCtx)
	mu.Lock()
	stopped = true
	mu.Unlock()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if runErr != nil {
		return runErr
	}
	if ctx.Err() == nil && led {
		return fmt.Errorf("lost the lease %s", lease)
	}
	if ctx.Err() == nil {
		return errors.New("leader election ended without leading")
	}
	return nil
}
