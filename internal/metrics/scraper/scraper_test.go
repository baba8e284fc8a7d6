package scraper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/sim"
)

func TestLabelSimulatedIsSims(t *testing.T) {
	if LabelSimulated != sim.LabelSimulated {
		t.Errorf("LabelSimulated = %q, package sim labels its nodes %q", LabelSimulated, sim.LabelSimulated)
	}
}

// fakeKubelets answers for each node with a text whose counters grow by a fixed
// amount per call, 15 s apart, and records what was asked and how many at once.
type fakeKubelets struct {
	mu        sync.Mutex
	calls     map[string]int
	inFlight  int
	maxFlight int
	fail      map[string]error
	hang      map[string]bool
	gate      chan struct{} // closed to let the reads answer
}

func (f *fakeKubelets) ResourceMetrics(ctx context.Context, n *corev1.Node) ([]byte, error) {
	f.mu.Lock()
	f.calls[n.Name]++
	call := f.calls[n.Name]
	f.inFlight++
	f.maxFlight = max(f.maxFlight, f.inFlight)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	if f.gate != nil {
		<-f.gate
	}
	if f.hang[n.Name] {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if err := f.fail[n.Name]; err != nil {
		return nil, err
	}
	ts := t0.Add(time.Duration(call) * 15 * time.Second).UnixMilli()
	// 1.5 core-seconds of the node and 0.75 of its container per 15 s: 100m and 50m.
	return []byte(fmt.Sprintf("node_cpu_usage_seconds_total %v %d\nnode_memory_working_set_bytes 1000 %d\n"+
		"container_cpu_usage_seconds_total{container=\"c\",namespace=\"ns\",pod=\"p-%s\"} %v %d\n"+
		"container_memory_working_set_bytes{container=\"c\",namespace=\"ns\",pod=\"p-%s\"} 10 %d\n",
		1.5*float64(call), ts, ts, n.Name, 0.75*float64(call), ts, n.Name, ts)), nil
}

func node(name string, simulated bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if simulated {
		n.Labels[LabelSimulated] = "true"
	}
	return n
}

func TestScrapeNodes(t *testing.T) {
	f := &fakeKubelets{calls: map[string]int{}, fail: map[string]error{"broken": errors.New("connection refused")},
		hang: map[string]bool{"slow": true}}
	nodes := []*corev1.Node{node("a", false), node("b", false), node("sim-1", true), node("broken", false), node("slow", false)}
	var logs bytes.Buffer
	s, err := New(Config{
		Source: f, Nodes: func(context.Context) ([]*corev1.Node, error) { return nodes, nil },
		Timeout: 50 * time.Millisecond, Concurrency: 2,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s.Scrape(ctx)
	if _, ok := s.Store().Node("a"); ok {
		t.Error("node usage after one scrape")
	}
	s.Scrape(ctx)
	for _, n := range []string{"a", "b"} {
		u, ok := s.Store().Node(n)
		if !ok || u.CPU != 100_000_000 || u.Window != 15*time.Second {
			t.Errorf("node %s = %+v %v, want 100m over 15s", n, u, ok)
		}
		p, ok := s.Store().Pod("ns", "p-"+n)
		if !ok || p.Containers[0].CPU != 50_000_000 || p.Containers[0].Memory != 10 {
			t.Errorf("pod of %s = %+v %v, want 50m", n, p, ok)
		}
	}
	for _, n := range []string{"broken", "slow", "sim-1"} {
		if u, ok := s.Store().Node(n); ok {
			t.Errorf("node %s has usage %+v", n, u)
		}
	}
	if f.calls["sim-1"] != 0 {
		t.Errorf("the simulated node was asked %d times", f.calls["sim-1"])
	}
	if f.maxFlight > 2 {
		t.Errorf("%d kubelets read at once, want at most 2", f.maxFlight)
	}
	// Each failing node is logged once while its error stays the same.
	out := logs.String()
	for _, n := range []string{"broken", "slow"} {
		if c := strings.Count(out, "node="+n+" "); c != 1 {
			t.Errorf("node %s logged %d times, want once:\n%s", n, c, out)
		}
	}
	if !strings.Contains(out, "connection refused") || !strings.Contains(out, "deadline exceeded") {
		t.Errorf("logs do not say why:\n%s", out)
	}

	// The broken node answers again: logged, and it has usage after two answers.
	delete(f.fail, "broken")
	s.Scrape(ctx)
	s.Scrape(ctx)
	if _, ok := s.Store().Node("broken"); !ok {
		t.Error("no usage for the node that recovered")
	}
	if !strings.Contains(logs.String(), "answers again") {
		t.Errorf("recovery not logged:\n%s", logs.String())
	}
}

func TestScrapeConcurrencyBound(t *testing.T) {
	f := &fakeKubelets{calls: map[string]int{}, gate: make(chan struct{})}
	var nodes []*corev1.Node
	for i := range 10 {
		nodes = append(nodes, node(fmt.Sprintf("n%d", i), false))
	}
	s, err := New(Config{Source: f, Nodes: func(context.Context) ([]*corev1.Node, error) { return nodes, nil },
		Concurrency: 3, Logger: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Scrape(context.Background()); close(done) }()
	// Wait until the bound is reached, then let every read answer.
	for {
		f.mu.Lock()
		n := f.inFlight
		f.mu.Unlock()
		if n == 3 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(f.gate)
	<-done
	if f.maxFlight != 3 {
		t.Errorf("at most %d reads at once, want 3", f.maxFlight)
	}
	for _, n := range nodes {
		if f.calls[n.Name] != 1 {
			t.Errorf("node %s read %d times", n.Name, f.calls[n.Name])
		}
	}
}

func TestScrapeStopsWithContext(t *testing.T) {
	f := &fakeKubelets{calls: map[string]int{}, hang: map[string]bool{"a": true}}
	s, err := New(Config{Source: f, Nodes: func(context.Context) ([]*corev1.Node, error) {
		return []*corev1.Node{node("a", false)}, nil
	}, Resolution: time.Hour, Logger: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	for {
		f.mu.Lock()
		n := f.inFlight
		f.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done // Run returns once its reads have
}

func TestNewDefaults(t *testing.T) {
	s, err := New(Config{Source: &fakeKubelets{}, Nodes: func(context.Context) ([]*corev1.Node, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.Resolution != 15*time.Second || s.cfg.Timeout != 13500*time.Millisecond || s.cfg.Concurrency != DefaultConcurrency {
		t.Errorf("defaults = %v %v %d", s.cfg.Resolution, s.cfg.Timeout, s.cfg.Concurrency)
	}
	if _, err := New(Config{}); err == nil {
		t.Error("a scraper without a source")
	}
}
