// Package sim simulates nodes for scale work, as KWOK does, inside kubette's
// one binary: it registers Node objects that look like a kubelet registered
// them, keeps their Leases and Ready condition fresh, and moves the pods bound
// to them through their lifecycle (Pending → Running with a pod IP from the
// node's pod CIDR; a deleted pod is gone after its grace period) without
// running any container. It reaches the cluster only through the API server.
//
// One process holds thousands of nodes: there is no goroutine, timer or watch
// per node. Heartbeats of every node sit in one heap and pass one token bucket
// (beatPlan); pods of every node come from one informer (a field selector
// spec.nodeName!= and a filter on the node names) whose cache keeps a trimmed
// copy of each pod, and go through one work queue served by Options.Workers
// workers.
//
// What a simulated node does, and where it differs from a kubelet:
//   - Registration: a Node with capacity = allocatable, the four standard
//     conditions (Ready True, the pressures False), nodeInfo, a /24 pod CIDR
//     per node from Options.PodCIDRBase, and as InternalIP and kubelet port the
//     simulator's own listener (Options.NodeIP, loopback by default, and
//     Options.KubeletPort); an existing Node of the same name is adopted (its
//     UID, pod CIDR and others' labels and taints stay).
//   - Kubelet API: that one HTTPS listener serves every node's /containerLogs,
//     which pods/log reaches: a simulated container's log says that it started
//     and runs no process, and when it exited (follow, tailLines, sinceSeconds,
//     sinceTime, timestamps and limitBytes as the kubelet's). /exec, /attach and
//     /portForward answer 400 saying the node is simulated. No request for a
//     simulated node leaves this machine.
//   - Heartbeats: each Lease in kube-node-lease is updated every
//     LeaseRenewInterval and each node's conditions get a fresh
//     lastHeartbeatTime every StatusInterval, unless the shared token bucket
//     (HeartbeatQPS) stretches both evenly.
//   - Pods: a pod bound to a simulated node goes from Pending to Running and
//     Ready in one status patch (no ContainerCreating step, no image pulls, no
//     Events, no probes): conditions PodReadyToStartContainers, Initialized,
//     ContainersReady, Ready and PodScheduled True, container statuses running
//     (init containers completed, sidecars running), a pod IP (the lowest free
//     address of the node's pod CIDR; the node's own for host-network pods),
//     hostIP and startTime. The address returns to the pool once the pod is gone
//     or has finished, never earlier, so two pods never hold one address.
//   - Deletion: a pod marked for deletion is deleted with grace period 0 and a
//     UID precondition once min(its grace period, MaxDeletionGrace) has passed,
//     counted from the deletion request (deletionTimestamp - grace, plus the
//     second the timestamp's truncation may have taken off). Unlike a
//     kubelet, the simulator does not first report the containers terminated.
//   - Completion: a pod with restartPolicy Never or OnFailure and the
//     AnnotationExitAfter annotation Succeeds that long after it started.
//   - A Node deleted by someone else is left alone (not registered again);
//     its pods are no longer driven.
package sim

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Sim is a set of simulated nodes. Build it with New and start it with Run.
type Sim struct {
	cfg    *config
	client kubernetes.Interface
	nodes  []*node
	byName map[string]*node // fixed at New: read without a lock
	ready  chan struct{}
	stats  counters
	run    atomic.Bool

	// ipMu guards every node's pool and the pod records.
	ipMu sync.Mutex
	pods map[string]*podRecord

	queue   workqueue.TypedRateLimitingInterface[string]
	indexer cache.Indexer

	// kubeletPort is the port the nodes publish, set by Run once it listens;
	// podsSynced is closed once the pod cache has synced (the kubelet port
	// answers 503 until then).
	kubeletPort int32
	podsSynced  chan struct{}

	// beatMu guards plan; wake tells the dispatcher that plan changed.
	beatMu sync.Mutex
	plan   *beatPlan
	wake   chan struct{}
}

// node is one simulated node. Fields set during registration are read by
// heartbeats and pod workers only after registration finished.
type node struct {
	index      int
	name       string
	cidr       netip.Prefix
	ip         netip.Addr
	pool       *ipPool // guarded by Sim.ipMu
	uid        types.UID
	readySince metav1.Time
	// leaseRV and the failure counts belong to the one heartbeat of their kind
	// in flight (beatPlan hands out one at a time per node and kind).
	leaseRV        string
	leaseFailures  uint8
	statusFailures uint8
	// gone is set when the Node was deleted by someone else: the simulator
	// then leaves it and its pods alone.
	gone atomic.Bool
}

// Stats count what a simulator did since it started.
type Stats struct {
	// Nodes is how many nodes are registered and still managed.
	Nodes int
	// LeaseRenewals and StatusUpdates count successful heartbeats.
	LeaseRenewals, StatusUpdates int64
	// PodsStarted, PodsCompleted and PodsDeleted count pods moved to Running,
	// to Succeeded, and deleted at the end of their grace period.
	PodsStarted, PodsCompleted, PodsDeleted int64
	// Errors counts failed API requests (each is retried).
	Errors int64
}

type counters struct {
	nodes                                   atomic.Int64
	leases, statuses                        atomic.Int64
	podsStarted, podsCompleted, podsDeleted atomic.Int64
	errors                                  atomic.Int64
}

// New validates o and prepares a simulator for cfg's cluster; nothing is sent
// to the API server until Run.
func New(cfg *rest.Config, o Options) (*Sim, error) {
	c, err := o.complete()
	if err != nil {
		return nil, fmt.Errorf("invalid simulator options: %w", err)
	}
	rc := rest.CopyConfig(cfg)
	rc.QPS, rc.Burst = c.ClientQPS, c.ClientBurst
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	if rc.UserAgent == "" {
		rc.UserAgent = "kubette-sim"
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("failed to build the simulator's client: %w", err)
	}
	s := &Sim{
		cfg:        c,
		client:     client,
		nodes:      make([]*node, c.Nodes),
		byName:     make(map[string]*node, c.Nodes),
		ready:      make(chan struct{}),
		podsSynced: make(chan struct{}),
		pods:       map[string]*podRecord{},
		plan:       newBeatPlan(c.HeartbeatQPS, c.HeartbeatBurst),
		wake:       make(chan struct{}, 1),
	}
	for i := range s.nodes {
		cidr, err := subnet(c.podCIDRBase, c.NodeCIDRMaskSize, i)
		if err != nil {
			return nil, fmt.Errorf("failed to carve the pod CIDR of node %d: %w", i, err)
		}
		pool, err := newIPPool(cidr)
		if err != nil {
			return nil, fmt.Errorf("failed to build the IP pool of node %d: %w", i, err)
		}
		n := &node{index: i, name: fmt.Sprintf("%s%d", c.NamePrefix, i), cidr: cidr,
			ip: c.nodeIP, pool: pool}
		s.nodes[i] = n
		s.byName[n.name] = n
	}
	return s, nil
}

// Run starts a simulator and blocks until ctx is done: it builds the
// simulator with New, then runs it. See (*Sim).Run.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	s, err := New(cfg, o)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}

// Run registers the nodes (creating them, or adopting Nodes of the same names
// left by an earlier run), then keeps their heartbeats going and drives their
// pods until ctx is done. On return the nodes stay, as after a kubelet stops,
// unless Options.Cleanup is set. It returns an error when the nodes cannot be
// registered (an invalid object, a forbidden request) or cleanup fails. Run
// may be called once.
func (s *Sim) Run(ctx context.Context) error {
	if !s.run.CompareAndSwap(false, true) {
		return errors.New("simulator already ran")
	}
	log := s.cfg.Logger
	start := s.cfg.Clock.Now()
	var wg sync.WaitGroup
	defer wg.Wait() // after stop, below
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ln, err := s.listenKubelet()
	if err != nil {
		return err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.serveKubelet(runCtx, ln); err != nil {
			log.Error("simulated kubelet port stopped", "err", err)
		}
	}()
	if err := s.register(ctx); err != nil {
		if ctx.Err() != nil {
			return s.cleanup(ctx)
		}
		return errors.Join(err, s.cleanup(ctx))
	}
	close(s.ready)
	log.Info("simulated nodes registered", "nodes", len(s.nodes), "took", s.cfg.Clock.Since(start).Round(time.Millisecond),
		"leaseRenewPeriod", s.cfg.leaseRenewPeriod().Round(time.Millisecond), "heartbeatQPS", s.cfg.HeartbeatQPS,
		"kubeletEndpoint", ln.Addr().String())

	s.startBeats(runCtx, &wg)
	if err := s.startPods(runCtx, &wg); err != nil {
		stop()
		wg.Wait()
		return errors.Join(err, s.cleanup(ctx))
	}
	<-ctx.Done()
	wg.Wait()
	st := s.Stats()
	log.Info("simulator stopped", "leaseRenewals", st.LeaseRenewals, "statusUpdates", st.StatusUpdates,
		"podsStarted", st.PodsStarted, "podsDeleted", st.PodsDeleted, "errors", st.Errors)
	return s.cleanup(ctx)
}

// Ready is closed once every node is registered with its Lease.
func (s *Sim) Ready() <-chan struct{} { return s.ready }

// NodeNames returns the names of the simulated nodes, in index order.
func (s *Sim) NodeNames() []string {
	names := make([]string, len(s.nodes))
	for i, n := range s.nodes {
		names[i] = n.name
	}
	return names
}

// Stats returns what the simulator did so far.
func (s *Sim) Stats() Stats {
	return Stats{
		Nodes:         int(s.stats.nodes.Load()),
		LeaseRenewals: s.stats.leases.Load(), StatusUpdates: s.stats.statuses.Load(),
		PodsStarted: s.stats.podsStarted.Load(), PodsCompleted: s.stats.podsCompleted.Load(),
		PodsDeleted: s.stats.podsDeleted.Load(), Errors: s.stats.errors.Load(),
	}
}
