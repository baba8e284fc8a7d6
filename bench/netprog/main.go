// Command netprog measures kubette's network programming latency: the time
// from the pod status write that makes a pod Ready (or not Ready) to the
// moment traffic to its Service's ClusterIP reaches it (or no longer does),
// as upstream's NetworkProgrammingLatency SLI ("from when service spec or
// list of its Ready pods change to when it is reflected in load balancing
// mechanism"), observed with real connections instead of the proxy's own
// clock.
//
// Everything on the path is the real thing, in this process: the API server
// with embedded etcd (internal/controlplane, in a temporary directory), the
// EndpointSlice controller (internal/controller/endpointslice) and the
// service proxy (internal/proxy) in its iptables or nftables mode, applying
// its rules inside a throwaway network namespace. The namespace holds the
// pods' addresses on lo with TCP listeners; a prober thread inside it
// connects to the ClusterIPs every --interval. Two changes are measured: a
// Service's only pod becoming ready and unready (REJECT <-> DNAT), and a
// second pod beside a ready one. The host's own tables are never touched;
// namespaces and the temporary directory are removed at the end and on
// SIGINT/SIGTERM. It needs root, iproute2, iptables and (for the nftables
// mode) nft. It prints plain lines meant to be pasted into a report.
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
	"runtime/pprof"
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
	"github.com/kubette/kubette/internal/apiserver/admission/serviceaccount"
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
	firstIP     = netip.MustParseAddr("10.128.0.10")
	peerIP      = netip.MustParseAddr("10.128.0.11")
	moreIP      = netip.MustParseAddr("10.128.0.12")
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
	cases         []string
	profile       string // CPU profile prefix, or ""
}

// The targets measured (--cases).
const (
	// caseFirst: a Service's only pod becomes ready (its rules change from
	// REJECT to DNAT) and unready again (back to REJECT).
	caseFirst = "first"
	// caseMore: a Service with a ready pod gets a second ready endpoint and
	// loses it again.
	caseMore = "more"
)

const usage = `netprog measures the network programming latency of kubette's service proxy:
from the pod status write that changes a pod's readiness to the first TCP
connect to its Service's ClusterIP that shows the change. Two cases (--cases):

  first  the Service's only pod: Ready=True -> the first connect that reaches
         it; Ready=False -> the first connect that is refused (no ready
         endpoint: the proxy rejects)
  more   a second pod beside a ready one: Ready=True -> the first connect
         answered by it; Ready=False -> the first of 50 connects in a row
         answered by the other pod

In one process: the API server (embedded etcd in a temporary directory), the
EndpointSlice controller and the service proxy, per mode in a fresh network
namespace (the host's iptables and nftables rules are never touched). The pods
are Pod objects bound to a Node object, their status written as a kubelet
does; their addresses sit on the namespace's lo with TCP listeners, and a
prober thread inside the namespace connects to ClusterIP:80 every --interval.

Background: --sizes other Services without selector, each with an
EndpointSlice of --endpoints ready endpoints written by the bench, so the
proxy's syncs carry a ruleset of that size. For every size, mode and case it
prints median, p90 and max over --runs, and where the time went (medians,
from the status write): the write's response, the EndpointSlice seen by a
watch, the proxy's sync start and the proxy's "synced" log line, the traffic.

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
	flag.StringVar(&cfg.profile, "cpu-profile", "", "write this process's CPU profile over each size, mode and case's changes to PREFIX-MODE-SIZE-CASE.pprof")
	cases := flag.String("cases", "first,more", "comma-separated changes to measure: first (a Service's only endpoint comes and goes: REJECT <-> DNAT), more (a second endpoint beside a ready one comes and goes)")
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
	for _, c := range strings.Split(*cases, ",") {
		c = strings.TrimSpace(c)
		if c != caseFirst && c != caseMore || slices.Contains(cfg.cases, c) {
			fmt.Fprintf(os.Stderr, "bad --cases entry %q: first or more, each once\n", c)
			os.Exit(2)
		}
		cfg.cases = append(cfg.cases, c)
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
	cfg     config
	cp      *controlplane.ControlPlane
	client  kubernetes.Interface
	cases   []*target
	slices  *timeline[sliceEvent]
	created int // background Services so far
}

// target is a Service whose endpoints change with one pod's readiness.
type target struct {
	name      string // the Service's and the changing pod's name
	clusterIP netip.Addr
	ip        netip.Addr  // the changing pod's address
	pod       *corev1.Pod // the changing pod as last written
	// peer is the address of a second pod of the Service that stays ready
	// (the "more" case); invalid for the "first" case.
	peer netip.Addr
}

// sliceEvent is a target's EndpointSlice as the bench's watch saw it.
type sliceEvent struct {
	at      time.Time
	service string
	ready   bool // the changing pod's endpoint is there and ready
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
		// No controller manager: no default ServiceAccount for the pods.
		DisableAdmissionPlugins: []string{serviceaccount.Name},
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
	e := &env{cfg: cfg, cp: cp, client: client, slices: newTimeline[sliceEvent]("EndpointSlice event")}

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

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
	if _, err := e.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create node: %w", err)
	}
	for _, c := range cfg.cases {
		t := &target{name: "netprog-first", ip: firstIP}
		if c == caseMore {
			t = &target{name: "netprog-more", ip: moreIP, peer: peerIP}
		}
		if err := e.createTarget(ctx, t); err != nil {
			return err
		}
		e.cases = append(e.cases, t)
	}
	if err := e.watchTargetSlices(compCtx, &components); err != nil {
		return err
	}
	for _, t := range e.cases {
		if _, err := e.slices.wait(ctx, cfg.timeout, func(s sliceEvent) bool { return s.service == t.name && !s.ready }); err != nil {
			return fmt.Errorf("the controller's slice of %s: %w", t.name, err)
		}
		fmt.Printf("netprog: %s at %s:80 -> pod %s:%d", t.name, t.clusterIP, t.ip, targetPort)
		if t.peer.IsValid() {
			fmt.Printf(" beside the ready pod %s:%d", t.peer, targetPort)
		}
		fmt.Println()
	}
	fmt.Printf("netprog: control plane and targets up in %v; %d runs per size, mode and case\n", time.Since(t0).Round(time.Millisecond), cfg.runs)

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

// createTarget creates t's Service (selector, ClusterIP allocated), its
// changing pod (bound, running, not ready) and its ready peer if it has one.
func (e *env) createTarget(ctx context.Context, t *target) error {
	labels := map[string]string{"app": t.name}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: t.name, Namespace: namespace},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{
			Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(targetPort),
		}}},
	}
	svc, err := e.client.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create Service %s: %w", t.name, err)
	}
	if t.clusterIP, err = netip.ParseAddr(svc.Spec.ClusterIP); err != nil || !serviceCIDR.Contains(t.clusterIP) {
		return fmt.Errorf("Service %s got ClusterIP %q, want one in %s", t.name, svc.Spec.ClusterIP, serviceCIDR)
	}
	if t.peer.IsValid() {
		if _, err := e.createPod(ctx, t.name+"-peer", labels, t.peer, true); err != nil {
			return err
		}
	}
	t.pod, err = e.createPod(ctx, t.name, labels, t.ip, false)
	return err
}

// createPod creates a pod bound to the node and writes its status as a
// kubelet does once its container runs: running, with ip, ready or not.
func (e *env) createPod(ctx context.Context, name string, labels map[string]string, ip netip.Addr, ready bool) (*corev1.Pod, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{
			Name: "app", Image: "netprog.invalid/app:1", Ports: []corev1.ContainerPort{{ContainerPort: targetPort}},
		}}},
	}
	pod, err := e.client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create pod %s: %w", name, err)
	}
	now := metav1.Now()
	readiness := corev1.ConditionFalse
	if ready {
		readiness = corev1.ConditionTrue
	}
	qos := pod.Status.QOSClass // set at create, immutable
	pod.Status = corev1.PodStatus{
		QOSClass: qos, Phase: corev1.PodRunning, HostIP: "192.0.2.10", HostIPs: []corev1.HostIP{{IP: "192.0.2.10"}},
		PodIP: ip.String(), PodIPs: []corev1.PodIP{{IP: ip.String()}}, StartTime: &now,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: readiness, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: readiness, LastTransitionTime: now},
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", Image: "netprog.invalid/app:1", ImageID: "netprog.invalid/app@sha256:0", ContainerID: "kubette://" + name,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}, Started: ptrTo(true), Ready: ready,
		}},
	}
	if pod, err = e.client.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("write the status of pod %s: %w", name, err)
	}
	return pod, nil
}

func ptrTo[T any](v T) *T { return &v }

// setReady writes the readiness of t's pod as a kubelet does (Ready and
// ContainersReady conditions with their transition time, the container's
// ready flag) and keeps the written pod.
func (e *env) setReady(ctx context.Context, t *target, ready bool, at time.Time) error {
	pod := t.pod.DeepCopy()
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
		return fmt.Errorf("write the status of pod %s (ready %v): %w", t.name, ready, err)
	}
	t.pod = written
	return nil
}

// watchTargetSlices records every change of the targets' EndpointSlices
// with the time the bench's informer delivered it.
func (e *env) watchTargetSlices(ctx context.Context, wg *sync.WaitGroup) error {
	var names []string
	ips := map[string]string{}
	for _, t := range e.cases {
		names = append(names, t.name)
		ips[t.name] = t.ip.String()
	}
	f := informers.NewSharedInformerFactoryWithOptions(e.client, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = discoveryv1.LabelServiceName + " in (" + strings.Join(names, ",") + ")"
		}))
	inf := f.Discovery().V1().EndpointSlices().Informer()
	record := func(obj any) {
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			return
		}
		ev := sliceEvent{at: time.Now(), service: s.Labels[discoveryv1.LabelServiceName]}
		for _, ep := range s.Endpoints {
			if slices.Contains(ep.Addresses, ips[ev.service]) && ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				ev.ready = true
			}
		}
		e.slices.add(ev)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: record, UpdateFunc: func(_, cur any) { record(cur) },
	}); err != nil {
		return fmt.Errorf("watch the targets' slices: %w", err)
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
	syncBytes                                       int64
	others                                          int
	proberCPU                                       time.Duration
	probes                                          int
}

// measure runs a proxy in mode in a fresh namespace over the current
// background and measures cfg.runs pairs of changes per target.
func (e *env) measure(ctx context.Context, n int, mode string) error {
	ips := []netip.Addr{}
	for _, t := range e.cases {
		ips = append(ips, t.ip)
		if t.peer.IsValid() {
			ips = append(ips, t.peer)
		}
	}
	ns, err := newNetns(ips, serviceCIDR)
	if err != nil {
		return err
	}
	defer ns.close()
	ctx, cancel := context.WithCancel(ctx)
	var running sync.WaitGroup
	defer running.Wait()
	defer cancel()
	for _, t := range e.cases {
		if err := ns.listen(ctx, netip.AddrPortFrom(t.ip, targetPort), answerTarget); err != nil {
			return err
		}
		if t.peer.IsValid() {
			if err := ns.listen(ctx, netip.AddrPortFrom(t.peer, targetPort), answerPeer); err != nil {
				return err
			}
		}
	}
	pr, err := ns.startProber(ctx, e.cfg.interval)
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
	written := ""
	if mode == proxy.ModeIPTables {
		written = fmt.Sprintf(", %.1f MB of restore text", float64(first.bytes)/1e6)
	}
	fmt.Printf("%-8s %5d services (+%d targets), load %.1f: first full sync %v after the start (the sync itself %v%s)\n",
		mode, n, len(e.cases), load0, first.end.Sub(started).Round(time.Millisecond), first.took.Round(time.Millisecond), written)

	for _, t := range e.cases {
		profile := ""
		if e.cfg.profile != "" {
			profile = fmt.Sprintf("%s-%s-%d-%s.pprof", e.cfg.profile, mode, n, strings.TrimPrefix(t.name, "netprog-"))
		}
		if err := e.measureTarget(ctx, pr, syncs, p, t, profile); err != nil {
			return err
		}
	}
	return nil
}

// measureTarget measures cfg.runs pairs of readiness changes of t's pod.
// With profile set, this process's CPU profile over the changes is written
// there.
func (e *env) measureTarget(ctx context.Context, pr *prober, syncs *timeline[syncRecord], p *proxy.Proxy, t *target, profile string) error {
	addr := netip.AddrPortFrom(t.clusterIP, 80)
	liveWant, goneWant := wantConnect, wantRefused
	liveWhat, goneWhat := "first endpoint ready -> connects", "no endpoint ready -> refused"
	if t.peer.IsValid() {
		liveWant, goneWant = wantTarget, wantNotTarget
		liveWhat, goneWhat = "2nd endpoint ready -> reached", "2nd endpoint not ready -> left"
	}
	// The pod is not ready: no traffic reaches it.
	wait, err := pr.probe(ctx, addr, goneWant, e.cfg.timeout)
	if err != nil {
		return err
	}
	if _, err := wait(); err != nil {
		return fmt.Errorf("%s before the first change: %w", t.name, err)
	}
	if err := sleep(ctx, e.cfg.settle); err != nil {
		return err
	}
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	st0 := p.Stats()
	cpu0 := cpuNow()
	var live, gone []sample
	for range e.cfg.runs {
		for _, ready := range []bool{true, false} {
			w := goneWant
			if ready {
				w = liveWant
			}
			s, err := e.change(ctx, pr, syncs, t, ready, w)
			if err != nil {
				return err
			}
			if ready {
				live = append(live, s)
			} else {
				gone = append(gone, s)
			}
			if err := sleep(ctx, e.cfg.settle); err != nil {
				return err
			}
		}
	}
	cpu := cpuNow().sub(cpu0)
	st := p.Stats()
	load, _ := benchutil.LoadAverage()
	report(liveWhat, live)
	report(goneWhat, gone)
	changes := time.Duration(2 * e.cfg.runs)
	var prober time.Duration
	probes := 0
	for _, s := range slices.Concat(live, gone) {
		prober += s.proberCPU
		probes += s.probes
	}
	fmt.Printf("    CPU per change: %v in this process (API server, etcd, controller, proxy, listeners; the prober's thread apart: %v, %v per connect), %v in the iptables/nft tools; proxy: %d syncs, %d applied, %d failed; load %.1f\n",
		((cpu.self - prober) / changes).Round(100*time.Microsecond), (prober / changes).Round(100*time.Microsecond),
		(prober / time.Duration(max(probes, 1))).Round(time.Microsecond), (cpu.children / changes).Round(100*time.Microsecond),
		st.Syncs-st0.Syncs, st.Restores-st0.Restores, st.Failures-st0.Failures, load)
	if st.Failures != st0.Failures {
		return fmt.Errorf("the proxy failed %d syncs during the runs (last: %v)", st.Failures-st0.Failures, st.LastError)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// change writes the readiness of t's pod and waits until the prober sees
// the rules follow (w); it returns when each step was seen.
func (e *env) change(ctx context.Context, pr *prober, syncs *timeline[syncRecord], t *target, ready bool, w want) (sample, error) {
	wait, err := pr.probe(ctx, netip.AddrPortFrom(t.clusterIP, 80), w, e.cfg.timeout)
	if err != nil {
		return sample{}, err
	}
	t0 := time.Now()
	if err := e.setReady(ctx, t, ready, t0); err != nil {
		return sample{}, err
	}
	written := time.Since(t0)
	res, err := wait()
	if err != nil {
		return sample{}, fmt.Errorf("%s ready %v: %w", t.name, ready, err)
	}
	if res.at.Before(t0) {
		return sample{}, fmt.Errorf("%s ready %v: the traffic changed before the status write", t.name, ready)
	}
	sl, err := e.slices.wait(ctx, e.cfg.timeout, func(s sliceEvent) bool { return s.at.After(t0) && s.service == t.name && s.ready == ready })
	if err != nil {
		return sample{}, fmt.Errorf("%s ready %v: the EndpointSlice: %w", t.name, ready, err)
	}
	// The first sync that started after the write: nothing else changes
	// Services or slices meanwhile.
	sy, err := syncs.wait(ctx, e.cfg.timeout, func(s syncRecord) bool { return s.start().After(t0) })
	if err != nil {
		return sample{}, fmt.Errorf("%s ready %v: the proxy's sync: %w", t.name, ready, err)
	}
	return sample{
		written: written, sliceSeen: sl.at.Sub(t0), syncStart: sy.start().Sub(t0), syncEnd: sy.end.Sub(t0),
		traffic: res.at.Sub(t0), syncTook: sy.took, syncBytes: sy.bytes, others: res.others, proberCPU: res.cpu, probes: res.probes,
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
	var bytes []float64
	for _, s := range samples {
		others += s.others
		bytes = append(bytes, float64(s.syncBytes))
	}
	fmt.Printf("  %-34s median %v  p90 %v  max %v  (%d changes)\n", what+":",
		r(benchutil.Percentile(total, 50)), r(benchutil.Percentile(total, 90)), r(total[len(total)-1]), len(samples))
	fmt.Printf("    medians from the status write: response %v, slice watched %v, proxy sync start %v, sync logged done %v (the sync itself %v, %.1f kB written), traffic %v",
		med(func(s sample) time.Duration { return s.written }), med(func(s sample) time.Duration { return s.sliceSeen }),
		med(func(s sample) time.Duration { return s.syncStart }), med(func(s sample) time.Duration { return s.syncEnd }),
		med(func(s sample) time.Duration { return s.syncTook }), benchutil.Median(bytes)/1e3, med(func(s sample) time.Duration { return s.traffic }))
	if others > 0 {
		fmt.Printf("; %d probes failed otherwise", others)
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
