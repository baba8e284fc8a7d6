// Package scraper is the resource metrics pipeline the API server runs in place of
// upstream's metrics-server: every resolution (15 s by default, metrics-server's
// --metric-resolution) it lists the Nodes, reads each real node's kubelet
// /metrics/resource (simulated nodes have no kubelet of their own and are never asked),
// decodes the Prometheus text with github.com/prometheus/common/expfmt and keeps the
// last two samples of every node and container in a Store, which computes CPU rates
// and working sets as metrics-server does. The API server serves them as
// metrics.k8s.io (package resourcemetrics).
package scraper

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// LabelSimulated marks the Nodes of `kubette sim` ("true"), as package sim labels
// them: they run no kubelet that could answer for them.
const LabelSimulated = "kubette.io/simulated"

// Defaults of Config.
const (
	// DefaultResolution is metrics-server's default --metric-resolution.
	DefaultResolution = 15 * time.Second
	// DefaultConcurrency is how many kubelets are read at once by default.
	DefaultConcurrency = 16
)

// Source reads a node's kubelet /metrics/resource as Prometheus text.
type Source interface {
	ResourceMetrics(ctx context.Context, node *corev1.Node) ([]byte, error)
}

// SourceFunc is a Source that is a function.
type SourceFunc func(ctx context.Context, node *corev1.Node) ([]byte, error)

// ResourceMetrics calls f.
func (f SourceFunc) ResourceMetrics(ctx context.Context, node *corev1.Node) ([]byte, error) {
	return f(ctx, node)
}

// Config configures a Scraper.
type Config struct {
	// Source reads the kubelets (required).
	Source Source
	// Nodes lists the cluster's Nodes (required).
	Nodes func(ctx context.Context) ([]*corev1.Node, error)
	// Resolution is the time between two scrapes (default DefaultResolution).
	Resolution time.Duration
	// Timeout bounds the read of one kubelet (default 90% of Resolution, as
	// metrics-server's).
	Timeout time.Duration
	// Concurrency is how many kubelets are read at once (default DefaultConcurrency).
	Concurrency int
	// Logger receives the scraper's logs (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock of samples without a timestamp (default time.Now).
	Now func() time.Time
}

// Scraper reads the kubelets every Resolution into its Store.
type Scraper struct {
	cfg   Config
	store *Store

	// failing is the last error of each node whose last read failed; only the
	// goroutine running Scrape uses it.
	failing map[string]string
}

// New validates cfg, fills its defaults and returns a scraper with an empty store.
func New(cfg Config) (*Scraper, error) {
	if cfg.Source == nil || cfg.Nodes == nil {
		return nil, errors.New("metrics scraper: a Source and a Nodes lister are required")
	}
	if cfg.Resolution < 0 || cfg.Timeout < 0 || cfg.Concurrency < 0 {
		return nil, errors.New("metrics scraper: negative resolution, timeout or concurrency")
	}
	if cfg.Resolution == 0 {
		cfg.Resolution = DefaultResolution
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = cfg.Resolution * 9 / 10
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Scraper{cfg: cfg, store: NewStore(cfg.Resolution), failing: map[string]string{}}, nil
}

// Store is where the scraper keeps its samples, which the metrics API reads.
func (s *Scraper) Store() *Store { return s.store }

// Resolution is the time between two scrapes.
func (s *Scraper) Resolution() time.Duration { return s.cfg.Resolution }

// Run scrapes at once and then every Resolution until ctx is done.
func (s *Scraper) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Resolution)
	defer t.Stop()
	for {
		s.Scrape(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// nodeResult is what the read of one kubelet gave.
type nodeResult struct {
	name   string
	node   Point
	nodeOK bool
	pods   map[types.NamespacedName]map[string]Point
	err    error
}

// Scrape reads every real node's kubelet once, at most Concurrency at a time and each
// within Timeout, and stores what they answered. A node whose read or decoding fails
// is left out of this scrape (so its usage and its pods' are gone until it answers
// twice again) and logged when it starts failing, when its error changes and when it
// answers again.
func (s *Scraper) Scrape(ctx context.Context) {
	nodes, err := s.cfg.Nodes(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Logger.Warn("list the nodes to scrape", "err", err)
		}
		return
	}
	results := make(chan nodeResult, len(nodes))
	sem := make(chan struct{}, s.cfg.Concurrency)
	var wg sync.WaitGroup
	for _, n := range nodes {
		if n.Labels[LabelSimulated] == "true" {
			continue
		}
		wg.Add(1)
		go func(n *corev1.Node) {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				results <- nodeResult{name: n.Name, err: ctx.Err()}
				return
			}
			defer func() { <-sem }()
			results <- s.scrapeNode(ctx, n)
		}(n)
	}
	wg.Wait()
	close(results)
	if ctx.Err() != nil {
		return
	}
	batch := Batch{Nodes: map[string]Point{}, Pods: map[types.NamespacedName]map[string]Point{}}
	scraped := map[string]bool{}
	for r := range results {
		scraped[r.name] = true
		if r.err != nil {
			s.reportFailure(r.name, r.err)
			continue
		}
		s.reportSuccess(r.name)
		if r.nodeOK {
			batch.Nodes[r.name] = r.node
		}
		for ref, containers := range r.pods {
			if _, dup := batch.Pods[ref]; dup {
				s.cfg.Logger.Warn("a pod reported by two kubelets: kept the first", "pod", ref.String(), "node", r.name)
				continue
			}
			batch.Pods[ref] = containers
		}
	}
	for name := range s.failing {
		if !scraped[name] { // deleted, or now simulated
			delete(s.failing, name)
		}
	}
	s.store.Add(batch)
}

// scrapeNode reads and decodes one kubelet.
func (s *Scraper) scrapeNode(ctx context.Context, n *corev1.Node) nodeResult {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	text, err := s.cfg.Source.ResourceMetrics(ctx, n)
	if err != nil {
		return nodeResult{name: n.Name, err: err}
	}
	point, ok, pods, err := Decode(text, s.cfg.Now())
	if err != nil {
		return nodeResult{name: n.Name, err: err}
	}
	return nodeResult{name: n.Name, node: point, nodeOK: ok, pods: pods}
}

func (s *Scraper) reportFailure(node string, err error) {
	msg := err.Error()
	if s.failing[node] == msg {
		s.cfg.Logger.Debug("scrape a node's resource metrics", "node", node, "err", err)
		return
	}
	s.failing[node] = msg
	s.cfg.Logger.Warn("scrape a node's resource metrics: skipped", "node", node, "err", err)
}

func (s *Scraper) reportSuccess(node string) {
	if _, ok := s.failing[node]; ok {
		delete(s.failing, node)
		s.cfg.Logger.Info("scrape a node's resource metrics: it answers again", "node", node)
	}
}
