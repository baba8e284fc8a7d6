package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/client-go/transport"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationv1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"

	"github.com/kubette/kubette/internal/apiserver/filters"
	"github.com/kubette/kubette/internal/localnet"
	"github.com/kubette/kubette/internal/streamproxy"
)

// ServiceResolver turns the Service an APIService names into the URL of one endpoint
// to send a request to (upstream's aggregator ServiceResolver).
type ServiceResolver interface {
	ResolveEndpoint(namespace, name string, port int32) (*url.URL, error)
}

// AggregationConfig is how the server reaches extension API servers (remote
// APIServices): where a Service's requests go, and the front-proxy client
// certificate the extension servers trust as the requestheader authenticator.
type AggregationConfig struct {
	Resolver ServiceResolver
	// ProxyClientCert is presented to every extension server.
	ProxyClientCert tls.Certificate
}

// aggregator holds the remote APIServices the server proxies to, as upstream's
// kube-aggregator proxy handlers: one per group-version, kept up to date by the
// APIService registration controller through AddAPIService and RemoveAPIService.
type aggregator struct {
	cfg    atomic.Pointer[AggregationConfig]
	mu     sync.RWMutex
	remote map[string]*remoteAPI // by APIService name
}

// remoteAPI is one remote APIService and its connection.
type remoteAPI struct {
	svc       *apiregistrationv1.APIService
	available bool
	transport *http.Transport

	// discovery is the last answer of the extension server to /apis/<group>/<version>.
	discMu      sync.Mutex
	discFetched time.Time
	disc        *metav1.APIResourceList
	discErr     error
}

// aggregatorSystemUser is the identity the server discovers extension servers as.
const aggregatorSystemUser = "system:kube-aggregator"

// discoveryRefresh is how long a remote group-version's discovery is reused before it is
// asked for again (upstream's discovery manager refreshes about as often).
const discoveryRefresh = 30 * time.Second

// EnableAggregation lets the server proxy to remote APIServices. Until it is called,
// AddAPIService of a remote APIService fails.
func (s *Server) EnableAggregation(cfg AggregationConfig) {
	s.agg.cfg.Store(&cfg)
}

// AddAPIService registers or updates the APIService a: a remote one (spec.service set)
// is proxied to from now on; a local one is served by this server, so any remote
// handling of its name ends.
func (s *Server) AddAPIService(a *apiregistrationv1.APIService) error {
	if a.Spec.Service == nil {
		s.RemoveAPIService(a.Name)
		return nil
	}
	cfg := s.agg.cfg.Load()
	if cfg == nil {
		return errors.New("API aggregation is not enabled on this server")
	}
	s.agg.mu.Lock()
	defer s.agg.mu.Unlock()
	if s.agg.remote == nil {
		s.agg.remote = map[string]*remoteAPI{}
	}
	old := s.agg.remote[a.Name]
	r := &remoteAPI{svc: a.DeepCopy(), available: apiregistrationv1helper.IsAPIServiceConditionTrue(a, apiregistrationv1.Available)}
	if old != nil && sameConnection(old.svc, a) {
		r.transport = old.transport
		if old.svc.Spec.Group == a.Spec.Group && old.svc.Spec.Version == a.Spec.Version {
			r.discFetched, r.disc, r.discErr = old.discFetched, old.disc, old.discErr
		}
	} else {
		t, err := remoteTransport(cfg, a)
		if err != nil {
			return fmt.Errorf("APIService %s: %w", a.Name, err)
		}
		r.transport = t
		if old != nil {
			old.transport.CloseIdleConnections()
		}
	}
	s.agg.remote[a.Name] = r
	return nil
}

// RemoveAPIService ends the proxying of the APIService called name.
func (s *Server) RemoveAPIService(name string) {
	s.agg.mu.Lock()
	defer s.agg.mu.Unlock()
	if r, ok := s.agg.remote[name]; ok {
		r.transport.CloseIdleConnections()
		delete(s.agg.remote, name)
	}
}

// sameConnection reports whether a and b reach their server the same way.
func sameConnection(a, b *apiregistrationv1.APIService) bool {
	sa, sb := a.Spec.Service, b.Spec.Service
	return sa.Namespace == sb.Namespace && sa.Name == sb.Name && ptrEqual(sa.Port, sb.Port) &&
		string(a.Spec.CABundle) == string(b.Spec.CABundle) && a.Spec.InsecureSkipTLSVerify == b.Spec.InsecureSkipTLSVerify
}

func ptrEqual(a, b *int32) bool { return (a == nil && b == nil) || (a != nil && b != nil && *a == *b) }

// remoteTransport is the connection to an APIService's server, as upstream's: TLS
// with the front-proxy client certificate, the server's certificate verified against
// the caBundle (the system roots without one) for the name <service>.<namespace>.svc,
// or not verified at all with insecureSkipTLSVerify. It dials only this machine's
// addresses (see AggregatorDial).
func remoteTransport(cfg *AggregationConfig, a *apiregistrationv1.APIService) (*http.Transport, error) {
	tc := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cfg.ProxyClientCert},
		ServerName:   a.Spec.Service.Name + "." + a.Spec.Service.Namespace + ".svc",
		// As upstream: the APIService's owner chose to skip verification.
		InsecureSkipVerify: a.Spec.InsecureSkipTLSVerify, //nolint:gosec // the APIService asks for it, as upstream allows
	}
	if len(a.Spec.CABundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(a.Spec.CABundle) {
			return nil, errors.New("spec.caBundle holds no PEM certificate")
		}
		tc.RootCAs = pool
	}
	return &http.Transport{
		DialContext:         AggregatorDial,
		TLSClientConfig:     tc,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 25,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}, nil
}

// AggregatorDial dials an extension server: only addresses of this machine (package
// localnet), and of names only "localhost" (an ExternalName Service of localhost),
// which is this machine's loopback address by definition and needs no resolver.
func AggregatorDial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	d := &localnet.Dialer{Dialer: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}}
	return d.DialContext(ctx, network, addr)
}

// remoteFor returns the remote APIService serving gv, if any.
func (s *Server) remoteFor(gv schema.GroupVersion) *remoteAPI {
	s.agg.mu.RLock()
	defer s.agg.mu.RUnlock()
	for _, r := range s.agg.remote {
		if r.svc.Spec.Group == gv.Group && r.svc.Spec.Version == gv.Version {
			return r
		}
	}
	return nil
}

// remoteAPIs returns the remote APIServices of named groups, sorted as upstream's
// discovery sorts them: by group priority (highest first), then group name, and within
// a group by version priority and version (kube-aggregator's helper).
func (s *Server) remoteAPIs() [][]*remoteAPI {
	s.agg.mu.RLock()
	var svcs []*apiregistrationv1.APIService
	byName := map[string]*remoteAPI{}
	for name, r := range s.agg.remote {
		if r.svc.Spec.Group == "" {
			continue
		}
		svcs = append(svcs, r.svc)
		byName[name] = r
	}
	s.agg.mu.RUnlock()
	var out [][]*remoteAPI
	for _, group := range apiregistrationv1helper.SortedByGroupAndVersion(svcs) {
		var g []*remoteAPI
		for _, svc := range group {
			g = append(g, byName[svc.Name])
		}
		out = append(out, g)
	}
	return out
}

// serveAggregated serves the paths of remote APIServices: /apis/<group> of a group no
// built-in or custom resource serves (its APIGroup from the APIServices, as upstream's
// aggregator), and everything under /apis/<group>/<version>, which is proxied. It
// reports whether it answered.
func (s *Server) serveAggregated(w http.ResponseWriter, req *http.Request) bool {
	if !strings.HasPrefix(req.URL.Path, "/apis/") {
		return false
	}
	parts := strings.SplitN(strings.TrimPrefix(req.URL.Path, "/apis/"), "/", 3)
	if len(parts) == 1 || (len(parts) == 2 && parts[1] == "") {
		group := parts[0]
		if group == "" || s.apiGroup(group) != nil {
			return false
		}
		g := s.remoteAPIGroup(group)
		if g == nil {
			return false
		}
		s.writeDiscovery(w, g, false)
		return true
	}
	r := s.remoteFor(schema.GroupVersion{Group: parts[0], Version: parts[1]})
	if r == nil {
		return false
	}
	s.proxyToAPIService(w, req, r)
	return true
}

// remoteAPIGroup is the APIGroup of a group served only by remote APIServices.
func (s *Server) remoteAPIGroup(group string) *metav1.APIGroup {
	for _, g := range s.remoteAPIs() {
		if g[0].svc.Spec.Group != group {
			continue
		}
		out := &metav1.APIGroup{Name: group}
		out.APIVersion, out.Kind = "v1", "APIGroup"
		for _, r := range g {
			v := metav1.GroupVersionForDiscovery{GroupVersion: group + "/" + r.svc.Spec.Version, Version: r.svc.Spec.Version}
			out.Versions = append(out.Versions, v)
		}
		out.PreferredVersion = out.Versions[0]
		return out
	}
	return nil
}

// proxyToAPIService passes a request that passed authentication and authorization on
// to the APIService's server, as upstream's proxy handler: 503 while the APIService is
// not available or its Service has no endpoint; the path and query as they are; the
// caller's credentials removed and its identity sent in the requestheader headers
// (X-Remote-User, X-Remote-Uid, X-Remote-Group, X-Remote-Extra-*), which the extension
// server believes because the connection carries the front-proxy client certificate;
// upgrades (exec, watch over WebSocket) tunnelled.
func (s *Server) proxyToAPIService(w http.ResponseWriter, req *http.Request, r *remoteAPI) {
	if !r.available {
		s.writeError(w, req, apierrors.NewServiceUnavailable("service unavailable"))
		return
	}
	u, ok := filters.UserFrom(req.Context())
	if !ok || u == nil {
		s.writeError(w, req, apierrors.NewInternalError(errors.New("missing user")))
		return
	}
	cfg := s.agg.cfg.Load()
	loc, err := cfg.Resolver.ResolveEndpoint(r.svc.Spec.Service.Namespace, r.svc.Spec.Service.Name, *r.svc.Spec.Service.Port)
	if err != nil {
		s.log.Debug("resolve an APIService's endpoint", "apiservice", r.svc.Name, "err", err)
		s.writeError(w, req, apierrors.NewServiceUnavailable("service unavailable"))
		return
	}
	loc.Path = req.URL.Path
	loc.RawQuery = req.URL.RawQuery
	out := req.Clone(req.Context())
	out.Header.Del("Authorization")
	for k := range out.Header {
		if strings.HasPrefix(strings.ToLower(k), "impersonate-") {
			out.Header.Del(k)
		}
	}
	transport.SetAuthProxyHeaders(out, u.Name, u.UID, u.Groups, u.Extra)
	h := proxy.NewUpgradeAwareHandler(loc, r.transport, true, httpstream.IsUpgradeRequest(req), proxyResponder{s})
	h.UseLocationHost = true
	h.ServeHTTP(streamproxy.ResponseWriter(w), out)
}

// remoteDiscovery returns the extension server's resources of the APIService's
// group-version, from its /apis/<group>/<version> (asked as system:kube-aggregator in
// system:masters, as upstream's discovery manager), reusing an answer younger than
// discoveryRefresh; stale is true when the last answer is older than the last
// attempt, which failed.
func (s *Server) remoteDiscovery(ctx context.Context, r *remoteAPI) (list *metav1.APIResourceList, stale bool) {
	r.discMu.Lock()
	defer r.discMu.Unlock()
	if r.disc != nil && time.Since(r.discFetched) < discoveryRefresh {
		return r.disc, r.discErr != nil
	}
	l, err := s.fetchRemoteDiscovery(ctx, r)
	r.discFetched = time.Now()
	r.discErr = err
	if err != nil {
		s.log.Debug("discover an APIService", "apiservice", r.svc.Name, "err", err)
		return r.disc, r.disc != nil
	}
	r.disc = l
	return l, false
}

func (s *Server) fetchRemoteDiscovery(ctx context.Context, r *remoteAPI) (*metav1.APIResourceList, error) {
	if !r.available {
		return nil, errors.New("not available")
	}
	cfg := s.agg.cfg.Load()
	loc, err := cfg.Resolver.ResolveEndpoint(r.svc.Spec.Service.Namespace, r.svc.Spec.Service.Name, *r.svc.Spec.Service.Port)
	if err != nil {
		return nil, err
	}
	loc.Path = "/apis/" + r.svc.Spec.Group + "/" + r.svc.Spec.Version
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", mimeJSON)
	transport.SetAuthProxyHeaders(req, aggregatorSystemUser, "", []string{"system:masters"}, nil)
	resp, err := (&http.Client{Transport: r.transport}).Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", loc.Path, resp.Status)
	}
	list := &metav1.APIResourceList{}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(list); err != nil {
		return nil, fmt.Errorf("GET %s: %w", loc.Path, err)
	}
	return list, nil
}

// remoteOnlyGroups lists the groups of remote APIServices not served here, in
// discovery order.
func (s *Server) remoteOnlyGroups() [][]*remoteAPI {
	var out [][]*remoteAPI
	for _, g := range s.remoteAPIs() {
		if s.apiGroup(g[0].svc.Spec.Group) == nil {
			out = append(out, g)
		}
	}
	return out
}

// BuiltinGroupVersions returns the group-versions the server serves built-in
// resources at (not those of custom resources), in discovery order: the local
// APIServices kept for them.
func (s *Server) BuiltinGroupVersions() []schema.GroupVersion {
	var out []schema.GroupVersion
	seen := map[schema.GroupVersion]bool{}
	for _, r := range s.table.All() {
		if r.Custom != nil || seen[r.GroupVersion] {
			continue
		}
		seen[r.GroupVersion] = true
		out = append(out, r.GroupVersion)
	}
	return out
}
