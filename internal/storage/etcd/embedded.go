package etcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/soheilhy/cmux"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Defaults of the embedded etcd.
const (
	// DefaultStartTimeout bounds how long StartEmbedded waits for etcd to be ready.
	DefaultStartTimeout = 30 * time.Second
	// embeddedCompactionRetention matches the upstream API server's compaction interval.
	embeddedCompactionRetention = "5m"
	// embeddedQuotaBackendBytes is the backend size at which etcd raises its NOSPACE alarm.
	embeddedQuotaBackendBytes = 2 << 30
	// embeddedTickMs is the raft heartbeat tick. A single member never waits on
	// peers, so a short tick only speeds up the first election at start-up.
	embeddedTickMs = 10
	// embeddedElectionMs is the raft election timeout.
	embeddedElectionMs = 100
	// startAttempts bounds retries when a freshly picked free port is taken
	// by someone else before etcd binds it.
	startAttempts = 5
)

// EmbeddedConfig configures StartEmbedded.
type EmbeddedConfig struct {
	// DataDir holds etcd's data; it is created (mode 0700) if missing. Starting
	// again on the same DataDir finds the data written before. Required.
	DataDir string
	// ClientURL is where etcd serves clients: "http://127.0.0.1:PORT" or
	// "unix:///absolute/path.sock". Empty picks a free loopback TCP port.
	ClientURL string
	// Logger receives etcd's error-level logs. Nil discards them.
	Logger *zap.Logger
	// StartTimeout bounds how long StartEmbedded waits for etcd to become
	// ready; zero means DefaultStartTimeout.
	StartTimeout time.Duration
	// UnsafeNoFsync turns off fsync: a crash can lose or corrupt data. For
	// tests and benchmarks only.
	UnsafeNoFsync bool
}

// Embedded is a single-member etcd server running inside this process.
type Embedded struct {
	// Endpoints are the client URLs of the server, for clientv3.Config.Endpoints.
	Endpoints []string

	etcd   *embed.Etcd
	logger *zap.Logger
	// closing is set by Close: etcd then logs errors of its listeners being
	// closed, which are expected and left out.
	closing *atomic.Bool

	mu      sync.Mutex
	clients []*clientv3.Client
	closed  bool
}

// StartEmbedded starts an etcd server with its data in cfg.DataDir, listening
// on loopback only, and waits until it serves requests. ctx bounds the start-up
// only: the server runs until Close.
func StartEmbedded(ctx context.Context, cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("embedded etcd: DataDir is required")
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded etcd: create data dir: %w", err)
	}
	logger := zap.NewNop()
	closing := &atomic.Bool{}
	if cfg.Logger != nil {
		logger = cfg.Logger.WithOptions(zap.IncreaseLevel(zapcore.ErrorLevel), zap.WrapCore(func(c zapcore.Core) zapcore.Core {
			return &closedListenerFilter{Core: c, closing: closing}
		}))
	}
	timeout := cfg.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var lastErr error
	for range startAttempts {
		clientURL := cfg.ClientURL
		if clientURL == "" {
			port, err := freeLoopbackPort()
			if err != nil {
				return nil, fmt.Errorf("embedded etcd: %w", err)
			}
			clientURL = fmt.Sprintf("http://127.0.0.1:%d", port)
		}
		e, err := startOnce(ctx, cfg, clientURL, logger)
		if err == nil {
			e.closing = closing
			return e, nil
		}
		lastErr = err
		// Only a lost race for the port we picked is worth another try.
		if cfg.ClientURL != "" || !errors.Is(err, syscall.EADDRINUSE) || ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// startOnce starts etcd serving clients on clientURL and waits until it is ready.
func startOnce(ctx context.Context, cfg EmbeddedConfig, clientURL string, logger *zap.Logger) (*Embedded, error) {
	curl, err := url.Parse(clientURL)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: client URL %q: %w", clientURL, err)
	}
	// A single member never dials its peer URL, but etcd needs one: let the
	// kernel pick the port so it cannot collide. The URL (port 0) is what gets
	// recorded in the member list, identically on every start.
	purl := url.URL{Scheme: "http", Host: "127.0.0.1:0"}

	ec := embed.NewConfig()
	ec.Name = "kubette"
	ec.Dir = cfg.DataDir
	ec.ListenClientUrls = []url.URL{*curl}
	ec.AdvertiseClientUrls = []url.URL{*curl}
	ec.ListenPeerUrls = []url.URL{purl}
	ec.AdvertisePeerUrls = []url.URL{purl}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.InitialClusterToken = "kubette"
	ec.TickMs = embeddedTickMs
	ec.ElectionMs = embeddedElectionMs
	ec.AutoCompactionMode = embed.CompactorModePeriodic
	ec.AutoCompactionRetention = embeddedCompactionRetention
	ec.QuotaBackendBytes = embeddedQuotaBackendBytes
	ec.UnsafeNoFsync = cfg.UnsafeNoFsync
	ec.EnableGRPCGateway = false
	ec.ListenMetricsUrls = nil
	ec.Metrics = "basic"
	ec.LogLevel = "error"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger)

	etcd, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: start in %s: %w", cfg.DataDir, err)
	}
	select {
	case <-etcd.Server.ReadyNotify():
	case err := <-etcd.Err():
		etcd.Close()
		return nil, fmt.Errorf("embedded etcd: serving failed before ready: %w", err)
	case <-etcd.Server.StopNotify():
		etcd.Close()
		return nil, errors.New("embedded etcd: server stopped before it was ready")
	case <-ctx.Done():
		etcd.Close()
		return nil, fmt.Errorf("embedded etcd: not ready (data dir %s): %w", cfg.DataDir, ctx.Err())
	}

	endpoints := make([]string, 0, len(etcd.Clients))
	for _, l := range etcd.Clients {
		switch curl.Scheme {
		case "unix", "unixs":
			endpoints = append(endpoints, clientURL)
		default:
			endpoints = append(endpoints, curl.Scheme+"://"+l.Addr().String())
		}
	}
	return &Embedded{Endpoints: endpoints, etcd: etcd, logger: logger}, nil
}

// freeLoopbackPort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	return port, nil
}

// Client returns a new client of the embedded server. The caller should close
// it; Close closes any client still open so that etcd can stop promptly.
func (e *Embedded) Client() (*clientv3.Client, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errors.New("embedded etcd: closed")
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints:            e.Endpoints,
		DialTimeout:          dialTimeout,
		DialKeepAliveTime:    dialKeepAliveTime,
		DialKeepAliveTimeout: dialKeepAliveTimeout,
		Logger:               e.logger,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: client: %w", err)
	}
	// Forget clients the caller already closed.
	open := e.clients[:0]
	for _, c := range e.clients {
		if c.Ctx().Err() == nil {
			open = append(open, c)
		}
	}
	e.clients = append(open, client)
	return client, nil
}

// Store returns a Store over a new client of the embedded server; closing the
// Store closes that client.
func (e *Embedded) Store() (*Store, error) {
	client, err := e.Client()
	if err != nil {
		return nil, err
	}
	return New(client, OwnClient()), nil
}

// InProcessStore returns a Store whose client calls the embedded server directly,
// without gRPC over a socket (etcd's v3client). The control plane uses it: the
// loopback hop cost about a quarter of the server's CPU on the create path.
// Closing the Store closes that client.
func (e *Embedded) InProcessStore() (*Store, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errors.New("embedded etcd: closed")
	}
	client := v3client.New(e.etcd.Server)
	e.clients = append(e.clients, client)
	st := New(client, OwnClient())
	st.kv = v3rpc.NewQuotaKVServer(e.etcd.Server)
	return st, nil
}

// Err reports errors from etcd's listeners while it runs. It is closed once
// Close has stopped the server.
func (e *Embedded) Err() <-chan error { return e.etcd.Err() }

// Close closes the clients made by Client that are still open, then stops
// etcd and waits until its data is flushed and its files are released.
// It is safe to call more than once.
func (e *Embedded) Close() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	clients := e.clients
	e.clients = nil
	e.mu.Unlock()

	for _, c := range clients {
		if c.Ctx().Err() == nil {
			_ = c.Close() // Open watch streams would hold up etcd's graceful stop.
		}
	}
	if e.closing != nil {
		e.closing.Store(true)
	}
	e.etcd.Close()
	<-e.etcd.Server.StopNotify()
}

// closedListenerFilter leaves out two kinds of error entries that are part of
// etcd's normal life: once closing is set, those whose error says a listener or
// server was closed (etcd logs them when it stops as asked: "setting up serving
// from embedded etcd failed", http: Server closed, mux: server closed), and the
// storage version update a first start retries.
type closedListenerFilter struct {
	zapcore.Core
	closing *atomic.Bool
}

func (f *closedListenerFilter) With(fields []zapcore.Field) zapcore.Core {
	return &closedListenerFilter{Core: f.Core.With(fields), closing: f.closing}
}

func (f *closedListenerFilter) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if f.Enabled(e.Level) {
		return ce.AddCore(e, f)
	}
	return ce
}

func (f *closedListenerFilter) Write(e zapcore.Entry, fields []zapcore.Field) error {
	// A new member's version monitor tries to record the storage version before the
	// first term is persisted, logs this at error level and succeeds on its next tick
	// (etcd 3.6+, on every first start of a data directory).
	if e.Message == "failed to update storage version" {
		for _, fl := range fields {
			if err, ok := fl.Interface.(error); ok && fl.Type == zapcore.ErrorType && strings.Contains(err.Error(), "missing term information") {
				return nil
			}
		}
	}
	if f.closing.Load() {
		for _, fl := range fields {
			if err, ok := fl.Interface.(error); ok && fl.Type == zapcore.ErrorType &&
				(errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) || errors.Is(err, cmux.ErrServerClosed) || errors.Is(err, cmux.ErrListenerClosed)) {
				return nil
			}
		}
	}
	return f.Core.Write(e, fields)
}
