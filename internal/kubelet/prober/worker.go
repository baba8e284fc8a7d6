package prober

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/kubelet"
)

// withDefaults returns a copy of p with the API's defaults for unset fields (period 10s,
// timeout 1s, success and failure thresholds 1 and 3), which a pod read from the API has
// already but a hand-made one may not.
func withDefaults(p *v1.Probe) *v1.Probe {
	p = p.DeepCopy()
	if p.PeriodSeconds <= 0 {
		p.PeriodSeconds = 10
	}
	if p.TimeoutSeconds <= 0 {
		p.TimeoutSeconds = 1
	}
	if p.SuccessThreshold <= 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold <= 0 {
		p.FailureThreshold = 3
	}
	return p
}

// maxProbeRetries is how often an errored probe attempt is tried in a row (upstream's).
const maxProbeRetries = 3

// worker probes one container instance periodically.
type worker struct {
	m           *Manager
	key         probeKey
	container   *v1.Container
	spec        *v1.Probe
	containerID string
	startedAt   time.Time
	state       *probeState

	lastResult bool
	resultRun  int
}

// kindTitle is how events name a probe kind.
func kindTitle(kind string) string {
	switch kind {
	case kubelet.ProbeLiveness:
		return "Liveness"
	case kubelet.ProbeReadiness:
		return "Readiness"
	case kubelet.ProbeStartup:
		return "Startup"
	}
	return kind
}

// run probes at once and then every period until ctx ends or the worker is done: a startup
// probe that succeeded, or a liveness or startup probe that failed (on hold until the container
// is replaced, as upstream).
func (w *worker) run(ctx context.Context) {
	ticker := time.NewTicker(time.Duration(w.spec.PeriodSeconds) * w.m.cfg.Second)
	defer ticker.Stop()
	for {
		if !w.doProbe(ctx) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// doProbe runs the probe once if its time has come and records the result; it reports
// whether the worker should go on.
func (w *worker) doProbe(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	if d := w.spec.InitialDelaySeconds; d > 0 && w.m.cfg.Now().Sub(w.startedAt) < time.Duration(d)*w.m.cfg.Second {
		return true
	}
	if w.key.kind != kubelet.ProbeStartup && !w.m.Started(w.key.uid, w.key.container) {
		return true
	}
	podIP, pod := w.m.podAddress(w.key.uid)
	if pod == nil {
		return false
	}
	// As upstream, a probe that errored (could not run at all) is retried at once, a few times.
	var res result
	for range maxProbeRetries {
		if res = w.m.runProbe(ctx, w.spec, w.container, w.containerID, podIP); res.err == nil || ctx.Err() != nil {
			break
		}
	}
	if ctx.Err() != nil {
		return false // stopped while probing: the outcome belongs to nobody
	}
	title := kindTitle(w.key.kind)
	switch {
	case res.err != nil:
		w.m.event(pod, w.container, v1.EventTypeWarning, "Unhealthy", fmt.Sprintf("%s probe errored and resulted in unknown state: %v", title, res.err))
	case res.warning:
		w.m.event(pod, w.container, v1.EventTypeWarning, "ProbeWarning", fmt.Sprintf("%s probe warning: %s", title, res.output))
	case !res.success:
		w.m.event(pod, w.container, v1.EventTypeWarning, "Unhealthy", fmt.Sprintf("%s probe failed: %s", title, res.output))
	}
	success := res.success && res.err == nil

	if w.resultRun > 0 && w.lastResult == success {
		w.resultRun++
	} else {
		w.lastResult, w.resultRun = success, 1
	}
	if (!success && w.resultRun < int(w.spec.FailureThreshold)) || (success && w.resultRun < int(w.spec.SuccessThreshold)) {
		return true
	}
	if !w.m.setResult(w, success) {
		return false
	}
	switch {
	case w.key.kind == kubelet.ProbeStartup && success:
		return false // started: the startup probe is done for this instance
	case (w.key.kind == kubelet.ProbeLiveness || w.key.kind == kubelet.ProbeStartup) && !success:
		return false // on hold until the kubelet replaces the container
	}
	return true
}
