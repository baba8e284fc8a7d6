package prober

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubette/kubette/internal/kubelet"
	"github.com/kubette/kubette/internal/kubelet/cri"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// recorder collects events without ever blocking.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Event(obj runtime.Object, eventtype, reason, message string) {
	ref := obj.(*v1.ObjectReference)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf("%s %s %s %s: %s", ref.Name, ref.FieldPath, eventtype, reason, message))
}
func (r *recorder) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	r.Event(obj, eventtype, reason, fmt.Sprintf(format, args...))
}
func (r *recorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, format string, args ...any) {
	r.Eventf(obj, eventtype, reason, format, args...)
}
func (r *recorder) has(sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if strings.Contains(e, sub) {
			return true
		}
	}
	return false
}

// fixture is a running Manager with tiny periods.
type fixture struct {
	m      *Manager
	rec    *recorder
	runner *fakeRunner
	now    atomic.Int64 // unix nanos of the fake clock
	stop   func()
}

func newFixture(t *testing.T, exec func(id string, cmd []string) ([]byte, error)) *fixture {
	t.Helper()
	f := &fixture{rec: &recorder{}, runner: &fakeRunner{fn: exec}}
	f.now.Store(time.Now().UnixNano())
	f.m = New(Config{Runner: f.runner, Recorder: f.rec, Now: func() time.Time { return time.Unix(0, f.now.Load()) }, Second: 2 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.m.Run(ctx); close(done) }()
	f.stop = func() { cancel(); <-done }
	t.Cleanup(f.stop)
	return f
}

func execProbe(cmd string, threshold int32) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{cmd}}}, PeriodSeconds: 1, FailureThreshold: threshold}
}

func probePod(c v1.Container) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid"}, Spec: v1.PodSpec{Containers: []v1.Container{c}}}
}

func runningStatus(name, id string, started time.Time) *v1.PodStatus {
	return &v1.PodStatus{PodIP: "127.0.0.1", ContainerStatuses: []v1.ContainerStatus{{
		Name: name, ContainerID: "kubette://" + id,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}},
	}}}
}

// waitResult reads results until one matches.
func waitResult(t *testing.T, m *Manager, want kubelet.ProbeResult) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case r := <-m.Results():
			if r == want {
				return
			}
		case <-timeout:
			t.Fatalf("no result %+v", want)
		}
	}
}

// workersOf returns the done channels of the pod's current workers.
func workersOf(m *Manager, uid types.UID) []chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []chan struct{}
	for k, st := range m.probes {
		if k.uid == uid {
			out = append(out, st.done)
		}
	}
	return out
}

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestReadinessHTTP(t *testing.T) {
	var code atomic.Int32
	code.Store(503)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(int(code.Load())) }))
	t.Cleanup(srv.Close)
	_, port := hostPort(t, srv.URL)
	f := newFixture(t, nil)
	c := v1.Container{Name: "web", ReadinessProbe: &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(int32(port))}},
		PeriodSeconds: 1, FailureThreshold: 2, SuccessThreshold: 1,
	}}
	pod := probePod(c)
	if f.m.Ready(pod.UID, "web") {
		t.Fatal("ready before the pod is known")
	}
	f.m.Update(pod, runningStatus("web", "id1", time.Now()))
	if f.m.Ready(pod.UID, "web") {
		t.Fatal("readiness must start false")
	}
	poll.Until(t, "a failed readiness probe", poll.True(func() bool { return f.rec.has("Readiness probe failed: HTTP probe failed with statuscode: 503") }))
	if f.m.Ready(pod.UID, "web") {
		t.Fatal("ready while failing")
	}
	code.Store(200)
	waitResult(t, f.m, kubelet.ProbeResult{UID: "uid", Container: "web", ContainerID: "id1", Kind: kubelet.ProbeReadiness, Success: true})
	if !f.m.Ready(pod.UID, "web") || !f.m.Started(pod.UID, "web") {
		t.Fatal("not ready after success")
	}
	code.Store(500)
	waitResult(t, f.m, kubelet.ProbeResult{UID: "uid", Container: "web", ContainerID: "id1", Kind: kubelet.ProbeReadiness, Success: false})
	if f.m.Ready(pod.UID, "web") {
		t.Fatal("ready after failures")
	}
	if !f.rec.has("p spec.containers{web} Warning Unhealthy: Readiness probe failed: HTTP probe failed with statuscode: 500") {
		t.Fatalf("events = %v", f.rec.events)
	}
	// Readiness keeps probing after failure, and recovers.
	code.Store(200)
	waitResult(t, f.m, kubelet.ProbeResult{UID: "uid", Container: "web", ContainerID: "id1", Kind: kubelet.ProbeReadiness, Success: true})
}

func TestLivenessThresholdAndHold(t *testing.T) {
	f := newFixture(t, func(id string, cmd []string) ([]byte, error) {
		return []byte("dead"), &cri.ExitError{Code: 1}
	})
	pod := probePod(v1.Container{Name: "app", LivenessProbe: execProbe("alive", 3)})
	f.m.Update(pod, runningStatus("app", "id1", time.Now()))
	if !f.m.Ready(pod.UID, "app") {
		t.Fatal("a container without a readiness probe is ready")
	}
	waitResult(t, f.m, kubelet.ProbeResult{UID: "uid", Container: "app", ContainerID: "id1", Kind: kubelet.ProbeLiveness, Success: false})
	// Exactly failureThreshold attempts, then the worker is on hold (ended).
	ws := workersOf(f.m, pod.UID)
	if len(ws) != 1 {
		t.Fatalf("workers = %d", len(ws))
	}
	poll.Until(t, "liveness worker to stop", poll.True(func() bool { return closed(ws[0]) }))
	if n := f.runner.count("id1 alive"); n != 3 {
		t.Fatalf("liveness ran %d times, want 3", n)
	}
	if !f.rec.has("Warning Unhealthy: Liveness probe failed: dead") {
		t.Fatalf("events = %v", f.rec.events)
	}
	// A new container instance gets a new worker, starting from success.
	f.m.Update(pod, runningStatus("app", "id2", time.Now()))
	poll.Until(t, "probes of the new instance", poll.True(func() bool { return f.runner.count("id2 alive") > 0 }))
	if f.runner.count("id1 alive") != 3 {
		t.Fatal("old instance probed again")
	}
}

func TestStartupGatesLivenessAndReadiness(t *testing.T) {
	var startupOK atomic.Bool
	f := newFixture(t, func(id string, cmd []string) ([]byte, error) {
		if cmd[0] == "startup" && !startupOK.Load() {
			return nil, &cri.ExitError{Code: 1}
		}
		return nil, nil
	})
	c := v1.Container{Name: "app",
		StartupProbe:   execProbe("startup", 1000),
		LivenessProbe:  execProbe("live", 3),
		ReadinessProbe: execProbe("ready", 3),
	}
	pod := probePod(c)
	f.m.Update(pod, runningStatus("app", "id1", time.Now()))
	poll.Until(t, "a few startup attempts", poll.True(func() bool { return f.runner.count("id1 startup") >= 3 }))
	if f.m.Started(pod.UID, "app") || f.m.Ready(pod.UID, "app") {
		t.Fatal("started or ready before the startup probe succeeded")
	}
	if f.runner.count("id1 live") != 0 || f.runner.count("id1 ready") != 0 {
		t.Fatal("liveness or readiness ran before startup succeeded")
	}
	startupOK.Store(true)
	waitResult(t, f.m, kubelet.ProbeResult{UID: "uid", Container: "app", ContainerID: "id1", Kind: kubelet.ProbeStartup, Success: true})
	poll.Until(t, "readiness", poll.True(func() bool { return f.m.Ready(pod.UID, "app") }))
	poll.Until(t, "liveness probes", poll.True(func() bool { return f.runner.count("id1 live") > 0 }))
	// The startup worker ended after its success.
	n := f.runner.count("id1 startup")
	poll.Until(t, "more liveness probes", poll.True(func() bool { return f.runner.count("id1 live") > 5 }))
	if f.runner.count("id1 startup") != n {
		t.Fatal("startup probe kept running after success")
	}
	if !f.m.Started(pod.UID, "app") {
		t.Fatal("not started")
	}
}

func TestInitialDelayUsesClock(t *testing.T) {
	f := newFixture(t, func(string, []string) ([]byte, error) { return nil, nil })
	p := execProbe("ready", 3)
	p.InitialDelaySeconds = 1000 // 1000 × 2ms of the fake clock
	pod := probePod(v1.Container{Name: "app", ReadinessProbe: p})
	start := time.Unix(0, f.now.Load())
	f.m.Update(pod, runningStatus("app", "id1", start))
	time.Sleep(50 * time.Millisecond)
	if f.runner.count("id1 ready") != 0 {
		t.Fatal("probed during the initial delay")
	}
	f.now.Store(start.Add(2 * time.Second).UnixNano())
	poll.Until(t, "ready after the delay", poll.True(func() bool { return f.m.Ready(pod.UID, "app") }))
}

func TestContainerIDChangeRestartsWorker(t *testing.T) {
	f := newFixture(t, func(string, []string) ([]byte, error) { return nil, nil })
	pod := probePod(v1.Container{Name: "app", ReadinessProbe: execProbe("ready", 3)})
	f.m.Update(pod, runningStatus("app", "a", time.Now()))
	poll.Until(t, "ready", poll.True(func() bool { return f.m.Ready(pod.UID, "app") }))
	old := workersOf(f.m, pod.UID)
	f.m.Update(pod, runningStatus("app", "b", time.Now()))
	if len(old) != 1 {
		t.Fatalf("workers = %d", len(old))
	}
	poll.Until(t, "old worker to end", poll.True(func() bool { return closed(old[0]) }))
	poll.Until(t, "new instance probed and ready", poll.True(func() bool { return f.runner.count("b ready") > 0 && f.m.Ready(pod.UID, "app") }))
	n := f.runner.count("a ready")
	time.Sleep(20 * time.Millisecond)
	if f.runner.count("a ready") != n {
		t.Fatal("old instance still probed")
	}
	// The same ID again keeps the worker.
	cur := workersOf(f.m, pod.UID)
	f.m.Update(pod, runningStatus("app", "b", time.Now()))
	if now := workersOf(f.m, pod.UID); len(now) != 1 || now[0] != cur[0] {
		t.Fatal("worker replaced without an ID change")
	}
	// The container stops: its worker ends and readiness is false.
	f.m.Update(pod, &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "app", ContainerID: "kubette://b",
		State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}}}})
	poll.Until(t, "worker of a stopped container to end", poll.True(func() bool { return closed(cur[0]) }))
	if f.m.Ready(pod.UID, "app") {
		t.Fatal("a stopped container is ready")
	}
}

func TestRemoveAndRunStopEveryWorker(t *testing.T) {
	f := newFixture(t, func(string, []string) ([]byte, error) { return nil, nil })
	var pods []*v1.Pod
	for i := range 5 {
		pod := probePod(v1.Container{Name: "app", ReadinessProbe: execProbe("ready", 3), LivenessProbe: execProbe("live", 3)})
		pod.UID = types.UID(fmt.Sprintf("uid%d", i))
		f.m.Update(pod, runningStatus("app", fmt.Sprintf("id%d", i), time.Now()))
		pods = append(pods, pod)
	}
	first := workersOf(f.m, pods[0].UID)
	if len(first) != 2 {
		t.Fatalf("workers of a pod = %d", len(first))
	}
	f.m.Remove(pods[0].UID)
	for _, ch := range first {
		poll.Until(t, "removed pod's workers to end", poll.True(func() bool { return closed(ch) }))
	}
	if f.m.Ready(pods[0].UID, "app") || len(workersOf(f.m, pods[0].UID)) != 0 {
		t.Fatal("removed pod still known")
	}
	// Run returns only after every worker ended.
	var rest []chan struct{}
	for _, p := range pods[1:] {
		rest = append(rest, workersOf(f.m, p.UID)...)
	}
	f.stop()
	for _, ch := range rest {
		if !closed(ch) {
			t.Fatal("a worker outlived Run")
		}
	}
	// After Run, Update starts nothing.
	late := probePod(v1.Container{Name: "app", ReadinessProbe: execProbe("ready", 3)})
	late.UID = "late"
	f.m.Update(late, runningStatus("app", "late", time.Now()))
	if len(workersOf(f.m, late.UID)) != 0 {
		t.Fatal("a worker started after Run returned")
	}
}

func TestUpdateOffersAnswerChanges(t *testing.T) {
	f := newFixture(t, nil)
	pod := probePod(v1.Container{Name: "plain"})
	if f.m.Ready(pod.UID, "plain") || f.m.Started(pod.UID, "plain") {
		t.Fatal("unknown pod answered true")
	}
	f.m.Update(pod, runningStatus("plain", "id1", time.Now()))
	waitResult(t, f.m, kubelet.ProbeResult{UID: "uid", Container: "plain", ContainerID: "id1", Kind: kubelet.ProbeReadiness, Success: true})
	// No change, nothing sent.
	f.m.Update(pod, runningStatus("plain", "id1", time.Now()))
	select {
	case r := <-f.m.Results():
		if r.Kind == kubelet.ProbeReadiness {
			t.Fatalf("unexpected result %+v", r)
		}
	case <-time.After(20 * time.Millisecond):
	}
}

func TestRawContainerID(t *testing.T) {
	for in, want := range map[string]string{"kubette://abc": "abc", "containerd://x": "x", "plain": "plain"} {
		if got := rawContainerID(in); got != want {
			t.Errorf("rawContainerID(%q) = %q", in, got)
		}
	}
}

func TestErroredProbeRetriedThenFails(t *testing.T) {
	f := newFixture(t, func(string, []string) ([]byte, error) { return nil, errors.New("runtime unavailable") })
	pod := probePod(v1.Container{Name: "app", LivenessProbe: execProbe("live", 2)})
	f.m.Update(pod, runningStatus("app", "id1", time.Now()))
	waitResult(t, f.m, kubelet.ProbeResult{UID: "uid", Container: "app", ContainerID: "id1", Kind: kubelet.ProbeLiveness, Success: false})
	ws := workersOf(f.m, pod.UID)
	poll.Until(t, "worker on hold", poll.True(func() bool { return closed(ws[0]) }))
	// Two failed attempts (the threshold), each tried three times.
	if n := f.runner.count("id1 live"); n != 6 {
		t.Fatalf("exec calls = %d, want 6", n)
	}
	if !f.rec.has("Warning Unhealthy: Liveness probe errored and resulted in unknown state: runtime unavailable") {
		t.Fatalf("events = %v", f.rec.events)
	}
}

// A startup probe that fails failureThreshold times is reported, although a startup result
// starts out failed (no change), so that the kubelet restarts the container; then it stops.
func TestStartupFailureIsReported(t *testing.T) {
	f := newFixture(t, func(id string, cmd []string) ([]byte, error) { return nil, &cri.ExitError{Code: 1} })
	pod := probePod(v1.Container{Name: "app", StartupProbe: execProbe("startup", 3)})
	f.m.Update(pod, runningStatus("app", "id1", time.Now()))
	waitResult(t, f.m, kubelet.ProbeResult{UID: "uid", Container: "app", ContainerID: "id1", Kind: kubelet.ProbeStartup, Success: false})
	if n := f.runner.count("id1 startup"); n < 3 {
		t.Errorf("reported after %d attempts, want failureThreshold 3", n)
	}
	n := f.runner.count("id1 startup")
	time.Sleep(50 * time.Millisecond)
	if f.runner.count("id1 startup") != n {
		t.Error("the startup probe kept running after its failure (it waits for the container to be replaced)")
	}
}

// successThreshold counts consecutive successes before a readiness probe says ready.
func TestReadinessSuccessThreshold(t *testing.T) {
	f := newFixture(t, func(id string, cmd []string) ([]byte, error) { return nil, nil })
	p := execProbe("ready", 1)
	p.SuccessThreshold = 4
	pod := probePod(v1.Container{Name: "app", ReadinessProbe: p})
	f.m.Update(pod, runningStatus("app", "id1", time.Now()))
	waitResult(t, f.m, kubelet.ProbeResult{UID: "uid", Container: "app", ContainerID: "id1", Kind: kubelet.ProbeReadiness, Success: true})
	if n := f.runner.count("id1 ready"); n < 4 {
		t.Errorf("ready after %d successes, want successThreshold 4", n)
	}
}
