// Package flowcontrol is the API server's API Priority and Fairness, as upstream's
// priority-and-fairness filter: every request is classified by the FlowSchemas (the
// first match by matchingPrecedence, then name) into a priority level and a flow (the
// schema and the user or namespace its distinguisher names); a Limited level has a share
// of the server's seats in proportion to its nominalConcurrencyShares. The Exempt level
// never waits. Long-running requests (exec, attach, port-forward, proxy, logs) are not
// counted; a watch takes its seats only to start.
//
// A request takes as many seats as upstream's work estimator says: a list
// ceil(objects / 100), from 1 to 10 and to the level's bound (15% of its seats, at most
// its seats over its hand size), objects being the resource's stored count in all
// namespaces (from the watch caches: Config.Objects) for a list the watch cache serves,
// the count plus the page for one read from storage with a selector, twice the page
// without; a write 1 seat, and when ten or more open watches may see its event,
// ceil(watches / 10) (at most 10) held 5 ms after it finished for the fan-out; anything
// else 1. A request runs only when its seats are free (one wider than its level, once the
// level is empty); otherwise it waits in one of its flow's queues (shuffle sharding deals
// the flow a hand and it joins the queue of least waiting work) or is rejected with 429
// and Retry-After when its queue is full while every seat is taken, the level rejects,
// or it waited too long. The queues are served by upstream's fair queuing: the queue
// whose head has the smallest virtual finish time (the queue's virtual start plus the
// head's seats times 3 ms, corrected by the real service time when it finishes) goes
// next, and when that head does not fit in the free seats nothing else is dispatched
// until it does.
//
// The configuration is read from the server's watch caches (Source) and rebuilt when
// their revision moves; the mandatory exempt and catch-all objects are assumed in
// memory while they do not exist. Differences from upstream: levels do not lend or
// borrow seats; lists are estimated by object count only (upstream's newer estimate by
// object size, SizeBasedListCostEstimate, is not done), and where the list is served
// from follows this server (the cache for resourceVersion=0 without continue, storage
// otherwise, where upstream serves consistent reads from the cache too); a resource
// without a watch cache (count unknown) lists in one seat, as upstream's unknown
// counts; the object counts are read live rather than refreshed each minute; a level of
// no seats admits nothing (upstream lets a Reject level run one request when idle); and
// the virtual time starts again from zero whenever a level is idle.
package flowcontrol

import (
	"context"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubette/kubette/internal/apiserver/authorizer"
	"github.com/kubette/kubette/internal/apiserver/filters"
	"github.com/kubette/kubette/internal/apiserver/flowcontrol/bootstrap"
)

// Upstream's defaults.
const (
	// DefaultServerConcurrencyLimit is --max-requests-inflight (400) plus
	// --max-mutating-requests-inflight (200).
	DefaultServerConcurrencyLimit = 600
	// DefaultQueueWaitLimit is how long a request without a deadline may wait in a
	// queue: a quarter of the default request timeout of one minute.
	DefaultQueueWaitLimit = 15 * time.Second
	// maxQueueWait bounds the wait of any request, as upstream's.
	maxQueueWait = time.Minute
	// staleAfter is how long a configuration read from a source that reports no
	// revision is used before it is read again.
	staleAfter = time.Second
)

// The resources the configuration is read from.
var (
	FlowSchemas    = schema.GroupResource{Group: flowcontrolv1.GroupName, Resource: "flowschemas"}
	PriorityLevels = schema.GroupResource{Group: flowcontrolv1.GroupName, Resource: "prioritylevelconfigurations"}
)

// Source is where the configuration comes from: the API server's watch caches.
type Source interface {
	List(ctx context.Context, gr schema.GroupResource, namespace string) ([]runtime.Object, error)
	// Revision tells how far the source's view of a resource has come (0: unknown).
	Revision(gr schema.GroupResource) int64
}

// Config configures a Controller.
type Config struct {
	// Source holds the FlowSchemas and PriorityLevelConfigurations.
	Source Source
	// Objects counts the stored objects of each resource, for the width of lists
	// (nil: every list takes one seat).
	Objects ObjectCounter
	// ServerConcurrencyLimit is the number of seats the Limited levels share
	// (default DefaultServerConcurrencyLimit).
	ServerConcurrencyLimit int
	// QueueWaitLimit is how long a request without a deadline may wait in a queue
	// (default DefaultQueueWaitLimit); one with a deadline waits a quarter of what
	// remains, at most a minute.
	QueueWaitLimit time.Duration
	// Logger receives the controller's logs (default slog.Default()).
	Logger *slog.Logger
}

// Controller classifies requests and holds each priority level's seats and queues.
type Controller struct {
	cfg Config
	cur atomic.Pointer[snapshot]
	// mu serialises rebuilds and guards levels.
	mu     sync.Mutex
	levels map[string]*level
	// watches counts the open watches, for the fan-out of writes.
	watches watchTracker
}

// snapshot is one configuration: the schemas in matching order, each with its level.
type snapshot struct {
	fsRev, plRev int64
	built        time.Time
	schemas      []compiledSchema
	catchAll     compiledSchema
}

type compiledSchema struct {
	fs    *flowcontrolv1.FlowSchema
	pl    *flowcontrolv1.PriorityLevelConfiguration
	level *level
	// maxSeats is levelMaxSeats of the level.
	maxSeats int
}

// New returns a controller over cfg's source.
func New(cfg Config) *Controller {
	if cfg.ServerConcurrencyLimit <= 0 {
		cfg.ServerConcurrencyLimit = DefaultServerConcurrencyLimit
	}
	if cfg.QueueWaitLimit <= 0 {
		cfg.QueueWaitLimit = DefaultQueueWaitLimit
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Controller{cfg: cfg, levels: map[string]*level{}}
}

// config returns the current configuration, rebuilding it when the source moved.
func (c *Controller) config(ctx context.Context) *snapshot {
	s := c.cur.Load()
	fsRev, plRev := c.cfg.Source.Revision(FlowSchemas), c.cfg.Source.Revision(PriorityLevels)
	if s != nil && s.fsRev == fsRev && s.plRev == plRev && (fsRev != 0 || time.Since(s.built) < staleAfter) {
		return s
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s = c.cur.Load(); s != nil && s.fsRev == fsRev && s.plRev == plRev && (fsRev != 0 || time.Since(s.built) < staleAfter) {
		return s
	}
	s = c.buildLocked(ctx, fsRev, plRev)
	c.cur.Store(s)
	return s
}

// buildLocked reads the configuration and brings the levels' state in line with it.
func (c *Controller) buildLocked(ctx context.Context, fsRev, plRev int64) *snapshot {
	var fss []*flowcontrolv1.FlowSchema
	var pls []*flowcontrolv1.PriorityLevelConfiguration
	if objs, err := c.cfg.Source.List(ctx, FlowSchemas, ""); err == nil {
		for _, o := range objs {
			if fs, ok := o.(*flowcontrolv1.FlowSchema); ok {
				fss = append(fss, fs)
			}
		}
	} else {
		c.cfg.Logger.Warn("flow control: list flow schemas", "err", err)
	}
	if objs, err := c.cfg.Source.List(ctx, PriorityLevels, ""); err == nil {
		for _, o := range objs {
			if pl, ok := o.(*flowcontrolv1.PriorityLevelConfiguration); ok {
				pls = append(pls, pl)
			}
		}
	} else {
		c.cfg.Logger.Warn("flow control: list priority levels", "err", err)
	}
	return c.compileLocked(fss, pls, fsRev, plRev)
}

func (c *Controller) compileLocked(fss []*flowcontrolv1.FlowSchema, pls []*flowcontrolv1.PriorityLevelConfiguration, fsRev, plRev int64) *snapshot {
	// The mandatory objects exist in memory until they exist in the cluster.
	byName := map[string]*flowcontrolv1.PriorityLevelConfiguration{}
	for _, pl := range pls {
		byName[pl.Name] = pl
	}
	for _, m := range bootstrap.MandatoryPriorityLevelConfigurations() {
		if byName[m.Name] == nil {
			byName[m.Name] = m
			pls = append(pls, m)
		}
	}
	have := map[string]bool{}
	for _, fs := range fss {
		have[fs.Name] = true
	}
	for _, m := range bootstrap.MandatoryFlowSchemas() {
		if !have[m.Name] {
			fss = append(fss, m)
		}
	}

	total := 0
	for _, pl := range pls {
		total += int(shares(pl))
	}
	levels := map[string]*level{}
	maxSeats := map[string]int{}
	for _, pl := range pls {
		sh := shapeOf(pl)
		seats := 0
		if total > 0 {
			// ceil(server limit * shares / sum of shares), as upstream's nominal limit.
			seats = (c.cfg.ServerConcurrencyLimit*int(shares(pl)) + total - 1) / total
		}
		maxSeats[pl.Name] = levelMaxSeats(sh, seats)
		if l := c.levels[pl.Name]; l != nil && l.shape == sh {
			l.setSeats(seats)
			levels[pl.Name] = l
			continue
		}
		levels[pl.Name] = newLevel(sh, seats)
	}
	c.levels = levels

	s := &snapshot{fsRev: fsRev, plRev: plRev, built: time.Now()}
	sort.SliceStable(fss, func(i, j int) bool {
		if fss[i].Spec.MatchingPrecedence != fss[j].Spec.MatchingPrecedence {
			return fss[i].Spec.MatchingPrecedence < fss[j].Spec.MatchingPrecedence
		}
		return fss[i].Name < fss[j].Name
	})
	for _, fs := range fss {
		pl := byName[fs.Spec.PriorityLevelConfiguration.Name]
		if pl == nil {
			continue // dangling: skipped, as upstream
		}
		cs := compiledSchema{fs: fs, pl: pl, level: levels[pl.Name], maxSeats: maxSeats[pl.Name]}
		s.schemas = append(s.schemas, cs)
		if fs.Name == bootstrap.CatchAll {
			s.catchAll = cs
		}
	}
	if s.catchAll.fs == nil {
		fs, _ := bootstrap.MandatoryFlowSchema(bootstrap.CatchAll)
		pl := byName[bootstrap.CatchAll]
		s.catchAll = compiledSchema{fs: fs, pl: pl, level: levels[pl.Name], maxSeats: maxSeats[pl.Name]}
	}
	return s
}

// shares is a level's nominalConcurrencyShares (defaults applied).
func shares(pl *flowcontrolv1.PriorityLevelConfiguration) int32 {
	switch {
	case pl.Spec.Limited != nil && pl.Spec.Limited.NominalConcurrencyShares != nil:
		return max(0, *pl.Spec.Limited.NominalConcurrencyShares)
	case pl.Spec.Limited != nil:
		return 30
	case pl.Spec.Exempt != nil && pl.Spec.Exempt.NominalConcurrencyShares != nil:
		return max(0, *pl.Spec.Exempt.NominalConcurrencyShares)
	}
	return 0
}

func shapeOf(pl *flowcontrolv1.PriorityLevelConfiguration) shape {
	if pl.Spec.Type == flowcontrolv1.PriorityLevelEnablementExempt || pl.Spec.Limited == nil {
		return shape{exempt: true}
	}
	q := pl.Spec.Limited.LimitResponse.Queuing
	if pl.Spec.Limited.LimitResponse.Type != flowcontrolv1.LimitResponseTypeQueue || q == nil || q.Queues <= 0 {
		return shape{reject: true}
	}
	return shape{queues: int(q.Queues), handSize: int(max(1, min(q.HandSize, q.Queues))), queueLengthLimit: int(q.QueueLengthLimit)}
}

// Classification is where a request went.
type Classification struct {
	FlowSchema    *flowcontrolv1.FlowSchema
	PriorityLevel *flowcontrolv1.PriorityLevelConfiguration
	// Distinguisher is the user or namespace that, with the schema, names the flow.
	Distinguisher string
}

// Classify returns the FlowSchema and priority level of a request.
func (c *Controller) Classify(ctx context.Context, a *authorizer.Attributes) Classification {
	cs, d := c.classify(c.config(ctx), a)
	return Classification{FlowSchema: cs.fs, PriorityLevel: cs.pl, Distinguisher: d}
}

func (c *Controller) classify(s *snapshot, a *authorizer.Attributes) (compiledSchema, string) {
	for _, cs := range s.schemas {
		if matches(cs.fs, a) {
			return cs, distinguisher(cs.fs, a)
		}
	}
	return s.catchAll, distinguisher(s.catchAll.fs, a)
}

// longRunning reports whether a request is one upstream does not count: the streams of
// exec, attach, port-forward, proxy and logs.
func longRunning(a *authorizer.Attributes) bool {
	if !a.ResourceRequest {
		return false
	}
	switch a.Subresource {
	case "exec", "attach", "portforward", "proxy", "log":
		return true
	}
	return a.Verb == "proxy"
}

// Handler returns next behind priority and fairness. It must run after authentication
// and impersonation (it classifies the user the request acts as) and before
// authorization, as upstream's filter.
func (c *Controller) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		u, _ := filters.UserFrom(req.Context())
		a := authorizer.RequestAttributes(req, u)
		if longRunning(&a) {
			next.ServeHTTP(w, req)
			return
		}
		s := c.config(req.Context())
		cs, d := c.classify(s, &a)
		// UIDs rather than names, as upstream, so that the names an administrator
		// chose are not shown to the clients.
		h := w.Header()
		h.Set(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID, string(cs.pl.UID))
		h.Set(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID, string(cs.fs.UID))
		t, err := c.wait(req, &a, cs, d)
		if err != nil {
			tooManyRequests(w)
			return
		}
		if a.Verb == "watch" {
			// A watch takes its seats to start, not for its life; while it lasts it
			// counts in the fan-out of the writes it may see.
			cs.level.finish(t)
			if k, ok := c.watches.register(&a); ok {
				defer c.watches.forget(k)
			}
			next.ServeHTTP(w, req)
			return
		}
		defer cs.level.finish(t)
		next.ServeHTTP(w, req)
	})
}

// wait takes the seats the request's work needs from the schema's level for the flow,
// waiting in a queue as long as the request may: a quarter of what remains of its
// deadline, QueueWaitLimit without one, at most a minute.
func (c *Controller) wait(req *http.Request, a *authorizer.Attributes, cs compiledSchema, distinguisher string) (ticket, error) {
	l := cs.level
	if l.shape.exempt {
		t, _, err := l.start(0, oneSeat)
		return t, err
	}
	t, w, err := l.start(flowHash(cs.fs.Name, distinguisher), c.estimateWork(req, a, cs.maxSeats))
	if w == nil || err != nil {
		return t, err
	}
	ctx := req.Context()
	limit := c.cfg.QueueWaitLimit
	if dl, ok := ctx.Deadline(); ok {
		limit = time.Until(dl) / 4
	}
	return l.await(ctx, w, min(limit, maxQueueWait))
}

// tooManyRequests is upstream's answer to a request priority and fairness refused.
func tooManyRequests(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, "Too many requests, please try again later.", http.StatusTooManyRequests)
}

// LevelStats is one priority level's state, for tests and benchmarks: its seats, the
// seats in use, and the requests executing and waiting.
type LevelStats struct {
	Seats, InUse, Executing, Waiting int
}

// Stats returns the state of each priority level by name.
func (c *Controller) Stats(ctx context.Context) map[string]LevelStats {
	c.config(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]LevelStats, len(c.levels))
	for name, l := range c.levels {
		seats, ex, wt := l.stats()
		inUse := ex // an exempt level counts requests only
		if !l.shape.exempt {
			inUse = l.seatsInUse()
		}
		out[name] = LevelStats{Seats: seats, InUse: inUse, Executing: ex, Waiting: wt}
	}
	return out
}
