// Package controlplane starts etcd (embedded or external), creates the
// certificates, runs the API server over HTTPS and writes the admin kubeconfig.
// `kubette apiserver` is a thin wrapper around it; `kubette up` adds the other
// components on top (package cluster); integration tests use it through testenv.
package controlplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/kubette/kubette/internal/hostaddr"

	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubette/kubette/internal/apiserver"
	"github.com/kubette/kubette/internal/apiserver/admission"
	"github.com/kubette/kubette/internal/apiserver/filters"
	"github.com/kubette/kubette/internal/apiserver/servicealloc"
	"github.com/kubette/kubette/internal/inprocess"
	"github.com/kubette/kubette/internal/logging"
	"github.com/kubette/kubette/internal/metrics/scraper"
	"github.com/kubette/kubette/internal/pki"
	"github.com/kubette/kubette/internal/storage"
	"github.com/kubette/kubette/internal/storage/etcd"
)

// Config configures a control plane.
type Config struct {
	// DataDir holds etcd's data (unless EtcdServers is set), the certificates and the kubeconfig.
	DataDir string
	// BindAddress and Port are where the API server listens (default 0.0.0.0:6443).
	BindAddress string
	Port        int
	// Listener, when set, is where the API server serves instead (BindAddress and Port are
	// then ignored): tests listen on a free port themselves and hold it, so that nothing
	// else can take it between choosing and binding.
	Listener net.Listener
	// EtcdServers, when set, names an external etcd cluster instead of the embedded one.
	EtcdServers []string
	// TokenAuthFile is an optional static token file (token,user,uid,"groups").
	TokenAuthFile string
	// DisableAnonymousAuth refuses requests without credentials with 401 (upstream's
	// --anonymous-auth=false). By default, as upstream's, they are served as
	// system:anonymous in system:unauthenticated, and the authorizers decide: the
	// default policy lets them read /healthz, /livez, /readyz and /version only.
	DisableAnonymousAuth bool
	// AuthorizationModes are the authorizers after system:masters, in order, as upstream's
	// --authorization-mode: Node, RBAC, AlwaysAllow. Empty means Node,RBAC (upstream's
	// kubeadm default), with the default policy created and reconciled at start.
	AuthorizationModes []string
	// Logger receives logs (default slog.Default()).
	Logger *slog.Logger
	// UnsafeNoFsync turns off etcd's fsync (benchmarks and tests only).
	UnsafeNoFsync bool
	// MaxWatchTimeout caps the length of one watch request (tests use a short one).
	MaxWatchTimeout time.Duration
	// BeforeShutdown, when set, runs after ctx is done and before the API server stops,
	// so that components in the same process can finish their last requests.
	BeforeShutdown func()
	// ServiceClusterIPRange is where Service cluster IPs come from (default 10.96.0.0/12,
	// IPv4 only); its first address goes to the kubernetes Service.
	ServiceClusterIPRange string
	// ServiceNodePortRange is where Service node ports come from (default 30000-32767).
	ServiceNodePortRange string
	// AdvertiseAddress is the address the kubernetes Service's endpoints point at (default:
	// the bind address when it is a non-loopback IPv4 address, else the first IPv4 address
	// of the interface of the host's default route).
	AdvertiseAddress string
	// ServiceRepairInterval is how often the Service IP and port allocations are rebuilt
	// from the stored Services (default 3m; tests use a short one).
	ServiceRepairInterval time.Duration
	// TraceCapacity is how many trace records the API server keeps per resource for
	// `kubette trace` and the /ui/ page (0: the default, 10000); negative turns tracing off.
	TraceCapacity int
	// EventTTL is how long an Event lives after its last write (`--event-ttl`, whose
	// default is 1h as upstream's); 0 keeps Events until they are deleted.
	EventTTL time.Duration
	// ServiceAccountIssuer is the iss claim of ServiceAccount tokens and the issuer of the
	// OIDC discovery documents (--service-account-issuer; default
	// https://kubernetes.default.svc.cluster.local); it is also the API server's audience.
	ServiceAccountIssuer string
	// ServiceAccountJWKSURI is the jwks_uri of the OIDC discovery document
	// (--service-account-jwks-uri; default https://ADVERTISE-ADDRESS:PORT/openid/v1/jwks).
	ServiceAccountJWKSURI string
	// ServiceAccountMaxTokenExpiration caps the lifetime of requested tokens
	// (--service-account-max-token-expiration; 0: no cap).
	ServiceAccountMaxTokenExpiration time.Duration
	// DisableAdmissionPlugins names admission plugins to leave out of the chain
	// (--disable-admission-plugins), e.g. ServiceAccount for an API server without the
	// controller manager, whose namespaces have no default ServiceAccount (as upstream's
	// integration tests do).
	DisableAdmissionPlugins []string
	// ComponentsOverTLS makes ComponentConfig return configurations that reach the API
	// server over HTTPS with client certificates, as separate processes do. Unset, the
	// components of this process call the API server's handler in-process (see package
	// inprocess): the same authentication, authorization, admission and storage without
	// the TLS and HTTP/2 work on both ends.
	ComponentsOverTLS bool
	// Audit configures the audit log (off unless both its policy file and path are set).
	Audit AuditConfig
	// FlowControlSeats is the number of requests API Priority and Fairness lets execute
	// at once (apiserver.Config.FlowControlSeats: 0 is upstream's 600, negative is off).
	FlowControlSeats int
	// MetricResolution is how often the resource metrics API scrapes the kubelets
	// (metrics-server's --metric-resolution; 0: 15s).
	MetricResolution time.Duration
	// MetricsSource, when set, is where the scraper reads each node's resource metrics
	// instead of its kubelet (tests).
	MetricsSource scraper.Source
}

// kubernetesServiceInterval is how often the kubernetes Service and its endpoints are
// checked and repaired (upstream's endpoint reconciler interval).
const kubernetesServiceInterval = 10 * time.Second

// ControlPlane is a running API server and its storage.
type ControlPlane struct {
	// Kubeconfig is the path of the admin kubeconfig.
	Kubeconfig string
	// URL is the API server's address.
	URL string
	// ReadyAfter is how long start-up took until the API answered.
	ReadyAfter time.Duration

	done    chan error
	ca      *pki.CA
	pkiDir  string
	dataDir string
	// handler is the API server's handler chain, for in-process clients; nil when
	// components go over TLS.
	handler http.Handler
}

// ComponentConfig issues a client certificate for a component (user is its common name,
// e.g. system:kube-controller-manager, groups its organizations, e.g. system:nodes for a
// kubelet), writes DATA_DIR/<name>.kubeconfig for running it as a separate process, and
// returns the client configuration of the component running in this process: in-process
// as that user unless Config.ComponentsOverTLS.
func (c *ControlPlane) ComponentConfig(name, user string, groups ...string) (*rest.Config, error) {
	cfg, err := componentConfig(c.ca, c.pkiDir, c.dataDir, c.URL, name, user, groups)
	if err != nil || c.handler == nil {
		return cfg, err
	}
	return &rest.Config{Host: c.URL, Transport: &inprocess.Transport{Handler: c.handler,
		User: &filters.User{Name: user, Groups: append([]string{}, groups...)}}}, nil
}

// ServiceAccountConfig is the client configuration of a component of this process that
// acts as the ServiceAccount kube-system/<name> (user system:serviceaccount:kube-system:<name>
// in the groups system:serviceaccounts and system:serviceaccounts:kube-system), as each
// controller of upstream's controller manager does with --use-service-account-credentials.
// Its certificate and kubeconfig are named sa-<name>.
func (c *ControlPlane) ServiceAccountConfig(name string) (*rest.Config, error) {
	return c.ComponentConfig("sa-"+name, "system:serviceaccount:kube-system:"+name,
		"system:serviceaccounts", "system:serviceaccounts:kube-system")
}

// CA is the cluster's certificate authority, which components on this machine (the kubelet's
// serving certificate) get their certificates from.
func (c *ControlPlane) CA() *pki.CA { return c.ca }

// PKIDir is where the control plane keeps its certificates.
func (c *ControlPlane) PKIDir() string { return c.pkiDir }

// Wait blocks until the control plane stopped and returns why.
func (c *ControlPlane) Wait() error { return <-c.done }

// Start brings up storage and the API server, and returns once the API is ready. Everything
// stops when ctx is done; Wait reports the end.
func Start(ctx context.Context, cfg Config) (*ControlPlane, error) {
	start := time.Now()
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Port == 0 {
		cfg.Port = 6443
	}
	if cfg.BindAddress == "" {
		cfg.BindAddress = "0.0.0.0"
	}
	if cfg.ServiceClusterIPRange == "" {
		cfg.ServiceClusterIPRange = apiserver.DefaultServiceClusterIPRange
	}
	if cfg.ServiceNodePortRange == "" {
		cfg.ServiceNodePortRange = apiserver.DefaultServiceNodePortRange
	}
	serviceIPs, err := servicealloc.ParseCIDR(cfg.ServiceClusterIPRange)
	if err != nil {
		return nil, fmt.Errorf("--service-cluster-ip-range: %w", err)
	}
	nodePorts, err := servicealloc.ParsePortRange(cfg.ServiceNodePortRange)
	if err != nil {
		return nil, fmt.Errorf("--service-node-port-range: %w", err)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	pkiDir := filepath.Join(cfg.DataDir, "pki")

	// Certificates and etcd start in parallel: both take a noticeable part of start-up.
	type storeResult struct {
		store storage.Store
		stop  func()
		err   error
	}
	storeCh := make(chan storeResult, 1)
	go func() {
		st, stop, err := openStorage(ctx, cfg)
		storeCh <- storeResult{st, stop, err}
	}()

	ca, err := pki.LoadOrCreateCA(pkiDir, "kubette-ca")
	if err != nil {
		<-storeCh
		return nil, err
	}
	serving, err := servingCert(ca, pkiDir, servicealloc.NewIPs(nil, serviceIPs).First())
	if err != nil {
		<-storeCh
		return nil, err
	}
	adminCert, adminKey, err := ca.LoadOrIssue(pkiDir, "admin", pki.CertSpec{CommonName: "kubernetes-admin", Organization: []string{"system:masters"}, Client: true})
	if err != nil {
		<-storeCh
		return nil, err
	}
	kubeletClient, err := kubeletClientCert(ca, pkiDir)
	if err != nil {
		<-storeCh
		return nil, err
	}
	fp, err := loadFrontProxy(pkiDir)
	if err != nil {
		<-storeCh
		return nil, err
	}
	sr := <-storeCh
	if sr.err != nil {
		return nil, sr.err
	}
	auditor, stopAudit, err := openAudit(ctx, cfg.Audit, cfg.Logger)
	if err != nil {
		sr.stop()
		return nil, err
	}
	// The audit log stops with the storage, after the HTTP server has served its last request.
	stopStore := sr.stop
	sr.stop = func() { stopAudit(); stopStore() }

	sa, err := newSATokens(cfg, pkiDir)
	if err != nil {
		sr.stop()
		return nil, err
	}
	var tokens *filters.TokenAuthenticator
	if cfg.TokenAuthFile != "" {
		if tokens, err = filters.LoadTokenFile(cfg.TokenAuthFile); err != nil {
			sr.stop()
			return nil, err
		}
		sa.static = tokens
	}
	deps := extensionDeps{cfg: cfg, ca: ca, pkiDir: pkiDir, dataDir: cfg.DataDir, sa: sa, built: &built{}}
	srv, err := apiserver.New(ctx, apiserver.Config{Store: sr.store, Logger: cfg.Logger, Version: Version, MaxWatchTimeout: cfg.MaxWatchTimeout,
		ServiceClusterIPRange: serviceIPs, ServiceNodePortRange: nodePorts, ServiceRepairInterval: cfg.ServiceRepairInterval,
		TraceCapacity: cfg.TraceCapacity, EventTTL: cfg.EventTTL, Audit: auditor, FlowControlSeats: cfg.FlowControlSeats,
		Extend: func(s *apiserver.Server) (admission.Chain, map[apiserver.ActionKey]apiserver.Action, error) {
			return extend(deps, s)
		},
		KubeletClientTLS: &tls.Config{Certificates: []tls.Certificate{kubeletClient}, RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}})
	if err != nil {
		sr.stop()
		return nil, err
	}
	auth := filters.Union{inprocess.Authenticator{}, filters.X509Authenticator{}}
	if tokens != nil {
		auth = append(auth, tokens)
	}
	auth = append(auth, sa.auth)
	ln := cfg.Listener
	if ln == nil {
		ln, err = net.Listen("tcp", net.JoinHostPort(cfg.BindAddress, strconv.Itoa(cfg.Port)))
		if err != nil {
			sr.stop()
			return nil, fmt.Errorf("listen on port %d: %w", cfg.Port, err)
		}
	}
	if addr, ok := ln.Addr().(*net.TCPAddr); ok {
		cfg.BindAddress, cfg.Port = addr.IP.String(), addr.Port
	}
	discoveryHost := cfg.BindAddress
	if a, err := advertiseAddress(cfg); err == nil {
		discoveryHost = a.String()
	} else if discoveryHost == "0.0.0.0" || discoveryHost == "::" || discoveryHost == "" {
		discoveryHost = "127.0.0.1"
	}
	if err := serveIssuerDiscovery(sa, cfg, srv, discoveryHost, cfg.Port); err != nil {
		_ = ln.Close()
		sr.stop()
		return nil, err
	}
	authz, err := authorizers(deps, srv)
	if err != nil {
		sr.stop()
		return nil, err
	}
	var authn filters.Authenticator = auth
	if !cfg.DisableAnonymousAuth {
		authn = filters.AnonymousFallback{Authenticator: auth}
	}
	handler := srv.Handler(authn, authz)
	httpSrv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{serving},
			ClientAuth:   tls.VerifyClientCertIfGiven,
			ClientCAs:    ca.Pool(),
			MinVersion:   tls.VersionTLS12,
			NextProtos:   []string{"h2", "http/1.1"},
		},
	}
	done := make(chan error, 1)
	serveErr := make(chan error, 1)
	go func() { serveErr <- httpSrv.ServeTLS(ln, "", "") }()

	readyCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := srv.WaitReady(readyCtx); err != nil {
		_ = httpSrv.Close()
		sr.stop()
		return nil, err
	}
	if err := srv.EnsureNamespaces(readyCtx, "default", "kube-system", "kube-public", "kube-node-lease"); err != nil {
		_ = httpSrv.Close()
		sr.stop()
		return nil, err
	}
	if err := ensureSystemPriorityClasses(readyCtx, srv); err != nil {
		_ = httpSrv.Close()
		sr.stop()
		return nil, err
	}
	if err := ensureFlowControlConfig(ctx, readyCtx, srv, cfg.Logger); err != nil {
		_ = httpSrv.Close()
		sr.stop()
		return nil, err
	}
	if err := ensureDefaultPolicy(readyCtx, srv, cfg.Logger); err != nil {
		_ = httpSrv.Close()
		sr.stop()
		return nil, err
	}
	if err := runCRDControllers(ctx, srv, cfg.Logger); err != nil {
		_ = httpSrv.Close()
		sr.stop()
		return nil, err
	}
	if err := runAggregator(ctx, readyCtx, srv, ca.CertPEM, fp, cfg.Logger); err != nil {
		_ = httpSrv.Close()
		sr.stop()
		return nil, err
	}
	go deps.built.metrics.Run(ctx)
	if advertise, err := advertiseAddress(cfg); err != nil {
		cfg.Logger.Warn("no address to advertise: the kubernetes Service has no endpoints", "err", err)
		if err := srv.EnsureKubernetesService(readyCtx, netip.Addr{}, cfg.Port); err != nil {
			_ = httpSrv.Close()
			sr.stop()
			return nil, err
		}
	} else {
		if err := srv.EnsureKubernetesService(readyCtx, advertise, cfg.Port); err != nil {
			_ = httpSrv.Close()
			sr.stop()
			return nil, err
		}
		go reconcileKubernetesService(ctx, srv, advertise, cfg.Port, cfg.Logger)
	}
	host := cfg.BindAddress
	if host == "0.0.0.0" || host == "::" || host == "" {
		host = "127.0.0.1"
	}
	url := "https://" + net.JoinHostPort(host, strconv.Itoa(cfg.Port))
	kubeconfig := filepath.Join(cfg.DataDir, "admin.kubeconfig")
	if err := WriteKubeconfig(kubeconfig, url, ca.CertPEM, adminCert, adminKey, "kubernetes-admin"); err != nil {
		_ = httpSrv.Close()
		sr.stop()
		return nil, err
	}
	cp := &ControlPlane{Kubeconfig: kubeconfig, URL: url, ReadyAfter: time.Since(start), done: done,
		ca: ca, pkiDir: pkiDir, dataDir: cfg.DataDir}
	if !cfg.ComponentsOverTLS {
		cp.handler = handler
	}

	go func() {
		var err error
		select {
		case <-ctx.Done():
		case err = <-serveErr:
		}
		if cfg.BeforeShutdown != nil {
			cfg.BeforeShutdown()
		}
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// Watches never end by themselves: give requests a moment, then close.
		if serr := httpSrv.Shutdown(shutdownCtx); serr != nil {
			_ = httpSrv.Close()
		}
		sr.stop()
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	return cp, nil
}

func openStorage(ctx context.Context, cfg Config) (storage.Store, func(), error) {
	if len(cfg.EtcdServers) > 0 {
		st, err := etcd.Dial(ctx, cfg.EtcdServers, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("connect to etcd %v: %w", cfg.EtcdServers, err)
		}
		return st, func() { _ = st.Close() }, nil
	}
	e, err := etcd.StartEmbedded(ctx, etcd.EmbeddedConfig{DataDir: filepath.Join(cfg.DataDir, "etcd"), UnsafeNoFsync: cfg.UnsafeNoFsync,
		// etcd's errors, in the process's one format (it is chatty below that).
		Logger: logging.Zap(cfg.Logger.With(logging.ComponentKey, "etcd"), zapcore.ErrorLevel)})
	if err != nil {
		return nil, nil, err
	}
	st, err := e.InProcessStore()
	if err != nil {
		e.Close()
		return nil, nil, err
	}
	return st, func() { _ = st.Close(); e.Close() }, nil
}

// reconcileKubernetesService repairs the kubernetes Service and its endpoints every
// kubernetesServiceInterval until ctx is done.
func reconcileKubernetesService(ctx context.Context, srv *apiserver.Server, addr netip.Addr, port int, log *slog.Logger) {
	t := time.NewTicker(kubernetesServiceInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := srv.EnsureKubernetesService(ctx, addr, port); err != nil && ctx.Err() == nil {
				log.Warn("repair the kubernetes Service", "err", err)
			}
		}
	}
}

// advertiseAddress is the API server's address for the kubernetes Service's endpoints.
func advertiseAddress(cfg Config) (netip.Addr, error) {
	if cfg.AdvertiseAddress != "" {
		a, err := netip.ParseAddr(cfg.AdvertiseAddress)
		if err != nil || !a.Is4() {
			return netip.Addr{}, fmt.Errorf("advertise address %q: want an IPv4 address", cfg.AdvertiseAddress)
		}
		return a, nil
	}
	if a, err := netip.ParseAddr(cfg.BindAddress); err == nil && a.Is4() && !a.IsLoopback() && !a.IsUnspecified() {
		return a, nil
	}
	return hostaddr.DefaultRouteIPv4()
}

func servingCert(ca *pki.CA, dir string, serviceIP netip.Addr) (tls.Certificate, error) {
	spec := pki.CertSpec{
		CommonName: "kube-apiserver", Server: true,
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPs:      []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.IP(serviceIP.AsSlice())},
	}
	if h, err := os.Hostname(); err == nil {
		spec.DNSNames = append(spec.DNSNames, h)
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
				spec.IPs = append(spec.IPs, ipn.IP)
			}
		}
	}
	certPEM, keyPEM, err := ca.LoadOrIssue(dir, "apiserver", spec)
	if err != nil {
		return tls.Certificate{}, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("load serving certificate: %w", err)
	}
	return cert, nil
}

// kubeletClientCert loads or issues the certificate the API server presents to kubelets
// (pods/log), named as kubeadm's apiserver-kubelet-client.
func kubeletClientCert(ca *pki.CA, dir string) (tls.Certificate, error) {
	certPEM, keyPEM, err := ca.LoadOrIssue(dir, "apiserver-kubelet-client", pki.CertSpec{
		CommonName: "kube-apiserver-kubelet-client", Organization: []string{"kubeadm:cluster-admins"}, Client: true,
	})
	if err != nil {
		return tls.Certificate{}, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("load kubelet client certificate: %w", err)
	}
	return cert, nil
}

// componentConfig issues a client certificate for a component, writes its kubeconfig
// under the data dir (for running the component as a separate process) and returns its
// client configuration.
func componentConfig(ca *pki.CA, pkiDir, dataDir, url, name, user string, groups []string) (*rest.Config, error) {
	certPEM, keyPEM, err := ca.LoadOrIssue(pkiDir, name, pki.CertSpec{CommonName: user, Organization: groups, Client: true})
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dataDir, name+".kubeconfig")
	if err := WriteKubeconfig(path, url, ca.CertPEM, certPEM, keyPEM, user); err != nil {
		return nil, err
	}
	return &rest.Config{Host: url, TLSClientConfig: rest.TLSClientConfig{CAData: ca.CertPEM, CertData: certPEM, KeyData: keyPEM}}, nil
}

// WriteKubeconfig writes a kubeconfig with embedded credentials for one user.
func WriteKubeconfig(path, server string, caPEM, certPEM, keyPEM []byte, user string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubette"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts["kubette"] = &clientcmdapi.Context{Cluster: "kubette", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "kubette"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return os.Chmod(path, 0o600)
}
