// Package proxy is kubette's service proxy (kube-proxy's iptables mode, or
// its nftables mode with Options.Mode ModeNFTables): it watches Services and
// EndpointSlices through the API server, rebuilds a model of them on every
// change, renders it with internal/proxy/iptables and applies the result with
// iptables-restore --noflush — or, in nftables mode, renders and applies the
// same model with internal/proxy/nftables (nft -f: the first sync, one every
// SyncPeriod and any after a failure replace the whole table in one
// transaction, the others write only what changed). Everything below but the
// iptables details drives both modes: informers, coalescing, backoff, health
// checks, conntrack cleanup, Events. Only one mode is active at a time: each
// removes the other's rules after installing its own guard.
//
// How a sync goes:
//   - Before anything else, Run installs the guard chain (KUBE-SERVICE-CIDR-GUARD)
//     and its jumps first in filter OUTPUT and FORWARD, so a packet to an
//     unknown ClusterIP is rejected locally, never routed out, even before the
//     first Service is synced. The guard is never removed by a sync, only by
//     Cleanup. With RejectUnroutedPodCIDR the guard also rejects packets to
//     the pod CIDRs of the cluster's Nodes that no local route serves (the
//     pods of simulated nodes, which exist nowhere), and nothing else of the
//     cluster CIDR: Run first lists the Nodes (a Node informer, nodes.go),
//     so that the guard it installs already knows them, and every change of
//     the Nodes' pod CIDRs or of the host's routes (polled) syncs the guard.
//     The Nodes' pod CIDRs are merged into the fewest covering prefixes, so
//     5000 simulated /24s make a handful of rules.
//   - Informer events only wake the sync loop. Syncs are coalesced: at once
//     when the loop was idle for MinSyncPeriod, else when MinSyncPeriod has
//     passed since the previous one; everything that changed meanwhile goes
//     into one sync.
//   - A sync builds the model again only for the Services whose Service or
//     EndpointSlice objects changed, and the iptables.Renderer renders again
//     only the Services whose model changed.
//   - The first sync, one every SyncPeriod and every sync after a failure are
//     full: iptables-save shows what the host holds (a previous run's rules
//     after a restart), and the restores write only the chains the host lacks
//     or holds with other rules (compared in the form iptables-save prints,
//     iptables.SaveForm) and delete the owned chains the ruleset lacks
//     (iptables.Ruleset.FullSyncBatches); a restart over unchanged rules
//     writes nothing. The jumps from the built-in chains that the saved
//     tables lack are checked (iptables -C) and inserted (-I). Other syncs
//     write only the chains whose rules changed since the last sync
//     (iptables.UpdateBatches), and nothing at all when no rule changed.
//   - A sync of more than MaxChainsPerRestore per-service chains is applied
//     in several restores (iptables-nft-restore --noflush is quadratic in
//     the chains of one transaction): each service port's chains in one
//     restore, the top-level chains and the deletions last, so no jump ever
//     lacks its target; smaller syncs are one atomic restore.
//   - A restarted proxy finds the previous run's rules in place: they keep
//     serving while it starts, its guard install rewrites only the guard
//     chain (one atomic restore) and its first (full) sync replaces the rest
//     chain by chain, so traffic to a Service is never refused in between
//     (TestProxyRestartKeepsServing).
//   - Services with a healthCheckNodePort get upstream's health check server
//     (healthcheck.go), brought in line with the model after every sync.
//   - A failed apply is retried as a full sync with exponential backoff
//     (from MinSyncPeriod to 30 s).
//   - UDP endpoints that went away get their conntrack entries deleted
//     (conntrack -D) when the conntrack tool is installed; without it the
//     proxy says so once and goes on (stale UDP flows then live until their
//     conntrack timeout).
//
// net.ipv4.conf.all.route_localnet is not set (upstream sets it only for
// NodePorts on 127.0.0.1): NodePorts answer on the node's addresses, not on
// localhost.
package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubette/kubette/internal/proxy/iptables"
	"github.com/kubette/kubette/internal/proxy/nftables"
)

// Options configure a Proxy.
type Options struct {
	// Client reaches the API server. Required.
	Client kubernetes.Interface
	// NodeName is this node's name: the endpoints of the Local traffic
	// policies are those whose nodeName it is.
	NodeName string
	// ServiceCIDR is the ClusterIP range, e.g. 10.96.0.0/12. Required.
	ServiceCIDR string
	// ClusterCIDR is the pod range, e.g. 10.244.0.0/16: traffic to a
	// ClusterIP from outside it is masqueraded. Empty masquerades all.
	ClusterCIDR string
	// NodeIPs are the addresses NodePorts (and the health check ports of
	// externalTrafficPolicy Local Services) answer on; empty means every
	// local address but 127.0.0.0/8 (health check ports: every address).
	NodeIPs []netip.Addr
	// RejectUnroutedPodCIDR makes the guard reject packets to the addresses
	// of the Nodes' pod CIDRs (spec.podCIDRs, the parts inside ClusterCIDR)
	// that no local route serves: pods of simulated nodes. Other addresses
	// of ClusterCIDR (the host's own network, say) are never rejected. The
	// proxy then watches Nodes; its Run waits for their first list before it
	// installs the guard.
	RejectUnroutedPodCIDR bool
	// RoutedPodCIDRs lists the parts of ClusterCIDR this host routes; nil
	// reads the kernel's IPv4 routes (see KernelRoutedPrefixes). Used only
	// with RejectUnroutedPodCIDR; polled every RoutePollPeriod.
	RoutedPodCIDRs func(cluster netip.Prefix) ([]netip.Prefix, error)
	// RoutePollPeriod is how often RoutedPodCIDRs is polled (default 2 s).
	RoutePollPeriod time.Duration
	// MinSyncPeriod is the least time between two syncs (default 100 ms;
	// upstream's default is 1 s).
	MinSyncPeriod time.Duration
	// SyncPeriod is the time between full syncs (default 1 h, as upstream).
	SyncPeriod time.Duration
	// MaxChainsPerRestore bounds the per-service chains of one
	// iptables-restore run; 0 picks ChainsPerRestore of the ruleset's size.
	MaxChainsPerRestore int
	// Iptables runs the tools (default ExecRunner{}).
	Iptables Runner
	// Mode is ModeIPTables (the default when empty) or ModeNFTables.
	Mode string
	// Nft runs the nft tool: nftables mode applies its rules with it, the
	// iptables mode removes the nftables mode's table with it. Default: an
	// nftables.ExecRunner with the Prefix of Iptables when that is an
	// ExecRunner; nil otherwise (then iptables mode leaves nftables alone).
	Nft nftables.Runner
	// Logger receives the proxy's logs (default slog.Default()).
	Logger *slog.Logger
}

// The proxy's modes (Options.Mode), as upstream's --proxy-mode.
const (
	ModeIPTables = "iptables"
	ModeNFTables = "nftables"
)

// DefaultMinSyncPeriod is MinSyncPeriod's default (upstream: 1 s): with
// cached rendering and partial restores a sync of one changed Service took
// 14 ms with 1000 Services and about 90 ms with 10000 on this project's
// 2-core machine (bench/proxy), so changes reach the kernel within about
// 100 ms while bursts still coalesce.
const DefaultMinSyncPeriod = 100 * time.Millisecond

const maxBackoff = 30 * time.Second

// ChainsPerRestore is how many per-service chains the proxy puts in one
// iptables-restore run when Options.MaxChainsPerRestore is 0, whatever the
// size of the ruleset (the argument, its chain count, is not needed any more).
// iptables-nft-restore --noflush takes CPU time quadratic in the chains of one
// transaction, plus a cost per run. The CPU time (user + system) of the
// restores of a full sync of 10000 Services × 10 endpoints (110009 chains,
// bench/proxy) was 18.7 s at 100 chains per restore, 11.0 s at 300, 10.4 s at
// 500, 12.7 s at 1000 and 21.9 s at about 3300 (10·√chains, the earlier
// choice, made from wall times under varying load); at 1000 Services 0.9 s at
// 300 and 1.0 s at about 1000.
func ChainsPerRestore(int) int { return 500 }

// Proxy turns Services and EndpointSlices into iptables rules.
type Proxy struct {
	o     Options
	ipt   iptables.Options
	log   *slog.Logger
	run   Runner
	wake  chan struct{}
	stats counters

	// Owned by the sync loop.
	models       modelCache
	renderer     *iptables.Renderer
	applied      *iptables.Ruleset
	udp          map[udpKey]map[netip.Addr]bool
	conntrackOff bool
	health       *healthServer     // healthcheck.go
	nft          *nftables.Applier // nftables mode; nil in iptables mode
	nftRun       nftables.Runner
	events       syncEvents // traceevents.go
	nodes        *nodeCIDRs // nodes.go; nil without RejectUnroutedPodCIDR

	mu        sync.Mutex
	lastError error
}

type counters struct {
	syncs, restores, fullRestores, unchanged, failures atomic.Int64
}

// Stats count what a Proxy did since it started.
type Stats struct {
	// Syncs counts sync attempts; Restores the syncs that applied rules
	// (with one iptables-restore run or more), FullRestores those of them that
	// were full (a full sync counts even when the host held every rule
	// already and nothing was written); Unchanged the partial syncs that
	// wrote nothing because no rule changed; Failures the failed syncs.
	Syncs, Restores, FullRestores, Unchanged, Failures int64
	// LastError is the error of the last failed sync, nil after a success.
	LastError error
}

// New validates o and fills its defaults.
func New(o Options) (*Proxy, error) {
	if o.Client == nil {
		return nil, fmt.Errorf("proxy options: Client is required")
	}
	svcCIDR, err := netip.ParsePrefix(o.ServiceCIDR)
	if err != nil || !svcCIDR.Addr().Is4() {
		return nil, fmt.Errorf("proxy options: service CIDR %q: want an IPv4 prefix (%v)", o.ServiceCIDR, err)
	}
	var clusterCIDR netip.Prefix
	if o.ClusterCIDR != "" {
		if clusterCIDR, err = netip.ParsePrefix(o.ClusterCIDR); err != nil || !clusterCIDR.Addr().Is4() {
			return nil, fmt.Errorf("proxy options: cluster CIDR %q: want an IPv4 prefix (%v)", o.ClusterCIDR, err)
		}
	}
	if o.RejectUnroutedPodCIDR && !clusterCIDR.IsValid() {
		return nil, fmt.Errorf("proxy options: RejectUnroutedPodCIDR needs a cluster CIDR")
	}
	if o.MinSyncPeriod <= 0 {
		o.MinSyncPeriod = DefaultMinSyncPeriod
	}
	if o.SyncPeriod <= 0 {
		o.SyncPeriod = time.Hour
	}
	if o.RoutePollPeriod <= 0 {
		o.RoutePollPeriod = 2 * time.Second
	}
	if o.RoutedPodCIDRs == nil {
		o.RoutedPodCIDRs = KernelRoutedPrefixes
	}
	if o.Iptables == nil {
		o.Iptables = ExecRunner{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch o.Mode {
	case "":
		o.Mode = ModeIPTables
	case ModeIPTables, ModeNFTables:
	default:
		return nil, fmt.Errorf("proxy options: mode %q: want %s or %s", o.Mode, ModeIPTables, ModeNFTables)
	}
	if o.Nft == nil {
		if r, ok := o.Iptables.(ExecRunner); ok {
			o.Nft = nftables.ExecRunner{Prefix: r.Prefix}
		}
	}
	if o.Mode == ModeNFTables && o.Nft == nil {
		return nil, fmt.Errorf("proxy options: nftables mode needs Nft when Iptables is not an ExecRunner")
	}
	var nft *nftables.Applier
	if o.Mode == ModeNFTables {
		nft = nftables.NewApplier(o.Nft)
	}
	return &Proxy{
		nft:      nft,
		nftRun:   o.Nft,
		o:        o,
		ipt:      iptables.Options{ServiceCIDR: svcCIDR.Masked(), ClusterCIDR: clusterCIDR.Masked(), NodeIPs: o.NodeIPs, NodeName: o.NodeName, RejectUnroutedPodCIDR: o.RejectUnroutedPodCIDR},
		log:      o.Logger.With("component", "proxy", "node", o.NodeName),
		health:   newHealthServer(o.NodeIPs, o.Logger.With("component", "proxy", "node", o.NodeName)),
		renderer: iptables.NewRenderer(),
		run:      o.Iptables,
		wake:     make(chan struct{}, 1),
	}, nil
}

// Stats returns the counters so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{
		Syncs: p.stats.syncs.Load(), Restores: p.stats.restores.Load(), FullRestores: p.stats.fullRestores.Load(),
		Unchanged: p.stats.unchanged.Load(), Failures: p.stats.failures.Load(), LastError: p.lastError,
	}
}

func (p *Proxy) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run installs the guard, then syncs the rules until ctx is done. The rules
// stay in place when it returns (Cleanup removes them).
func (p *Proxy) Run(ctx context.Context) error {
	if p.o.RejectUnroutedPodCIDR {
		// The guard must know the Nodes' pod CIDRs: installed without them it
		// would let packets to simulated pods out (a restarted proxy replaces
		// its predecessor's guard, which knew them).
		nodes, err := newNodeCIDRs(p.o.Client, p.kick)
		if err != nil {
			return err
		}
		defer nodes.factory.Shutdown()
		if !nodes.start(ctx) {
			return nil // ctx done
		}
		p.nodes = nodes
	}
	// Another writer of the host's tables (iptables-restore of another tool,
	// a second proxy being cleaned up) can remove the guard between its
	// restore and the jumps' insert: install it again a few times first.
	for attempt := 1; ; attempt++ {
		err := p.installGuard(ctx)
		if err == nil {
			break
		}
		if attempt == guardAttempts || ctx.Err() != nil {
			return err
		}
		p.log.Warn("installing the service CIDR guard failed; trying again", "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
		}
	}
	p.removeOtherMode(ctx)
	svcFactory := informers.NewSharedInformerFactoryWithOptions(p.o.Client, 0,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = "!service.kubernetes.io/service-proxy-name"
		}))
	sliceFactory := informers.NewSharedInformerFactoryWithOptions(p.o.Client, 0,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = discoveryv1.LabelServiceName
		}))
	svcInformer := svcFactory.Core().V1().Services()
	sliceInformer := sliceFactory.Discovery().V1().EndpointSlices()
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { p.kick() },
		UpdateFunc: func(any, any) { p.kick() },
		DeleteFunc: func(any) { p.kick() },
	}
	if _, err := svcInformer.Informer().AddEventHandler(handler); err != nil {
		return fmt.Errorf("watch services: %w", err)
	}
	if _, err := sliceInformer.Informer().AddEventHandler(handler); err != nil {
		return fmt.Errorf("watch endpointslices: %w", err)
	}
	svcLister, sliceLister := svcInformer.Lister(), sliceInformer.Lister()
	svcFactory.Start(ctx.Done())
	sliceFactory.Start(ctx.Done())
	defer svcFactory.Shutdown()
	defer sliceFactory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), svcInformer.Informer().HasSynced, sliceInformer.Informer().HasSynced) {
		return nil // ctx done
	}
	p.log.Info("proxy started", "mode", p.o.Mode, "serviceCIDR", p.ipt.ServiceCIDR, "clusterCIDR", p.ipt.ClusterCIDR, "minSyncPeriod", p.o.MinSyncPeriod)
	defer p.health.closeAll()
	p.loop(ctx, svcLister, sliceLister)
	return nil
}

// guardAttempts is how many times Run tries to install the guard.
const guardAttempts = 5

// installGuard applies the guard chain and puts its jumps first in filter
// OUTPUT and FORWARD (nftables mode: the guard chain of its table, jumped to
// from its filter-output and filter-forward).
func (p *Proxy) installGuard(ctx context.Context) error {
	o, err := p.withRoutes(p.ipt)
	if err != nil {
		p.log.Warn("cannot read the routed pod CIDRs; the guard rejects every Node's pod CIDR until they are known", "err", err)
	}
	if p.nft != nil {
		return p.nft.InstallGuard(ctx, o)
	}
	if err := p.run.Restore(ctx, iptables.GuardText(o)); err != nil {
		return fmt.Errorf("install the service CIDR guard: %w", err)
	}
	if err := p.ensureGuardFirst(ctx); err != nil {
		return fmt.Errorf("install the service CIDR guard: %w", err)
	}
	return nil
}

// withRoutes returns o with the Nodes' pod CIDRs and the routed ones; on
// an error of RoutedPodCIDRs it has the Nodes' pod CIDRs but no routed ones.
func (p *Proxy) withRoutes(o iptables.Options) (iptables.Options, error) {
	if !o.RejectUnroutedPodCIDR {
		return o, nil
	}
	if p.nodes != nil {
		o.NodePodCIDRs = p.nodes.merged()
	}
	routed, err := p.o.RoutedPodCIDRs(o.ClusterCIDR)
	o.RoutedPodCIDRs = routed
	return o, err
}

// removeOtherMode removes the rules of the mode this proxy does not run
// (upstream's kube-proxy does the same on start), after this mode's guard is
// in place: the two never serve at once. A failure is logged, not fatal (the
// other mode's tools may not be installed at all).
func (p *Proxy) removeOtherMode(ctx context.Context) {
	if p.nft != nil {
		if err := Cleanup(ctx, p.run); err != nil {
			p.log.Warn("cannot remove the iptables mode's rules", "err", err)
		}
		return
	}
	if p.nftRun != nil {
		if err := nftables.Cleanup(ctx, p.nftRun); err != nil {
			p.log.Warn("cannot remove the nftables mode's table", "err", err)
		}
	}
}

// loop is the sync loop; it owns applied and udp.
func (p *Proxy) loop(ctx context.Context, svcLister listersv1.ServiceLister, sliceLister discoverylisters.EndpointSliceLister) {
	full := true
	var last, notBefore time.Time // notBefore: the end of a failure's backoff
	backoff := time.Duration(0)
	resync := time.NewTimer(p.o.SyncPeriod)
	defer resync.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	var routeTick <-chan time.Time
	var routes []netip.Prefix
	if p.ipt.RejectUnroutedPodCIDR {
		t := time.NewTicker(p.o.RoutePollPeriod)
		defer t.Stop()
		routeTick = t.C
	}
	p.kick() // the first sync, at once
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-retry.C:
		case <-resync.C:
			full = true
		case <-routeTick:
			r, err := p.o.RoutedPodCIDRs(p.ipt.ClusterCIDR)
			if err != nil || slices.Equal(r, routes) {
				continue
			}
		}
		until := last.Add(p.o.MinSyncPeriod)
		if notBefore.After(until) {
			until = notBefore
		}
		if wait := time.Until(until); wait > 0 && !last.IsZero() {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		select { // what woke meanwhile is part of this sync
		case <-p.wake:
		default:
		}
		last = time.Now()
		o, err := p.withRoutes(p.ipt)
		if err != nil {
			p.log.Warn("cannot read the routed pod CIDRs; keeping the last known ones", "err", err)
			o.RoutedPodCIDRs = routes
		}
		routes = o.RoutedPodCIDRs
		err = p.sync(ctx, o, svcLister, sliceLister, full)
		p.stats.syncs.Add(1)
		p.mu.Lock()
		p.lastError = err
		p.mu.Unlock()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.stats.failures.Add(1)
			full = true
			backoff = min(max(2*backoff, p.o.MinSyncPeriod), maxBackoff)
			p.log.Error("sync failed; retrying with a full sync", "err", err, "retryIn", backoff)
			retry.Reset(backoff)
			notBefore = time.Now().Add(backoff)
			continue
		}
		backoff, notBefore = 0, time.Time{}
		if full {
			full = false
			resync.Reset(p.o.SyncPeriod)
		}
	}
}

// sync renders the rules from the listers and applies them.
func (p *Proxy) sync(ctx context.Context, o iptables.Options, svcLister listersv1.ServiceLister, sliceLister discoverylisters.EndpointSliceLister, full bool) error {
	start := time.Now()
	svcs, err := svcLister.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list services: %w", err)
	}
	eps, err := sliceLister.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list endpointslices: %w", err)
	}
	model := p.models.build(svcs, eps)
	// The health check servers follow the model once its rules are in place
	// (or failed to be: then they report the proxy unhealthy).
	applied := false
	defer func() {
		ports, counts := healthChecks(model, p.o.NodeName)
		p.health.sync(ports, counts, applied)
	}()
	if p.nft != nil {
		res, err := p.nft.Sync(ctx, model, o, full)
		if err != nil {
			return err
		}
		applied = true
		if res.Bytes == 0 {
			p.stats.unchanged.Add(1)
			return nil
		}
		if res.Full {
			p.stats.fullRestores.Add(1)
		}
		p.stats.restores.Add(1)
		p.clearStaleUDP(ctx, model)
		p.reportSynced(ctx)
		p.log.Debug("synced nftables rules", "full", res.Full, "services", len(model.Services), "bytes", res.Bytes, "took", time.Since(start))
		return nil
	}
	rs := p.renderer.Render(model, o)
	maxChains := p.o.MaxChainsPerRestore
	if maxChains <= 0 {
		maxChains = ChainsPerRestore(len(rs.NAT))
	}
	var batches [][]byte
	var saved *iptables.Saved
	if full || p.applied == nil {
		full = true
		text, err := p.run.Save(ctx)
		if err != nil {
			return fmt.Errorf("full sync: %w", err)
		}
		if saved, err = iptables.ParseSave(text); err != nil {
			// Output this parser does not know (another iptables version):
			// write every chain, delete the stale ones, as a fresh host gets.
			p.log.Warn("cannot compare with the host's tables; writing every chain", "err", err)
			saved = nil
			batches = rs.TextBatches(iptables.StaleChains(text, rs), maxChains)
		} else {
			var st iptables.SyncStats
			batches, st = rs.FullSyncBatches(saved, maxChains)
			p.log.Debug("full sync against the host's tables", "unchangedChains", st.Unchanged, "changedChains", st.Changed,
				"staleChains", st.Stale, "unpredictedRules", st.Unpredicted)
		}
	} else if batches = iptables.UpdateBatches(p.applied, rs, maxChains); batches == nil {
		p.stats.unchanged.Add(1)
		applied = true
		return nil
	}
	p.applied = nil // unknown until every restore succeeded
	size := 0
	for _, b := range batches {
		if err := p.run.Restore(ctx, b); err != nil {
			return fmt.Errorf("apply rules: %w", err)
		}
		size += len(b)
	}
	if full {
		if err := p.ensureHooks(ctx, saved); err != nil {
			return err
		}
		p.stats.fullRestores.Add(1)
	}
	p.stats.restores.Add(1)
	p.applied = rs
	applied = true
	p.clearStaleUDP(ctx, model)
	p.reportSynced(ctx)
	p.log.Debug("synced rules", "full", full, "services", len(model.Services), "restores", len(batches), "bytes", size, "took", time.Since(start))
	return nil
}

// ensureHooks makes sure every jump from a built-in chain exists, and that
// the guard's jumps come first. The hooks that the full sync's saved tables
// show (the restores never touch the built-in chains) are not checked again.
func (p *Proxy) ensureHooks(ctx context.Context, saved *iptables.Saved) error {
	guardChains := map[string]bool{}
	for _, h := range iptables.GuardHooks() {
		guardChains[h.Table+"/"+h.Chain] = true
	}
	for _, h := range iptables.Hooks() {
		if saved != nil && saved.HasRule(h.Table, h.Chain, h.Args) {
			continue
		}
		check := append([]string{"-t", h.Table, "-C", h.Chain}, h.Args...)
		_, err := p.run.Iptables(ctx, check...)
		if err == nil {
			continue
		}
		if exitCode(err) != 1 {
			return fmt.Errorf("check the %s %s hook: %w", h.Table, h.Chain, err)
		}
		pos := "1"
		if guardChains[h.Table+"/"+h.Chain] {
			if first, err := p.guardIsFirst(ctx, h.Table, h.Chain); err != nil {
				return err
			} else if first {
				pos = "2"
			}
		}
		if _, err := p.run.Iptables(ctx, append([]string{"-t", h.Table, "-I", h.Chain, pos}, h.Args...)...); err != nil {
			return fmt.Errorf("insert the %s %s hook: %w", h.Table, h.Chain, err)
		}
		saved = nil // the saved order of the built-in chains is out of date
	}
	if saved != nil && guardFirstIn(saved) {
		return nil
	}
	return p.ensureGuardFirst(ctx)
}

// guardFirstIn reports whether the saved tables start filter OUTPUT and
// FORWARD with the guard's jump.
func guardFirstIn(saved *iptables.Saved) bool {
	for _, h := range iptables.GuardHooks() {
		if !saved.FirstRuleJumpsTo(h.Table, h.Chain, iptables.ChainGuard) {
			return false
		}
	}
	return true
}

// ensureGuardFirst inserts a jump to the guard at the top of filter OUTPUT
// and FORWARD unless the first rule already is one.
func (p *Proxy) ensureGuardFirst(ctx context.Context) error {
	for _, h := range iptables.GuardHooks() {
		first, err := p.guardIsFirst(ctx, h.Table, h.Chain)
		if err != nil {
			return err
		}
		if first {
			continue
		}
		if _, err := p.run.Iptables(ctx, append([]string{"-t", h.Table, "-I", h.Chain, "1"}, h.Args...)...); err != nil {
			return fmt.Errorf("insert the guard jump in %s %s: %w", h.Table, h.Chain, err)
		}
	}
	return nil
}

func (p *Proxy) guardIsFirst(ctx context.Context, table, chain string) (bool, error) {
	out, err := p.run.Iptables(ctx, "-t", table, "-S", chain, "1")
	if err != nil {
		return false, fmt.Errorf("list %s %s: %w", table, chain, err)
	}
	return containsJump(string(out), iptables.ChainGuard), nil
}

func containsJump(rule, chain string) bool {
	f := strings.Fields(rule)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "-j" && f[i+1] == chain {
			return true
		}
	}
	return false
}

// Cleanup removes every chain the proxy owns (the KUBE-SERVICES family, the
// per-service chains and the guard) and every jump to them from the host's
// filter and nat tables, as for `kubette down`. Chains of other components
// (the kubelet's KUBE-FIREWALL, say) are left alone.
func Cleanup(ctx context.Context, r Runner) error {
	saved, err := r.Save(ctx)
	if err != nil {
		return fmt.Errorf("proxy cleanup: %w", err)
	}
	text := iptables.CleanupText(saved)
	if text == nil {
		return nil
	}
	if err := r.Restore(ctx, text); err != nil {
		return fmt.Errorf("proxy cleanup: %w", err)
	}
	return nil
}
