// Package stats is the kubelet's resource-usage view: it joins the runtime's CRI container
// stats with its sandboxes and containers and the node's own cgroup figures into upstream's
// stats summary (k8s.io/kubelet/pkg/apis/stats/v1alpha1, served at /stats/summary), and
// renders that summary as upstream's resource metrics in the Prometheus format (served at
// /metrics/resource, which metrics-server scrapes). CPU rates (usageNanoCores) are computed
// from the previous sample of the same container, pod or node, which a Provider keeps.
package stats

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Runtime is the part of the CRI client the provider reads.
type Runtime interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
}

// NodeSample is the node's own usage at one time. A nil field is unknown.
type NodeSample struct {
	Time time.Time
	// CPUUsageCoreNanoSeconds is the cumulative CPU time of everything on the node.
	CPUUsageCoreNanoSeconds *uint64
	// Memory: the working set (usage minus inactive file pages), usage, RSS and what is left
	// of the machine's memory beside the working set.
	WorkingSetBytes, UsageBytes, RSSBytes, AvailableBytes *uint64
	// Fs is the filesystem of the kubelet's data directory.
	Fs *statsapi.FsStats
	// StartTime is when the node's figures started counting (the machine's boot); zero: unknown.
	StartTime time.Time
}

// NodeReader reads the node's usage.
type NodeReader func() (NodeSample, error)

// Config configures a Provider.
type Config struct {
	// NodeName names the node in the summary (required).
	NodeName string
	// Runtime is the CRI runtime (required).
	Runtime Runtime
	// Node reads the node's own usage (required; see CgroupNode).
	Node NodeReader
}

// Provider builds stats summaries. It keeps the previous CPU sample of each container, pod
// and node to compute usageNanoCores; it is safe for concurrent use.
type Provider struct {
	cfg   Config
	mu    sync.Mutex
	rates map[string]cpuSample
}

type cpuSample struct {
	at    int64 // unix nanoseconds
	usage uint64
}

// New validates cfg and builds a Provider.
func New(cfg Config) (*Provider, error) {
	if cfg.NodeName == "" || cfg.Runtime == nil || cfg.Node == nil {
		return nil, fmt.Errorf("stats provider: NodeName, Runtime and Node are required")
	}
	return &Provider{cfg: cfg, rates: map[string]cpuSample{}}, nil
}

// nanoCores returns the CPU rate since key's previous sample (nil for the first sample, or
// when the sample is not newer or the counter went back, e.g. a restarted container) and
// records the new sample, as upstream's CRI stats provider does.
func (p *Provider) nanoCores(key string, at int64, usage uint64) *uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev, ok := p.rates[key]
	if ok && at <= prev.at {
		return nil
	}
	p.rates[key] = cpuSample{at: at, usage: usage}
	if !ok || usage < prev.usage {
		return nil
	}
	rate := uint64(float64(usage-prev.usage) / float64(at-prev.at) * float64(time.Second))
	return &rate
}

// forget drops the samples of the keys not in keep (containers and pods that are gone).
func (p *Provider) forget(keep map[string]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.rates {
		if !keep[k] {
			delete(p.rates, k)
		}
	}
}

// Summary reads the runtime and the node and builds the stats summary: the node, and each
// ready pod sandbox with its running containers. A pod's CPU and memory are the sums of its
// containers'. The error is the runtime's: the node part is still filled then.
func (p *Provider) Summary(ctx context.Context) (*statsapi.Summary, error) {
	sum := &statsapi.Summary{Node: p.node(ctx), Pods: []statsapi.PodStats{}}
	pods, err := p.pods(ctx)
	if err != nil {
		return sum, err
	}
	sum.Pods = pods
	return sum, nil
}

func (p *Provider) node(ctx context.Context) statsapi.NodeStats {
	ns := statsapi.NodeStats{NodeName: p.cfg.NodeName}
	s, err := p.cfg.Node()
	if err == nil {
		at := metav1.NewTime(s.Time)
		if !s.StartTime.IsZero() {
			ns.StartTime = metav1.NewTime(s.StartTime)
		}
		if s.CPUUsageCoreNanoSeconds != nil {
			ns.CPU = &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: s.CPUUsageCoreNanoSeconds,
				UsageNanoCores: p.nanoCores("node", s.Time.UnixNano(), *s.CPUUsageCoreNanoSeconds)}
		}
		if s.WorkingSetBytes != nil || s.UsageBytes != nil {
			ns.Memory = &statsapi.MemoryStats{Time: at, WorkingSetBytes: s.WorkingSetBytes, UsageBytes: s.UsageBytes,
				RSSBytes: s.RSSBytes, AvailableBytes: s.AvailableBytes}
		}
		ns.Fs = s.Fs
	}
	if info, err := p.cfg.Runtime.ImageFsInfo(ctx); err == nil && len(info.GetImageFilesystems()) > 0 {
		fsu := info.GetImageFilesystems()[0]
		fs := &statsapi.FsStats{Time: metav1.NewTime(time.Unix(0, fsu.GetTimestamp())), UsedBytes: optUint(fsu.GetUsedBytes()), InodesUsed: optUint(fsu.GetInodesUsed())}
		ns.Runtime = &statsapi.RuntimeStats{ImageFs: fs}
	}
	return ns
}

func (p *Provider) pods(ctx context.Context) ([]statsapi.PodStats, error) {
	sandboxes, err := p.cfg.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	containers, err := p.cfg.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	cstats, err := p.cfg.Runtime.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{})
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	byID := make(map[string]*runtimeapi.ContainerStats, len(cstats))
	for _, cs := range cstats {
		byID[cs.GetAttributes().GetId()] = cs
	}
	bySandbox := map[string][]*runtimeapi.Container{}
	for _, c := range containers {
		bySandbox[c.GetPodSandboxId()] = append(bySandbox[c.GetPodSandboxId()], c)
	}
	keep := map[string]bool{"node": true}
	out := make([]statsapi.PodStats, 0, len(sandboxes))
	for _, sb := range sandboxes {
		md := sb.GetMetadata()
		ps := statsapi.PodStats{
			PodRef:    statsapi.PodReference{Name: md.GetName(), Namespace: md.GetNamespace(), UID: md.GetUid()},
			StartTime: metav1.NewTime(time.Unix(0, sb.GetCreatedAt())),
		}
		var cpuSum, wsSum, usageSum, rssSum uint64
		var cpuAt, memAt int64
		haveCPU, haveMem := true, true
		for _, c := range bySandbox[sb.GetId()] {
			cs := p.container(c, byID[c.GetId()], keep)
			ps.Containers = append(ps.Containers, cs)
			if cs.CPU == nil || cs.CPU.UsageCoreNanoSeconds == nil {
				haveCPU = false
			} else {
				cpuSum += *cs.CPU.UsageCoreNanoSeconds
				cpuAt = max(cpuAt, cs.CPU.Time.UnixNano())
			}
			if cs.Memory == nil || cs.Memory.WorkingSetBytes == nil {
				haveMem = false
			} else {
				wsSum += *cs.Memory.WorkingSetBytes
				usageSum += deref(cs.Memory.UsageBytes)
				rssSum += deref(cs.Memory.RSSBytes)
				memAt = max(memAt, cs.Memory.Time.UnixNano())
			}
		}
		if len(ps.Containers) > 0 && haveCPU {
			key := "pod/" + md.GetUid()
			keep[key] = true
			ps.CPU = &statsapi.CPUStats{Time: metav1.NewTime(time.Unix(0, cpuAt)), UsageCoreNanoSeconds: uintPtr(cpuSum),
				UsageNanoCores: p.nanoCores(key, cpuAt, cpuSum)}
		}
		if len(ps.Containers) > 0 && haveMem {
			ps.Memory = &statsapi.MemoryStats{Time: metav1.NewTime(time.Unix(0, memAt)), WorkingSetBytes: uintPtr(wsSum),
				UsageBytes: uintPtr(usageSum), RSSBytes: uintPtr(rssSum)}
		}
		out = append(out, ps)
	}
	p.forget(keep)
	return out, nil
}

// container builds one container's stats from the runtime's (cs may be nil: not reported).
func (p *Provider) container(c *runtimeapi.Container, cs *runtimeapi.ContainerStats, keep map[string]bool) statsapi.ContainerStats {
	out := statsapi.ContainerStats{Name: c.GetMetadata().GetName(), StartTime: metav1.NewTime(time.Unix(0, c.GetCreatedAt()))}
	if cpu := cs.GetCpu(); cpu != nil && cpu.GetUsageCoreNanoSeconds() != nil {
		key := "container/" + c.GetId()
		keep[key] = true
		usage := cpu.GetUsageCoreNanoSeconds().GetValue()
		out.CPU = &statsapi.CPUStats{Time: metav1.NewTime(time.Unix(0, cpu.GetTimestamp())), UsageCoreNanoSeconds: uintPtr(usage),
			UsageNanoCores: p.nanoCores(key, cpu.GetTimestamp(), usage)}
	}
	if mem := cs.GetMemory(); mem != nil && mem.GetWorkingSetBytes() != nil {
		out.Memory = &statsapi.MemoryStats{Time: metav1.NewTime(time.Unix(0, mem.GetTimestamp())),
			WorkingSetBytes: uintPtr(mem.GetWorkingSetBytes().GetValue()), UsageBytes: optUint(mem.GetUsageBytes()),
			RSSBytes: optUint(mem.GetRssBytes()), PageFaults: optUint(mem.GetPageFaults()), MajorPageFaults: optUint(mem.GetMajorPageFaults())}
	}
	if wl := cs.GetWritableLayer(); wl != nil && wl.GetUsedBytes() != nil {
		out.Rootfs = &statsapi.FsStats{Time: metav1.NewTime(time.Unix(0, wl.GetTimestamp())),
			UsedBytes: uintPtr(wl.GetUsedBytes().GetValue()), InodesUsed: optUint(wl.GetInodesUsed())}
	}
	return out
}

func uintPtr(v uint64) *uint64 { return &v }

func optUint(v *runtimeapi.UInt64Value) *uint64 {
	if v == nil {
		return nil
	}
	return uintPtr(v.GetValue())
}

func deref(v *uint64) uint64 {
	if v == nil {
		return 0
	}
	return *v
}
