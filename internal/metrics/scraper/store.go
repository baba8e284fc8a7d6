package scraper

import (
	"math"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// freshContainerMinAge is the youngest a container may be for its start to count as
// its previous sample (zero CPU time at its start time), as metrics-server's: a shorter
// window gives an inaccurate rate.
const freshContainerMinAge = 10 * time.Second

// Usage is a node's or container's resource usage: the CPU rate between two samples
// and the working set of the last one.
type Usage struct {
	// Timestamp is the last sample's time; Window the time between the two samples.
	Timestamp time.Time
	Window    time.Duration
	// CPU is the rate in nanocores; Memory the working set in bytes.
	CPU, Memory uint64
}

// ContainerUsage is one container's usage.
type ContainerUsage struct {
	Name string
	Usage
}

// PodUsage is the usage of every container of a pod (sorted by name), with the
// earliest container's timestamp and its window, as metrics-server reports a pod.
type PodUsage struct {
	Timestamp  time.Time
	Window     time.Duration
	Containers []ContainerUsage
}

// Store keeps the last two samples of every node and container, as metrics-server's
// storage, and computes usage from them. It is safe for concurrent use.
type Store struct {
	resolution time.Duration

	mu        sync.RWMutex
	nodes     map[string]Point
	prevNodes map[string]Point
	pods      map[types.NamespacedName]map[string]Point
	prevPods  map[types.NamespacedName]map[string]Point
}

// NewStore returns an empty store for samples taken every resolution.
func NewStore(resolution time.Duration) *Store {
	return &Store{resolution: resolution}
}

// Add replaces the stored samples with those of batch: each point becomes the last
// one, and the last one before it its previous one when the two belong together (the
// same start, a newer sample, a counter that did not go back). A node or pod missing
// from batch is forgotten, so its usage is gone until it has two samples again.
func (s *Store) Add(b Batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	nodes := make(map[string]Point, len(b.Nodes))
	prevNodes := make(map[string]Point, len(b.Nodes))
	for name, p := range b.Nodes {
		nodes[name] = p
		last, hasLast := s.nodes[name]
		prev, hasPrev := s.prevNodes[name]
		if q, ok := previous(p, last, hasLast, prev, hasPrev); ok {
			prevNodes[name] = q
		}
	}
	pods := make(map[types.NamespacedName]map[string]Point, len(b.Pods))
	prevPods := make(map[types.NamespacedName]map[string]Point, len(b.Pods))
	for ref, containers := range b.Pods {
		last := make(map[string]Point, len(containers))
		prev := make(map[string]Point, len(containers))
		for name, p := range containers {
			last[name] = p
			if age := p.Timestamp.Sub(p.StartTime); !p.StartTime.IsZero() && age >= freshContainerMinAge && age < s.resolution {
				// Started within the last scrape interval: its start is the sample
				// before (no CPU time yet), so the pod need not wait for the next scrape.
				prev[name] = Point{StartTime: p.StartTime, Timestamp: p.StartTime, Memory: p.Memory}
				continue
			}
			l, hasLast := s.pods[ref][name]
			q, hasPrev := s.prevPods[ref][name]
			if q, ok := previous(p, l, hasLast, q, hasPrev); ok {
				prev[name] = q
			}
		}
		pods[ref] = last
		if len(prev) > 0 {
			prevPods[ref] = prev
		}
	}
	s.nodes, s.prevNodes, s.pods, s.prevPods = nodes, prevNodes, pods, prevPods
}

// previous chooses the sample to keep before p, given the stored last sample and the
// one before it: the last when p is newer and its counter went on from it; the stored
// previous one when the kubelet answered with the last sample again (p not newer);
// none when the node or container restarted (p started after the last sample, or its
// counter went back) or nothing fits.
func previous(p, last Point, hasLast bool, prev Point, hasPrev bool) (Point, bool) {
	if !hasLast || !p.StartTime.Before(last.Timestamp) {
		return Point{}, false
	}
	if p.Timestamp.After(last.Timestamp) {
		return last, p.CPU >= last.CPU
	}
	if hasPrev && prev.Timestamp.Before(p.Timestamp) && p.CPU >= prev.CPU {
		return prev, true
	}
	return Point{}, false
}

// usage is the usage from prev to last.
func usage(last, prev Point) (Usage, bool) {
	window := last.Timestamp.Sub(prev.Timestamp)
	if window <= 0 || last.CPU < prev.CPU {
		return Usage{}, false
	}
	rate := float64(last.CPU-prev.CPU) / window.Seconds()
	cpu := uint64(math.MaxUint64)
	if rate < math.MaxUint64 {
		cpu = uint64(rate)
	}
	return Usage{Timestamp: last.Timestamp, Window: window, CPU: cpu, Memory: last.Memory}, true
}

// Node returns a node's usage; ok is false until it has two samples that belong
// together.
func (s *Store) Node(name string) (Usage, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	last, ok := s.nodes[name]
	if !ok {
		return Usage{}, false
	}
	prev, ok := s.prevNodes[name]
	if !ok {
		return Usage{}, false
	}
	return usage(last, prev)
}

// Pod returns a pod's usage; ok is false unless every container the last scrape
// reported has two samples that belong together, as metrics-server reports a pod only
// whole.
func (s *Store) Pod(namespace, name string) (PodUsage, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ref := types.NamespacedName{Namespace: namespace, Name: name}
	last, prev := s.pods[ref], s.prevPods[ref]
	if len(last) == 0 || len(prev) == 0 {
		return PodUsage{}, false
	}
	out := PodUsage{Containers: make([]ContainerUsage, 0, len(last))}
	for cname, l := range last {
		p, ok := prev[cname]
		if !ok {
			return PodUsage{}, false
		}
		u, ok := usage(l, p)
		if !ok {
			return PodUsage{}, false
		}
		out.Containers = append(out.Containers, ContainerUsage{Name: cname, Usage: u})
		if out.Timestamp.IsZero() || u.Timestamp.Before(out.Timestamp) {
			out.Timestamp, out.Window = u.Timestamp, u.Window
		}
	}
	sort.Slice(out.Containers, func(i, j int) bool { return out.Containers[i].Name < out.Containers[j].Name })
	return out, true
}
