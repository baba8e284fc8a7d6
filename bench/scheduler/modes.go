package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/kubette/kubette/bench/internal/benchutil"
	"github.com/kubette/kubette/internal/scheduler"
)

// nodeLabel marks the nodes the bench registered itself (--nodes).
const nodeLabel = "bench.kubette.io/node"

// benchNode is one node as --nodes registers it: Ready, 32 CPUs, 256Gi, 110 pods,
// with no kubelet behind it (as upstream scheduler_perf's nodes).
func benchNode(name, runID string) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("32"),
		corev1.ResourceMemory:           resource.MustParse("256Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	now := metav1.Now()
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			nodeLabel: runID, "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: capacity.DeepCopy(),
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				LastHeartbeatTime: now, LastTransitionTime: now, Reason: "KubeletReady", Message: "bench node"}},
		},
	}
}

// createNodes registers n Ready nodes named bench-node-<runID>-<i> from workers goroutines.
func createNodes(ctx context.Context, cs kubernetes.Interface, runID string, n, workers int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var once sync.Once
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				name := fmt.Sprintf("bench-node-%s-%d", runID, i)
				if _, err := cs.CoreV1().Nodes().Create(ctx, benchNode(name, runID), metav1.CreateOptions{}); err != nil {
					once.Do(func() {
						firstErr = fmt.Errorf("create node %s: %w", name, err)
						cancel()
					})
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// deleteNodes removes the nodes createNodes registered.
func deleteNodes(ctx context.Context, cs kubernetes.Interface, runID string, out io.Writer) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteWait)
	defer cancel()
	start := time.Now()
	if err := cs.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: nodeLabel + "=" + runID}); err != nil {
		fmt.Fprintf(out, "cleanup: DeleteCollection of the bench's nodes failed: %v\n", err)
		return
	}
	fmt.Fprintf(out, "cleanup: bench nodes deleted in %s\n", time.Since(start).Round(time.Millisecond))
}

// startScheduler runs a scheduler in this process for the pods whose
// spec.schedulerName is name (the cluster's own scheduler ignores them) until
// the returned stop is called; stop waits for it to end.
func startScheduler(ctx context.Context, cfg *rest.Config, name string) (stop func() error) {
	// The scheduler's event broadcaster logs through klog: every event still queued
	// when the bench stops it would print a line.
	klog.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- scheduler.RunWithLeaderElection(ctx, cfg, scheduler.Options{
			SchedulerName: name, LeaderElect: false,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
	}()
	return func() error {
		cancel()
		err := <-done
		if err != nil && ctx.Err() != nil {
			return nil
		}
		return err
	}
}

// bindPhase starts the in-process scheduler for pods created beforehand and
// waits for all of them to be bound, then reports the bind rate, the time from
// the scheduler's start to each bind, the server's requests and the CPU of the
// bind phase alone (the bench's CPU includes the scheduler's).
func bindPhase(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, schedulerName string, created int, o options, tr *bindTracker, out io.Writer) error {
	stopProfile, err := startCPUProfile(o.cpuProfile)
	if err != nil {
		return err
	}
	before, err := fetchMetrics(ctx, cs)
	if err != nil {
		fmt.Fprintf(out, "note:    no server metrics (%v)\n", err)
	}
	busyBefore, _, _ := benchutil.HostCPU()
	benchBefore := processCPU()
	start := time.Now()
	serverProfiles := startServerProfiles(ctx, cs, o.serverProfile, o.serverProfileSeconds)
	var stop func() error
	if o.clusterScheduler {
		if err := releaseSchedulerLease(ctx, cs); err != nil {
			return err
		}
		stop = func() error { return nil }
	} else {
		stop = startScheduler(ctx, cfg, schedulerName)
	}
	// The binding window: the server's counters once the first bind was seen, so that
	// the figures per pod leave out the scheduler's start (the Lease, with
	// --cluster-scheduler up to its 2 s retry period, and the informers' sync).
	firstCh := make(chan windowStart, 1)
	windowCtx, stopWindow := context.WithCancel(ctx)
	go func() {
		defer close(firstCh)
		if before == nil || tr.wait(windowCtx, start.Add(bindTimeout), func(t *bindTracker) bool { return len(t.bound) > 0 }) != nil {
			return
		}
		sc, err := fetchMetrics(windowCtx, cs)
		if err != nil {
			return
		}
		tr.mu.Lock()
		n := len(tr.bound)
		tr.mu.Unlock()
		firstCh <- windowStart{scrape: sc, bound: n}
	}()
	waitErr := tr.wait(ctx, start.Add(bindTimeout), func(t *bindTracker) bool { return len(t.bound) >= created })
	end := time.Now()
	stopWindow()
	first, haveFirst := <-firstCh
	var after *scrape
	if before != nil {
		after, _ = fetchMetrics(ctx, cs)
	}
	busyAfter, _, _ := benchutil.HostCPU()
	benchCPU := processCPU() - benchBefore
	if err := serverProfiles(); err != nil {
		fmt.Fprintf(out, "note:    server profile: %v\n", err)
	}
	if err := stopProfile(); err != nil {
		fmt.Fprintf(out, "note:    %v\n", err)
	}
	if err := stop(); err != nil {
		fmt.Fprintf(out, "note:    scheduler ended with %v\n", err)
	}
	report(out, tr, created)
	tr.mu.Lock()
	lat := make([]time.Duration, 0, len(tr.bound))
	for _, at := range tr.bound {
		lat = append(lat, at.Sub(start))
	}
	tr.mu.Unlock()
	s := benchutil.Sorted(lat)
	fmt.Fprintf(out, "scheduler: start (with --cluster-scheduler: the Lease freed)→bind first %s p50 %s p90 %s p99 %s last %s\n",
		benchutil.FormatDuration(benchutil.Percentile(s, 0)), benchutil.FormatDuration(benchutil.Percentile(s, 50)),
		benchutil.FormatDuration(benchutil.Percentile(s, 90)), benchutil.FormatDuration(benchutil.Percentile(s, 99)),
		benchutil.FormatDuration(benchutil.Percentile(s, 100)))
	wall := end.Sub(start).Seconds()
	if after != nil {
		fmt.Fprintf(out, "requests: pods/binding creates %s; pods/status updates %s, patches %s\n",
			after.delta(before, "create", "binding"), after.delta(before, "update", "status"), after.delta(before, "patch", "status"))
		fmt.Fprintf(out, "cpu:     bind phase %.2fs, cores busy: server %.2f, bench+scheduler %.2f, host total %.2f of %d\n", wall,
			(after.cpu-before.cpu)/wall, benchCPU.Seconds()/wall, (busyAfter-busyBefore).Seconds()/wall, runtime.NumCPU())
		serverWhat := "bind, Scheduled event, watch delivery"
		if o.clusterScheduler {
			serverWhat = "with the cluster's scheduler when it runs in the server's process, as in kubette up"
		}
		fmt.Fprintf(out, "server cpu per pod: %.2f ms in the bind phase (%s; steadier than rates on a loaded host)\n",
			(after.cpu-before.cpu)*1000/float64(max(created, 1)), serverWhat)
		fmt.Fprintf(out, "server alloc per pod: %.1f KB in the bind phase, %.0f GC cycles (what feeds the collector; does not move with the host's load)\n",
			(after.alloc-before.alloc)/1024/float64(max(created, 1)), after.gcs-before.gcs)
		if n := created - first.bound; haveFirst && after != nil && n > 0 {
			fmt.Fprintf(out, "binding window: %d pods bound after the counters were read at the first bind: server cpu per pod %.3f ms, alloc per pod %.1f KB, %.0f GC cycles\n",
				n, (after.cpu-first.scrape.cpu)*1000/float64(n), (after.alloc-first.scrape.alloc)/1024/float64(n), after.gcs-first.scrape.gcs)
		}
	}
	if o.clusterScheduler {
		fmt.Fprintf(out, "bench cpu per pod: %.2f ms in the bind phase (its pod informer)\n", benchCPU.Seconds()*1000/float64(max(created, 1)))
	} else {
		fmt.Fprintf(out, "scheduler cpu per pod: %.2f ms in the bind phase (this process: the scheduler and the bench's own pod informer)\n",
			benchCPU.Seconds()*1000/float64(max(created, 1)))
	}
	fmt.Fprintln(out, "upstream: kube-scheduler on this workload: about 270 pods/s CI floor, 600–690 pods/s measured; kubette target > 2000 pods/s at 5000 nodes")
	if waitErr != nil {
		return fmt.Errorf("wait for %d pods to be bound: %w", created, waitErr)
	}
	return nil
}

// windowStart is the server's counters when the first bind was seen, and the pods
// bound by the time they were read.
type windowStart struct {
	scrape *scrape
	bound  int
}

// startCPUProfile starts writing this process's CPU profile to path (nothing
// when path is empty); the returned stop ends it and closes the file.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("start cpu profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("write cpu profile %s: %w", path, err)
		}
		return nil
	}, nil
}

// startServerProfiles fetches the API server's heap profile into prefix.heap0
// after a forced collection (so its allocation counts reach up to now), then
// its CPU profile over the next seconds into prefix.cpu (nothing when prefix is
// empty); wait, called at the end of the bind phase, writes the heap profile
// into prefix.heap1 after another collection, so that
// `go tool pprof -sample_index=alloc_space -diff_base prefix.heap0 prefix.heap1`
// holds the phase's allocations and prefix.heap1's inuse_space its live heap,
// then waits for the CPU profile.
func startServerProfiles(ctx context.Context, cs kubernetes.Interface, prefix string, seconds int) (wait func() error) {
	if prefix == "" {
		return func() error { return nil }
	}
	heap := func(file string) error {
		data, err := cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/heap").Param("gc", "1").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("fetch heap profile: %w", err)
		}
		if err := os.WriteFile(file, data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", file, err)
		}
		return nil
	}
	heapErr := heap(prefix + ".heap0")
	cpuErr := make(chan error, 1)
	go func() {
		data, err := cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(seconds)).DoRaw(ctx)
		if err != nil {
			cpuErr <- fmt.Errorf("fetch cpu profile: %w", err)
			return
		}
		if err := os.WriteFile(prefix+".cpu", data, 0o644); err != nil {
			cpuErr <- fmt.Errorf("write %s.cpu: %w", prefix, err)
			return
		}
		cpuErr <- nil
	}()
	traceErr := make(chan error, 1)
	go func() {
		// The execution trace over the same seconds: where the server's goroutines
		// wait when its cores are not busy (go tool trace PREFIX.trace).
		data, err := cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/trace").
			Param("seconds", strconv.Itoa(seconds)).DoRaw(ctx)
		if err != nil {
			traceErr <- fmt.Errorf("fetch execution trace: %w", err)
			return
		}
		if err := os.WriteFile(prefix+".trace", data, 0o644); err != nil {
			traceErr <- fmt.Errorf("write %s.trace: %w", prefix, err)
			return
		}
		traceErr <- nil
	}()
	return func() error {
		return errors.Join(heapErr, heap(prefix+".heap1"), <-cpuErr, <-traceErr)
	}
}
