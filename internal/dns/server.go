// Package dns is kubette's cluster DNS: it answers for the cluster zone
// (cluster.local by default) the way CoreDNS's kubernetes plugin does, after
// the Kubernetes DNS specification, and forwards every other question to the
// host's resolvers.
//
// Records come from Services and EndpointSlices (discovery.k8s.io/v1) watched
// through informers. An event only queues its Service's key; one worker
// recomputes that Service's records and swaps them into an in-memory index,
// which queries read under a read lock. The zone holds:
//   - <svc>.<ns>.svc.<zone> A/AAAA: the ClusterIPs; for a headless Service
//     the addresses of its ready endpoints; CNAME for an ExternalName Service;
//   - <host>.<svc>.<ns>.svc.<zone> A/AAAA for each ready endpoint of a
//     headless Service, host being its hostname or its dashed address
//     (10-244-1-5);
//   - _<port>._<proto>.<svc>.<ns>.svc.<zone> SRV for named ports, to the
//     Service's name or, when headless, to each endpoint's name;
//   - PTR for ClusterIPs and headless endpoint addresses (other reverse names
//     are forwarded);
//   - <a-b-c-d>.<ns>.pod.<zone> A for any address and namespace (the
//     "pods insecure" mode);
//   - dns-version.<zone> TXT and the apex SOA.
//
// Names in the zone that do not exist get NXDOMAIN, names that exist without
// records of the asked type an empty NOERROR answer; both carry the SOA in
// the authority section.
package dns

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Defaults of Options.
const (
	DefaultAddr       = ":53"
	DefaultZone       = "cluster.local"
	DefaultTTL        = 5
	DefaultResolvConf = "/etc/resolv.conf"
)

// Options configure a Server.
type Options struct {
	// Client reaches the API server. Required.
	Client kubernetes.Interface
	// Addr is the UDP and TCP address to serve on (default ":53"). With port
	// 0 a free port is chosen, the same for both; see Server.Addr.
	Addr string
	// Zone is the cluster domain (default "cluster.local").
	Zone string
	// TTL is the TTL of every record and of negative answers (default 5 s).
	TTL uint32
	// Upstreams are the resolvers ("host:port", or a bare address for port
	// 53) that questions outside the zone go to. Nil reads the nameservers of
	// ResolvConf, leaving out this very server. With none, such questions
	// get SERVFAIL.
	Upstreams []string
	// ResolvConf is read when Upstreams is nil (default /etc/resolv.conf).
	ResolvConf string
	// Logger receives the server's logs (default slog.Default()).
	Logger *slog.Logger
}

// Server is the cluster DNS server.
type Server struct {
	o   Options
	log *slog.Logger
	res *resolver

	ready chan struct{}
	addr  net.Addr // set before ready is closed
}

// New validates o and fills its defaults.
func New(o Options) (*Server, error) {
	if o.Client == nil {
		return nil, fmt.Errorf("dns options: Client is required")
	}
	if o.Addr == "" {
		o.Addr = DefaultAddr
	}
	if _, _, err := net.SplitHostPort(o.Addr); err != nil {
		return nil, fmt.Errorf("dns options: address %q: %w", o.Addr, err)
	}
	if o.Zone == "" {
		o.Zone = DefaultZone
	}
	zone := strings.ToLower(dns.Fqdn(o.Zone))
	if _, ok := dns.IsDomainName(zone); !ok || zone == "." {
		return nil, fmt.Errorf("dns options: zone %q is not a domain name", o.Zone)
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.ResolvConf == "" {
		o.ResolvConf = DefaultResolvConf
	}
	ups := make([]string, 0, len(o.Upstreams))
	for _, u := range o.Upstreams {
		if _, _, err := net.SplitHostPort(u); err != nil {
			u = net.JoinHostPort(u, "53")
		}
		ups = append(ups, u)
	}
	if o.Upstreams != nil {
		o.Upstreams = ups
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Server{
		o: o, log: o.Logger,
		res:   &resolver{zone: zone, ttl: o.TTL, ix: newIndex(zone, uint32(time.Now().Unix()))},
		ready: make(chan struct{}),
	}, nil
}

// Ready is closed once the server listens and its index holds every Service
// of the first list.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Addr is the UDP address the server listens on (the TCP one has the same
// port). It is nil until Ready is closed.
func (s *Server) Addr() net.Addr {
	select {
	case <-s.ready:
		return s.addr
	default:
		return nil
	}
}

// Run serves until ctx is done.
func (s *Server) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pc, ln, err := listen(s.o.Addr)
	if err != nil {
		return err
	}
	// Closed by the dns.Servers' shutdown once they serve; until then here.
	serving := false
	defer func() {
		if !serving {
			pc.Close()
			ln.Close()
		}
	}()
	fwd := newForwarder(s.o.Upstreams)
	if s.o.Upstreams == nil {
		ups, err := resolvConfUpstreams(s.o.ResolvConf, pc.LocalAddr().String())
		if err != nil || len(ups) == 0 {
			s.log.Warn("dns: no upstream resolvers, names outside the zone get SERVFAIL", "resolv.conf", s.o.ResolvConf, "err", err)
		}
		fwd = newForwarder(ups)
	}

	queue := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: "dns"})
	defer queue.ShutDown()
	factory := informers.NewSharedInformerFactory(s.o.Client, 0)
	defer func() {
		cancel() // the informers stop with ctx; Shutdown waits for them
		factory.Shutdown()
	}()
	sy, err := s.watch(ctx, factory, queue)
	if err != nil {
		return err
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for s.processNext(queue, sy) {
		}
	}()

	h := &handler{res: s.res, fwd: fwd, ctx: ctx, log: s.log}
	started := make(chan struct{}, 2)
	notify := func() { started <- struct{}{} }
	servers := []*dns.Server{
		{PacketConn: pc, Handler: h, NotifyStartedFunc: notify},
		{Listener: ln, Handler: h, NotifyStartedFunc: notify},
	}
	serving = true
	errc := make(chan error, len(servers))
	for _, srv := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- srv.ActivateAndServe()
		}()
	}
	// Shutting down a dns.Server that has not started yet does not stop it,
	// so both must have started before anything may end them.
	var runErr error
	for range servers {
		select {
		case <-started:
		case err := <-errc:
			runErr = fmt.Errorf("dns: serve: %w", err)
		}
	}
	if runErr == nil {
		s.addr = pc.LocalAddr()
		close(s.ready)
		s.log.Info("dns: serving", "addr", s.addr.String(), "zone", s.res.zone, "upstreams", fwd.upstreams)
		select {
		case <-ctx.Done():
		case err := <-errc:
			runErr = fmt.Errorf("dns: serve: %w", err)
		}
	}
	cancel()
	queue.ShutDown()
	shutdownCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer stop()
	for _, srv := range servers {
		if err := srv.ShutdownContext(shutdownCtx); err != nil {
			s.log.Debug("dns: shutdown", "err", err)
		}
	}
	return runErr
}

// watch starts the informers on Services and EndpointSlices, whose events
// queue Service keys, waits for their caches and builds the first index
// from them: no answer is given from a partial one. Keys queued meanwhile
// are synced again, harmlessly.
func (s *Server) watch(ctx context.Context, factory informers.SharedInformerFactory, queue workqueue.TypedInterface[string]) (*syncer, error) {
	svcInformer := factory.Core().V1().Services()
	sliceInformer := factory.Discovery().V1().EndpointSlices()
	svcReg, err := svcInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { enqueueService(queue, obj) },
		UpdateFunc: func(_, obj any) { enqueueService(queue, obj) },
		DeleteFunc: func(obj any) { enqueueService(queue, obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("dns: watch services: %w", err)
	}
	sliceReg, err := sliceInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { enqueueSliceService(queue, obj) },
		UpdateFunc: func(old, obj any) {
			enqueueSliceService(queue, old)
			enqueueSliceService(queue, obj)
		},
		DeleteFunc: func(obj any) { enqueueSliceService(queue, obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("dns: watch endpointslices: %w", err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), svcInformer.Informer().HasSynced, sliceInformer.Informer().HasSynced, svcReg.HasSynced, sliceReg.HasSynced) {
		return nil, fmt.Errorf("dns: wait for the service and endpointslice caches: %w", context.Cause(ctx))
	}
	sy := &syncer{zone: s.res.zone, ttl: s.o.TTL, ix: s.res.ix, services: svcInformer.Lister(), slices: sliceInformer.Lister()}
	svcs, err := sy.services.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("dns: list services: %w", err)
	}
	for _, svc := range svcs {
		if err := sy.sync(svc.Namespace + "/" + svc.Name); err != nil {
			return nil, err
		}
	}
	return sy, nil
}

// processNext syncs one queued Service; false once the queue is shut down.
func (s *Server) processNext(queue workqueue.TypedInterface[string], sy *syncer) bool {
	key, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(key)
	if err := sy.sync(key); err != nil {
		// Listers read memory; an error means a malformed key, which
		// retrying would not mend.
		s.log.Error("dns: sync service", "service", key, "err", err)
	}
	return true
}

// listen binds UDP and TCP on addr, on the same port when addr's port is 0.
func listen(addr string) (net.PacketConn, net.Listener, error) {
	var lastErr error
	for range 20 {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("dns: listen udp %s: %w", addr, err)
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		lastErr = fmt.Errorf("dns: listen tcp %s: %w", pc.LocalAddr(), err)
		if _, port, _ := net.SplitHostPort(addr); port != "0" {
			break
		}
	}
	return nil, nil, lastErr
}

func enqueueService(queue workqueue.TypedInterface[string], obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		queue.Add(key)
	}
}

func enqueueSliceService(queue workqueue.TypedInterface[string], obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	es, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	if name := es.Labels[discoveryv1.LabelServiceName]; name != "" {
		queue.Add(es.Namespace + "/" + name)
	}
}

// syncer recomputes one Service's records from the listers.
type syncer struct {
	zone     string
	ttl      uint32
	ix       *index
	services corelisters.ServiceLister
	slices   discoverylisters.EndpointSliceLister
}

func (sy *syncer) sync(key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("split key %q: %w", key, err)
	}
	svc, err := sy.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		sy.ix.set(key, nil)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get service %s: %w", key, err)
	}
	var endpointSlices []*discoveryv1.EndpointSlice
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name})
		if endpointSlices, err = sy.slices.EndpointSlices(ns).List(sel); err != nil {
			return fmt.Errorf("list endpointslices of %s: %w", key, err)
		}
	}
	sy.ix.set(key, serviceRecords(sy.zone, sy.ttl, svc, endpointSlices))
	return nil
}
