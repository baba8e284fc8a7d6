package scraper

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

var (
	t0  = time.Unix(1700000000, 0)
	web = types.NamespacedName{Namespace: "default", Name: "web"}
)

// sec is t0 plus s seconds.
func sec(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// batch is one scrape of node n1 (CPU in core-seconds) and of pod web's containers.
func batch(ts time.Time, nodeCPU float64, containers map[string]Point) Batch {
	b := Batch{Nodes: map[string]Point{"n1": {Timestamp: ts, CPU: uint64(nodeCPU * 1e9), Memory: 1 << 30}},
		Pods: map[types.NamespacedName]map[string]Point{}}
	if containers != nil {
		b.Pods[web] = containers
	}
	return b
}

func ctr(start, ts time.Time, cpuSeconds float64, mem uint64) Point {
	return Point{StartTime: start, Timestamp: ts, CPU: uint64(cpuSeconds * 1e9), Memory: mem}
}

func TestStoreRateFromTwoSamples(t *testing.T) {
	s := NewStore(15 * time.Second)
	started := sec(-600)
	s.Add(batch(sec(0), 100, map[string]Point{"app": ctr(started, sec(0), 10, 1000), "side": ctr(started, sec(1), 1, 50)}))
	if u, ok := s.Node("n1"); ok {
		t.Errorf("usage after one sample: %+v", u)
	}
	if u, ok := s.Pod("default", "web"); ok {
		t.Errorf("pod usage after one sample: %+v", u)
	}
	s.Add(batch(sec(15), 106, map[string]Point{"app": ctr(started, sec(15), 13, 2000), "side": ctr(started, sec(16), 1.15, 60)}))
	n, ok := s.Node("n1")
	if !ok || n.CPU != 400_000_000 || n.Memory != 1<<30 || n.Window != 15*time.Second || !n.Timestamp.Equal(sec(15)) {
		t.Errorf("node usage = %+v %v, want 400m over 15s", n, ok)
	}
	p, ok := s.Pod("default", "web")
	if !ok || len(p.Containers) != 2 {
		t.Fatalf("pod usage = %+v %v", p, ok)
	}
	app, side := p.Containers[0], p.Containers[1]
	if app.Name != "app" || app.CPU != 200_000_000 || app.Memory != 2000 {
		t.Errorf("app = %+v, want 200m and 2000 bytes", app)
	}
	if side.Name != "side" || side.CPU != 10_000_000 || side.Memory != 60 {
		t.Errorf("side = %+v, want 10m and 60 bytes", side)
	}
	// The pod's time is its earliest container's.
	if !p.Timestamp.Equal(sec(15)) || p.Window != 15*time.Second {
		t.Errorf("pod at %v over %v, want app's", p.Timestamp, p.Window)
	}
}

func TestStoreContainerRestart(t *testing.T) {
	s := NewStore(15 * time.Second)
	first := sec(-600)
	s.Add(batch(sec(0), 100, map[string]Point{"app": ctr(first, sec(0), 50, 1000)}))
	s.Add(batch(sec(15), 101, map[string]Point{"app": ctr(first, sec(15), 53, 1000)}))
	if _, ok := s.Pod("default", "web"); !ok {
		t.Fatal("no usage before the restart")
	}
	// Restarted 7 s after the last sample (8 s before the next: too young for its
	// start to count as a sample): a new start time and a counter from zero.
	restarted := sec(22)
	s.Add(batch(sec(30), 102, map[string]Point{"app": ctr(restarted, sec(30), 0.5, 500)}))
	if u, ok := s.Pod("default", "web"); ok {
		t.Errorf("usage across a restart: %+v", u)
	}
	s.Add(batch(sec(45), 103, map[string]Point{"app": ctr(restarted, sec(45), 2, 600)}))
	u, ok := s.Pod("default", "web")
	if !ok || u.Containers[0].CPU != 100_000_000 {
		t.Errorf("usage after the restart = %+v %v, want 100m", u, ok)
	}

	// A counter that went back with no new start time (the kubelet did not say) is a
	// restart too: never a rate from a decrease.
	s.Add(batch(sec(60), 104, map[string]Point{"app": ctr(restarted, sec(60), 1, 600)}))
	if u, ok := s.Pod("default", "web"); ok {
		t.Errorf("usage across a counter reset: %+v", u)
	}
}

func TestStoreMissingSamples(t *testing.T) {
	s := NewStore(15 * time.Second)
	old := sec(-600)
	s.Add(batch(sec(0), 100, map[string]Point{"app": ctr(old, sec(0), 10, 1)}))
	// A second container appears: the pod waits until it has two samples too.
	s.Add(batch(sec(15), 101, map[string]Point{"app": ctr(old, sec(15), 11, 1), "new": ctr(old, sec(15), 1, 1)}))
	if u, ok := s.Pod("default", "web"); ok {
		t.Errorf("pod with a container of one sample: %+v", u)
	}
	s.Add(batch(sec(30), 102, map[string]Point{"app": ctr(old, sec(30), 12, 1), "new": ctr(old, sec(30), 2, 1)}))
	if u, ok := s.Pod("default", "web"); !ok || len(u.Containers) != 2 {
		t.Errorf("pod usage = %+v %v, want both containers", u, ok)
	}
	// The kubelet answers the same samples again: the usage stays what it was.
	s.Add(batch(sec(30), 102, map[string]Point{"app": ctr(old, sec(30), 12, 1), "new": ctr(old, sec(30), 2, 1)}))
	if u, ok := s.Pod("default", "web"); !ok || u.Window != 15*time.Second {
		t.Errorf("after a repeated sample: %+v %v", u, ok)
	}
	// A scrape without the node and the pod (the node failed) forgets both.
	s.Add(Batch{})
	if _, ok := s.Node("n1"); ok {
		t.Error("node usage after a failed scrape")
	}
	if _, ok := s.Pod("default", "web"); ok {
		t.Error("pod usage after a failed scrape")
	}
	if _, ok := s.Pod("default", "other"); ok {
		t.Error("usage of a pod never seen")
	}
}

func TestStoreFreshContainer(t *testing.T) {
	s := NewStore(15 * time.Second)
	// Started 12 s before its first sample: its start counts as the sample before.
	s.Add(batch(sec(12), 100, map[string]Point{"app": ctr(sec(0), sec(12), 6, 700)}))
	u, ok := s.Pod("default", "web")
	if !ok || u.Containers[0].CPU != 500_000_000 || u.Window != 12*time.Second || u.Containers[0].Memory != 700 {
		t.Errorf("fresh container = %+v %v, want 500m over 12s", u, ok)
	}
	// Started 5 s before: too short a window, it waits for a second sample.
	s2 := NewStore(15 * time.Second)
	s2.Add(batch(sec(5), 100, map[string]Point{"app": ctr(sec(0), sec(5), 1, 700)}))
	if u, ok := s2.Pod("default", "web"); ok {
		t.Errorf("container of 5 s = %+v", u)
	}
}
