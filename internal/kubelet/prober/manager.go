// Package prober runs the liveness, readiness and startup probes of a node's containers: one
// worker goroutine per (pod, container, probe kind) while the container runs, probing by HTTP
// GET, TCP connect, exec (through CRI ExecSync) or the gRPC health protocol, with upstream's
// delays, periods, timeouts and thresholds, Unhealthy events and result changes on a channel.
// It implements the kubelet's ProbeManager.
//
// It imports internal/kubelet for ProbeResult (the ProbeManager interface returns a channel
// of that type, which no identical type could satisfy), so the wiring that builds a Manager
// for a kubelet lives outside internal/kubelet (in cmd/kubette).
package prober

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/kubette/kubette/internal/kubelet"
)

// ExecRunner runs a command in a container, with the shape of CRI's RuntimeService.ExecSync:
// a non-zero exit comes back as an error with an ExitStatus() int method.
type ExecRunner interface {
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout, stderr []byte, err error)
}

// Config configures a Manager.
type Config struct {
	// Runner runs exec probes; nil makes exec probes error.
	Runner ExecRunner
	// Recorder records Unhealthy and ProbeWarning events; nil records none.
	Recorder record.EventRecorder
	// Logger logs; nil discards.
	Logger *slog.Logger
	// Now is the clock initialDelaySeconds is measured with against the container's start;
	// nil is time.Now.
	Now func() time.Time
	// KubeVersion is "<major>.<minor>", sent as User-Agent kube-probe/<KubeVersion> by HTTP
	// probes; empty sends "kube-probe".
	KubeVersion string
	// Second is the length of one of the probe's initialDelaySeconds and periodSeconds
	// (time.Second when zero); tests shorten it. timeoutSeconds are always real seconds.
	Second time.Duration
	// ResultsBuffer is the capacity of the Results channel (256 when zero).
	ResultsBuffer int
}

// Manager runs probe workers and keeps their results. Its workers run until Run's context
// ends, the pod is removed, or the container they probe stops or is replaced.
type Manager struct {
	cfg     Config
	log     *slog.Logger
	ctx     context.Context // parent of every worker's context; cancelled when Run returns
	cancel  context.CancelFunc
	wg      sync.WaitGroup // one per running worker
	results chan kubelet.ProbeResult

	mu     sync.Mutex
	pods   map[types.UID]*podEntry
	probes map[probeKey]*probeState
}

var _ kubelet.ProbeManager = (*Manager)(nil)

// probeKey names one probe worker's slot.
type probeKey struct {
	uid       types.UID
	container string
	kind      string
}

// podEntry is what the manager knows of a pod from the last Update.
type podEntry struct {
	pod   *v1.Pod
	podIP string
}

// probeState is a probe's current result for one container instance and its worker.
type probeState struct {
	containerID string // raw CRI ID
	success     bool
	stop        context.CancelFunc // stops the worker (a no-op once it ended)
	done        chan struct{}
}

// New returns a Manager. Call Run to tie its workers to a context.
func New(cfg Config) *Manager {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Second <= 0 {
		cfg.Second = time.Second
	}
	if cfg.ResultsBuffer <= 0 {
		cfg.ResultsBuffer = 256
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{
		cfg:     cfg,
		log:     cfg.Logger,
		ctx:     ctx,
		cancel:  cancel,
		results: make(chan kubelet.ProbeResult, cfg.ResultsBuffer),
		pods:    map[types.UID]*podEntry{},
		probes:  map[probeKey]*probeState{},
	}
}

// Run blocks until ctx ends, then stops every worker and waits for them. Workers started
// by Update before or during Run are owned by it.
func (m *Manager) Run(ctx context.Context) {
	<-ctx.Done()
	// Under mu, so that no Update starts a worker (wg.Add) once Wait may run.
	m.mu.Lock()
	m.cancel()
	m.mu.Unlock()
	m.wg.Wait()
}

// Results delivers result changes: a probe's outcome for a container changed, or (from
// Update) what Ready or Started answers for a running container changed.
func (m *Manager) Results() <-chan kubelet.ProbeResult { return m.results }

// probeOf returns a container's probe of a kind.
func probeOf(c *v1.Container, kind string) *v1.Probe {
	switch kind {
	case kubelet.ProbeLiveness:
		return c.LivenessProbe
	case kubelet.ProbeReadiness:
		return c.ReadinessProbe
	case kubelet.ProbeStartup:
		return c.StartupProbe
	}
	return nil
}

var kinds = [...]string{kubelet.ProbeStartup, kubelet.ProbeLiveness, kubelet.ProbeReadiness}

// probedContainers returns the containers of a pod that may have probes: the regular ones
// and the sidecars (init containers with restartPolicy Always).
func probedContainers(pod *v1.Pod) []*v1.Container {
	var out []*v1.Container
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			out = append(out, c)
		}
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

// runningContainer is a running container instance from a pod status.
type runningContainer struct {
	id        string // raw CRI ID
	startedAt time.Time
}

// runningContainers maps container names to their running instance in status.
func runningContainers(status *v1.PodStatus) map[string]runningContainer {
	out := map[string]runningContainer{}
	if status == nil {
		return out
	}
	for _, list := range [][]v1.ContainerStatus{status.InitContainerStatuses, status.ContainerStatuses} {
		for _, cs := range list {
			if cs.State.Running == nil || cs.ContainerID == "" {
				continue
			}
			out[cs.Name] = runningContainer{id: rawContainerID(cs.ContainerID), startedAt: cs.State.Running.StartedAt.Time}
		}
	}
	return out
}

// rawContainerID strips the "<runtime>://" prefix of a status's containerID.
func rawContainerID(id string) string {
	if _, after, ok := strings.Cut(id, "://"); ok {
		return after
	}
	return id
}

// Update starts a worker for every probe of every running container of pod that has none
// for its current container ID, restarts those whose container ID changed (the new instance
// starts with readiness false, liveness true, startup false) and stops those whose container
// no longer runs or left the spec.
func (m *Manager) Update(pod *v1.Pod, status *v1.PodStatus) {
	running := runningContainers(status)
	m.mu.Lock()
	before := m.answersLocked(pod.UID, running)
	e := &podEntry{pod: pod}
	if status != nil {
		e.podIP = status.PodIP
	}
	m.pods[pod.UID] = e

	want := map[probeKey]bool{}
	for _, c := range probedContainers(pod) {
		rc, ok := running[c.Name]
		if !ok {
			continue
		}
		for _, kind := range kinds {
			p := probeOf(c, kind)
			if p == nil {
				continue
			}
			key := probeKey{pod.UID, c.Name, kind}
			want[key] = true
			if st := m.probes[key]; st != nil {
				if st.containerID == rc.id {
					continue
				}
				m.stopLocked(key)
			}
			m.startLocked(key, c, p, rc)
		}
	}
	for key := range m.probes {
		if key.uid == pod.UID && !want[key] {
			m.stopLocked(key)
		}
	}
	after := m.answersLocked(pod.UID, running)
	m.mu.Unlock()

	for name, a := range after {
		b := before[name]
		if a.ready != b.ready {
			m.offer(kubelet.ProbeResult{UID: pod.UID, Container: name, ContainerID: running[name].id, Kind: kubelet.ProbeReadiness, Success: a.ready})
		}
		if a.started != b.started {
			m.offer(kubelet.ProbeResult{UID: pod.UID, Container: name, ContainerID: running[name].id, Kind: kubelet.ProbeStartup, Success: a.started})
		}
	}
}

// answers is what Ready and Started say of a container.
type answers struct{ ready, started bool }

// answersLocked returns Ready and Started of each running container of a pod.
func (m *Manager) answersLocked(uid types.UID, running map[string]runningContainer) map[string]answers {
	out := map[string]answers{}
	for name := range running {
		out[name] = answers{ready: m.answerLocked(uid, name, kubelet.ProbeReadiness), started: m.answerLocked(uid, name, kubelet.ProbeStartup)}
	}
	return out
}

// answerLocked is Ready (readiness) or Started (startup): false for a pod Update has not seen,
// true for a container without that probe, else the probe's current result.
func (m *Manager) answerLocked(uid types.UID, name, kind string) bool {
	e := m.pods[uid]
	if e == nil {
		return false
	}
	var c *v1.Container
	for _, pc := range probedContainers(e.pod) {
		if pc.Name == name {
			c = pc
		}
	}
	if c == nil || probeOf(c, kind) == nil {
		return true
	}
	st := m.probes[probeKey{uid, name, kind}]
	return st != nil && st.success
}

// Ready tells whether a container passes its readiness probe (true without one; false for a
// pod Update has not seen yet).
func (m *Manager) Ready(uid types.UID, container string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.answerLocked(uid, container, kubelet.ProbeReadiness)
}

// Started tells whether a container passed its startup probe (true without one; false for a
// pod Update has not seen yet).
func (m *Manager) Started(uid types.UID, container string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.answerLocked(uid, container, kubelet.ProbeStartup)
}

// Remove stops every worker of a pod and forgets it. It does not wait for the workers; Run
// does when it returns.
func (m *Manager) Remove(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for key := range m.probes {
		if key.uid == uid {
			m.stopLocked(key)
		}
	}
	delete(m.pods, uid)
}

// startLocked starts the worker of a probe for a container instance.
func (m *Manager) startLocked(key probeKey, c *v1.Container, p *v1.Probe, rc runningContainer) {
	if m.ctx.Err() != nil {
		return // Run has ended: no more workers
	}
	ctx, cancel := context.WithCancel(m.ctx)
	st := &probeState{
		containerID: rc.id,
		success:     key.kind == kubelet.ProbeLiveness, // readiness and startup start false
		stop:        cancel,
		done:        make(chan struct{}),
	}
	m.probes[key] = st
	w := &worker{m: m, key: key, container: c.DeepCopy(), spec: withDefaults(p), containerID: rc.id, startedAt: rc.startedAt, state: st}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(st.done)
		defer cancel()
		w.run(ctx)
	}()
}

// stopLocked stops a probe's worker and drops its result.
func (m *Manager) stopLocked(key probeKey) {
	if st := m.probes[key]; st != nil && st.stop != nil {
		st.stop()
	}
	delete(m.probes, key)
}

// setResult records a worker's result for its container instance and sends it when it
// changed. It reports false when the worker is stale (its slot went to another instance or
// was dropped), so that the worker ends.
func (m *Manager) setResult(w *worker, success bool) bool {
	m.mu.Lock()
	st := m.probes[w.key]
	if st != w.state {
		m.mu.Unlock()
		return false
	}
	changed := st.success != success
	st.success = success
	m.mu.Unlock()
	// A startup probe starts failed, so its failure changes nothing here; the kubelet must
	// still hear of it, to restart the container.
	if changed || (w.key.kind == kubelet.ProbeStartup && !success) {
		select {
		case m.results <- kubelet.ProbeResult{UID: w.key.uid, Container: w.key.container, ContainerID: w.containerID, Kind: w.key.kind, Success: success}:
		case <-m.ctx.Done():
		}
	}
	return true
}

// offer sends a result without blocking (Update runs in the kubelet's sync); a full channel
// drops it, and the kubelet's periodic resync picks the change up instead.
func (m *Manager) offer(r kubelet.ProbeResult) {
	select {
	case m.results <- r:
	default:
		m.log.Warn("probe results channel full; dropped a change", "pod", string(r.UID), "container", r.Container, "kind", r.Kind)
	}
}

// podAddress returns the pod's IP and the pod from the last Update (nil once removed).
func (m *Manager) podAddress(uid types.UID) (podIP string, pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.pods[uid]; e != nil {
		return e.podIP, e.pod
	}
	return "", nil
}
