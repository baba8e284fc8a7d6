// Command netprog measures kubette's network programming latency: the time
// from the pod status write that makes a pod Ready (or not Ready) to the
// moment traffic to its Service's ClusterIP reaches it (or is refused), as
// upstream's NetworkProgrammingLatency SLI ("from when service spec or list
// of its Ready pods change to when it is reflected in load balancing
// mechanism"), observed with real connections instead of the proxy's own
// clock.
//
// Everything on the path is the real thing, in this process: the API server
// with embedded etcd (internal/controlplane, in a temporary directory), the
// EndpointSlice controller (internal/controller/endpointslice) and the
// service proxy (internal/proxy) in its iptables or nftables mode, applying
// its rules inside a throwaway network namespace. The namespace holds the
// pod's address on lo with a TCP listener; a prober thread inside it
// connects to the ClusterIP every --interval. The host's own tables are never
// touched; namespaces and the temporary directory are removed at the end and
// on SIGINT/SIGTERM. It needs root, iproute2, iptables and (for the
// nftables mode) nft. It prints plain lines meant to be pasted into a
// report.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubette/kubette/bench/internal/benchutil"
	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/endpointslice"
	"github.com/kubette/kubette/internal/controlplane"
	"github.com/kubette/kubette/internal/proxy"
)

const (
	namespace  = "default"
	targetName = "netprog-target"
	nodeName   = "netprog-node"
	// managedBy marks the background EndpointSlices the bench writes itself:
	// the EndpointSlice controller leaves slices of other managers alone,
	// the proxy reads every slice with a kubernetes.io/service-name label.
	managedBy  = "netprog-bench.kubette.io"
	targetPort = 8080
	protobuf   = "application/vnd.kubernetes.protobuf"
)

// The address ranges, all inside the bench's namespaces and API server:
// away from kubette's defaults (10.96.0.0/12, 10.244.0.0/16).
var (
	serviceCIDR = netip.MustParsePrefix("10.160.0.0/16")
	clusterCIDR = netip.MustParsePrefix("10.128.0.0/12")
	podIP       = netip.MustParseAddr("10.128.0.10")
	// background endpoints are 10.129.0.0 + k.
	backgroundBase = netip.MustParseAddr("10.129.0.0")
)

type config struct {
	sizes         []int
	modes         []string
	runs          int
	endpoints     int
	interval      time.Duration
	settle        time.Duration
	minSyncPeriod time.Duration
	timeout       time.Duration
	workers       int
}

const usage = `netprog measures the network programming latency of kubette's service proxy:
from the pod status write that sets Ready=True to the first TCP connect to the
Service's ClusterIP that reaches the pod ("ready -> live"), and from the write
that sets Ready=False to the first connect that is refused ("not ready ->
refused").

In one process: the API server (embedded etcd in a temporary directory), the
EndpointSlice controller and the service proxy, per mode in a fresh network
namespace (the host's iptables and nftables rules are never touched). The pod
is a Pod object bound to a Node object, its status written as a kubelet does;
its address sits on the namespace's lo with a TCP listener, and a prober
thread inside the namespace connects to ClusterIP:80 every --interval.

Background: --sizes other Services without selector, each with an
EndpointSlice of --endpoints ready endpoints written by the bench, so the
proxy's syncs carry a ruleset of that size. For every size and mode it prints
median, p90 and max over --runs, and where the time went (medians, from the
status write): the write's response, the EndpointSlice seen by a watch, the
proxy's sync start and end, the first connect.

Needs root, ip (iproute2), iptables-restore/-save and, for nftables, nft.

Flags:
`

func main() {
	var cfg config
	sizes := flag.String("sizes", "0,1000,10000", "comma-separated counts of background Services (created once, growing)")
	modes := flag.String("modes", "iptables,nftables", "comma-separated proxy modes to measure: iptables, nftables")
	flag.IntVar(&cfg.runs, "runs", 10, "Ready=True/Ready=False pairs measured per size and mode")
	flag.IntVar(&cfg.endpoints, "endpoints", 10, "ready endpoints per background Service")
	flag.DurationVar(&cfg.interval, "interval", time.Millisecond, "pause between two connects of the prober")
	flag.DurationVar(&cfg.settle, "settle", 500*time.Millisecond, "pause after each change is live, before the next (longer than the proxy's min sync period, so no change waits for the previous sync's period)")
	flag.DurationVar(&cfg.minSyncPeriod, "min-sync-period", 0, "the proxy's MinSyncPeriod (0: its default, proxy.DefaultMinSyncPeriod)")
	flag.DurationVar(&cfg.timeout, "timeout", 2*time.Minute, "how long one change may take before the bench gives up")
	flag.IntVar(&cfg.workers, "create-workers", 16, "parallel creates of the background objects")
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), usage)
		flag.PrintDefaults()
	}
	flag.Parse()
	var err error
	if cfg.sizes, err = parseSizes(*sizes); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for _, m := range strings.Split(*modes, ",") {
		m = strings.TrimSpace(m)
		if m != proxy.ModeIPTables && m != proxy.ModeNFTables {
			fmt.Fprintf(os.Stderr, "bad --modes entry %q: iptables or nftables\n", m)
			os.Exit(2)
		}
		cfg.modes = append(cfg.modes, m)
	}
	if cfg.runs < 1 || cfg.endpoints < 1 || cfg.workers < 1 || cfg.interval <= 0 {
		fmt.Fprintln(os.Stderr, "--runs, --endpoints, --create-workers and --interval must be positive")
		os.Exit(2)
	}
	if err := preflight(cfg.modes); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal ends the process at once
	}()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		if ctx.Err() != nil {
			os.Exit(130)
		}
		os.Exit(1)
	}
}

func parseSizes(s string) ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || n > 60000 {
			return nil, fmt.Errorf("bad --sizes entry %q: a count from 0 to 60000", f)
		}
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	return slices.Compact(sizes), nil
}

// preflight checks what the bench needs before it starts anything.
func preflight(modes []string) error {
	if os.Geteuid() != 0 {
		return errors.New("netprog needs root (network namespaces, iptables, nft)")
	}
	tools := []string{"ip", "iptables-restore", "iptables-save", "iptables"}
	if slices.Contains(modes, proxy.ModeNFTables) {
		tools = append(tools, "nft")
	}
	for _, t := range tools {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("netprog needs %s: %w", t, err)
		}
	}
	return nil
}

// env is the running control plane and what the bench keeps of it.
type env struct {
	cfg       config
	cp        *controlplane.ControlPlane
	client    kubernetes.Interface
	clusterIP netip.Addr
	pod       *corev1.Pod
	slices    *timeline[sliceEvent]
	created   int // background Services so far
	quiet     *slog.Logger
}

// sliceEvent is the target's EndpointSlice as the bench's watch saw it.
type sliceEvent struct {
	at    time.Time
	ready bool // the pod's endpoint is there and ready
}

func run(ctx context.Context, cfg config) error {
	dir, err := os.MkdirTemp("", "netprog-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	// The control plane outlives the components: they stop first.
	cpCtx, cpCancel := context.WithCancel(context.Background())
	defer cpCancel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	t0 := time.Now()
	cp, err := controlplane.Start(cpCtx, controlplane.Config{
		DataDir: filepath.Join(dir, "cp"), Listener: l, UnsafeNoFsync: true, Logger: quiet,
		ServiceClusterIPRange: serviceCIDR.String(),
	})
	if err != nil {
		return fmt.Errorf("start control plane: %w", err)
	}
	defer func() { cpCancel(); _ = cp.Wait() }()
	compCtx, compCancel := context.WithCancel(ctx)
	var components sync.WaitGroup
	defer components.Wait()
	defer compCancel()

	restCfg, err := clientcmd.BuildConfigFromFlags("", cp.Kubeconfig)
	if err != nil {
		return err
	}
	restCfg.QPS, restCfg.Burst = 5000, 10000
	restCfg.ContentType, restCfg.AcceptContentTypes = protobuf, protobuf+",application/json"
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	e := &env{cfg: cfg, cp: cp, client: client, quiet: quiet, slices: newTimeline[sliceEvent]("EndpointSlice event")}

	// The EndpointSlice controller, wired as the controller manager does.
	ccfg, err := cp.ComponentConfig("controller-manager", "system:kube-controller-manager")
	if err != nil {
		return fmt.Errorf("controller credentials: %w", err)
	}
	deps, starter, err := controller.NewDeps(ccfg, "netprog-bench")
	if err != nil {
		return err
	}
	deps.Logger = quiet
	esc, err := endpointslice.New(deps)
	if err != nil {
		return err
	}
	starter.Start(compCtx)
	components.Go(func() { esc.Run(compCtx, 5) })

	if err := e.createTarget(ctx); err != nil {
		return err
	}
	if err := e.watchTargetSlice(compCtx, &components); err != nil {
		return err
	}
	if _, err := e.slices.wait(ctx, cfg.timeout, func(s sliceEvent) bool { return !s.ready }); err != nil {
		return fmt.Errorf("the controller's slice of the not-ready pod: %w", err)
	}
	fmt.Printf("netprog: control plane up in %v; target %s/%s at %s:80 -> pod %s:%d on node %s; %d runs per size and mode\n",
		time.Since(t0).Round(time.Millisecond), namespace, targetName, e.clusterIP, podIP, targetPort, nodeName, cfg.runs)

	for _, n := range cfg.sizes {
		if n > e.created {
			if err := e.createBackground(ctx, n); err != nil {
				return err
			}
		}
		for _, mode := range cfg.modes {
			if err := e.measure(ctx, n, mode); err != nil {
				return fmt.Errorf("%s, %d services: %w", mode, n, err)
			}
		}
	}
	return nil
}

// createTarget creates the node, the target Service (selector, ClusterIP
// allocated) and its pod, bound and running but not Ready.
func (e *env) createTarget(ctx context.Context) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
	if _, err := e.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create node: %w", err)
	}
	labels := map[string]string{"app": targetName}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: targetName, Namespace: namespace},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{
			Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(targetPort),
		}}},
	}
	svc, err := e.client.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create the target Service: %w", err)
	}
	if e.clusterIP, err = netip.ParseAddr(svc.Spec.ClusterIP); err != nil || !serviceCIDR.Contains(e.clusterIP) {
		return fmt.Errorf("the target Service got ClusterIP %q, want one in %s", svc.Spec.ClusterIP, serviceCIDR)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: targetName, Namespace: namespace, Labels: labels},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{
			Name: "app", Image: "netprog.invalid/app:1", Ports: []corev1.ContainerPort{{ContainerPort: targetPort}},
		}}},
	}
	if pod, err = e.client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the target pod: %w", err)
	}
	now := metav1.Now()
	qos := pod.Status.QOSClass // set at create, immutable
	pod.Status = corev1.PodStatus{
		QOSClass: qos, Phase: corev1.PodRunning, HostIP: "192.0.2.10", HostIPs: []corev1.HostIP{{IP: "192.0.2.10"}},
		PodIP: podIP.String(), PodIPs: []corev1.PodIP{{IP: podIP.String()}}, StartTime: &now,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now},
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", Image: "netprog.invalid/app:1", ImageID: "netprog.invalid/app@sha256:0", ContainerID: "kubette://netprog",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}, Started: ptrTo(true),
		}},
	}
	if e.pod, err = e.client.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("write the target pod's status: %w", err)
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }

// setReady writes the pod's readiness as a kubelet does (Ready and
// ContainersReady conditions with their transition time, the container's
// ready flag) and keeps the written pod.
func (e *env) setReady(ctx context.Context, ready bool, at time.Time) error {
	pod := e.pod.DeepCopy()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	for i, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
			pod.Status.Conditions[i].Status = status
			pod.Status.Conditions[i].LastTransitionTime = metav1.NewTime(at)
		}
	}
	pod.Status.ContainerStatuses[0].Ready = ready
	written, err := e.client.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("write the pod's status (ready %v): %w", ready, err)
	}
	e.pod = written
	return nil
}

// watchTargetSlice records every change of the target's EndpointSlices with
// the time the bench's informer delivered it.
func (e *env) watchTargetSlice(ctx context.Context, wg *sync.WaitGroup) error {
	f := informers.NewSharedInformerFactoryWithOptions(e.client, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = discoveryv1.LabelServiceName + "=" + targetName
		}))
	inf := f.Discovery().V1().EndpointSlices().Informer()
	record := func(obj any) {
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			return
		}
		ev := sliceEvent{at: time.Now()}
		for _, ep := range s.Endpoints {
			if slices.Contains(ep.Addresses, podIP.String()) && ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				ev.ready = true
			}
		}
		e.slices.add(ev)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: record, UpdateFunc: func(_, cur any) { record(cur) },
	}); err != nil {
		return fmt.Errorf("watch the target's slices: %w", err)
	}
	f.Start(ctx.Done())
	wg.Go(func() { <-ctx.Done(); f.Shutdown() })
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return ctx.Err()
	}
	return nil
}

// createBackground creates Services (without selector) and their
// EndpointSlices until there are n.
func (e *env) createBackground(ctx context.Context, n int) error {
	t0 := time.Now()
	next := make(chan int)
	errc := make(chan error, e.cfg.workers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range e.cfg.workers {
		wg.Go(func() {
			for i := range next {
				if err := e.createOne(ctx, i); err != nil {
					errc <- err
					cancel()
					return
				}
			}
		})
	}
feed:
	for i := e.created; i < n; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	fmt.Printf("background: %d -> %d Services x %d endpoints created in %v\n", e.created, n, e.cfg.endpoints, time.Since(t0).Round(time.Millisecond))
	e.created = n
	return nil
}

func (e *env) createOne(ctx context.Context, i int) error {
	name := fmt.Sprintf("bg-%05d", i)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(targetPort),
		}}},
	}
	if _, err := e.client.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create Service %s: %w", name, err)
	}
	portName, port, proto := "http", int32(targetPort), corev1.ProtocolTCP
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: managedBy,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}
	base := backgroundBase.As4()
	for j := range e.cfg.endpoints {
		var a4 [4]byte
		binary.BigEndian.PutUint32(a4[:], binary.BigEndian.Uint32(base[:])+uint32(i*e.cfg.endpoints+j))
		a := netip.AddrFrom4(a4)
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{a.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptrTo(true), Serving: ptrTo(true), Terminating: ptrTo(false)},
		})
	}
	if _, err := e.client.DiscoveryV1().EndpointSlices(namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create EndpointSlice %s: %w", name, err)
	}
	return nil
}

// sample is one change: when each step was seen, from the status write.
type sample struct {
	written, sliceSeen, syncStart, syncEnd, traffic time.Duration
	syncTook                                        time.Duration
	probes, others                                  int
}

// measure runs a proxy in mode in a fresh namespace over the current
// background and measures cfg.runs pairs of changes.
func (e *env) measure(ctx context.Context, n int, mode string) error {
	ns, err := newNetns(podIP, serviceCIDR)
	if err != nil {
		return err
	}
	defer ns.close()
	ctx, cancel := context.WithCancel(ctx)
	var running sync.WaitGroup
	defer running.Wait()
	defer cancel()
	if err := ns.listen(ctx, netip.AddrPortFrom(podIP, targetPort)); err != nil {
		return err
	}
	pr, err := ns.startProber(ctx, netip.AddrPortFrom(e.clusterIP, 80), e.cfg.interval)
	if err != nil {
		return err
	}

	pcfg, err := e.cp.ComponentConfig("proxy", "system:kube-proxy")
	if err != nil {
		return fmt.Errorf("proxy credentials: %w", err)
	}
	pcfg = rest.CopyConfig(pcfg)
	pcfg.ContentType, pcfg.AcceptContentTypes = protobuf, protobuf+",application/json"
	pclient, err := kubernetes.NewForConfig(pcfg)
	if err != nil {
		return err
	}
	syncs := newTimeline[syncRecord]("proxy sync")
	p, err := proxy.New(proxy.Options{
		Client: pclient, NodeName: nodeName, ServiceCIDR: serviceCIDR.String(), ClusterCIDR: clusterCIDR.String(),
		Mode: mode, MinSyncPeriod: e.cfg.minSyncPeriod, Iptables: proxy.ExecRunner{Prefix: ns.prefix()},
		Logger: slog.New(syncLog{rec: syncs, next: slog.NewTextHandler(os.Stderr, nil)}),
	})
	if err != nil {
		return err
	}
	load0, _ := benchutil.LoadAverage()
	started := time.Now()
	running.Go(func() {
		if err := p.Run(ctx); err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "proxy: %v\n", err)
		}
	})
	first, err := syncs.wait(ctx, 30*time.Minute, func(s syncRecord) bool { return s.full })
	if err != nil {
		return fmt.Errorf("the proxy's first full sync: %w", err)
	}
	fmt.Printf("%-8s %5d services (+1 target), load %.1f: first full sync %v after the start (the sync itself %v)\n",
		mode, n, load0, first.end.Sub(started).Round(time.Millisecond), first.took.Round(time.Millisecond))
	// The pod is not ready: its Service's rules refuse.
	wait, err := pr.probe(ctx, false, e.cfg.timeout)
	if err != nil {
		return err
	}
	if _, err := wait(); err != nil {
		return fmt.Errorf("before the first change: %w", err)
	}
	time.Sleep(e.cfg.settle)

	st0 := p.Stats()
	cpu0 := cpuNow()
	var live, gone []sample
	for range e.cfg.runs {
		for _, ready := range []bool{true, false} {
			s, err := e.change(ctx, pr, syncs, ready)
			if err != nil {
				return err
			}
			if ready {
				live = append(live, s)
			} else {
				gone = append(gone, s)
			}
			select {
			case <-time.After(e.cfg.settle):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	cpu := cpuNow().sub(cpu0)
	st := p.Stats()
	load1, _ := benchutil.LoadAverage()
	report("ready -> live", live)
	report("not ready -> refused", gone)
	changes := time.Duration(2 * e.cfg.runs)
	fmt.Printf("  CPU per change: %v in this process (API server, etcd, controller, proxy, prober), %v in the iptables/nft tools; proxy: %d syncs, %d applied, %d failed; load %.1f\n",
		(cpu.self / changes).Round(100*time.Microsecond), (cpu.children / changes).Round(100*time.Microsecond),
		st.Syncs-st0.Syncs, st.Restores-st0.Restores, st.Failures-st0.Failures, load1)
	if st.Failures != st0.Failures {
		return fmt.Errorf("the proxy failed %d syncs during the runs (last: %v)", st.Failures-st0.Failures, st.LastError)
	}
	return nil
}

// change writes the pod's readiness and waits until the prober sees the
// rules follow; it returns when each step was seen.
func (e *env) change(ctx context.Context, pr *prober, syncs *timeline[syncRecord], ready bool) (sample, error) {
	wait, err := pr.probe(ctx, ready, e.cfg.timeout)
	if err != nil {
		return sample{}, err
	}
	t0 := time.Now()
	if err := e.setReady(ctx, ready, t0); err != nil {
		return sample{}, err
	}
	written := time.Since(t0)
	res, err := wait()
	if err != nil {
		return sample{}, fmt.Errorf("ready %v: %w", ready, err)
	}
	if res.at.Before(t0) {
		return sample{}, fmt.Errorf("ready %v: the traffic changed before the status write", ready)
	}
	sl, err := e.slices.wait(ctx, e.cfg.timeout, func(s sliceEvent) bool { return s.at.After(t0) && s.ready == ready })
	if err != nil {
		return sample{}, fmt.Errorf("ready %v: the EndpointSlice: %w", ready, err)
	}
	// The first sync that started after the write: nothing else changes
	// Services or slices meanwhile.
	sy, err := syncs.wait(ctx, e.cfg.timeout, func(s syncRecord) bool { return s.start().After(t0) })
	if err != nil {
		return sample{}, fmt.Errorf("ready %v: the proxy's sync: %w", ready, err)
	}
	return sample{
		written: written, sliceSeen: sl.at.Sub(t0), syncStart: sy.start().Sub(t0), syncEnd: sy.end.Sub(t0),
		traffic: res.at.Sub(t0), syncTook: sy.took, probes: res.probes, others: res.others,
	}, nil
}

func report(what string, samples []sample) {
	pick := func(f func(sample) time.Duration) []time.Duration {
		var d []time.Duration
		for _, s := range samples {
			d = append(d, f(s))
		}
		return benchutil.Sorted(d)
	}
	r := func(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
	med := func(f func(sample) time.Duration) time.Duration { return r(benchutil.Percentile(pick(f), 50)) }
	total := pick(func(s sample) time.Duration { return s.traffic })
	others := 0
	for _, s := range samples {
		others += s.others
	}
	fmt.Printf("  %-21s median %v  p90 %v  max %v  (%d changes)\n", what+":",
		r(benchutil.Percentile(total, 50)), r(benchutil.Percentile(total, 90)), r(total[len(total)-1]), len(samples))
	fmt.Printf("    medians from the status write: response %v, slice watched %v, proxy sync start %v, sync logged done %v (the sync itself %v), traffic %v",
		med(func(s sample) time.Duration { return s.written }), med(func(s sample) time.Duration { return s.sliceSeen }),
		med(func(s sample) time.Duration { return s.syncStart }), med(func(s sample) time.Duration { return s.syncEnd }),
		med(func(s sample) time.Duration { return s.syncTook }), med(func(s sample) time.Duration { return s.traffic }))
	if others > 0 {
		fmt.Printf("; %d probes neither connected nor refused", others)
	}
	fmt.Println()
}

// cpuTimes are the CPU time (user + system) of this process and of its
// finished children (the iptables and nft tools).
type cpuTimes struct{ self, children time.Duration }

func cpuNow() cpuTimes {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	sum := func(r syscall.Rusage) time.Duration { return time.Duration(r.Utime.Nano() + r.Stime.Nano()) }
	return cpuTimes{sum(self), sum(children)}
}

func (c cpuTimes) sub(o cpuTimes) cpuTimes { return cpuTimes{c.self - o.self, c.children - o.children} }
