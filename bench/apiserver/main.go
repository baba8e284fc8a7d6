// Command apiserver is a client-go load generator for kubette's API server (it
// works against any Kubernetes API server). It opens a watch, creates ConfigMaps
// with concurrent workers, lists them back and prints create throughput and
// latency percentiles, list throughput, watch delivery delay and, when asked,
// the server's resident memory.
//
//	go run ./bench/apiserver --kubeconfig DIR/admin.kubeconfig --server-pid PID
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubette/kubette/bench/internal/benchutil"
)

// runLabel is the label key that marks the ConfigMaps of one run.
const runLabel = "bench.kubette.io/run"

// namePrefix starts the name of every ConfigMap the bench creates; the index follows.
const namePrefix = "bench-cm-"

// options are the command-line flags.
type options struct {
	kubeconfig    string
	objects       int
	workers       int
	namespace     string
	qps           float64
	burst         int
	payloadBytes  int
	serverPID     int
	serverMetrics bool
	watchTimeout  time.Duration
	asSA          bool
}

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to load (required)")
	flag.IntVar(&o.objects, "objects", 2000, "number of ConfigMaps to create")
	flag.IntVar(&o.workers, "workers", 8, "concurrent create workers")
	flag.StringVar(&o.namespace, "namespace", "", "namespace to use (default: create a fresh bench-<random> namespace)")
	flag.Float64Var(&o.qps, "qps", 10000, "client-side QPS limit")
	flag.IntVar(&o.burst, "burst", 10000, "client-side burst")
	flag.IntVar(&o.payloadBytes, "payload-bytes", 512, "size of the one data value each ConfigMap carries")
	flag.IntVar(&o.serverPID, "server-pid", 0, "PID of the API server, to report its VmRSS before and after")
	flag.BoolVar(&o.serverMetrics, "server-metrics", true, "scrape the server's /metrics for server-side latency, CPU and memory")
	flag.DurationVar(&o.watchTimeout, "watch-timeout", time.Minute, "how long to wait for missing watch events after the last create")
	flag.BoolVar(&o.asSA, "as-service-account", false, "load as a ServiceAccount bound to the edit role in the namespace (a TokenRequest token: RBAC and token authentication on every request) instead of the kubeconfig's user")
	flag.Parse()
	if o.kubeconfig == "" || o.objects <= 0 || o.workers <= 0 || o.payloadBytes < 0 {
		fmt.Fprintln(os.Stderr, "usage: apiserver --kubeconfig FILE [--objects N>0] [--workers W>0] [flags]")
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

// wireInfo records the protocol and content type the server answered the first
// create with, to show what was actually measured.
type wireInfo struct {
	once        sync.Once
	proto, ctyp string
}

type recordingTransport struct {
	next http.RoundTripper
	info *wireInfo
}

func (t recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil && req.Method == http.MethodPost {
		t.info.once.Do(func() { t.info.proto, t.info.ctyp = resp.Proto, resp.Header.Get("Content-Type") })
	}
	return resp, err
}

func run(ctx context.Context, o options, out io.Writer) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", o.kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	wire := &wireInfo{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return recordingTransport{rt, wire} })
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create clientset: %w", err)
	}
	ver, err := cs.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("get server version: %w", err)
	}

	rssBefore := readRSS(o.serverPID, out)
	var metricsBefore scrape
	if o.serverMetrics {
		if metricsBefore, err = fetchMetrics(ctx, cs.CoreV1().RESTClient()); err != nil {
			fmt.Fprintf(out, "note: no server metrics (%v)\n", err)
			o.serverMetrics = false
		}
	}

	ns := o.namespace
	if ns == "" {
		ns = "bench-" + utilrand.String(5)
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	runID := utilrand.String(8)
	selector := labels.Set{runLabel: runID}.String()
	cms := cs.CoreV1().ConfigMaps(ns)
	defer cleanup(ctx, cms, selector, ns, o.namespace == "", out)
	user := "the kubeconfig's user"
	if o.asSA {
		if cms, err = serviceAccountConfigMaps(ctx, cs, cfg, ns, wire); err != nil {
			return err
		}
		user = "ServiceAccount " + ns + "/bench bound to edit"
	}

	load, _ := benchutil.LoadAverage()
	fmt.Fprintf(out, "server:    %s at %s\n", ver.GitVersion, cfg.Host)
	fmt.Fprintf(out, "load:      %d ConfigMaps x %d B payload, %d workers, namespace %s, client qps %g burst %d, %d CPUs, as %s\n",
		o.objects, o.payloadBytes, o.workers, ns, o.qps, o.burst, runtime.NumCPU(), user)

	// The watch starts before the first create, from the revision of an (empty) list.
	initial, err := cms.List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: 1})
	if err != nil {
		return fmt.Errorf("list before watch: %w", err)
	}
	watchCtx, cancelWatch := context.WithCancel(ctx)
	defer cancelWatch()
	wi, err := cms.Watch(watchCtx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: initial.ResourceVersion})
	if err != nil {
		return fmt.Errorf("start watch: %w", err)
	}
	wt := &watcher{cms: cms, selector: selector, recvAt: make([]time.Time, o.objects)}
	expect := make(chan int, 1)
	watchDone := make(chan struct{})
	go wt.run(watchCtx, wi, initial.ResourceVersion, expect, watchDone)
	defer func() { cancelWatch(); <-watchDone }()

	// Creates.
	cr := createAll(ctx, cms, o, runID)
	expect <- cr.succeeded
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted during creates: %w", err)
	}
	sorted := benchutil.Sorted(cr.latencies)
	fmt.Fprintf(out, "creates:   %d in %s = %.0f/s  p50 %s p90 %s p99 %s max %s\n",
		cr.succeeded, benchutil.FormatDuration(cr.elapsed), float64(cr.succeeded)/cr.elapsed.Seconds(),
		benchutil.FormatDuration(benchutil.Percentile(sorted, 50)), benchutil.FormatDuration(benchutil.Percentile(sorted, 90)),
		benchutil.FormatDuration(benchutil.Percentile(sorted, 99)), benchutil.FormatDuration(benchutil.Percentile(sorted, 100)))
	if cr.failed > 0 {
		fmt.Fprintf(out, "errors:    %d creates failed, first: %v\n", cr.failed, cr.firstErr)
	}
	fmt.Fprintf(out, "wire:      %s, response %s\n", wire.proto, wire.ctyp)
	serverCPU := time.Duration(-1)
	if o.serverMetrics {
		serverCPU = printServerCreateStats(ctx, cs, metricsBefore, cr, out)
	}
	printHostCPU(cr, serverCPU, load, out)

	// Lists: paginated from etcd, then resourceVersion=0 from the watch cache.
	if err := listPaged(ctx, cms, selector, out); err != nil {
		return err
	}
	start := time.Now()
	l, err := cms.List(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: "0"})
	if err != nil {
		return fmt.Errorf("list resourceVersion=0: %w", err)
	}
	d := time.Since(start)
	fmt.Fprintf(out, "list rv=0: %d objects in %s = %.0f objects/s\n", len(l.Items), benchutil.FormatDuration(d), float64(len(l.Items))/d.Seconds())

	// Watch delivery.
	select {
	case <-watchDone:
	case <-time.After(o.watchTimeout):
		cancelWatch()
		<-watchDone
	case <-ctx.Done():
		cancelWatch()
		<-watchDone
		return fmt.Errorf("interrupted waiting for watch events: %w", ctx.Err())
	}
	printWatch(wt, cr, out)

	rssAfter := readRSS(o.serverPID, out)
	if rssBefore > 0 && rssAfter > 0 {
		fmt.Fprintf(out, "server RSS: before %.1f MiB  after %.1f MiB  (%+.1f MiB)  [VmRSS of pid %d]\n",
			benchutil.MiB(rssBefore), benchutil.MiB(rssAfter), benchutil.MiB(rssAfter-rssBefore), o.serverPID)
	}
	if o.serverMetrics {
		if m, err := fetchMetrics(ctx, cs.CoreV1().RESTClient()); err == nil {
			rb, _ := metricsBefore.sum("process_resident_memory_bytes", nil)
			ra, _ := m.sum("process_resident_memory_bytes", nil)
			heap, _ := m.sum("go_memstats_heap_inuse_bytes", nil)
			gr, _ := m.sum("go_goroutines", nil)
			fmt.Fprintf(out, "server /metrics: RSS before %.1f MiB after %.1f MiB, heap in use %.1f MiB, %0.f goroutines\n",
				rb/(1<<20), ra/(1<<20), heap/(1<<20), gr)
		}
	}
	return nil
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

// createResult is what the create phase measured.
type createResult struct {
	start     time.Time
	elapsed   time.Duration
	succeeded int
	failed    int
	firstErr  error
	// returned[i] is when the create of object i returned (zero if it failed).
	returned  []time.Time
	latencies []time.Duration
	clientCPU time.Duration
	// hostBusy and hostIOWait are the CPU time of the whole host during the creates.
	hostBusy, hostIOWait time.Duration
}

// createAll creates o.objects ConfigMaps with o.workers workers, timing each call.
func createAll(ctx context.Context, cms typedcorev1.ConfigMapInterface, o options, runID string) createResult {
	payload := utilrand.String(o.payloadBytes)
	res := createResult{returned: make([]time.Time, o.objects)}
	lat := make([]time.Duration, o.objects)
	errs := make([]error, o.objects)
	var failed atomic.Int64
	idx := make(chan int)
	var wg sync.WaitGroup
	cpu0 := processCPU()
	busy0, iow0, hostErr := benchutil.HostCPU()
	res.start = time.Now()
	for range o.workers {
		wg.Go(func() {
			for i := range idx {
				cm := &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: namePrefix + strconv.Itoa(i), Labels: map[string]string{runLabel: runID}},
					Data:       map[string]string{"payload": payload},
				}
				t := time.Now()
				_, err := cms.Create(ctx, cm, metav1.CreateOptions{})
				end := time.Now()
				if err != nil {
					errs[i] = err
					failed.Add(1)
					continue
				}
				lat[i], res.returned[i] = end.Sub(t), end
			}
		})
	}
feed:
	for i := range o.objects {
		select {
		case idx <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(idx)
	wg.Wait()
	res.elapsed = time.Since(res.start)
	res.clientCPU = processCPU() - cpu0
	if busy1, iow1, err := benchutil.HostCPU(); err == nil && hostErr == nil {
		res.hostBusy, res.hostIOWait = busy1-busy0, iow1-iow0
	}
	for i := range o.objects {
		switch {
		case errs[i] != nil:
			res.failed++
			if res.firstErr == nil {
				res.firstErr = errs[i]
			}
		case !res.returned[i].IsZero():
			res.succeeded++
			res.latencies = append(res.latencies, lat[i])
		}
	}
	return res
}

// processCPU is the user+system CPU time this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// printServerCreateStats prints the server's own view of the create phase from
// its /metrics: the latency histogram of configmap creates and its CPU time,
// which it returns (-1 when unknown).
func printServerCreateStats(ctx context.Context, cs *kubernetes.Clientset, before scrape, cr createResult, out io.Writer) time.Duration {
	after, err := fetchMetrics(ctx, cs.CoreV1().RESTClient())
	if err != nil {
		fmt.Fprintf(out, "note: %v\n", err)
		return -1
	}
	sel := map[string]string{"verb": "create", "resource": "configmaps"}
	h := histogramDelta(before.histogram("apiserver_request_duration_seconds", sel), after.histogram("apiserver_request_duration_seconds", sel))
	if len(h) > 0 {
		ms := func(q float64) string {
			v := quantile(q, h)
			if math.IsNaN(v) {
				return "n/a"
			}
			return benchutil.FormatDuration(time.Duration(v * float64(time.Second)))
		}
		fmt.Fprintf(out, "server:    create latency from its histogram (interpolated): p50 ~%s p90 ~%s p99 ~%s over %.0f requests\n",
			ms(0.5), ms(0.9), ms(0.99), h[len(h)-1].count)
	}
	c0, ok0 := before.sum("process_cpu_seconds_total", nil)
	c1, ok1 := after.sum("process_cpu_seconds_total", nil)
	if !ok0 || !ok1 {
		return -1
	}
	// The scrapes bracket the creates closely; a few ms of serving them are included.
	return time.Duration((c1 - c0) * float64(time.Second))
}

// printHostCPU breaks down the host's CPU time during the creates: the server's
// (serverCPU, -1 if unknown), the bench's own and everything else, which on a
// shared machine is the noise in the measurement.
func printHostCPU(cr createResult, serverCPU time.Duration, load float64, out io.Writer) {
	cores := func(d time.Duration) float64 { return d.Seconds() / cr.elapsed.Seconds() }
	line := fmt.Sprintf("cpu:       during creates, cores busy: bench %.2f", cores(cr.clientCPU))
	if serverCPU >= 0 {
		line += fmt.Sprintf(", server %.2f", cores(serverCPU))
	}
	if cr.hostBusy > 0 {
		line += fmt.Sprintf(", host total %.2f of %d", cores(cr.hostBusy), runtime.NumCPU())
		if serverCPU >= 0 {
			line += fmt.Sprintf(" (other processes %.2f)", max(0, cores(cr.hostBusy-serverCPU-cr.clientCPU)))
		}
		line += fmt.Sprintf(", iowait %.2f", cores(cr.hostIOWait))
	}
	fmt.Fprintf(out, "%s; load average before %.2f\n", line, load)
}

// listPaged lists all ConfigMaps of the run in pages of 500 and prints the time.
func listPaged(ctx context.Context, cms typedcorev1.ConfigMapInterface, selector string, out io.Writer) error {
	start := time.Now()
	pages, count, cont := 0, 0, ""
	for {
		l, err := cms.List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: 500, Continue: cont})
		if err != nil {
			return fmt.Errorf("list page %d: %w", pages+1, err)
		}
		pages++
		count += len(l.Items)
		if cont = l.Continue; cont == "" {
			break
		}
	}
	d := time.Since(start)
	fmt.Fprintf(out, "list:      %d objects in %d pages of 500 in %s = %.0f objects/s\n", count, pages, benchutil.FormatDuration(d), float64(count)/d.Seconds())
	return nil
}

// watcher follows the run's ConfigMaps and records when each ADDED event arrived.
type watcher struct {
	cms      typedcorev1.ConfigMapInterface
	selector string
	// recvAt[i] is when the ADDED event of object i arrived.
	recvAt     []time.Time
	received   int
	last       time.Time
	unexpected int
	rewatches  int
	err        error
}

// run consumes wi until it saw as many ADDED events as expected (n until a value
// arrives on expect), ctx ends or the watch fails; it closes done when it returns.
// A watch the server closes is reopened from the last resourceVersion seen.
func (w *watcher) run(ctx context.Context, wi watch.Interface, rv string, expect <-chan int, done chan<- struct{}) {
	defer close(done)
	defer func() { wi.Stop() }()
	expected := len(w.recvAt)
	for w.received < expected {
		select {
		case <-ctx.Done():
			w.err = ctx.Err()
			return
		case e := <-expect:
			expected, expect = e, nil
		case ev, ok := <-wi.ResultChan():
			now := time.Now()
			if !ok {
				if w.rewatches++; w.rewatches > 10 {
					w.err = errors.New("the server closed the watch more than 10 times")
					return
				}
				wi.Stop()
				nw, err := w.cms.Watch(ctx, metav1.ListOptions{LabelSelector: w.selector, ResourceVersion: rv})
				if err != nil {
					w.err = fmt.Errorf("reopen watch at resourceVersion %s: %w", rv, err)
					wi = watch.NewEmptyWatch()
					return
				}
				wi = nw
				continue
			}
			switch ev.Type {
			case watch.Error:
				w.err = fmt.Errorf("watch error event: %w", apierrors.FromObject(ev.Object))
				return
			case watch.Bookmark:
				if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
					rv = cm.ResourceVersion
				}
				continue
			}
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				w.unexpected++
				continue
			}
			rv = cm.ResourceVersion
			i, err := strconv.Atoi(strings.TrimPrefix(cm.Name, namePrefix))
			if ev.Type != watch.Added || err != nil || i < 0 || i >= len(w.recvAt) || !w.recvAt[i].IsZero() {
				w.unexpected++
				continue
			}
			w.recvAt[i], w.last = now, now
			w.received++
		}
	}
}

// printWatch prints how fast the watch delivered the creates.
func printWatch(w *watcher, cr createResult, out io.Writer) {
	var delays []time.Duration
	early := 0
	for i, r := range w.recvAt {
		if r.IsZero() || cr.returned[i].IsZero() {
			continue
		}
		d := r.Sub(cr.returned[i])
		if d < 0 {
			early++
		}
		delays = append(delays, d)
	}
	sorted := benchutil.Sorted(delays)
	line := fmt.Sprintf("watch:     %d/%d ADDED, last %s after first create (creates took %s)  event-after-create-returned p50 %s p99 %s max %s",
		w.received, cr.succeeded, benchutil.FormatDuration(w.last.Sub(cr.start)), benchutil.FormatDuration(cr.elapsed),
		benchutil.FormatDuration(benchutil.Percentile(sorted, 50)), benchutil.FormatDuration(benchutil.Percentile(sorted, 99)),
		benchutil.FormatDuration(benchutil.Percentile(sorted, 100)))
	if early > 0 {
		line += fmt.Sprintf("  (%d events arrived before their create returned)", early)
	}
	fmt.Fprintln(out, line)
	if w.err != nil && w.received < cr.succeeded {
		fmt.Fprintf(out, "watch:     stopped early: %v\n", w.err)
	}
	if w.unexpected > 0 || w.rewatches > 0 {
		fmt.Fprintf(out, "watch:     %d unexpected events, %d re-watches\n", w.unexpected, w.rewatches)
	}
}

// cleanup deletes the run's ConfigMaps with one DeleteCollection. A namespace the
// bench created is left in place: without a namespace controller its deletion
// would never finish.
func cleanup(ctx context.Context, cms typedcorev1.ConfigMapInterface, selector, ns string, ownNamespace bool, out io.Writer) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	start := time.Now()
	if err := cms.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: selector}); err != nil {
		fmt.Fprintf(out, "cleanup:   deletecollection failed: %v\n", err)
		return
	}
	d := time.Since(start)
	left := "?"
	if l, err := cms.List(ctx, metav1.ListOptions{LabelSelector: selector}); err == nil {
		left = strconv.Itoa(len(l.Items))
	}
	note := ""
	if ownNamespace {
		note = fmt.Sprintf("; namespace %s left in place", ns)
	}
	fmt.Fprintf(out, "cleanup:   deletecollection in %s, %s left%s\n", benchutil.FormatDuration(d), left, note)
}

// serviceAccountConfigMaps makes the ServiceAccount bench in ns, binds it to the edit
// ClusterRole there, and returns the ConfigMaps client of a clientset that authenticates
// with a token of it (none of the kubeconfig's credentials), once RBAC lets it list.
func serviceAccountConfigMaps(ctx context.Context, admin kubernetes.Interface, base *rest.Config, ns string, wire *wireInfo) (typedcorev1.ConfigMapInterface, error) {
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create service account: %w", err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench-edit"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "bench", Namespace: ns}}}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("bind the service account to edit: %w", err)
	}
	ttl := int64(3600)
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "bench", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("request a token: %w", err)
	}
	cfg := rest.AnonymousClientConfig(base)
	cfg.BearerToken = tr.Status.Token
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return recordingTransport{rt, wire} })
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("service account clientset: %w", err)
	}
	cms := cs.CoreV1().ConfigMaps(ns)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := cms.List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return cms, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the service account cannot list ConfigMaps (is edit aggregated?): %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
