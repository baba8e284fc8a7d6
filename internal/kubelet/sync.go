package kubelet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Waiting reasons, as upstream's.
const (
	reasonContainerCreating          = "ContainerCreating"
	reasonPodInitializing            = "PodInitializing"
	reasonCrashLoopBackOff           = "CrashLoopBackOff"
	reasonErrImagePull               = "ErrImagePull"
	reasonImagePullBackOff           = "ImagePullBackOff"
	reasonErrImageNeverPull          = "ErrImageNeverPull"
	reasonCreateContainerConfigError = "CreateContainerConfigError"
	reasonCreateContainerError       = "CreateContainerError"
	reasonRunContainerError          = "RunContainerError"
)

// syncPod brings the runtime in line with the pod and reports its status. done is true when
// the pod is gone from the API and nothing of it is left in the runtime.
func (k *Kubelet) syncPod(ctx context.Context, w *podWorker) (done bool, err error) {
	pod := k.podByUID(w.uid)
	rt, err := readRuntime(ctx, k.cfg.Runtime, w.uid)
	if err != nil {
		return false, err
	}
	k.observe(rt)
	if pod == nil {
		return k.cleanupOrphan(ctx, w, rt)
	}
	if pod.DeletionTimestamp != nil {
		return false, k.terminatePod(ctx, w, pod, rt)
	}
	if w.startTime.IsZero() {
		w.startTime = k.clock.Now()
	}
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		// A terminal pod never runs again; make sure nothing of it does.
		return false, k.stopEnded(ctx, pod, rt)
	}
	if rejected, err := k.admit(ctx, w, pod, rt); rejected || err != nil {
		return false, err
	}
	if exceeded, left := k.activeDeadline(pod, w); exceeded {
		return false, k.failPastDeadline(ctx, w, pod, rt)
	} else if left > 0 {
		k.triggerAfter(pod.UID, left)
	}
	syncErr := k.syncContainers(ctx, w, pod, rt)
	if rt, err = readRuntime(ctx, k.cfg.Runtime, w.uid); err != nil {
		return false, errors.Join(syncErr, err)
	}
	if rt.settled() {
		k.observe(rt)
	}
	st := k.podStatus(pod, rt, w, false)
	if k.cfg.Probes != nil {
		// The prober learns of newly running containers before the status is written, so that
		// one without probes is started and ready in the same write that reports it running.
		k.cfg.Probes.Update(pod, st)
		st = k.podStatus(pod, rt, w, false)
	}
	if err := k.writeStatus(ctx, pod, st); err != nil {
		return false, errors.Join(syncErr, err)
	}
	if st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed {
		return false, errors.Join(syncErr, k.stopEnded(ctx, pod, rt))
	}
	k.collectGarbage(ctx, rt)
	return false, syncErr
}

// gracePeriod is the pod's termination grace in seconds: the deletion's, else the spec's.
func gracePeriod(pod *v1.Pod) int64 {
	if pod.DeletionGracePeriodSeconds != nil {
		return *pod.DeletionGracePeriodSeconds
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return 30
}

// isSidecar tells whether an init container is a restartable ("sidecar") one.
func isSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// podSandbox is the sandbox the pod's containers go into.
type podSandbox struct {
	id      string
	config  *runtimeapi.PodSandboxConfig
	podIPs  []string
	hostIPs []string
}

// syncContainers is computePodActions and their execution: a sandbox when there is no ready
// one, then init containers one at a time, then the app containers, each (re)started as the
// restart policy and the back-off allow.
func (k *Kubelet) syncContainers(ctx context.Context, w *podWorker, pod *v1.Pod, rt *podRuntime) error {
	if k.node() == nil {
		// Admission, the host IP and resource defaults need the Node; it is registered by
		// the node status loop, and this sync is retried.
		return fmt.Errorf("node %s is not registered yet", k.cfg.NodeName)
	}
	latest := rt.latestSandbox()
	sb := &podSandbox{hostIPs: k.hostIPs()}
	if rt.sandboxReady() {
		sb.id = latest.Id
	} else {
		if latest != nil && pod.Spec.RestartPolicy == v1.RestartPolicyNever && len(rt.containers) > 0 {
			return nil // the pod ran and must not run again; its status goes terminal
		}
		if latest != nil && pod.Spec.RestartPolicy == v1.RestartPolicyOnFailure && allSucceeded(pod, rt) {
			return nil
		}
		if err := k.killContainers(ctx, pod, rt.containers, gracePeriod(pod), ""); err != nil {
			return err
		}
		attempt, handler := uint32(0), ""
		if latest != nil {
			attempt = latest.GetMetadata().GetAttempt() + 1
		}
		cfg, err := k.sandboxConfig(pod, attempt)
		if err == nil {
			handler, err = k.runtimeHandler(pod)
		}
		if err != nil {
			k.event(pod, "", v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: "+err.Error())
			return err
		}
		for _, s := range rt.sandboxes {
			if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				if err := k.cfg.Runtime.StopPodSandbox(ctx, s.Id); err != nil {
					return fmt.Errorf("stop sandbox %s: %w", s.Id, err)
				}
			}
		}
		if err := os.MkdirAll(cfg.LogDirectory, 0o755); err != nil {
			return fmt.Errorf("pod log directory: %w", err)
		}
		id, err := k.cfg.Runtime.RunPodSandbox(ctx, cfg, handler)
		if err != nil {
			k.event(pod, "", v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: "+criMessage(err))
			return fmt.Errorf("run sandbox of %s: %w", podFullName(pod), err)
		}
		// The containers of earlier sandboxes are history now: the new sandbox starts over.
		sb.id = id
	}
	st, err := k.cfg.Runtime.PodSandboxStatus(ctx, sb.id, false)
	if err != nil {
		return fmt.Errorf("status of sandbox %s: %w", sb.id, err)
	}
	sb.podIPs = sandboxIPs(pod, st.GetStatus(), sb.hostIPs)
	if sb.config, err = k.sandboxConfig(pod, st.GetStatus().GetMetadata().GetAttempt()); err != nil {
		return err
	}
	if k.cfg.Volumes != nil {
		var alloc v1.ResourceList
		if n := k.node(); n != nil {
			alloc = n.Status.Allocatable
		}
		if err := k.cfg.Volumes.Setup(ctx, pod, alloc); err != nil {
			k.event(pod, "", v1.EventTypeWarning, "FailedMount", fmt.Sprintf("MountVolume.SetUp failed for pod %q: %v", podFullName(pod), err))
			return fmt.Errorf("set up volumes of %s: %w", podFullName(pod), err)
		}
	}
	// What ran in this sandbox decides what to do next.
	inSandbox := func(name string) *containerState {
		for _, c := range rt.containers {
			if c.name() == name && c.sandboxID == sb.id {
				return c
			}
		}
		return nil
	}
	initDone := true
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; !isSidecar(c) {
			if inst := inSandbox(c.Name); inst == nil || !inst.exited() || inst.status.ExitCode != 0 {
				initDone = false
			}
		}
	}
	// Once the app containers started, sidecars no longer hold anything up.
	appsStarted := false
	for _, c := range pod.Spec.Containers {
		appsStarted = appsStarted || inSandbox(c.Name) != nil
	}
	if initDone && appsDone(pod, inSandbox) {
		// Nothing will run again: the sidecars stop too, and the pod completes.
		var sidecars []*containerState
		for i := len(pod.Spec.InitContainers) - 1; i >= 0; i-- {
			if c := &pod.Spec.InitContainers[i]; isSidecar(c) {
				if inst := inSandbox(c.Name); inst != nil && inst.running() {
					sidecars = append(sidecars, inst)
				}
			}
		}
		return k.killContainers(ctx, pod, sidecars, gracePeriod(pod), "")
	}
	// Ephemeral containers may start before the init containers are done, as upstream.
	errs := []error{k.startEphemeralContainers(ctx, w, pod, sb, rt)}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		inst := inSandbox(c.Name)
		if isSidecar(c) {
			blocked, err := k.syncSidecar(ctx, w, pod, sb, rt, c, inst)
			errs = append(errs, err)
			if blocked && !appsStarted {
				return errors.Join(errs...)
			}
			continue
		}
		if initDone {
			continue
		}
		switch {
		case inst == nil:
			return errors.Join(append(errs, k.startContainer(ctx, w, pod, sb, rt, c))...)
		case inst.exited() && inst.status.ExitCode == 0:
			continue
		case inst.exited():
			if pod.Spec.RestartPolicy == v1.RestartPolicyNever {
				return errors.Join(errs...) // the pod failed
			}
			return errors.Join(append(errs, k.restartContainer(ctx, w, pod, sb, rt, c, inst))...)
		case k.failedProbe(inst) != "":
			grace, msg := probeKill(pod, c, k.failedProbe(inst))
			errs = append(errs, k.killContainers(ctx, pod, []*containerState{inst}, grace, msg))
			return errors.Join(errs...)
		default:
			return errors.Join(errs...) // running: wait for it to finish
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		inst := inSandbox(c.Name)
		switch {
		case inst == nil:
			errs = append(errs, k.startContainer(ctx, w, pod, sb, rt, c))
		case inst.running() && (k.failedProbe(inst) != "" || inst.status.Annotations[annotationHash] != strconv.FormatUint(containerHash(c), 16)):
			grace, msg := gracePeriod(pod), fmt.Sprintf("Container %s definition changed, will be restarted", c.Name)
			if probe := k.failedProbe(inst); probe != "" {
				grace, msg = probeKill(pod, c, probe)
			}
			if err := k.killContainers(ctx, pod, []*containerState{inst}, grace, msg); err != nil {
				errs = append(errs, err)
				continue
			}
			k.trigger(pod.UID) // restart (or not) by the policy once the runtime says it exited
		case inst.running():
		case inst.exited() || inst.status.State == runtimeapi.ContainerState_CONTAINER_CREATED:
			if shouldRestart(pod.Spec.RestartPolicy, inst) {
				errs = append(errs, k.restartContainer(ctx, w, pod, sb, rt, c, inst))
			}
		}
	}
	return errors.Join(errs...)
}

// syncSidecar keeps a restartable init container running; blocked tells whether the next
// containers must wait for it (it is not started yet).
func (k *Kubelet) syncSidecar(ctx context.Context, w *podWorker, pod *v1.Pod, sb *podSandbox, rt *podRuntime, c *v1.Container, inst *containerState) (blocked bool, err error) {
	switch {
	case inst == nil:
		return true, k.startContainer(ctx, w, pod, sb, rt, c)
	case inst.running() && k.failedProbe(inst) != "":
		grace, msg := probeKill(pod, c, k.failedProbe(inst))
		return true, k.killContainers(ctx, pod, []*containerState{inst}, grace, msg)
	case inst.running():
		return !k.started(pod, c), nil
	default:
		return true, k.restartContainer(ctx, w, pod, sb, rt, c, inst)
	}
}

// appsDone tells whether every app container exited and the restart policy restarts none.
func appsDone(pod *v1.Pod, inSandbox func(string) *containerState) bool {
	if pod.Spec.RestartPolicy == v1.RestartPolicyAlways {
		return false
	}
	for _, c := range pod.Spec.Containers {
		inst := inSandbox(c.Name)
		if inst == nil || !inst.exited() || shouldRestart(pod.Spec.RestartPolicy, inst) {
			return false
		}
	}
	return true
}

// allSucceeded tells whether every app container's newest instance exited 0.
func allSucceeded(pod *v1.Pod, rt *podRuntime) bool {
	for _, c := range pod.Spec.Containers {
		l := rt.latest(c.Name)
		if l == nil || !l.exited() || l.status.ExitCode != 0 {
			return false
		}
	}
	return true
}

// shouldRestart applies the pod's restart policy to a container instance that is not running.
func shouldRestart(policy v1.RestartPolicy, inst *containerState) bool {
	switch policy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return !inst.exited() || inst.status.ExitCode != 0
	}
	return true
}

// failedProbe is the probe (ProbeLiveness or ProbeStartup) whose failure restarts the container
// instance, or "".
func (k *Kubelet) failedProbe(inst *containerState) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.probeKills[inst.id()]
}

// probeKill is the grace period and the Killing Event's message of a container whose liveness
// or startup probe failed: as upstream, the probe's own terminationGracePeriodSeconds when it
// has one, unless the pod is being deleted (the deletion's grace then), else the pod's.
func probeKill(pod *v1.Pod, c *v1.Container, probe string) (grace int64, msg string) {
	grace = gracePeriod(pod)
	p := c.LivenessProbe
	if probe == ProbeStartup {
		p = c.StartupProbe
	}
	if pod.DeletionGracePeriodSeconds == nil && p != nil && p.TerminationGracePeriodSeconds != nil {
		grace = *p.TerminationGracePeriodSeconds
	}
	return grace, fmt.Sprintf("Container %s failed %s probe, will be restarted", c.Name, probe)
}

// started tells whether a running container passed its startup probe.
func (k *Kubelet) started(pod *v1.Pod, c *v1.Container) bool {
	if k.cfg.Probes == nil {
		return c.StartupProbe == nil
	}
	return k.cfg.Probes.Started(pod.UID, c.Name)
}

// ready tells whether a running container passes its readiness probe.
func (k *Kubelet) ready(pod *v1.Pod, c *v1.Container) bool {
	if k.cfg.Probes == nil {
		return c.ReadinessProbe == nil
	}
	return k.cfg.Probes.Ready(pod.UID, c.Name)
}
