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
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	"github.com/kubette/kubette/internal/apiserver/servicealloc"
	"github.com/kubette/kubette/internal/apiserver/watchcache"
	"github.com/kubette/kubette/internal/registry"
	"github.com/kubette/kubette/internal/storage"
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
	// EventTTL is how long an Event lives after its last write (upstream's --event-ttl,
	// whose default is 1h): the store deletes it then, and watchers see it deleted.
	// 0 keeps Events until they are deleted.
	EventTTL time.Duration
}

// Server is the API server's request handling. Create it with New and serve Handler().
type Server struct {
	cfg     Config
	log     *slog.Logger
	scheme  *runtime.Scheme
	codecs  *codecs
	table   *registry.Table
	caches  map[string]*watchcache.Cache // by storage prefix
	docs    *openAPIDocs
	fields  *fieldManagers
	metrics *metrics
	svc     *serviceAllocators
	tracer  *tracer // nil when tracing is off
	// bindingCreated is the response to every successful binding, encoded once.
	bindingCreated *constResponse
	// eventTTL are the store options of a write of a resource that expires with the
	// event TTL (nil when Events do not expire); built once, so writes pass it as is.
	eventTTL []storage.WriteOption

	nsDeleted deletedNamespaces

	readyOnce sync.Once
	readyCh   chan struct{}
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
	s.startTrace()
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
	go s.runServiceRepair(ctx, cfg.ServiceRepairInterval)
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
func (s *Server) cacheFor(r *registry.Resource) *watchcache.Cache { return s.caches[r.Prefix("")] }

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
