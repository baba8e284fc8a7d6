package kubelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	nodelisters "k8s.io/client-go/listers/node/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// Defaults of Config.
const (
	DefaultRelistPeriod   = time.Second
	DefaultResyncPeriod   = time.Minute
	DefaultBackoffInitial = 10 * time.Second
	DefaultBackoffMax     = 5 * time.Minute
	DefaultResolvConf     = "/etc/resolv.conf"
	DefaultHostsFile      = "/etc/hosts"
)

// Config configures a Kubelet.
type Config struct {
	// NodeName is the node whose pods this kubelet runs.
	NodeName string
	// Client talks to the API server.
	Client kubernetes.Interface
	// Runtime and Images reach the container runtime (CRI).
	Runtime RuntimeService
	Images  ImageService
	// Volumes materialises pod volumes. Nil: pods with volume mounts fail to start.
	Volumes VolumeManager
	// Probes runs container probes. Nil: no probes run, and containers with a readiness
	// probe never become ready.
	Probes ProbeManager
	// HTTPHooks sends the GET of httpGet lifecycle hooks (the prober's Manager). Nil: those
	// hooks fail. Exec hooks go through Runtime's ExecSync, sleep hooks need nothing.
	HTTPHooks HTTPHookRunner
	// RootDir is DATA_DIR/kubelet (pods/<uid>/... below it).
	RootDir string
	// LogDir is DATA_DIR/logs/pods.
	LogDir string
	// Logger logs; nil discards.
	Logger *slog.Logger
	// Recorder records events; nil builds one that writes to the API server.
	Recorder record.EventRecorder
	// Clock is the time source; nil is the real clock.
	Clock clock.WithTickerAndDelayedExecution
	// ResolvConf is the host's resolver configuration pods get (default /etc/resolv.conf).
	ResolvConf string
	// HostsFile is the node's hosts file, which host-network pods get in their kubelet-managed
	// /etc/hosts (default /etc/hosts).
	HostsFile string
	// ClusterDNS are the cluster DNS servers (the DNS Service's ClusterIP) pods with dnsPolicy
	// ClusterFirst use; empty: pods get the host's resolvers.
	ClusterDNS []string
	// ClusterDomain is the cluster's DNS domain (default cluster.local).
	ClusterDomain string
	// RelistPeriod is how often the runtime is relisted (default 1 s).
	RelistPeriod time.Duration
	// ResyncPeriod is how often every pod is synced even without a change (default 1 min, as
	// upstream's --sync-frequency): the runtime's changes reach a pod through the PLEG's
	// relist, the API's through the watch, probe results, back-offs and deadlines through
	// their own triggers, so the resync catches only what none of those report (a ConfigMap or
	// Secret a volume holds changed), and each costs a pod two reads of the runtime.
	ResyncPeriod time.Duration
	// BackoffInitial and BackoffMax bound the restart and image pull back-off (10 s, 5 min).
	BackoffInitial, BackoffMax time.Duration
	// AllowedUnsafeSysctls are the sysctls (or prefixes ending in "*") pods may set beyond
	// the safe ones, as upstream's --allowed-unsafe-sysctls; each must be namespaced.
	AllowedUnsafeSysctls []string
}

// Kubelet runs the pods bound to one node.
type Kubelet struct {
	cfg      Config
	log      *slog.Logger
	clock    clock.WithTickerAndDelayedExecution
	recorder record.EventRecorder // cfg.Recorder, or Run's own broadcaster's

	podInformer  cache.SharedIndexInformer
	nodeInformer cache.SharedIndexInformer
	nodes        corelisters.NodeLister
	services     corelisters.ServiceLister // every namespace's, for the service environment variables
	svcInformer  cache.SharedIndexInformer
	// runtimeClasses turn a pod's spec.runtimeClassName into its CRI runtime handler.
	runtimeClasses nodelisters.RuntimeClassLister
	rcInformer     cache.SharedIndexInformer
	informers      []informers.SharedInformerFactory

	sysctls      *sysctlAllowlist
	crashBackoff *flowcontrol.Backoff
	pullBackoff  *flowcontrol.Backoff

	admitMu    sync.Mutex // serialises admission decisions (admit.go); taken before mu
	mu         sync.Mutex
	workers    map[types.UID]*podWorker
	probeKills map[string]string // container ID → the probe (liveness or startup) whose failure restarts it
	timers     map[types.UID]*podTimer
	written    map[types.UID]*v1.Pod // the pod as the last status write returned it (written.go)
	observed   map[types.UID]string  // the runtime state the pod's last sync read (observed.go)
	admitted   map[types.UID]bool    // the admitted pods (admit.go)
	runCtx     context.Context       // nil before Run
	stopped    bool                  // no new workers once Run is returning
	workersWG  sync.WaitGroup
}

// uidIndex indexes pods by UID.
const uidIndex = "uid"

// New validates cfg, fills in defaults and builds a Kubelet; Run starts it.
func New(cfg Config) (*Kubelet, error) {
	switch {
	case cfg.NodeName == "":
		return nil, errors.New("kubelet: NodeName is required")
	case cfg.Client == nil:
		return nil, errors.New("kubelet: Client is required")
	case cfg.Runtime == nil || cfg.Images == nil:
		return nil, errors.New("kubelet: Runtime and Images are required")
	case cfg.RootDir == "" || cfg.LogDir == "":
		return nil, errors.New("kubelet: RootDir and LogDir are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.ResolvConf == "" {
		cfg.ResolvConf = DefaultResolvConf
	}
	if cfg.HostsFile == "" {
		cfg.HostsFile = DefaultHostsFile
	}
	if cfg.RelistPeriod <= 0 {
		cfg.RelistPeriod = DefaultRelistPeriod
	}
	if cfg.ResyncPeriod <= 0 {
		cfg.ResyncPeriod = DefaultResyncPeriod
	}
	if cfg.BackoffInitial <= 0 {
		cfg.BackoffInitial = DefaultBackoffInitial
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = DefaultBackoffMax
	}
	sysctls, err := newSysctlAllowlist(kernelRelease(), cfg.AllowedUnsafeSysctls)
	if err != nil {
		return nil, fmt.Errorf("kubelet: allowed unsafe sysctls: %w", err)
	}
	k := &Kubelet{
		cfg:          cfg,
		sysctls:      sysctls,
		log:          cfg.Logger,
		clock:        cfg.Clock,
		recorder:     cfg.Recorder,
		crashBackoff: flowcontrol.NewFakeBackOff(cfg.BackoffInitial, cfg.BackoffMax, cfg.Clock),
		pullBackoff:  flowcontrol.NewFakeBackOff(cfg.BackoffInitial, cfg.BackoffMax, cfg.Clock),
		workers:      map[types.UID]*podWorker{},
		probeKills:   map[string]string{},
		timers:       map[types.UID]*podTimer{},
		written:      map[types.UID]*v1.Pod{},
		observed:     map[types.UID]string{},
		admitted:     map[types.UID]bool{},
	}
	podFactory := informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()
		}))
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", cfg.NodeName).String()
		}))
	k.podInformer = podFactory.Core().V1().Pods().Informer()
	if err := k.podInformer.AddIndexers(cache.Indexers{uidIndex: func(obj any) ([]string, error) {
		return []string{string(obj.(*v1.Pod).UID)}, nil
	}}); err != nil {
		return nil, fmt.Errorf("kubelet: pod index: %w", err)
	}
	k.nodeInformer = nodeFactory.Core().V1().Nodes().Informer()
	k.nodes = nodeFactory.Core().V1().Nodes().Lister()
	svcFactory := informers.NewSharedInformerFactory(cfg.Client, 0)
	k.svcInformer = svcFactory.Core().V1().Services().Informer()
	k.services = svcFactory.Core().V1().Services().Lister()
	k.rcInformer = svcFactory.Node().V1().RuntimeClasses().Informer()
	k.runtimeClasses = svcFactory.Node().V1().RuntimeClasses().Lister()
	k.informers = []informers.SharedInformerFactory{podFactory, nodeFactory, svcFactory}
	if _, err := k.nodeInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { k.triggerAll() }, // pods wait for their node to be registered
	}); err != nil {
		return nil, fmt.Errorf("kubelet: node handler: %w", err)
	}
	if _, err := k.podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.triggerObj(obj) },
		UpdateFunc: func(_, obj any) { k.podUpdated(obj) },
		DeleteFunc: func(obj any) { k.triggerObj(obj) },
	}); err != nil {
		return nil, fmt.Errorf("kubelet: pod handler: %w", err)
	}
	return k, nil
}

// podUpdated triggers a sync of an updated pod, unless the update is the watch's echo of the
// kubelet's own status write (isOwnWrite), which carries nothing new to act on.
func (k *Kubelet) podUpdated(obj any) {
	if p, ok := obj.(*v1.Pod); ok && k.isOwnWrite(p) {
		return
	}
	k.triggerObj(obj)
}

func (k *Kubelet) triggerObj(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if p, ok := obj.(*v1.Pod); ok {
		k.trigger(p.UID)
	}
}

// Run runs the kubelet until ctx is done (call it once): it waits for the informers, then starts the PLEG,
// the periodic resync and the probe result loop; pod workers start on demand. It returns
// after every goroutine it started has stopped.
func (k *Kubelet) Run(ctx context.Context) error {
	for _, dir := range []string{k.cfg.RootDir, k.cfg.LogDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("kubelet: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if k.cfg.Recorder == nil {
		// The broadcaster's goroutines live exactly as long as Run.
		events := record.NewBroadcaster()
		events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: k.cfg.Client.CoreV1().Events("")})
		defer events.Shutdown()
		k.recorder = events.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kubelet", Host: k.cfg.NodeName})
	}
	var wg sync.WaitGroup
	for _, f := range k.informers {
		f.Start(ctx.Done())
	}
	defer func() {
		cancel()
		k.mu.Lock()
		k.stopped = true
		for uid, t := range k.timers {
			t.timer.Stop()
			delete(k.timers, uid)
		}
		k.mu.Unlock()
		for _, f := range k.informers {
			f.Shutdown()
		}
		wg.Wait()
		k.workersWG.Wait()
	}()
	// The Services too, as upstream's kubelet waits for them: a pod started before would miss
	// its service variables (KUBERNETES_SERVICE_HOST among them, which in-cluster clients need).
	if !cache.WaitForCacheSync(ctx.Done(), k.podInformer.HasSynced, k.nodeInformer.HasSynced, k.svcInformer.HasSynced, k.rcInformer.HasSynced) {
		return nil // stopped before the caches synced
	}
	// Workers start only now, with the pods, the node and the Services known; triggers before were
	// dropped, so every pod is triggered once here, and the first relist triggers what the
	// runtime holds, orphans among it. The pods a previous kubelet ran count against the node
	// before any new one is admitted.
	if err := k.seedAdmitted(ctx); err != nil {
		// Each such pod's worker still counts it once it syncs.
		k.log.Warn("reading the runtime's pods for admission", "err", err)
	}
	k.mu.Lock()
	k.runCtx = ctx
	k.mu.Unlock()
	k.triggerAll()
	k.log.Info("kubelet started", "node", k.cfg.NodeName)
	p := &pleg{k: k}
	wg.Add(2)
	go func() { defer wg.Done(); p.run(ctx) }()
	go func() { defer wg.Done(); k.resyncLoop(ctx) }()
	if k.cfg.Probes != nil {
		wg.Add(1)
		go func() { defer wg.Done(); k.probeLoop(ctx) }()
	}
	<-ctx.Done()
	return nil
}

// resyncLoop syncs every known pod periodically and drops expired back-off entries.
func (k *Kubelet) resyncLoop(ctx context.Context) {
	t := k.clock.NewTicker(k.cfg.ResyncPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		k.triggerAll()
		k.crashBackoff.GC()
		k.pullBackoff.GC()
	}
}

// triggerAll syncs every pod the informer holds.
func (k *Kubelet) triggerAll() {
	for _, obj := range k.podInformer.GetStore().List() {
		k.trigger(obj.(*v1.Pod).UID)
	}
}

// probeLoop turns probe result changes into syncs; a liveness or startup probe failure marks
// the container for a restart.
func (k *Kubelet) probeLoop(ctx context.Context) {
	results := k.cfg.Probes.Results()
	for {
		select {
		case <-ctx.Done():
			return
		case r, ok := <-results:
			if !ok {
				return
			}
			if (r.Kind == ProbeLiveness || r.Kind == ProbeStartup) && !r.Success && r.ContainerID != "" {
				id := r.ContainerID
				if _, raw, ok := strings.Cut(id, "://"); ok {
					id = raw
				}
				k.mu.Lock()
				k.probeKills[id] = r.Kind
				k.mu.Unlock()
			}
			k.trigger(r.UID)
		}
	}
}

// podByUID returns the pod with this UID, or nil when the informer does not have it: the
// informer's copy, or the one the kubelet's last status write returned when that is newer.
func (k *Kubelet) podByUID(uid types.UID) *v1.Pod {
	objs, err := k.podInformer.GetIndexer().ByIndex(uidIndex, string(uid))
	if err != nil || len(objs) == 0 {
		return nil
	}
	return k.newerPod(objs[0].(*v1.Pod))
}

// node returns this kubelet's Node, or nil before it is registered.
func (k *Kubelet) node() *v1.Node {
	n, err := k.nodes.Get(k.cfg.NodeName)
	if err != nil {
		return nil
	}
	return n
}
