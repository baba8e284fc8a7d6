// Command podstartup measures pod startup latency on a real kubette node: the time from the
// pod's create request to the watch event that shows it Running, for pods whose image is
// already on the node, one at a time and then several at a time.
//
//	go build -o /tmp/ ./cmd/kubette ./cmd/kubette-shim
//	sudo /tmp/kubette up --data-dir /tmp/kb --port 16443 &
//	go run ./bench/podstartup --kubeconfig /tmp/kb/admin.kubeconfig --kubette /tmp/kubette --data-dir /tmp/kb
//
// The bench builds a one-layer image from the host's static busybox, loads it with
// `kubette image load`, and runs `sleep` pods with imagePullPolicy Never.
//
// On a shared machine wall-clock latency depends on everything else that runs; --cpuacct
// names a cgroup v1 cpuacct directory that holds `kubette up` (its children inherit it: the
// shims, runc, the CNI plugins, iptables), and each phase then also prints the CPU time that
// cgroup spent per pod, from the first create to the last pod Running, less what the idle
// cluster spends in as long (its rate measured over idleWindow before the phase):
//
//	mkdir /sys/fs/cgroup/cpuacct/kubette-bench
//	sh -c 'echo $$ > /sys/fs/cgroup/cpuacct/kubette-bench/cgroup.procs; exec /tmp/kubette up --data-dir /tmp/kb --port 16443' &
//	go run ./bench/podstartup ... --cpuacct /sys/fs/cgroup/cpuacct/kubette-bench
//
// Each phase also prints the idle rate before it and, measured right after its last pod runs,
// with its pods running: the difference is the background work that grows with the running
// pods (relists, status loops, the shims). --sequential=false runs only the parallel phase,
// and --server-profile PREFIX writes `kubette up`'s CPU profiles over it (PREFIX.cpu.N, 2 s
// each, from /debug/pprof with the kubeconfig's admin credentials):
//
//	go run ./bench/podstartup ... --pods 100 --sequential=false --server-profile /tmp/p10
//	go tool pprof -top /tmp/p10.cpu.*
//
// (Without kubette-shim beside kubette the runtime starts `kubette shim` for every container,
// ~20 ms of CPU more per pod.) Where a pod's CPU goes, process by process: record the whole
// machine with `perf record -a -g -k CLOCK_REALTIME` while the bench runs with --marks, and count
// the samples of `kubette up`'s process tree between a phase's two marks (`perf script
// --show-task-events` gives each process's parent and executable; the shims, runc create and
// runc init, the CNI plugins, and the stacks of kubette's own process by package).
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kubette/kubette/bench/internal/benchutil"
)

const imageRef = "bench.kubette.io/busybox:podstartup"

func main() {
	var (
		kubeconfig, kubette, dataDir, busybox, cpuacct, profile string
		pods, parallel                                          int
		marks, sequential                                       bool
	)
	flag.StringVar(&kubeconfig, "kubeconfig", "", "admin kubeconfig of a cluster whose node is this machine")
	flag.StringVar(&kubette, "kubette", "kubette", "the kubette binary (for `image load`)")
	flag.StringVar(&dataDir, "data-dir", "/var/lib/kubette", "the node's data dir (for `image load`)")
	flag.StringVar(&busybox, "busybox", "/bin/busybox", "a static busybox for the image")
	flag.IntVar(&pods, "pods", 50, "pods per phase")
	flag.IntVar(&parallel, "parallel", 10, "pods created at once in the second phase")
	flag.StringVar(&cpuacct, "cpuacct", "", "a cgroup v1 cpuacct directory holding the cluster's processes: print their CPU time per pod (less the idle cluster's) too")
	flag.BoolVar(&sequential, "sequential", true, "run the one-at-a-time phase (false: only the parallel one, e.g. for a longer profile of it with more --pods)")
	flag.StringVar(&profile, "server-profile", "", "write `kubette up`'s CPU profiles over the parallel phase, from its /debug/pprof with the kubeconfig's credentials, 2 s each back to back from the first create to the last pod Running, into PREFIX.cpu.N (`go tool pprof` takes them all at once)")
	flag.BoolVar(&marks, "marks", false, "print each phase's start and end as Unix times in seconds (to cut a `perf record -k CLOCK_REALTIME` trace to the phases)")
	flag.Parse()
	if err := run(kubeconfig, kubette, dataDir, busybox, newMeters(cpuacct), profile, pods, parallel, marks, sequential); err != nil {
		fmt.Fprintln(os.Stderr, "podstartup:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, kubette, dataDir, busybox string, m meters, profile string, pods, parallel int, marks, sequential bool) error {
	ctx := context.Background()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := loadImage(kubette, dataDir, busybox); err != nil {
		return err
	}
	ns := fmt.Sprintf("podstartup-%d", time.Now().Unix())
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("namespace: %w", err)
	}
	defer func() {
		_ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	}()
	// Warm-up: the first pod pays for one-time work (cgroup parents, the bridge).
	if _, _, err := measure(ctx, client, dataDir, meters{}, "", ns, "warmup", 1, 1); err != nil {
		return err
	}
	type phase struct {
		name string
		at   int
	}
	phases := []phase{{"sequential", 1}, {fmt.Sprintf("%d at a time", parallel), parallel}}
	if !sequential {
		phases = phases[1:]
	}
	for _, phase := range phases {
		prof := ""
		if phase.at > 1 {
			prof = profile
		}
		lat, cpu, err := measure(ctx, client, dataDir, m, prof, ns, fmt.Sprintf("p%d", phase.at), pods, phase.at)
		if err != nil {
			return fmt.Errorf("%s: %w", phase.name, err)
		}
		if marks {
			fmt.Printf("%-14s from %.6f to %.6f\n", phase.name+":", unixSeconds(cpu.span[0]), unixSeconds(cpu.span[1]))
		}
		s := benchutil.Sorted(lat)
		fmt.Printf("%-14s pods %3d  create→Running p50 %s  p90 %s  p99 %s  max %s\n", phase.name+":", len(s),
			benchutil.FormatDuration(benchutil.Percentile(s, 50)), benchutil.FormatDuration(benchutil.Percentile(s, 90)),
			benchutil.FormatDuration(benchutil.Percentile(s, 99)), benchutil.FormatDuration(s[len(s)-1]))
		if line := cpu.report(len(s), phase.at); line != "" {
			fmt.Printf("%-14s %s\n", "", line)
		}
	}
	return nil
}

// measure creates n pods, at most `at` of them starting at once, and returns each one's time from create to
// the watch event showing it Running and what the meters read over the phase (phaseCPU): the CPU time
// from the first create to the last pod Running, the idle rates before the first create and, measured
// right after the phase, with the n pods running, and the times of the phase's first create and last
// Running; with profile (a file prefix) it writes the server's CPU profiles
// over the phase (profileServer); then it deletes them and waits until they are gone, from the API and
// from the node's runtime (its sandbox directories under DATA_DIR/runtime/sandboxes), so that the next
// phase does not share the machine with the teardown of this one.
func measure(ctx context.Context, client kubernetes.Interface, dataDir string, m meters, profile, ns, prefix string, n, at int) (_ []time.Duration, pc phaseCPU, _ error) {
	label := map[string]string{"bench": prefix}
	// A retry watcher from the list's resource version: a watch the API server ends early (its
	// watch cache restarts when etcd stalls on a loaded machine) is resumed where it stopped
	// instead of leaving the phase waiting for events that never come.
	selector := "bench=" + prefix
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, pc, fmt.Errorf("list pods: %w", err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return client.CoreV1().Pods(ns).Watch(ctx, o)
		},
	})
	if err != nil {
		return nil, pc, fmt.Errorf("watch pods: %w", err)
	}
	defer w.Stop()
	// Each pod's slot waits on its own channel, closed when the watch shows the pod Running
	// (a polling loop per slot would take CPU from the cluster it measures).
	var mu sync.Mutex
	started := map[string]time.Time{}
	runningAt := map[string]time.Time{}
	running := make(map[string]chan struct{}, n)
	for i := range n {
		running[fmt.Sprintf("%s-%03d", prefix, i)] = make(chan struct{})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*v1.Pod)
			if !ok || ev.Type == watch.Deleted || ev.Type == watch.Error {
				continue
			}
			if p.Status.Phase == v1.PodRunning {
				mu.Lock()
				if _, seen := runningAt[p.Name]; !seen {
					runningAt[p.Name] = time.Now()
					if ch, ok := running[p.Name]; ok {
						close(ch)
					}
				}
				finished := len(runningAt) == n
				mu.Unlock()
				if finished {
					return
				}
			}
		}
	}()
	if pc.idle[0], err = m.idleRate(); err != nil {
		return nil, pc, err
	}
	before, err := m.usage()
	if err != nil {
		return nil, pc, err
	}
	stopProfile := profileServer(ctx, client, profile)
	start := time.Now()
	pc.span[0] = start
	sem := make(chan struct{}, at)
	var wg sync.WaitGroup
	var createErr error
	var errOnce sync.Once
	for i := range n {
		name := fmt.Sprintf("%s-%03d", prefix, i)
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			pod := benchPod(name, label)
			mu.Lock()
			started[name] = time.Now()
			mu.Unlock()
			if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				errOnce.Do(func() { createErr = err })
				return
			}
			// Hold the slot until this pod runs: at most `at` pods are starting at once.
			select {
			case <-running[name]:
			case <-done:
			case <-time.After(2 * time.Minute):
			}
		}()
	}
	wg.Wait()
	if createErr != nil {
		return nil, pc, createErr
	}
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		return nil, pc, errors.New("pods not Running within 2 minutes")
	}
	pc.span[1] = time.Now()
	after, err := m.usage()
	if err != nil {
		return nil, pc, err
	}
	if err := stopProfile(); err != nil {
		return nil, pc, err
	}
	for i := range pc.used {
		pc.used[i] = after[i] - before[i] - time.Duration(pc.idle[0][i]*float64(pc.span[1].Sub(start)))
	}
	// The background work that grows with the running pods (relists, probes, status loops).
	if pc.idle[1], err = m.idleRate(); err != nil {
		return nil, pc, err
	}
	var out []time.Duration
	mu.Lock()
	for name, at := range runningAt {
		out = append(out, at.Sub(started[name]))
	}
	mu.Unlock()
	zero := int64(0)
	if err := client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero},
		metav1.ListOptions{LabelSelector: "bench=" + prefix}); err != nil {
		return nil, pc, fmt.Errorf("delete pods: %w", err)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; {
		l, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "bench=" + prefix})
		if err == nil && len(l.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return nil, pc, errors.New("pods not gone within 2 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
	sandboxes := filepath.Join(dataDir, "runtime", "sandboxes")
	for deadline := time.Now().Add(2 * time.Minute); ; {
		left, err := os.ReadDir(sandboxes)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, pc, fmt.Errorf("wait for the runtime's teardown: %w", err)
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return nil, pc, fmt.Errorf("%d sandboxes still in %s after 2 minutes", len(left), sandboxes)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return out, pc, nil
}

// profileServer fetches the API server process's CPU profile, 2 s at a time, into prefix.cpu.0,
// prefix.cpu.1, ... until stop is called (nothing when prefix is empty); stop waits for the
// profile in progress and returns the first error.
func profileServer(ctx context.Context, client kubernetes.Interface, prefix string) (stop func() error) {
	if prefix == "" {
		return func() error { return nil }
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			// The chunk in progress when stop is called still completes: a canceled
			// request would lose it.
			data, err := client.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
				Param("seconds", "2").DoRaw(context.WithoutCancel(ctx))
			if err != nil {
				done <- fmt.Errorf("fetch cpu profile: %w", err)
				return
			}
			file := fmt.Sprintf("%s.cpu.%d", prefix, i)
			if err := os.WriteFile(file, data, 0o644); err != nil {
				done <- fmt.Errorf("write %s: %w", file, err)
				return
			}
			if ctx.Err() != nil {
				done <- nil
				return
			}
		}
	}()
	return func() error {
		cancel()
		return <-done
	}
}

// unixSeconds is t as seconds since the Unix epoch.
func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// idleWindow is how long the idle CPU rates are measured before a phase.
const idleWindow = 5 * time.Second

// The meters, in the order of a reading's values.
const (
	meterCluster = iota // the cgroup that holds `kubette up` and what it starts (--cpuacct)
	meterPods           // the pods' cgroups, below /kubette in the same cpuacct hierarchy
	meterMachine        // every CPU of the machine, from /proc/stat
	numMeters
)

// meters reads the CPU time the cluster spends. runc moves each container's init into the
// pod's cgroup before it runs the init's Go part and the container's process, so the cgroup
// that holds `kubette up` alone misses them: the pods' cgroups are read too. The machine's
// time is everything (the kernel's threads and this bench's own client included): in a closed
// loop of `at` pods it is what sets the mean create → Running (Little's law), at × CPU per
// pod / cores.
type meters struct {
	cluster, pods string // cpuacct directories ("" = not read)
}

// newMeters returns the meters for --cpuacct (none when it is empty).
func newMeters(cpuacct string) meters {
	if cpuacct == "" {
		return meters{}
	}
	return meters{cluster: cpuacct, pods: filepath.Join(filepath.Dir(cpuacct), "kubette")}
}

// usage reads every meter (zeros for the ones not read).
func (m meters) usage() (u [numMeters]time.Duration, err error) {
	if m.cluster == "" {
		return u, nil
	}
	if u[meterCluster], err = cgroupUsage(m.cluster); err != nil {
		return u, err
	}
	// The pods' parent exists once the first pod has started (the warm-up's).
	if u[meterPods], err = cgroupUsage(m.pods); err != nil && !errors.Is(err, os.ErrNotExist) {
		return u, err
	}
	if u[meterMachine], err = machineBusy(); err != nil {
		return u, err
	}
	return u, nil
}

// idleRate is each meter's CPU time per second over idleWindow.
func (m meters) idleRate() (r [numMeters]float64, err error) {
	if m.cluster == "" {
		return r, nil
	}
	before, err := m.usage()
	if err != nil {
		return r, err
	}
	t0 := time.Now()
	time.Sleep(idleWindow)
	after, err := m.usage()
	if err != nil {
		return r, err
	}
	for i := range r {
		r[i] = float64(after[i]-before[i]) / float64(time.Since(t0))
	}
	return r, nil
}

// phaseCPU is what the meters read over a phase.
type phaseCPU struct {
	used [numMeters]time.Duration // over the phase, less the idle rate before it
	idle [2][numMeters]float64    // CPU seconds per second before the phase and after it
	span [2]time.Time             // the first create and the last pod Running
}

// report is the phase's CPU line ("" when nothing was read).
func (pc phaseCPU) report(pods, at int) string {
	if pc.idle[0] == ([numMeters]float64{}) && pc.used == ([numMeters]time.Duration{}) {
		return ""
	}
	per := func(d time.Duration) string { return benchutil.FormatDuration(d / time.Duration(pods)) }
	cluster := pc.used[meterCluster] + pc.used[meterPods]
	machine := pc.used[meterMachine]
	cores := float64(pc.machineCores())
	line := fmt.Sprintf("CPU/pod %s (up's tree %s, the pods' cgroups %s), machine %s  idle CPU/s %.1f ms before, %.1f ms with the %d pods running",
		per(cluster), per(pc.used[meterCluster]), per(pc.used[meterPods]), per(machine),
		1e3*(pc.idle[0][meterCluster]+pc.idle[0][meterPods]), 1e3*(pc.idle[1][meterCluster]+pc.idle[1][meterPods]), pods)
	if at > 1 {
		// Little's law for the closed loop: mean latency = at / throughput, and with the CPU
		// saturated, throughput = cores / machine CPU per pod.
		line += fmt.Sprintf("\n%-14s Little's law: %d × machine CPU/pod / %g cores = %s mean create→Running if the machine's CPU is all the pods'", "",
			at, cores, benchutil.FormatDuration(time.Duration(float64(at)*float64(machine/time.Duration(pods))/cores)))
	}
	return line
}

// machineCores is the number of CPUs /proc/stat counts.
func (phaseCPU) machineCores() int {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 1
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if len(l) > 3 && strings.HasPrefix(l, "cpu") && l[3] >= '0' && l[3] <= '9' {
			n++
		}
	}
	return max(n, 1)
}

// cgroupUsage reads the CPU time a cgroup v1 cpuacct directory has used.
func cgroupUsage(dir string) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cpuacct.usage"))
	if err != nil {
		return 0, fmt.Errorf("cpu usage: %w", err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cpu usage of %s: %w", dir, err)
	}
	return time.Duration(ns), nil
}

// machineBusy is the CPU time all the machine's CPUs have spent not idle (user, nice, system,
// irq, softirq, steal), from /proc/stat's first line in USER_HZ ticks (100 per second).
func machineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("machine CPU: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("machine CPU: unexpected /proc/stat line %q", line)
	}
	var ticks int64
	for i, v := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("machine CPU: %q: %w", line, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

func benchPod(name string, labels map[string]string) *v1.Pod {
	zero := int64(0)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: &zero,
			Containers: []v1.Container{{
				Name: "sleep", Image: imageRef, ImagePullPolicy: v1.PullNever,
				Command: []string{"/bin/busybox", "sleep", "3600"},
			}},
		},
	}
}

// loadImage builds a one-layer busybox image and loads it with `kubette image load`.
func loadImage(kubette, dataDir, busybox string) error {
	bin, err := os.ReadFile(busybox)
	if err != nil {
		return fmt.Errorf("busybox: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin))},
	} {
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(bin); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	ref, err := name.NewTag(imageRef)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "podstartup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "image.tar")
	if err := tarball.WriteToFile(path, ref, img); err != nil {
		return err
	}
	out, err := exec.Command(kubette, "image", "load", "--data-dir", dataDir, path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubette image load: %w: %s", err, out)
	}
	return nil
}
