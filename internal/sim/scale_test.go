package sim_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubette/kubette/internal/sim"
	"github.com/kubette/kubette/internal/testenv"
)

// Environment of the simulator child process of BenchmarkSimScale.
const (
	envChildKubeconfig = "KUBETTE_SIM_CHILD_KUBECONFIG"
	envChildNodes      = "KUBETTE_SIM_CHILD_NODES"
	envChildWorkers    = "KUBETTE_SIM_CHILD_WORKERS"
	readyLine          = "SIM-READY "
	heapLine           = "SIM-HEAP "
)

// TestSimChildProcess is not a test: BenchmarkSimScale runs the test binary
// again with this test alone to measure the simulator in a process of its own.
// It runs until SIGTERM.
func TestSimChildProcess(t *testing.T) {
	kubeconfig := os.Getenv(envChildKubeconfig)
	if kubeconfig == "" {
		t.Skip("helper process of BenchmarkSimScale")
	}
	nodes, err := strconv.Atoi(os.Getenv(envChildNodes))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	workers, _ := strconv.Atoi(os.Getenv(envChildWorkers))
	s, err := sim.New(cfg, sim.Options{Nodes: nodes, Workers: workers, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	go func() {
		select {
		case <-s.Ready():
			fmt.Printf("%s%d\n", readyLine, time.Since(start).Milliseconds())
		case <-ctx.Done():
		}
	}()
	// SIGUSR1 asks for the live heap, after a collection.
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	go func() {
		for {
			select {
			case <-usr1:
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				if path := os.Getenv("SIM_BENCH_HEAPPROFILE"); path != "" {
					if f, err := os.Create(path); err == nil {
						_ = pprof.WriteHeapProfile(f)
						_ = f.Close()
					}
				}
				fmt.Printf("%s%d\n", heapLine, ms.HeapAlloc)
			case <-ctx.Done():
				return
			}
		}
	}()
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("SIM-STATS %+v\n", s.Stats())
}

// procStat reads a process's resident anonymous memory (MiB: the heap,
// stacks and runtime, not the pages of the binary) and CPU time so far.
func procStat(tb testing.TB, pid int) (rssMiB float64, cpu time.Duration) {
	tb.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "RssAnon:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			rssMiB = kb / 1024
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return rssMiB, time.Duration(utime+stime) * (time.Second / 100) // USER_HZ is 100 on Linux
}

// BenchmarkSimScale registers SIM_BENCH_NODES simulated nodes (default 5000)
// in a process of their own, measures the idle heartbeat load, then creates
// SIM_BENCH_PODS pods (default 10000) bound to them and measures the time
// until all are Running. Run it with
//
//	go test -run '^$' -bench SimScale -benchtime 1x ./internal/sim/
func BenchmarkSimScale(b *testing.B) {
	if testing.Short() {
		b.Skip("scale benchmark")
	}
	nodes, pods := envInt(b, "SIM_BENCH_NODES", 5000), envInt(b, "SIM_BENCH_PODS", 10000)
	idle := time.Duration(envInt(b, "SIM_BENCH_IDLE_SECONDS", 30)) * time.Second
	for range b.N {
		runScale(b, nodes, pods, idle)
	}
}

func envInt(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return n
}

func runScale(b *testing.B, nodes, pods int, idle time.Duration) {
	env := testenv.Start(b, testenv.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	self := os.Getpid()
	baseRSS, _ := procStat(b, self)

	// The simulator in a child process.
	child := exec.Command(os.Args[0], "-test.run=^TestSimChildProcess$")
	child.Env = append(os.Environ(), envChildKubeconfig+"="+env.Kubeconfig, envChildNodes+"="+strconv.Itoa(nodes),
		envChildWorkers+"="+os.Getenv("SIM_BENCH_WORKERS"))
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	var childWG sync.WaitGroup
	defer func() {
		_ = child.Process.Signal(syscall.SIGTERM)
		childWG.Wait()
		_ = child.Wait()
	}()
	ready := make(chan int64, 1)
	heap := make(chan int64, 1)
	liveHeapMiB := func() float64 {
		if err := child.Process.Signal(syscall.SIGUSR1); err != nil {
			b.Fatal(err)
		}
		select {
		case n := <-heap:
			return float64(n) / (1 << 20)
		case <-time.After(time.Minute):
			b.Fatal("no heap figure from the simulator")
			return 0
		}
	}
	childWG.Add(1)
	go func() {
		defer childWG.Done()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if ms, ok := strings.CutPrefix(line, readyLine); ok {
				n, _ := strconv.ParseInt(ms, 10, 64)
				ready <- n
			} else if n, ok := strings.CutPrefix(line, heapLine); ok {
				v, _ := strconv.ParseInt(n, 10, 64)
				heap <- v
			} else if strings.HasPrefix(line, "SIM-STATS") {
				b.Log(line)
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	var registerMs int64
	select {
	case registerMs = <-ready:
	case <-time.After(10 * time.Minute):
		b.Fatal("nodes not registered after 10 minutes")
	}
	b.Logf("%d nodes registered in %d ms (child says), %v since the child started", nodes, registerMs, time.Since(start).Round(time.Millisecond))
	b.ReportMetric(float64(registerMs)/1000, "register-s")

	// Idle: heartbeat load and memory.
	w, err := env.Client.CoordinationV1().Leases(sim.LeaseNamespace).Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		b.Fatal(err)
	}
	var leaseUpdates atomic.Int64
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Modified {
				leaseUpdates.Add(1)
			}
		}
	}()
	_, serverCPU0 := procStat(b, self)
	_, simCPU0 := procStat(b, child.Process.Pid)
	time.Sleep(idle)
	w.Stop()
	serverRSS, serverCPU1 := procStat(b, self)
	simRSS, simCPU1 := procStat(b, child.Process.Pid)
	rate := float64(leaseUpdates.Load()) / idle.Seconds()
	b.Logf("idle %v: %.0f lease updates/s; CPU: test process (API server + etcd) %.0f%%, simulator %.0f%% of one core; anonymous RSS: test process %.0f MiB (%.0f before), simulator %.0f MiB (live heap %.1f MiB)",
		idle, rate, 100*(serverCPU1-serverCPU0).Seconds()/idle.Seconds(), 100*(simCPU1-simCPU0).Seconds()/idle.Seconds(), serverRSS, baseRSS, simRSS, liveHeapMiB())
	b.ReportMetric(rate, "lease-updates/s")
	b.ReportMetric(simRSS, "sim-idle-MiB")
	b.ReportMetric(serverRSS, "server-idle-MiB")
	if pods == 0 {
		return
	}

	// Pods bound directly to the nodes: time until all are Running.
	c := env.Client
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	var running atomic.Int64
	allRunning := make(chan struct{})
	factory := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace("bench"))
	inf := factory.Core().V1().Pods().Informer()
	// Keep only whether a pod runs: the cache of this process stays small.
	if err := inf.SetTransform(func(obj any) (any, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}, Status: corev1.PodStatus{Phase: p.Status.Phase}}, nil
		}
		return obj, nil
	}); err != nil {
		b.Fatal(err)
	}
	var seen sync.Map
	count := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Status.Phase != corev1.PodRunning {
			return
		}
		if _, dup := seen.LoadOrStore(p.Name, true); !dup && running.Add(1) == int64(pods) {
			close(allRunning)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: count, UpdateFunc: func(_, obj any) { count(obj) }}); err != nil {
		b.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	_, serverCPU0 = procStat(b, self)
	_, simCPU0 = procStat(b, child.Process.Pid)
	created := time.Now()
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= pods {
					return
				}
				p := newPod("bench", fmt.Sprintf("p%d", i), fmt.Sprintf("%s%d", sim.DefaultNamePrefix, i%nodes))
				if _, err := c.CoreV1().Pods("bench").Create(ctx, p, metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	createdAll := time.Since(created)
	select {
	case <-allRunning:
	case <-time.After(30 * time.Minute):
		b.Fatalf("only %d of %d pods Running after 30 minutes", running.Load(), pods)
	}
	took := time.Since(created)
	_, serverCPU1 = procStat(b, self)
	_, simCPU1 = procStat(b, child.Process.Pid)
	b.Logf("pods: CPU test process (API server + etcd + pod creation) %.0f%%, simulator %.0f%% of one core",
		100*(serverCPU1-serverCPU0).Seconds()/took.Seconds(), 100*(simCPU1-simCPU0).Seconds()/took.Seconds())
	time.Sleep(5 * time.Second) // let the simulator settle before measuring its memory
	simRSS, _ = procStat(b, child.Process.Pid)
	serverRSS, _ = procStat(b, self)
	b.Logf("%d pods created in %v, all Running %v after the first create: %.0f pods/s; anonymous RSS: simulator %.0f MiB (live heap %.1f MiB), test process %.0f MiB",
		pods, createdAll.Round(time.Millisecond), took.Round(time.Millisecond), float64(pods)/took.Seconds(), simRSS, liveHeapMiB(), serverRSS)
	b.ReportMetric(float64(pods)/took.Seconds(), "pods-running/s")
	b.ReportMetric(simRSS, "sim-pods-MiB")
}
