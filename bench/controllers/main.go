// Command controllers measures kubette's Deployment and ReplicaSet
// controllers end to end (it works against any Kubernetes cluster). It runs a
// fake kubelet that marks every pod of the run Running and Ready through the
// status subresource, creates a Deployment of --replicas pods, and reports
// how long the pods took to exist and to be ready, and the Deployment to
// report them available and to pass `kubectl rollout status`; then it scales
// the Deployment to 0 and reports how long the pods took to go and the status
// to say so. Request counts and CPU time from the API server's /metrics show
// where the time went.
//
//	go run ./bench/controllers --kubeconfig DIR/admin.kubeconfig --server-pid PID
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubette/kubette/bench/internal/benchutil"
)

// runLabel is the label key that marks the Deployment, ReplicaSets and pods of one run.
const runLabel = "bench.kubette.io/run"

// appLabel is the second label of the pod template, so that the selector is
// not just the run.
const appLabel = "app"

// image is the pods' image; nothing pulls it.
const image = "registry.local/pause:1"

// cleanupWait bounds each wait of the cleanup (garbage collection, namespace deletion).
const cleanupWait = 30 * time.Second

// options are the command-line flags.
type options struct {
	kubeconfig     string
	replicas       int
	namespace      string
	qps            float64
	burst          int
	markWorkers    int
	serverPID      int
	serverMetrics  bool
	timeout        time.Duration
	timeline       bool
	timelineBucket time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (required)")
	flag.IntVar(&o.replicas, "replicas", 1000, "replicas of the Deployment")
	flag.StringVar(&o.namespace, "namespace", "", "namespace to use (default: create a fresh bench-ctl-<random> namespace)")
	flag.Float64Var(&o.qps, "qps", 10000, "client-side QPS limit of the bench (its fake kubelet included)")
	flag.IntVar(&o.burst, "burst", 10000, "client-side burst")
	flag.IntVar(&o.markWorkers, "mark-workers", 16, "concurrent status writers of the fake kubelet")
	flag.IntVar(&o.serverPID, "server-pid", 0, "PID of the server, to report its VmRSS")
	flag.BoolVar(&o.serverMetrics, "server-metrics", true, "scrape the server's /metrics for request counts and CPU time per phase")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long each phase may take before the bench gives up")
	flag.BoolVar(&o.timeline, "timeline", false, "print every Deployment and ReplicaSet status change and the pod events per interval")
	flag.DurationVar(&o.timelineBucket, "timeline-bucket", 100*time.Millisecond, "interval of the pod event histogram of --timeline")
	flag.Parse()
	if o.kubeconfig == "" || o.replicas <= 0 || o.markWorkers <= 0 || o.timeout <= 0 || o.timelineBucket <= 0 {
		fmt.Fprintln(os.Stderr, "usage: controllers --kubeconfig FILE [--replicas N>0] [--mark-workers W>0] [flags]")
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

// bench holds what the phases of one run share.
type bench struct {
	o       options
	out     io.Writer
	cs      *kubernetes.Clientset
	ns      string
	name    string
	runID   string
	tracker *tracker
	kubelet *fakeKubelet
	// metrics is false when the server's /metrics cannot be read.
	metrics bool
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
	b := &bench{o: o, out: out, cs: cs, runID: utilrand.String(5), metrics: o.serverMetrics}
	b.name = "bench-ctl-" + b.runID

	b.ns = o.namespace
	if b.ns == "" {
		b.ns = "bench-ctl-" + utilrand.String(5)
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: b.ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace %s: %w", b.ns, err)
		}
	}

	// Informers on the run's objects feed the tracker and the fake kubelet;
	// they and the kubelet's workers stop with bgCtx, after the cleanup.
	bgCtx, cancelBg := context.WithCancel(ctx)
	var bg sync.WaitGroup
	selector := labels.Set{runLabel: b.runID}.String()
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(b.ns),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = selector }))
	defer func() {
		cancelBg()
		factory.Shutdown()
		bg.Wait()
	}()
	b.tracker = newTracker(b.name)
	podInformer := factory.Core().V1().Pods()
	b.kubelet = newFakeKubelet(cs, podInformer.Lister(), o.markWorkers)
	if _, err := podInformer.Informer().AddEventHandler(b.tracker.podHandler(b.kubelet.observe)); err != nil {
		return fmt.Errorf("add pod event handler: %w", err)
	}
	if _, err := factory.Apps().V1().Deployments().Informer().AddEventHandler(b.tracker.deploymentHandler()); err != nil {
		return fmt.Errorf("add deployment event handler: %w", err)
	}
	if _, err := factory.Apps().V1().ReplicaSets().Informer().AddEventHandler(b.tracker.replicaSetHandler()); err != nil {
		return fmt.Errorf("add replicaset event handler: %w", err)
	}
	factory.Start(bgCtx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("informer of %v did not sync", typ)
		}
	}
	bg.Go(func() { b.kubelet.run(bgCtx) })

	load, _ := benchutil.LoadAverage()
	fmt.Fprintf(out, "server:     %s at %s\n", ver.GitVersion, cfg.Host)
	fmt.Fprintf(out, "load:       Deployment %s/%s, %d replicas, %d mark workers, client qps %g burst %d, %d CPUs, load average %.2f\n",
		b.ns, b.name, o.replicas, o.markWorkers, o.qps, o.burst, runtime.NumCPU(), load)

	rssBefore := readRSS(o.serverPID, out)
	created := false
	defer func() { b.cleanup(ctx, created, o.namespace == "") }()

	up, err := b.scaleUp(ctx)
	created = !up.start.IsZero()
	if err != nil {
		return err
	}
	rssUp := readRSS(o.serverPID, out)
	if err := b.scaleDown(ctx); err != nil {
		return err
	}
	rssDown := readRSS(o.serverPID, out)
	if rssBefore > 0 && rssUp > 0 && rssDown > 0 {
		fmt.Fprintf(out, "server RSS: before %.1f MiB, at %d pods %.1f MiB, after scale to 0 %.1f MiB  [VmRSS of pid %d]\n",
			benchutil.MiB(rssBefore), o.replicas, benchutil.MiB(rssUp), benchutil.MiB(rssDown), o.serverPID)
	}
	printUpstream(out)
	if o.timeline {
		b.printTimeline()
	}
	return nil
}

// phase is the start of one measured phase: when the action that starts it
// returned, and the readings to compare the phase's end with.
type phase struct {
	start    time.Time
	metrics  *scrape
	cpu      time.Duration // this process's CPU time
	hostBusy time.Duration // the host's busy CPU time
}

// begin takes the readings at the start of a phase; call it right before the action.
func (b *bench) begin(ctx context.Context) phase {
	var p phase
	if b.metrics {
		m, err := fetchMetrics(ctx, b.cs.CoreV1().RESTClient())
		if err != nil {
			fmt.Fprintf(b.out, "note: no server metrics (%v)\n", err)
			b.metrics = false
		}
		p.metrics = m
	}
	p.cpu = processCPU()
	p.hostBusy, _, _ = benchutil.HostCPU()
	return p
}

// report prints the requests the server answered during the phase and the CPU
// the server, the bench and everything else used.
func (b *bench) report(ctx context.Context, label string, p phase) {
	end := time.Now()
	wall := end.Sub(p.start)
	cores := func(d time.Duration) float64 { return d.Seconds() / wall.Seconds() }
	line := fmt.Sprintf("cpu (%s): over %s, cores busy: bench %.2f", label, benchutil.FormatDuration(wall), cores(processCPU()-p.cpu))
	var serverCPU time.Duration = -1
	if b.metrics && p.metrics != nil {
		m, err := fetchMetrics(ctx, b.cs.CoreV1().RESTClient())
		if err != nil {
			fmt.Fprintf(b.out, "note: %v\n", err)
		} else {
			fmt.Fprintf(b.out, "requests (%s): %s\n", label, formatRequests(requestDelta(p.metrics, m)))
			serverCPU = time.Duration((m.cpu - p.metrics.cpu) * float64(time.Second))
			line += fmt.Sprintf(", server %.2f", cores(serverCPU))
		}
	}
	if busy, _, err := benchutil.HostCPU(); err == nil && p.hostBusy > 0 {
		line += fmt.Sprintf(", host total %.2f of %d", cores(busy-p.hostBusy), runtime.NumCPU())
		if serverCPU >= 0 {
			line += fmt.Sprintf(" (other processes %.2f)", max(0, cores(busy-p.hostBusy-serverCPU-(processCPU()-p.cpu))))
		}
	}
	fmt.Fprintln(b.out, line)
}

// scaleUp creates the Deployment and waits for its pods to exist and be
// ready and for its status to report them available.
func (b *bench) scaleUp(ctx context.Context) (phase, error) {
	n := int32(b.o.replicas)
	tr := b.tracker
	podsExist := tr.expect(func(s *snapshot) bool { return s.active() >= int(n) })
	podsReady := tr.expect(func(s *snapshot) bool { return s.ready >= int(n) })
	available := tr.expect(deploymentAvailable(n))
	rolledOut := tr.expect(rolloutComplete(n))

	p := b.begin(ctx)
	if _, err := b.cs.AppsV1().Deployments(b.ns).Create(ctx, b.deployment(n), metav1.CreateOptions{}); err != nil {
		return phase{}, fmt.Errorf("create deployment %s/%s: %w", b.ns, b.name, err)
	}
	p.start = time.Now()
	tr.setOrigin(p.start)
	deadline := p.start.Add(b.o.timeout)

	var errs []error
	wait := func(w *waiter, what string) (time.Duration, bool) {
		at, err := tr.wait(ctx, w, deadline, what)
		if err != nil {
			errs = append(errs, err)
			return 0, false
		}
		return at.Sub(p.start), true
	}
	if d, ok := wait(podsExist, "pods created"); ok {
		fmt.Fprintf(b.out, "pods created: %d in %s\n", n, benchutil.FormatDuration(d))
	} else {
		b.progress("pods created", n)
	}
	if d, ok := wait(podsReady, "pods ready"); ok {
		fmt.Fprintf(b.out, "pods ready: %d in %s\n", n, benchutil.FormatDuration(d))
	} else {
		b.progress("pods ready", n)
	}
	if d, ok := wait(available, "deployment available"); ok {
		fmt.Fprintf(b.out, "deployment available: %d in %s\n", n, benchutil.FormatDuration(d))
	} else {
		b.progress("deployment available", n)
	}
	if d, ok := wait(rolledOut, "rollout status"); ok {
		fmt.Fprintf(b.out, "rollout status done: %d updated and available in %s\n", n, benchutil.FormatDuration(d))
	} else {
		b.progress("rollout status", n)
	}
	k := b.kubelet
	fmt.Fprintf(b.out, "fake kubelet: %d status writes (the last returned %s after the create), %d conflicts\n",
		k.marked.Load(), benchutil.FormatDuration(time.Unix(0, k.lastMark.Load()).Sub(p.start)), k.conflicts.Load())
	b.printKubeletErrors()
	b.report(ctx, "scale up", p)
	if len(errs) > 0 {
		return p, fmt.Errorf("scale up to %d: %w", n, errors.Join(errs...))
	}
	return p, nil
}

// scaleDown sets the Deployment's scale to 0 and waits for the pods to go and
// the status to report 0 replicas.
func (b *bench) scaleDown(ctx context.Context) error {
	tr := b.tracker
	podsGone := tr.expect(func(s *snapshot) bool { return len(s.pods) == 0 })
	statusZero := tr.expect(deploymentScaledTo(0))

	deployments := b.cs.AppsV1().Deployments(b.ns)
	scale, err := deployments.GetScale(ctx, b.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get scale of deployment %s/%s: %w", b.ns, b.name, err)
	}
	finalizedBefore := b.kubelet.finalized.Load()
	p := b.begin(ctx)
	scale.Spec.Replicas = 0
	if _, err := deployments.UpdateScale(ctx, b.name, &autoscalingv1.Scale{ObjectMeta: scale.ObjectMeta, Spec: scale.Spec}, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("scale deployment %s/%s to 0: %w", b.ns, b.name, err)
	}
	p.start = time.Now()
	deadline := p.start.Add(b.o.timeout)

	var errs []error
	gone, err := tr.wait(ctx, podsGone, deadline, "pods gone")
	if err != nil {
		errs = append(errs, err)
	}
	zero, err := tr.wait(ctx, statusZero, deadline, "status 0")
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		line := fmt.Sprintf("scale to 0: pods gone in %s, status 0 in %s",
			benchutil.FormatDuration(gone.Sub(p.start)), benchutil.FormatDuration(zero.Sub(p.start)))
		if f := b.kubelet.finalized.Load() - finalizedBefore; f > 0 {
			line += fmt.Sprintf("  (fake kubelet finished %d graceful deletions)", f)
		}
		fmt.Fprintln(b.out, line)
	} else {
		b.progress("scale to 0", 0)
	}
	b.report(ctx, "scale to 0", p)
	if len(errs) > 0 {
		return fmt.Errorf("scale to 0: %w", errors.Join(errs...))
	}
	return nil
}

// progress prints how far the run got when a wait for what (towards n) timed out.
func (b *bench) progress(what string, n int32) {
	b.tracker.view(func(s *snapshot) {
		line := fmt.Sprintf("%s: NOT REACHED (want %d): %d pods (%d ready, %d terminating)", what, n, len(s.pods), s.ready, s.terminating)
		if d := s.deployment; d != nil {
			st := d.Status
			line += fmt.Sprintf("; deployment gen %d observed %d spec %d replicas %d updated %d ready %d available %d",
				d.Generation, st.ObservedGeneration, replicasOf(d.Spec.Replicas), st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, st.AvailableReplicas)
		}
		fmt.Fprintln(b.out, line)
	})
}

// printKubeletErrors prints the fake kubelet's failures other than conflicts.
func (b *bench) printKubeletErrors() {
	if n := b.kubelet.errs.Load(); n > 0 {
		fmt.Fprintf(b.out, "errors:     fake kubelet: %d failed requests, first: %v\n", n, b.kubelet.firstError())
	}
}

// deployment is the Deployment of the run: n pods of one container.
func (b *bench) deployment(n int32) *appsv1.Deployment {
	podLabels := map[string]string{appLabel: "bench-ctl", runLabel: b.runID}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: b.name, Labels: map[string]string{runLabel: b.runID}},
		Spec: appsv1.DeploymentSpec{
			Replicas:        &n,
			MinReadySeconds: 0,
			Selector:        &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: image}}},
			},
		},
	}
}

// cleanup deletes the Deployment in the background (created reports whether
// it exists) and waits up to cleanupWait for the garbage collector to remove
// its ReplicaSet and pods, then deletes a namespace the bench created and
// waits as long for it to go. Neither wait is an error: either controller
// may be missing.
func (b *bench) cleanup(ctx context.Context, created, ownNamespace bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*cleanupWait)
	defer cancel()
	if created {
		deploymentGone := b.tracker.expect(func(s *snapshot) bool { return s.deployment == nil })
		collected := b.tracker.expect(func(s *snapshot) bool { return len(s.replicaSets) == 0 && len(s.pods) == 0 })
		bg := metav1.DeletePropagationBackground
		start := time.Now()
		if err := b.cs.AppsV1().Deployments(b.ns).Delete(ctx, b.name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
			fmt.Fprintf(b.out, "cleanup:    delete deployment %s/%s failed: %v\n", b.ns, b.name, err)
			return
		}
		deadline := start.Add(cleanupWait)
		line := "cleanup:    deployment deleted (background propagation)"
		if at, err := b.tracker.wait(ctx, deploymentGone, deadline, "deployment gone"); err == nil {
			line += " and gone in " + benchutil.FormatDuration(at.Sub(start))
		}
		if at, err := b.tracker.wait(ctx, collected, deadline, "garbage collection"); err == nil {
			line += "; its ReplicaSet and pods collected in " + benchutil.FormatDuration(at.Sub(start))
		} else {
			b.tracker.view(func(s *snapshot) {
				line += fmt.Sprintf("; after %s %d ReplicaSets and %d pods remain (no garbage collector?)", cleanupWait, len(s.replicaSets), len(s.pods))
			})
		}
		fmt.Fprintln(b.out, line)
	}
	if !ownNamespace {
		return
	}
	start := time.Now()
	if err := b.cs.CoreV1().Namespaces().Delete(ctx, b.ns, metav1.DeleteOptions{}); err != nil {
		fmt.Fprintf(b.out, "cleanup:    delete namespace %s failed: %v\n", b.ns, err)
		return
	}
	for time.Since(start) < cleanupWait {
		_, err := b.cs.CoreV1().Namespaces().Get(ctx, b.ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			fmt.Fprintf(b.out, "cleanup:    namespace %s deleted in %s\n", b.ns, benchutil.FormatDuration(time.Since(start)))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	fmt.Fprintf(b.out, "cleanup:    namespace %s still terminating after %s (no namespace controller?)\n", b.ns, cleanupWait)
}

// printUpstream prints the reference figures measured with upstream on this machine.
func printUpstream(out io.Writer) {
	fmt.Fprintln(out, "upstream:   v1.32 (kube-apiserver, kube-controller-manager, 100 simulated nodes), this machine: 1000 pods Running in 49.7s with default client limits, 14.9s with limits raised; scale to 0 in 48.8s and 11.5s; kubette target < 3s each way")
}

// printTimeline prints every Deployment and ReplicaSet status change and a
// histogram of pod events, relative to the return of the Deployment create.
func (b *bench) printTimeline() {
	b.tracker.mu.Lock()
	defer b.tracker.mu.Unlock()
	origin := b.tracker.origin
	fmt.Fprintln(b.out, "timeline:   status changes (time after the Deployment create returned)")
	for _, e := range b.tracker.timeline {
		fmt.Fprintf(b.out, "  %8s  %s\n", benchutil.FormatDuration(e.at.Sub(origin)), e.text)
	}
	fmt.Fprintf(b.out, "timeline:   pod events per %s (added / marked ready / gone, as the bench's informer saw them)\n", benchutil.FormatDuration(b.o.timelineBucket))
	type counts struct{ added, ready, gone int }
	buckets := map[int64]*counts{}
	first, last := int64(math.MaxInt64), int64(math.MinInt64)
	for _, e := range b.tracker.podEvents {
		i := int64(e.at.Sub(origin) / b.o.timelineBucket)
		first, last = min(first, i), max(last, i)
		c := buckets[i]
		if c == nil {
			c = &counts{}
			buckets[i] = c
		}
		switch e.kind {
		case podAdded:
			c.added++
		case podReady:
			c.ready++
		case podGone:
			c.gone++
		}
	}
	at := func(i int64) string { return benchutil.FormatDuration(time.Duration(i) * b.o.timelineBucket) }
	for i := first; i <= last; i++ {
		c := buckets[i]
		if c == nil {
			// Collapse a run of idle intervals into one line.
			j := i
			for j+1 <= last && buckets[j+1] == nil {
				j++
			}
			fmt.Fprintf(b.out, "  %8s  (no pod events until %s)\n", at(i), at(j+1))
			i = j
			continue
		}
		fmt.Fprintf(b.out, "  %8s  added %-4d ready %-4d gone %d\n", at(i), c.added, c.ready, c.gone)
	}
}

// readRSS returns the VmRSS of pid, or 0 (after a note) when pid is 0 or unreadable.
func readRSS(pid int, out io.Writer) int64 {
	if pid <= 0 {
		return 0
	}
	rss, err := benchutil.ReadRSS(pid)
	if err != nil {
		fmt.Fprintf(out, "note: %v\n", err)
		return 0
	}
	return rss
}

// processCPU is the user+system CPU time this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
