// Package apiserver serves the Kubernetes API over HTTP(S): discovery, OpenAPI,
// and the REST verbs of every registered resource, backed by a storage.Store and
// a watch cache per resource. It speaks JSON, YAML and protobuf, serves Tables
// for kubectl get, and answers errors as metav1.Status.
package apiserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	"github.com/kubette/kubette/internal/apiserver/admission"
	"github.com/kubette/kubette/internal/apiserver/audit"
	"github.com/kubette/kubette/internal/apiserver/flowcontrol"
	"github.com/kubette/kubette/internal/apiserver/servicealloc"
	"github.com/kubette/kubette/internal/apiserver/watchcache"
	"github.com/kubette/kubette/internal/registry"
	"github.com/kubette/kubette/internal/storage"
	"github.com/kubette/kubette/internal/webhookclient"
)

// Config configures a Server.
type Config struct {
	// Store persists objects.
	Store storage.Store
	// Logger receives the server's logs (default slog.Default()).
	Logger *slog.Logger
	// Version is served at /version.
	Version version.Info
	// Now returns the current time (default time.Now).
	Now func() time.Time
	// WatchCacheCapacity is the number of recent events each resource keeps (default 4096).
	WatchCacheCapacity int
	// BookmarkInterval is how often watchers that asked for bookmarks get one (default 1m).
	BookmarkInterval time.Duration
	// MaxWatchTimeout caps how long one watch request lasts (default 30 to 60 minutes,
	// chosen at random per watch, as upstream's min-request-timeout). Clients resume.
	MaxWatchTimeout time.Duration
	// KubeletClientTLS is how the server reaches kubelets (pods/log): its client certificate
	// and the CA that signed the kubelets' serving certificates. Without it pods/log answers 503.
	KubeletClientTLS *tls.Config
	// ServiceClusterIPRange is where Service cluster IPs come from (default 10.96.0.0/12; IPv4 only).
	ServiceClusterIPRange netip.Prefix
	// ServiceNodePortRange is where node ports come from (default 30000-32767).
	ServiceNodePortRange servicealloc.PortRange
	// ServiceRepairInterval is how often the allocation bitmaps are rebuilt from the
	// stored Services (default 3m, as upstream's repair controllers).
	ServiceRepairInterval time.Duration
	// TraceCapacity is how many trace records each resource keeps for `kubette trace`
	// and the /ui/ page (0: trace.DefaultCapacity); negative turns tracing off.
	TraceCapacity int
	// CompactionInterval is how often the server compacts the store's history (a store
	// that is a storage.Compactor), as upstream's --etcd-compaction-interval: each time to
	// the revision of the previous time, so that a revision lives 5 to 10 minutes at the
	// default of 5m (continue tokens and watches from older ones get 410). Negative: never.
	CompactionInterval time.Duration
	// EventTTL is how long an Event lives after its last write (upstream's --event-ttl,
	// whose default is 1h): the store deletes it then, and watchers see it deleted.
	// 0 keeps Events until they are deleted.
	EventTTL time.Duration
	// Admission is the chain of admission plugins every create, update and delete goes
	// through (none by default).
	Admission admission.Chain
	// Actions serve creates outside the generic store (reviews, serviceaccounts/token),
	// besides the server's own (SelfSubjectReview). See Action.
	Actions map[ActionKey]Action
	// Extend, when set, is called once by New with the server, before it serves: it
	// returns further admission plugins (appended to Admission) and actions. It is how
	// plugins and actions that read the cluster through the server (Get, List) or write
	// through it (LoopbackConfig) are built.
	Extend func(s *Server) (admission.Chain, map[ActionKey]Action, error)
	// Audit, when set, is the audit log's filter, after authentication (see Handler).
	Audit *audit.Auditor
	// FlowControlSeats is the number of requests API Priority and Fairness lets execute
	// at once, shared by the priority levels (upstream's --max-requests-inflight plus
	// --max-mutating-requests-inflight; 0: 600); negative turns it off.
	FlowControlSeats int
}

// Server is the API server's request handling. Create it with New and serve Handler().
type Server struct {
	cfg     Config
	log     *slog.Logger
	scheme  *runtime.Scheme
	codecs  *codecs
	table   *registry.Table
	caches  map[string]*watchcache.Cache // by storage prefix, built-in resources
	custom  customCaches                 // those of custom resources
	docs    *openAPIDocs
	fields  *fieldManagers
	metrics *metrics
	svc     *serviceAllocators
	tracer  *tracer // nil when tracing is off
	proxy   *proxyTransports
	// webhooks posts to conversion webhooks.
	webhooks *webhookclient.Client
	// agg holds the remote APIServices requests are proxied to (see aggregator.go).
	agg aggregator
	// bindingCreated is the response to every successful binding, encoded once.
	bindingCreated *constResponse
	// eventTTL are the store options of a write of a resource that expires with the
	// event TTL (nil when Events do not expire); built once, so writes pass it as is.
	eventTTL []storage.WriteOption
	// chain is the handler chain Handler built last (for LoopbackConfig).
	chain atomic.Pointer[http.Handler]
	// actions serve the creates the generic store does not (see Action).
	actions map[ActionKey]Action
	// paths serve non-resource paths of no kind (see HandlePath); written only before
	// the server serves.
	paths map[string]http.Handler

	nsDeleted deletedNamespaces

	readyOnce sync.Once
	readyCh   chan struct{}
	// apf is API Priority and Fairness (nil when off).
	apf *flowcontrol.Controller
}

// New builds a server and starts its watch caches, which run until ctx is done.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("apiserver: a Store is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.EventTTL < 0 {
		return nil, fmt.Errorf("apiserver: negative event TTL %v", cfg.EventTTL)
	}
	scheme, err := registry.NewScheme()
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, log: cfg.Logger, scheme: scheme, codecs: newCodecs(scheme),
		table: registry.NewTable(registry.Builtin()), caches: map[string]*watchcache.Cache{},
		readyCh: make(chan struct{}),
		custom:  customCaches{ctx: ctx, byName: map[string]*customCache{}, byPfx: map[string]*customCache{}},
	}
	s.webhooks = webhookclient.New(s)
	s.actions = s.defaultActions()
	for k, a := range cfg.Actions {
		s.actions[k] = a
	}
	if cfg.Extend != nil {
		chain, actions, err := cfg.Extend(s)
		if err != nil {
			return nil, fmt.Errorf("apiserver: %w", err)
		}
		s.cfg.Admission = append(append(admission.Chain{}, cfg.Admission...), chain...)
		for k, a := range actions {
			s.actions[k] = a
		}
	}
	if s.bindingCreated, err = s.codecs.newConstResponse(bindingCreatedStatus()); err != nil {
		return nil, fmt.Errorf("apiserver: %w", err)
	}
	if cfg.EventTTL > 0 {
		s.eventTTL = []storage.WriteOption{storage.WithTTL(cfg.EventTTL)}
	}
	if s.svc, err = newServiceAllocators(cfg); err != nil {
		return nil, err
	}
	// The Service strategy's allocator works on this server's storage.
	if svcRes, ok := s.table.Lookup(schemaCoreV1, "services"); ok {
		svcRes.Strategy.Allocator = s.svc
	}
	s.startTrace()
	s.proxy = newProxyTransports(cfg.KubeletClientTLS)
	go s.proxy.closeIdleOnDone(ctx)
	s.fields = newFieldManagers(ctx, s)
	s.metrics = newMetrics()
	if s.docs, err = newOpenAPIDocs(s.table); err != nil {
		return nil, err
	}
	for _, r := range s.table.All() {
		if r.Virtual || r.NoWatchCache {
			continue
		}
		prefix := r.Prefix("")
		if _, ok := s.caches[prefix]; ok {
			continue
		}
		c := watchcache.New(watchcache.Config{
			Prefix: prefix, Store: cfg.Store, Decode: s.storageDecoder(r),
			Capacity: cfg.WatchCacheCapacity, BookmarkInterval: cfg.BookmarkInterval, Logger: cfg.Logger,
		})
		s.caches[prefix] = c
		go c.Run(ctx)
	}
	s.apf = s.startFlowControl(ctx)
	go s.runServiceRepair(ctx, cfg.ServiceRepairInterval)
	go s.runCompaction(ctx, cfg.CompactionInterval)
	return s, nil
}

// WaitReady blocks until every watch cache has loaded.
func (s *Server) WaitReady(ctx context.Context) error {
	for _, c := range s.caches {
		if err := c.WaitReady(ctx); err != nil {
			return err
		}
	}
	if err := s.svc.waitReady(ctx); err != nil {
		return err
	}
	s.readyOnce.Do(func() { close(s.readyCh) })
	return nil
}

func (s *Server) ready() bool {
	select {
	case <-s.readyCh:
		return true
	default:
		return false
	}
}

// cacheFor returns r's watch cache, nil for a resource served from storage alone
// (registry.Resource.NoWatchCache).
func (s *Server) cacheFor(r *registry.Resource) *watchcache.Cache {
	if r.Custom != nil {
		return s.custom.get(r.Prefix(""))
	}
	return s.caches[r.Prefix("")]
}

// storeOptions are the options of every store write of an object of r: the event TTL
// for the resources that expire with it, as upstream applies it on each write.
func (s *Server) storeOptions(r *registry.Resource) []storage.WriteOption {
	if r.ExpiresWithEventTTL {
		return s.eventTTL
	}
	return nil
}

// Scheme returns the server's scheme.
func (s *Server) Scheme() *runtime.Scheme { return s.scheme }

// requestInfo is what the URL says about a resource request.
type requestInfo struct {
	res         *registry.Resource
	gv          schema.GroupVersion
	namespace   string
	name        string
	subresource string
	verb        string
	// proxyPath is the path after {name}/proxy/ of a proxy request.
	proxyPath string
}

// parseResourcePath interprets /api/v1/... and /apis/g/v/... paths. ok is false when the
// path is not a resource path; err is a Status error for resource paths that cannot be served.
func (s *Server) parseResourcePath(method, path string, watchParam bool) (*requestInfo, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var gv schema.GroupVersion
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		gv = schema.GroupVersion{Version: parts[1]}
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		gv = schema.GroupVersion{Group: parts[1], Version: parts[2]}
		parts = parts[3:]
	default:
		return nil, false
	}
	legacyWatch := false
	if len(parts) > 0 && parts[0] == "watch" {
		legacyWatch = true
		parts = parts[1:]
	}
	ri := &requestInfo{gv: gv}
	if len(parts) >= 3 && parts[0] == "namespaces" && !(len(parts) == 3 && (parts[2] == "status" || parts[2] == "finalize")) {
		ri.namespace = parts[1]
		parts = parts[2:]
	}
	if len(parts) >= 3 && parts[2] == subresourceProxy {
		// As upstream's subpath option: "/" and the rest of the path, with the trailing
		// slash of the request ("/" for .../proxy/, "" for .../proxy).
		if len(parts) > 3 {
			ri.proxyPath = "/" + strings.Join(parts[3:], "/")
		}
		if strings.HasSuffix(path, "/") && !strings.HasSuffix(ri.proxyPath, "/") {
			ri.proxyPath += "/"
		}
		parts = parts[:3]
	}
	if len(parts) == 0 || len(parts) > 3 {
		return nil, false
	}
	res, ok := s.table.Lookup(gv, parts[0])
	if !ok {
		return nil, false
	}
	ri.res = res
	if len(parts) >= 2 {
		ri.name = parts[1]
	}
	if len(parts) == 3 {
		ri.subresource = parts[2]
	}
	if !res.Namespaced && ri.namespace != "" {
		return nil, false
	}
	if ri.subresource == subresourceProxy {
		ri.verb = proxyVerb(method)
		return ri, true
	}
	switch method {
	case http.MethodGet, http.MethodHead:
		switch {
		case legacyWatch || watchParam:
			ri.verb = "watch"
		case ri.name == "":
			ri.verb = "list"
		default:
			ri.verb = "get"
		}
	case http.MethodPost:
		ri.verb = "create"
	case http.MethodPut:
		ri.verb = "update"
	case http.MethodPatch:
		ri.verb = "patch"
	case http.MethodDelete:
		ri.verb = "delete"
		if ri.name == "" {
			ri.verb = "deletecollection"
		}
	default:
		ri.verb = strings.ToLower(method)
	}
	return ri, true
}

// EnsureNamespaces creates the given namespaces if they do not exist, as the upstream
// API server's bootstrap controller does for default, kube-system, kube-public and kube-node-lease.
func (s *Server) EnsureNamespaces(ctx context.Context, names ...string) error {
	r, _ := s.table.Lookup(schemaCoreV1, "namespaces")
	for _, name := range names {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := s.create(ctx, r, "", ns, writeOptions{manager: "kube-apiserver"}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	}
	return nil
}
