// Command scheduler measures kubette's scheduler end to end (it works against
// any Kubernetes cluster with a scheduler and Ready nodes). It creates --pods
// bare pods from --workers goroutines, watches them through an informer until
// every pod has spec.nodeName set, and reports the create rate, the bind rate
// from the first to the last bind seen, and the latency from a pod's create
// returning to its bind being seen. It then deletes the pods with one
// DeleteCollection. The nodes must exist already, e.g. from
// `kubette sim --nodes 5000`.
//
//	go run ./bench/scheduler --kubeconfig DIR/admin.kubeconfig
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubette/kubette/bench/internal/benchutil"
)

// runLabel is the label key that marks the pods of one run.
const runLabel = "bench.kubette.io/run"

// image is the pods' image; nothing pulls it.
const image = "registry.local/pause:1"

// bindTimeout bounds the wait for every pod to be bound.
const bindTimeout = 10 * time.Minute

// deleteWait bounds the wait for the pods to go after the DeleteCollection.
const deleteWait = 60 * time.Second

// options are the command-line flags.
type options struct {
	kubeconfig string
	pods       int
	workers    int
	namespace  string
	qps        float64
	burst      int
	// podsFirst creates every pod before a scheduler (in this process) starts.
	podsFirst bool
	// clusterScheduler, with podsFirst, times the cluster's own scheduler instead: the
	// bench holds its Lease while it creates the pods, then frees it.
	clusterScheduler bool
	// nodes > 0 registers that many nodes without a kubelet (no sim needed).
	nodes int
	// cpuProfile, when set, is the file that gets this process's CPU profile
	// (the in-process scheduler's with --pods-first) over the bind phase.
	cpuProfile string
	// serverProfile, when set, is the prefix of the files that get the API server's CPU
	// profile (PREFIX.cpu) and allocations (PREFIX.allocs) over the first seconds of the
	// bind phase, from its /debug/pprof.
	serverProfile string
	// serverProfileSeconds is how long the server profiles run.
	serverProfileSeconds int
}

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (required)")
	flag.IntVar(&o.pods, "pods", 10000, "pods to create and schedule")
	flag.IntVar(&o.workers, "workers", 16, "concurrent pod creators")
	flag.StringVar(&o.namespace, "namespace", "", "namespace to use (default: create a fresh bench-sched-<random> namespace)")
	flag.Float64Var(&o.qps, "qps", 10000, "client-side QPS limit")
	flag.IntVar(&o.burst, "burst", 10000, "client-side burst")
	flag.BoolVar(&o.podsFirst, "pods-first", false, "create every pod first, then start a scheduler in this process (schedulerName bench-scheduler-<run>, so the cluster's scheduler ignores them) and time the binds alone")
	flag.BoolVar(&o.clusterScheduler, "cluster-scheduler", false, "with --pods-first: time the cluster's own scheduler (inside kubette up: in the API server's process) instead of one in this process; the bench holds its Lease kube-system/kube-scheduler while it creates the pods, then frees it")
	flag.IntVar(&o.nodes, "nodes", 0, "register this many Ready nodes with no kubelet behind them (nodes only, as upstream scheduler_perf: run no `kubette sim`); they are deleted at the end")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write this process's CPU profile over the bind phase to this file (with --pods-first: the in-process scheduler's)")
	flag.StringVar(&o.serverProfile, "server-profile", "", "with --pods-first: write the API server's CPU profile (PREFIX.cpu), its execution trace over the same seconds (PREFIX.trace) and heap profiles before and after the bind phase (PREFIX.heap0, PREFIX.heap1: each after a forced collection; diff them for the phase's allocations), read from its /debug/pprof with the kubeconfig's credentials")
	flag.IntVar(&o.serverProfileSeconds, "server-profile-seconds", 8, "length of the --server-profile profiles")
	flag.Parse()
	if o.kubeconfig == "" || o.pods <= 0 || o.workers <= 0 {
		fmt.Fprintln(os.Stderr, "usage: scheduler --kubeconfig FILE [--pods N>0] [--workers W>0] [flags]")
		flag.PrintDefaults()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// bindTracker records, per pod, when its create returned and when the
// informer first saw it with spec.nodeName set.
type bindTracker struct {
	mu      sync.Mutex
	created map[string]time.Time
	bound   map[string]time.Time
	gone    int
	// changed is closed and replaced whenever bound or gone changes.
	changed chan struct{}
}

func newBindTracker() *bindTracker {
	return &bindTracker{created: map[string]time.Time{}, bound: map[string]time.Time{}, changed: make(chan struct{})}
}

// observe records the first sighting of pod with a node.
func (t *bindTracker) observe(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, seen := t.bound[pod.Name]; seen {
		return
	}
	t.bound[pod.Name] = now
	t.notifyLocked()
}

// deleted counts a pod that went away.
func (t *bindTracker) deleted(any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gone++
	t.notifyLocked()
}

func (t *bindTracker) notifyLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// setCreated records when the create of pod name returned.
func (t *bindTracker) setCreated(name string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.created[name] = at
}

// wait blocks until cond (called under the lock) holds, ctx ends or deadline passes.
func (t *bindTracker) wait(ctx context.Context, deadline time.Time, cond func(t *bindTracker) bool) error {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		t.mu.Lock()
		ok, ch := cond(t), t.changed
		t.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return errors.New("timed out")
		}
	}
}

func run(ctx context.Context, o options, out io.Writer) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", o.kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create clientset: %w", err)
	}
	ver, err := cs.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("get server version: %w", err)
	}
	runID := utilrand.String(5)
	if o.nodes > 0 {
		defer deleteNodes(ctx, cs, runID, out)
		start := time.Now()
		if err := createNodes(ctx, cs, runID, o.nodes, o.workers); err != nil {
			return err
		}
		fmt.Fprintf(out, "nodes:   %d registered by the bench in %s (no kubelet: pods stay Pending once bound)\n", o.nodes, time.Since(start).Round(time.Millisecond))
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	ready := 0
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}

	ns := o.namespace
	if ns == "" {
		ns = "bench-sched-" + runID
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}

	// The informer stops with bgCtx when run returns.
	bgCtx, cancelBg := context.WithCancel(ctx)
	selector := labels.Set{runLabel: runID}.String()
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = selector }))
	defer func() {
		cancelBg()
		factory.Shutdown()
	}()
	tr := newBindTracker()
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    tr.observe,
		UpdateFunc: func(_, obj any) { tr.observe(obj) },
		DeleteFunc: tr.deleted,
	}); err != nil {
		return fmt.Errorf("add pod event handler: %w", err)
	}
	factory.Start(bgCtx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("informer of %v did not sync", typ)
		}
	}

	load, _ := benchutil.LoadAverage()
	fmt.Fprintf(out, "server:  %s at %s\n", ver.GitVersion, cfg.Host)
	fmt.Fprintf(out, "nodes:   %d (%d Ready)\n", len(nodes.Items), ready)
	fmt.Fprintf(out, "load:    %d pods in %s, %d creators, client qps %g burst %d, %d CPUs, load average %.2f\n",
		o.pods, ns, o.workers, o.qps, o.burst, runtime.NumCPU(), load)
	schedulerName := ""
	switch {
	case o.podsFirst && o.clusterScheduler:
		// Freed at the latest when the bench ends, so that the cluster gets its scheduler back.
		defer func() {
			if err := releaseSchedulerLease(context.WithoutCancel(ctx), cs); err != nil {
				fmt.Fprintf(out, "note:    %v\n", err)
			}
		}()
		if err := holdSchedulerLease(ctx, cs, "bench-"+runID); err != nil {
			return err
		}
		fmt.Fprintf(out, "mode:    pods first, then the cluster's own scheduler (the bench held its Lease while creating the pods)\n")
	case o.podsFirst:
		schedulerName = "bench-scheduler-" + runID
		fmt.Fprintf(out, "mode:    pods first, then scheduler %s in the bench process\n", schedulerName)
	}

	before, err := fetchMetrics(ctx, cs)
	if err != nil {
		fmt.Fprintf(out, "note:    no server metrics (%v)\n", err)
	}
	busyBefore, _, _ := benchutil.HostCPU()
	benchBefore := processCPU()

	defer cleanup(ctx, cs, ns, selector, tr, out)
	start := time.Now()
	createErr := createPods(ctx, cs, ns, runID, schedulerName, o, tr)
	createEnd := time.Now()
	tr.mu.Lock()
	created := len(tr.created)
	tr.mu.Unlock()
	createWall := createEnd.Sub(start)
	fmt.Fprintf(out, "pods:    %d created in %.2fs (%.0f/s)\n", created, createWall.Seconds(), float64(created)/createWall.Seconds())
	if createErr != nil {
		return fmt.Errorf("create pods: %w", createErr)
	}
	if o.podsFirst {
		return bindPhase(ctx, cfg, cs, schedulerName, created, o, tr, out)
	}

	waitErr := tr.wait(ctx, start.Add(bindTimeout), func(t *bindTracker) bool { return len(t.bound) >= created })
	end := time.Now()
	report(out, tr, created)
	if before != nil {
		if after, err := fetchMetrics(ctx, cs); err == nil {
			fmt.Fprintf(out, "requests: pods/binding creates %s; pod creates %s; pods/status updates %s, patches %s\n",
				after.delta(before, "create", "binding"), after.delta(before, "create", ""), after.delta(before, "update", "status"), after.delta(before, "patch", "status"))
			wall := end.Sub(start).Seconds()
			busyAfter, _, _ := benchutil.HostCPU()
			fmt.Fprintf(out, "cpu:     over %.2fs, cores busy: server %.2f, bench %.2f, host total %.2f of %d\n", wall,
				(after.cpu-before.cpu)/wall, (processCPU()-benchBefore).Seconds()/wall, (busyAfter-busyBefore).Seconds()/wall, runtime.NumCPU())
			fmt.Fprintf(out, "server cpu per pod: %.2f ms (create, bind, events, status writes, heartbeats; steadier than rates on a loaded host)\n",
				(after.cpu-before.cpu)*1000/float64(max(created, 1)))
		}
	}
	fmt.Fprintln(out, "upstream: kube-scheduler on this workload: about 270 pods/s CI floor, 600–690 pods/s measured; kubette target > 2000 pods/s at 5000 nodes")
	if waitErr != nil {
		return fmt.Errorf("wait for %d pods to be bound: %w", created, waitErr)
	}
	return nil
}

// createPods creates o.pods pods from o.workers goroutines and records when
// each create returned. It stops at the first error.
func createPods(ctx context.Context, cs kubernetes.Interface, ns, runID, schedulerName string, o options, tr *bindTracker) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var once sync.Once
	for range o.workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(o.pods) || ctx.Err() != nil {
					return
				}
				name := fmt.Sprintf("sched-%s-%d", runID, i)
				if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod(name, runID, schedulerName), metav1.CreateOptions{}); err != nil {
					once.Do(func() {
						firstErr = fmt.Errorf("create pod %s/%s: %w", ns, name, err)
						cancel()
					})
					return
				}
				tr.setCreated(name, time.Now())
			}
		})
	}
	wg.Wait()
	return firstErr
}

// pod is one bare pod of the run: one container requesting 10m CPU and 10Mi
// memory, for schedulerName (the default scheduler when empty).
func pod(name, runID, schedulerName string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{runLabel: runID}},
		Spec: corev1.PodSpec{SchedulerName: schedulerName, Containers: []corev1.Container{{
			Name:  "pause",
			Image: image,
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("10m"),
				corev1.ResourceMemory: resource.MustParse("10Mi"),
			}},
		}}},
	}
}

// report prints the bind rate and the create→bind latencies.
func report(out io.Writer, tr *bindTracker, created int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var first, last time.Time
	var lat []time.Duration
	for name, at := range tr.bound {
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
		if c, ok := tr.created[name]; ok {
			lat = append(lat, at.Sub(c))
		}
	}
	n := len(tr.bound)
	span := last.Sub(first)
	rate := 0.0
	if span > 0 {
		rate = float64(n) / span.Seconds()
	}
	line := fmt.Sprintf("bound:   %d in %.2fs from first to last bind = %.0f pods/s", n, span.Seconds(), rate)
	if n < created {
		line += fmt.Sprintf("  (NOT ALL: %d of %d created)", n, created)
	}
	fmt.Fprintln(out, line)
	s := benchutil.Sorted(lat)
	fmt.Fprintf(out, "latency: create→bind p50 %s p90 %s p99 %s max %s  (negative: the bind was seen before the create returned)\n",
		benchutil.FormatDuration(benchutil.Percentile(s, 50)), benchutil.FormatDuration(benchutil.Percentile(s, 90)),
		benchutil.FormatDuration(benchutil.Percentile(s, 99)), benchutil.FormatDuration(benchutil.Percentile(s, 100)))
}

// cleanup deletes the run's pods with one DeleteCollection and waits up to
// deleteWait for the informer to see them go. A namespace the bench created is
// left in place: its deletion needs a namespace controller.
func cleanup(ctx context.Context, cs kubernetes.Interface, ns, selector string, tr *bindTracker, out io.Writer) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteWait+10*time.Second)
	defer cancel()
	tr.mu.Lock()
	want := len(tr.created)
	tr.mu.Unlock()
	start := time.Now()
	zero := int64(0)
	if err := cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero},
		metav1.ListOptions{LabelSelector: selector}); err != nil {
		fmt.Fprintf(out, "cleanup: DeleteCollection of pods in %s failed: %v\n", ns, err)
		return
	}
	if err := tr.wait(ctx, start.Add(deleteWait), func(t *bindTracker) bool { return t.gone >= want }); err != nil {
		tr.mu.Lock()
		fmt.Fprintf(out, "cleanup: %d of %d pods gone after %s (%v)\n", tr.gone, want, deleteWait, err)
		tr.mu.Unlock()
		return
	}
	fmt.Fprintf(out, "cleanup: %d pods deleted in %s\n", want, benchutil.FormatDuration(time.Since(start)))
}

// scrape is what the bench reads from the API server's /metrics: request
// counts by verb, subresource and code for pods, and the process's CPU time.
type scrape struct {
	requests map[[3]string]float64 // verb, subresource, code → count
	cpu      float64               // process_cpu_seconds_total
	alloc    float64               // go_memstats_alloc_bytes_total
	gcs      float64               // go_gc_duration_seconds_count
}

// fetchMetrics reads the API server's /metrics in the text format.
func fetchMetrics(ctx context.Context, cs kubernetes.Interface) (*scrape, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").SetHeader("Accept", "text/plain;version=0.0.4").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("get /metrics: %w", err)
	}
	s := &scrape{requests: map[[3]string]float64{}}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "process_cpu_seconds_total "); ok {
			s.cpu, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
			continue
		}
		if v, ok := strings.CutPrefix(line, "go_memstats_alloc_bytes_total "); ok {
			s.alloc, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
			continue
		}
		if v, ok := strings.CutPrefix(line, "go_gc_duration_seconds_count "); ok {
			s.gcs, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
			continue
		}
		rest, ok := strings.CutPrefix(line, "apiserver_request_total{")
		if !ok {
			continue
		}
		lbls, val, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		l := parseLabels(lbls)
		if l["resource"] != "pods" {
			continue
		}
		f, err := strconv.ParseFloat(strings.Fields(val)[0], 64)
		if err != nil {
			return nil, fmt.Errorf("parse /metrics line %q: %w", line, err)
		}
		s.requests[[3]string{l["verb"], l["subresource"], l["code"]}] += f
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read /metrics: %w", err)
	}
	return s, nil
}

// parseLabels splits `a="x",b="y"` into a map; values hold no commas or quotes here.
func parseLabels(s string) map[string]string {
	m := map[string]string{}
	for kv := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok {
			m[k] = strings.Trim(v, `"`)
		}
	}
	return m
}

// delta formats the requests of verb on the pods subresource sub since
// before, by code, e.g. "10000 (201: 10000)".
func (s *scrape) delta(before *scrape, verb, sub string) string {
	total := 0.0
	codes := map[string]float64{}
	for k, v := range s.requests {
		if k[0] != verb || k[1] != sub {
			continue
		}
		if d := v - before.requests[k]; d > 0 {
			codes[k[2]] += d
			total += d
		}
	}
	keys := make([]string, 0, len(codes))
	for c := range codes {
		keys = append(keys, c)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, c := range keys {
		parts = append(parts, fmt.Sprintf("%s: %.0f", c, codes[c]))
	}
	return fmt.Sprintf("%.0f (%s)", total, strings.Join(parts, ", "))
}

// processCPU is the user+system CPU time this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
