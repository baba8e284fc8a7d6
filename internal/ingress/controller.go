// Package ingress is kubette's Ingress controller. It watches Ingresses,
// IngressClasses, Services, EndpointSlices and Secrets, builds an nginx
// configuration from them (Build, a pure function rendered by package nginx),
// runs nginx and reloads it when the configuration changes, and writes the
// address it serves on into the status of every Ingress it serves.
//
// How a sync goes:
//   - Informer events only wake the sync loop; syncs are coalesced to one per
//     MinSyncPeriod and always rebuild the whole configuration from the
//     listers (level-based).
//   - Ingresses of our classes are built into a Model. An Ingress with an
//     invalid annotation is left out (Warning event); a path to a missing
//     Service or a backend without ready endpoints answers 503.
//   - When the rendered nginx.conf differs from the running one, the new one
//     is written next to it and checked with `nginx -t`. When nginx rejects
//     it, the Ingress owning the offending line (every server and location
//     names its owner in a comment) is left out with a Warning event and the
//     configuration rebuilt; a rejection nobody owns keeps the running
//     configuration and is retried with back-off. A configuration nginx
//     rejected never replaces the running one.
//   - A checked configuration is renamed over conf/nginx.conf and nginx is
//     reloaded with SIGHUP. The reload is confirmed: every configuration
//     serves its id (a hash of it) on the control socket, and the reload
//     counts as done when a fresh connection gets the new id. When the
//     master logs an "[emerg]" instead (e.g. a listen address taken: `nginx
//     -t` does not bind) or the id never comes, the reload failed: the
//     Ingresses whose part of the configuration changed get a ReloadFailed
//     Warning event, FailedReloads is counted, and the sync is retried with
//     back-off (the old configuration keeps serving meanwhile).
//   - Endpoints: when nginx's Lua module works (detected at start with a
//     throwaway nginx, Options.EndpointUpdates), upstreams are picked by a
//     Lua balancer from endpoints kept in a shared dict, which the
//     controller replaces through the control socket (a unix socket in a
//     0700 directory) and keeps in conf/backends (loaded by nginx at start
//     and reload): an endpoint change needs no reload. Without Lua the
//     endpoints are server lines and a change of them reloads nginx.
//   - Status: served Ingresses get status.loadBalancer.ingress = PublishIP;
//     one that carries exactly that address and is no longer served is
//     cleared.
//
// On-disk layout under Options.DataDir/ingress: conf/nginx.conf (running),
// conf/nginx.conf.new (candidate), conf/backends (endpoints, with Lua),
// certs/ (0600 certificate+key files named after their content hash, 0700
// directory), run/control.sock (0700 directory), logs/, tmp/, lua-probe/
// (the Lua detection's nginx), nginx.pid.
package ingress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kubette/kubette/internal/hostaddr"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	listersv1 "k8s.io/client-go/listers/core/v1"

	"github.com/kubette/kubette/internal/ingress/nginx"
)

// Options configure a Controller.
type Options struct {
	// Client reaches the API server. Required.
	Client kubernetes.Interface
	// DataDir holds the controller's state in DataDir/ingress. Required.
	DataDir string
	// NginxBinary is the nginx executable (default: nginx from PATH).
	NginxBinary string
	// HTTPPort and HTTPSPort are where nginx listens (defaults 80 and 443).
	HTTPPort, HTTPSPort int
	// ListenAddress is the address nginx binds ("" means every address).
	ListenAddress string
	// PublishIP is written into the status of served Ingresses (default:
	// the IPv4 address of the default-route interface).
	PublishIP string
	// ClassName is the IngressClass EnsureClass creates (default "nginx").
	// Every class whose spec.controller is ControllerName is served.
	ClassName string
	// DefaultClass makes EnsureClass mark the class as the default one.
	DefaultClass bool
	// WorkerProcesses is nginx's worker_processes (default "auto").
	WorkerProcesses string
	// MinSyncPeriod is the least time between two syncs (default 100 ms).
	MinSyncPeriod time.Duration
	// EndpointUpdates is how endpoint changes reach nginx: EndpointsAuto
	// (the default: Lua when nginx's Lua module works, else reloads),
	// EndpointsLua (Run fails without a working Lua module) or
	// EndpointsReload.
	EndpointUpdates string
	// ReloadTimeout is how long a reload may take to be served before it
	// counts as failed (default 60 s).
	ReloadTimeout time.Duration
	// LuaModuleDirs are where nginx's NDK and Lua modules are looked for
	// (default nginx.DefaultModuleDirs()).
	LuaModuleDirs []string
	// Logger receives the controller's logs (default slog.Default()).
	Logger *slog.Logger
}

// Endpoint update modes (Options.EndpointUpdates).
const (
	EndpointsAuto   = "auto"
	EndpointsLua    = "lua"
	EndpointsReload = "reload"
)

// Controller serves Ingresses with nginx.
type Controller struct {
	o      Options
	prefix string
	log    *slog.Logger
	proc   *nginx.Process
	ctl    nginx.Control
	wake   chan struct{}
	// lua is set by Run when endpoints go through Lua.
	lua atomic.Pointer[nginx.Lua]
	// beforeReload, when set (tests), runs between the check and the
	// reload of a new configuration.
	beforeReload func()

	// Owned by the sync loop.
	recorder     record.EventRecorder
	applied      []byte
	rejected     map[string]rejection
	reported     map[string]bool
	secretsSeen  atomic.Bool
	backendsFile []byte // content of conf/backends
	pushed       []byte // endpoints nginx holds
	pushedStarts int    // nginx starts when they were sent

	events syncEvents // traceevents.go; owned by the sync loop

	syncs, reloads, checks, rejections, failedReloads, pushes atomic.Int64
	// syncing is set from the loop's wake-up until its sync has returned
	// (and its reload was confirmed and counted).
	syncing   atomic.Bool
	mu        sync.Mutex
	lastError error
}

type rejection struct {
	resourceVersion string
	message         string
}

// Stats count what a Controller did since it started.
type Stats struct {
	// Syncs counts sync attempts, Checks the `nginx -t` runs, Reloads the
	// configurations applied, Rejections the Ingresses nginx rejected,
	// FailedReloads the reloads nginx did not take, EndpointPushes the
	// endpoint sets sent to nginx's control socket (Lua).
	Syncs, Checks, Reloads, Rejections, FailedReloads, EndpointPushes int64
	// Lua tells whether endpoints go through the Lua balancer (known once
	// Run has started).
	Lua bool
	// LastError is the last sync's error, nil after a success.
	LastError error
	// Idle tells that no sync runs or waits to run: every change the
	// informers delivered so far is applied and counted.
	Idle bool
}

// New validates o and fills its defaults.
func New(o Options) (*Controller, error) {
	if o.Client == nil {
		return nil, fmt.Errorf("ingress options: Client is required")
	}
	if o.DataDir == "" {
		return nil, fmt.Errorf("ingress options: DataDir is required")
	}
	if o.NginxBinary == "" {
		o.NginxBinary = "nginx"
	}
	bin, err := exec.LookPath(o.NginxBinary)
	if err != nil {
		return nil, fmt.Errorf("ingress options: nginx binary: %w", err)
	}
	o.NginxBinary = bin
	if o.HTTPPort == 0 {
		o.HTTPPort = 80
	}
	if o.HTTPSPort == 0 {
		o.HTTPSPort = 443
	}
	if o.ClassName == "" {
		o.ClassName = DefaultClassName
	}
	if o.MinSyncPeriod <= 0 {
		o.MinSyncPeriod = 100 * time.Millisecond
	}
	if o.ReloadTimeout <= 0 {
		o.ReloadTimeout = time.Minute
	}
	switch o.EndpointUpdates {
	case "":
		o.EndpointUpdates = EndpointsAuto
	case EndpointsAuto, EndpointsLua, EndpointsReload:
	default:
		return nil, fmt.Errorf("ingress options: EndpointUpdates %q: want %s, %s or %s", o.EndpointUpdates, EndpointsAuto, EndpointsLua, EndpointsReload)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.PublishIP == "" {
		addr, err := hostaddr.DefaultRouteIPv4()
		if err != nil {
			return nil, fmt.Errorf("ingress options: no PublishIP given: %w", err)
		}
		o.PublishIP = addr.String()
	}
	if net.ParseIP(o.PublishIP) == nil {
		return nil, fmt.Errorf("ingress options: PublishIP %q is not an IP address", o.PublishIP)
	}
	dataDir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return nil, fmt.Errorf("ingress options: data dir: %w", err)
	}
	prefix := filepath.Join(dataDir, "ingress")
	sock := nginx.ControlSocket(prefix)
	if len(sock) > maxSocketPath {
		return nil, fmt.Errorf("ingress options: data dir %s is too long for the control socket %s (%d bytes at most)", dataDir, sock, maxSocketPath)
	}
	log := o.Logger.With("component", "ingress")
	c := &Controller{
		o:      o,
		prefix: prefix,
		log:    log,
		ctl:    nginx.Control{Socket: sock},
		wake:   make(chan struct{}, 1),
	}
	c.proc = &nginx.Process{Binary: bin, Prefix: prefix, Conf: filepath.Join(prefix, "conf", "nginx.conf"), Control: sock, Logger: log, OnStart: c.kick}
	return c, nil
}

// maxSocketPath is the longest unix socket path Linux takes (sun_path less
// its terminating NUL).
const maxSocketPath = 107

// Stats returns the counters so far.
func (c *Controller) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Syncs: c.syncs.Load(), Checks: c.checks.Load(), Reloads: c.reloads.Load(), Rejections: c.rejections.Load(),
		FailedReloads: c.failedReloads.Load(), EndpointPushes: c.pushes.Load(), Lua: c.lua.Load() != nil, LastError: c.lastError,
		Idle: !c.syncing.Load() && len(c.wake) == 0}
}

// NginxPid returns the pid of the running nginx master, 0 when none runs.
func (c *Controller) NginxPid() int { return c.proc.Pid() }

// ConfPath is the running configuration file.
func (c *Controller) ConfPath() string { return c.proc.Conf }

func (c *Controller) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

type listers struct {
	ingresses networkinglisters.IngressLister
	classes   networkinglisters.IngressClassLister
	services  listersv1.ServiceLister
	slices    discoverylisters.EndpointSliceLister
	secrets   listersv1.SecretLister
}

// Run serves Ingresses until ctx is done; nginx is stopped before it
// returns.
func (c *Controller) Run(ctx context.Context) error {
	if err := prepareDirs(c.prefix); err != nil {
		return err
	}
	if err := c.detectLua(ctx); err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(c.o.Client, 0)
	ing := factory.Networking().V1().Ingresses()
	cls := factory.Networking().V1().IngressClasses()
	svc := factory.Core().V1().Services()
	sl := factory.Discovery().V1().EndpointSlices()
	sec := factory.Core().V1().Secrets()
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.kick() },
		UpdateFunc: func(any, any) { c.kick() },
		DeleteFunc: func(any) { c.kick() },
	}
	secretHandler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.secretsSeen.Store(true); c.kick() },
		UpdateFunc: func(any, any) { c.secretsSeen.Store(true); c.kick() },
		DeleteFunc: func(any) { c.secretsSeen.Store(true); c.kick() },
	}
	for name, inf := range map[string]cache.SharedIndexInformer{
		"ingresses": ing.Informer(), "ingressclasses": cls.Informer(), "services": svc.Informer(), "endpointslices": sl.Informer(),
	} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return fmt.Errorf("watch %s: %w", name, err)
		}
	}
	if _, err := sec.Informer().AddEventHandler(secretHandler); err != nil {
		return fmt.Errorf("watch secrets: %w", err)
	}
	l := listers{ingresses: ing.Lister(), classes: cls.Lister(), services: svc.Lister(), slices: sl.Lister(), secrets: sec.Lister()}
	factory.Start(ctx.Done())
	defer factory.Shutdown()

	events := record.NewBroadcaster(record.WithContext(ctx))
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.o.Client.CoreV1().Events("")})
	defer events.Shutdown()
	c.recorder = events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubette-ingress"})
	c.rejected = map[string]rejection{}
	c.reported = map[string]bool{}

	if !cache.WaitForCacheSync(ctx.Done(), ing.Informer().HasSynced, cls.Informer().HasSynced, svc.Informer().HasSynced,
		sl.Informer().HasSynced, sec.Informer().HasSynced) {
		return nil // ctx done
	}
	c.log.Info("ingress controller started", "http", c.o.HTTPPort, "https", c.o.HTTPSPort, "publishIP", c.o.PublishIP, "dir", c.prefix,
		"endpointUpdates", map[bool]string{true: EndpointsLua, false: EndpointsReload}[c.lua.Load() != nil])
	var wg sync.WaitGroup
	defer wg.Wait()
	c.loop(ctx, l, func() {
		wg.Go(func() {
			if err := c.proc.Run(ctx); err != nil {
				c.log.Error("nginx supervision ended", "err", err)
			}
		})
	})
	return nil
}

// detectLua decides how endpoint changes reach nginx.
func (c *Controller) detectLua(ctx context.Context) error {
	if c.o.EndpointUpdates == EndpointsReload {
		return nil
	}
	probe := filepath.Join(c.prefix, "lua-probe")
	lua, err := nginx.DetectLua(ctx, c.o.NginxBinary, probe, c.o.LuaModuleDirs)
	if err != nil {
		if c.o.EndpointUpdates == EndpointsLua {
			return fmt.Errorf("endpoint updates through Lua: %w", err)
		}
		c.log.Info("nginx's Lua module is not usable; endpoint changes reload nginx", "reason", err)
		return nil
	}
	c.lua.Store(lua)
	return nil
}

// loop is the sync loop; startNginx is called once, after the first
// configuration was written.
func (c *Controller) loop(ctx context.Context, l listers, startNginx func()) {
	var last time.Time
	backoff := time.Duration(0)
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	started := false
	c.kick()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		case <-retry.C:
		}
		c.syncing.Store(true)
		if wait := c.o.MinSyncPeriod - time.Since(last); wait > 0 && !last.IsZero() {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		select {
		case <-c.wake:
		default:
		}
		last = time.Now()
		err := c.sync(ctx, l)
		c.syncs.Add(1)
		c.log.Debug("synced", "took", time.Since(last), "err", err)
		c.mu.Lock()
		c.lastError = err
		c.mu.Unlock()
		c.syncing.Store(false)
		if err == nil && !started && c.applied != nil {
			started = true
			startNginx()
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, c.o.MinSyncPeriod), 30*time.Second)
			c.log.Error("sync failed", "err", err, "retryIn", backoff)
			retry.Reset(backoff)
			continue
		}
		backoff = 0
	}
}

// maxRejections bounds the rebuilds of one sync after nginx rejected a
// configuration.
const maxRejections = 20

// sync builds, checks and applies the configuration, then reports problems
// and writes statuses.
func (c *Controller) sync(ctx context.Context, l listers) error {
	classes, err := l.classes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list ingressclasses: %w", err)
	}
	all, err := l.ingresses.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list ingresses: %w", err)
	}
	svcs, err := l.services.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list services: %w", err)
	}
	eps, err := l.slices.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list endpointslices: %w", err)
	}
	secs, err := l.secrets.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list secrets: %w", err)
	}
	cs := newClassSet(classes)
	byKey := map[string]*networkingv1.Ingress{}
	var mine []*networkingv1.Ingress
	for _, ing := range all {
		key := ing.Namespace + "/" + ing.Name
		byKey[key] = ing
		if cs.serves(ing) {
			mine = append(mine, ing)
		}
	}
	// Rejections by nginx hold while the Ingress and every Secret are
	// unchanged.
	if c.secretsSeen.Swap(false) {
		clear(c.rejected)
	}
	for key, r := range c.rejected {
		if ing := byKey[key]; ing == nil || ing.ResourceVersion != r.resourceVersion {
			delete(c.rejected, key)
		}
	}
	layout := Layout{Prefix: c.prefix, ListenAddress: c.o.ListenAddress, HTTPPort: c.o.HTTPPort, HTTPSPort: c.o.HTTPSPort,
		WorkerProcesses: c.o.WorkerProcesses, Lua: c.lua.Load()}
	var model Model
	var applyErr error
	for attempt := 0; ; attempt++ {
		in := Inputs{Services: svcs, Slices: eps, Secrets: secs}
		for _, ing := range mine {
			if _, ok := c.rejected[ing.Namespace+"/"+ing.Name]; !ok {
				in.Ingresses = append(in.Ingresses, ing)
			}
		}
		model = Build(layout, in)
		culprit, err := c.apply(ctx, model)
		if err == nil || culprit == "" || attempt >= maxRejections {
			applyErr = err
			break
		}
		c.rejections.Add(1)
		c.rejected[culprit] = rejection{resourceVersion: byKey[culprit].ResourceVersion, message: err.Error()}
		c.log.Warn("nginx rejected an Ingress; it is left out", "ingress", culprit, "err", err)
	}
	// Problems: those of the model, and the nginx rejections.
	problems := slices.Clone(model.Problems)
	for key, r := range c.rejected {
		problems = append(problems, Problem{Ingress: key, Reason: ReasonRejected, Message: r.message + "; the Ingress is not served"})
	}
	if applyErr != nil {
		var ce *nginx.CheckError
		var rf *reloadFailure
		switch {
		case errors.As(applyErr, &ce):
			for _, key := range model.Served {
				problems = append(problems, Problem{Ingress: key, Reason: ReasonRejected, Message: applyErr.Error() + "; the running configuration is kept"})
			}
		case errors.As(applyErr, &rf):
			for _, key := range rf.affected {
				problems = append(problems, Problem{Ingress: key, Reason: ReasonReloadFailed,
					Message: rf.err.Error() + "; the previous configuration keeps serving; retrying"})
			}
		}
	}
	c.reportSynced(mine) // traceevents.go
	c.report(problems, byKey)
	if applyErr != nil {
		return applyErr
	}
	if err := c.pushEndpoints(ctx, model); err != nil {
		return err
	}
	return c.writeStatuses(ctx, all, model.Served)
}

// writeBackendsFile keeps conf/backends equal to the model's endpoints
// (Lua): nginx loads it when it starts or reloads, so a new configuration's
// workers find their backends' endpoints at once.
func (c *Controller) writeBackendsFile(m Model) error {
	if m.Config.Lua == nil {
		return nil
	}
	text := nginx.BackendsText(m.Config.Upstreams)
	if c.backendsFile != nil && bytes.Equal(text, c.backendsFile) {
		return nil
	}
	if err := writeFileAtomic(nginx.BackendsFile(c.prefix), text, 0o600); err != nil {
		return fmt.Errorf("write endpoints: %w", err)
	}
	c.backendsFile = text
	return nil
}

// pushEndpoints sends the model's endpoints to nginx (Lua) when they differ
// from what nginx holds, or nginx started since they were sent.
func (c *Controller) pushEndpoints(ctx context.Context, m Model) error {
	if m.Config.Lua == nil {
		return nil
	}
	if err := c.writeBackendsFile(m); err != nil {
		return err
	}
	starts := c.proc.Starts()
	if c.pushed != nil && bytes.Equal(c.backendsFile, c.pushed) && starts == c.pushedStarts {
		return nil
	}
	if c.proc.Pid() == 0 {
		return nil // the next start loads the backends file, then kicks a sync
	}
	// A master that just started may not listen yet.
	var err error
	deadline := time.Now().Add(c.o.ReloadTimeout)
	for {
		var n int
		n, err = c.ctl.PutBackends(ctx, c.backendsFile)
		if err == nil {
			c.log.Debug("endpoints sent to nginx", "backends", n)
			break
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("send endpoints to nginx: %w", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.pushes.Add(1)
	c.pushed = c.backendsFile
	c.pushedStarts = starts
	return nil
}

// reloadFailure is a reload nginx did not take, with the Ingresses whose
// part of the configuration changed.
type reloadFailure struct {
	err      error
	affected []string
}

func (r *reloadFailure) Error() string { return r.err.Error() }
func (r *reloadFailure) Unwrap() error { return r.err }

// report records a Warning event for each problem not reported since it
// last appeared.
func (c *Controller) report(problems []Problem, byKey map[string]*networkingv1.Ingress) {
	now := map[string]bool{}
	for _, p := range problems {
		k := p.Ingress + "\x00" + p.Reason + "\x00" + p.Message
		now[k] = true
		if c.reported[k] {
			continue
		}
		if ing := byKey[p.Ingress]; ing != nil {
			c.recorder.Event(ing, corev1.EventTypeWarning, p.Reason, p.Message)
		}
		c.log.Warn("ingress problem", "ingress", p.Ingress, "reason", p.Reason, "message", p.Message)
	}
	c.reported = now
}

var quotedPath = regexp.MustCompile(`"(/[^"]+)"`)

// apply writes, checks and loads the model's configuration when it differs
// from the running one. When nginx rejects it, culprit names the Ingress
// that owns the offending line, if one does.
func (c *Controller) apply(ctx context.Context, m Model) (culprit string, err error) {
	conf := nginx.Render(m.Config)
	if bytes.Equal(conf, c.applied) {
		return "", nil
	}
	for file, pem := range m.Certs {
		if old, err := os.ReadFile(file); err == nil && bytes.Equal(old, pem) {
			continue
		}
		if err := writeFileAtomic(file, pem, 0o600); err != nil {
			return "", fmt.Errorf("write certificate: %w", err)
		}
	}
	candidate := c.proc.Conf + ".new"
	if err := writeFileAtomic(candidate, conf, 0o644); err != nil {
		return "", fmt.Errorf("write nginx config: %w", err)
	}
	c.checks.Add(1)
	checkStart := time.Now()
	if err := c.proc.Check(ctx, candidate); err != nil {
		var ce *nginx.CheckError
		if !errors.As(err, &ce) {
			return "", err
		}
		line := 0
		if ce.File == candidate {
			line = ce.Line
		} else if q := quotedPath.FindStringSubmatch(ce.Message); q != nil {
			line = nginx.LineOf(conf, q[1])
		}
		if owner := nginx.OwnerAt(conf, line); owner != "" && owner != "-" && slices.Contains(m.Served, owner) {
			return owner, err
		}
		return "", err
	}
	if err := c.writeBackendsFile(m); err != nil {
		return "", err
	}
	if err := os.Rename(candidate, c.proc.Conf); err != nil {
		return "", fmt.Errorf("install nginx config: %w", err)
	}
	c.log.Debug("nginx accepted the new configuration", "took", time.Since(checkStart))
	if c.beforeReload != nil {
		c.beforeReload()
	}
	reloadStart := time.Now()
	if err := c.proc.ReloadConfirmed(ctx, nginx.ConfigID(conf), c.o.ReloadTimeout); err != nil {
		var re *nginx.ReloadError
		if !errors.As(err, &re) {
			return "", err
		}
		c.failedReloads.Add(1)
		affected := changedOwners(c.applied, conf)
		if len(affected) == 0 {
			affected = m.Served
		}
		return "", &reloadFailure{err: err, affected: affected}
	}
	c.log.Debug("nginx serves the new configuration", "took", time.Since(reloadStart))
	c.applied = conf
	c.reloads.Add(1)
	c.removeStaleCerts(m.Certs)
	return "", nil
}

func (c *Controller) removeStaleCerts(keep map[string][]byte) {
	dir := filepath.Join(c.prefix, "certs")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if _, ok := keep[p]; !ok && strings.HasSuffix(p, ".pem") {
			if err := os.Remove(p); err != nil {
				c.log.Warn("remove stale certificate", "file", p, "err", err)
			}
		}
	}
}

// writeFileAtomic writes data to a temporary file beside name and renames it.
func writeFileAtomic(name string, data []byte, mode os.FileMode) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return fmt.Errorf("chmod %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, name); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return nil
}
