package kubelet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
		return false, k.stopPod(ctx, pod, rt, gracePeriod(pod))
	}
	syncErr := k.syncContainers(ctx, w, pod, rt)
	if rt, err = readRuntime(ctx, k.cfg.Runtime, w.uid); err != nil {
		return false, errors.Join(syncErr, err)
	}
	st := k.podStatus(pod, rt, w, false)
	if err := k.writeStatus(ctx, pod, st); err != nil {
		return false, errors.Join(syncErr, err)
	}
	if k.cfg.Probes != nil {
		k.cfg.Probes.Update(pod, st)
	}
	if st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed {
		return false, errors.Join(syncErr, k.stopPod(ctx, pod, rt, gracePeriod(pod)))
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
		attempt := uint32(0)
		if latest != nil {
			attempt = latest.GetMetadata().GetAttempt() + 1
		}
		cfg, err := k.sandboxConfig(pod, attempt)
		if err != nil {
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
		id, err := k.cfg.Runtime.RunPodSandbox(ctx, cfg, "")
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
		if err := k.cfg.Volumes.Setup(ctx, pod); err != nil {
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
	var errs []error
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
		case k.livenessFailed(inst):
			errs = append(errs, k.killContainers(ctx, pod, []*containerState{inst}, gracePeriod(pod),
				fmt.Sprintf("Container %s failed liveness probe, will be restarted", c.Name)))
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
		case inst.running() && (k.livenessFailed(inst) || inst.status.Annotations[annotationHash] != strconv.FormatUint(containerHash(c), 16)):
			msg := fmt.Sprintf("Container %s definition changed, will be restarted", c.Name)
			if k.livenessFailed(inst) {
				msg = fmt.Sprintf("Container %s failed liveness probe, will be restarted", c.Name)
			}
			if err := k.killContainers(ctx, pod, []*containerState{inst}, gracePeriod(pod), msg); err != nil {
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
	case inst.running() && k.livenessFailed(inst):
		return true, k.killContainers(ctx, pod, []*containerState{inst}, gracePeriod(pod),
			fmt.Sprintf("Container %s failed liveness probe, will be restarted", c.Name))
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

func (k *Kubelet) livenessFailed(inst *containerState) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.liveness[inst.id()]
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

// restartContainer starts a new instance of a container whose last one is not running,
// unless the crash back-off holds it.
func (k *Kubelet) restartContainer(ctx context.Context, w *podWorker, pod *v1.Pod, sb *podSandbox, rt *podRuntime, c *v1.Container, inst *containerState) error {
	key := string(pod.UID) + "/" + c.Name
	finished := inst.finishedAt()
	if inst.status.FinishedAt == 0 {
		finished = k.clock.Now()
	}
	if k.crashBackoff.IsInBackOffSince(key, finished) {
		delay := k.crashBackoff.Get(key)
		w.waiting[c.Name] = waitingReason{reasonCrashLoopBackOff,
			fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", delay, c.Name, podFullName(pod))}
		k.event(pod, fieldPath(pod, c), v1.EventTypeWarning, "BackOff",
			fmt.Sprintf("Back-off restarting failed container %s in pod %s", c.Name, podFullName(pod)))
		k.triggerAfter(pod.UID, finished.Add(delay).Sub(k.clock.Now()))
		return nil
	}
	k.crashBackoff.Next(key, finished)
	return k.startContainer(ctx, w, pod, sb, rt, c)
}

// startContainer pulls the image, resolves the environment and mounts, then creates and
// starts a container, recording why it could not in w.waiting.
func (k *Kubelet) startContainer(ctx context.Context, w *podWorker, pod *v1.Pod, sb *podSandbox, rt *podRuntime, c *v1.Container) error {
	fp := fieldPath(pod, c)
	restartCount := 0
	if l := rt.latest(c.Name); l != nil {
		restartCount = l.restartCount + 1
	}
	imageRef, reason, msg := k.ensureImage(ctx, pod, c, sb.config)
	if reason != "" {
		w.waiting[c.Name] = waitingReason{reason, msg}
		return nil // retried by the pull back-off's timer or the next sync
	}
	fail := func(reason string, err error) error {
		w.waiting[c.Name] = waitingReason{reason, err.Error()}
		k.event(pod, fp, v1.EventTypeWarning, "Failed", "Error: "+err.Error())
		return fmt.Errorf("container %s of %s: %w", c.Name, podFullName(pod), err)
	}
	var alloc v1.ResourceList
	var memCap int64
	if n := k.node(); n != nil {
		alloc = n.Status.Allocatable
		memCap = n.Status.Capacity.Memory().Value()
	}
	env, err := containerEnv(ctx, envInputs{client: k.cfg.Client, podIPs: sb.podIPs, hostIPs: sb.hostIPs, allocatable: alloc}, pod, c)
	if err != nil {
		return fail(reasonCreateContainerConfigError, err)
	}
	var mounts []*runtimeapi.Mount
	if len(c.VolumeMounts) > 0 {
		if k.cfg.Volumes == nil {
			return fail(reasonCreateContainerConfigError, errors.New("this kubelet has no volume manager"))
		}
		if mounts, err = k.cfg.Volumes.Mounts(pod, c); err != nil {
			return fail(reasonCreateContainerConfigError, err)
		}
	}
	if c.TerminationMessagePath != "" {
		hostPath, err := k.terminationLogFile(pod, c, restartCount)
		if err != nil {
			return fail(reasonCreateContainerError, err)
		}
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: c.TerminationMessagePath, HostPath: hostPath})
	}
	if err := os.MkdirAll(filepath.Join(sb.config.LogDirectory, c.Name), 0o755); err != nil {
		return fail(reasonCreateContainerError, fmt.Errorf("container log directory: %w", err))
	}
	cfg := containerConfig(pod, c, restartCount, imageRef, env, mounts, memCap)
	id, err := k.cfg.Runtime.CreateContainer(ctx, sb.id, cfg, sb.config)
	if err != nil {
		return fail(reasonCreateContainerError, errors.New(criMessage(err)))
	}
	k.event(pod, fp, v1.EventTypeNormal, "Created", "Created container: "+c.Name)
	if err := k.cfg.Runtime.StartContainer(ctx, id); err != nil {
		return fail(reasonRunContainerError, errors.New(criMessage(err)))
	}
	k.event(pod, fp, v1.EventTypeNormal, "Started", "Started container "+c.Name)
	delete(w.waiting, c.Name)
	return nil
}

// terminationLogFile creates the host file a container instance's termination message is
// written to: RootDir/pods/<uid>/containers/<name>/<restartCount>.
func (k *Kubelet) terminationLogFile(pod *v1.Pod, c *v1.Container, restartCount int) (string, error) {
	p := k.terminationLogPath(pod.UID, c.Name, restartCount)
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return "", fmt.Errorf("termination log: %w", err)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o666)
	if err != nil {
		return "", fmt.Errorf("termination log: %w", err)
	}
	f.Close()
	if err := os.Chmod(p, 0o666); err != nil { // writable by any container user
		return "", fmt.Errorf("termination log: %w", err)
	}
	return p, nil
}

// criMessage is the message of a CRI error, without the gRPC decoration or the client's
// context.
func criMessage(err error) string {
	var gs interface{ GRPCStatus() *status.Status }
	if errors.As(err, &gs) && gs.GRPCStatus() != nil {
		return gs.GRPCStatus().Message()
	}
	return err.Error()
}

// fieldPath is the field path of a container in events: spec.containers{name}.
func fieldPath(pod *v1.Pod, c *v1.Container) string {
	for _, ic := range pod.Spec.InitContainers {
		if ic.Name == c.Name {
			return "spec.initContainers{" + c.Name + "}"
		}
	}
	return "spec.containers{" + c.Name + "}"
}

// killContainers stops running containers in parallel with the grace period, recording a
// Killing event for each (msg, or "Stopping container <name>").
func (k *Kubelet) killContainers(ctx context.Context, pod *v1.Pod, cs []*containerState, grace int64, msg string) error {
	var wg sync.WaitGroup
	errs := make([]error, len(cs))
	for i, c := range cs {
		if !c.running() && c.status.State != runtimeapi.ContainerState_CONTAINER_CREATED {
			continue
		}
		if pod != nil {
			m := msg
			if m == "" {
				m = "Stopping container " + c.name()
			}
			spec := &v1.Container{Name: c.name()}
			k.event(pod, fieldPath(pod, spec), v1.EventTypeNormal, "Killing", m)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := k.cfg.Runtime.StopContainer(ctx, c.id(), grace); err != nil {
				errs[i] = fmt.Errorf("stop container %s: %w", c.id(), err)
				return
			}
			k.mu.Lock()
			delete(k.liveness, c.id())
			k.mu.Unlock()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stopPod stops a pod's containers and sandboxes but keeps them (their logs stay readable).
func (k *Kubelet) stopPod(ctx context.Context, pod *v1.Pod, rt *podRuntime, grace int64) error {
	if err := k.killContainers(ctx, pod, rt.containers, grace, ""); err != nil {
		return err
	}
	for _, s := range rt.sandboxes {
		if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			if err := k.cfg.Runtime.StopPodSandbox(ctx, s.Id); err != nil {
				return fmt.Errorf("stop sandbox %s: %w", s.Id, err)
			}
		}
	}
	return nil
}

// removePod removes every container and sandbox of the pod from the runtime.
func (k *Kubelet) removePod(ctx context.Context, rt *podRuntime) error {
	var errs []error
	for _, c := range rt.containers {
		if err := k.cfg.Runtime.RemoveContainer(ctx, c.id()); err != nil {
			errs = append(errs, fmt.Errorf("remove container %s: %w", c.id(), err))
		}
	}
	for _, s := range rt.sandboxes {
		if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			if err := k.cfg.Runtime.StopPodSandbox(ctx, s.Id); err != nil {
				errs = append(errs, fmt.Errorf("stop sandbox %s: %w", s.Id, err))
				continue
			}
		}
		if err := k.cfg.Runtime.RemovePodSandbox(ctx, s.Id); err != nil {
			errs = append(errs, fmt.Errorf("remove sandbox %s: %w", s.Id, err))
		}
	}
	return errors.Join(errs...)
}

// terminatePod carries out a graceful deletion: stop the containers within the grace period,
// report the final status, remove everything, tear the volumes down and delete the pod
// object for good (grace 0, only this UID).
func (k *Kubelet) terminatePod(ctx context.Context, w *podWorker, pod *v1.Pod, rt *podRuntime) error {
	if err := k.stopPod(ctx, pod, rt, gracePeriod(pod)); err != nil {
		return err
	}
	rt, err := readRuntime(ctx, k.cfg.Runtime, pod.UID)
	if err != nil {
		return err
	}
	if err := k.writeStatus(ctx, pod, k.podStatus(pod, rt, w, true)); err != nil {
		return err
	}
	if err := k.removePod(ctx, rt); err != nil {
		return err
	}
	if err := k.releasePod(ctx, pod.UID, podLogDir(k.cfg.LogDir, pod)); err != nil {
		return err
	}
	uid := pod.UID
	err = k.cfg.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64),
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s: %w", podFullName(pod), err)
	}
	return nil
}

// releasePod drops what the node keeps for a removed pod beyond the runtime: probes,
// volumes, termination message files, the pod directory once empty, and the pod's logs.
func (k *Kubelet) releasePod(ctx context.Context, uid types.UID, logDir string) error {
	if k.cfg.Probes != nil {
		k.cfg.Probes.Remove(uid)
	}
	if k.cfg.Volumes != nil {
		if err := k.cfg.Volumes.TearDown(ctx, uid); err != nil {
			return fmt.Errorf("tear down volumes of pod %s: %w", uid, err)
		}
	}
	podDir := filepath.Join(k.cfg.RootDir, "pods", string(uid))
	if err := os.RemoveAll(filepath.Join(podDir, "containers")); err != nil {
		return fmt.Errorf("remove pod dir: %w", err)
	}
	// Never recursive here: whatever the volume manager left (a mount) is not ours to delete.
	os.Remove(filepath.Join(podDir, "volumes"))
	os.Remove(podDir)
	if logDir != "" {
		if err := os.RemoveAll(logDir); err != nil {
			return fmt.Errorf("remove pod logs: %w", err)
		}
	}
	return nil
}

// cleanupOrphan kills and removes what the runtime holds of a pod the API does not have.
func (k *Kubelet) cleanupOrphan(ctx context.Context, w *podWorker, rt *podRuntime) (bool, error) {
	if rt.empty() {
		return true, nil
	}
	k.log.Info("cleaning up a pod the API does not have", "uid", w.uid)
	var wg sync.WaitGroup
	errs := make([]error, len(rt.containers))
	for i, c := range rt.containers {
		if !c.running() && c.status.State != runtimeapi.ContainerState_CONTAINER_CREATED {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := k.cfg.Runtime.StopContainer(ctx, c.id(), graceFromAnnotations(c.status.Annotations)); err != nil {
				errs[i] = fmt.Errorf("stop container %s: %w", c.id(), err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return false, err
	}
	if err := k.removePod(ctx, rt); err != nil {
		return false, err
	}
	logDir := ""
	for _, c := range rt.containers {
		if ns, name := c.status.Labels[labelPodNamespace], c.status.Labels[labelPodName]; ns != "" && name != "" {
			logDir = filepath.Join(k.cfg.LogDir, fmt.Sprintf("%s_%s_%s", ns, name, w.uid))
		}
	}
	if err := k.releasePod(ctx, w.uid, logDir); err != nil {
		return false, err
	}
	return true, nil
}

// collectGarbage removes stopped containers beyond the newest two per name (the newest and
// the one before it carry the status and last termination state) and stopped sandboxes
// that no longer hold a kept container.
func (k *Kubelet) collectGarbage(ctx context.Context, rt *podRuntime) {
	seen := map[string]int{}
	keepSandbox := map[string]bool{}
	if s := rt.latestSandbox(); s != nil {
		keepSandbox[s.Id] = true
	}
	for _, c := range rt.containers {
		seen[c.name()]++
		if seen[c.name()] <= 2 || c.running() {
			keepSandbox[c.sandboxID] = true
			continue
		}
		if err := k.cfg.Runtime.RemoveContainer(ctx, c.id()); err != nil {
			k.log.Warn("remove old container", "id", c.id(), "err", err)
		}
	}
	for _, s := range rt.sandboxes {
		if keepSandbox[s.Id] || s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		if err := k.cfg.Runtime.RemovePodSandbox(ctx, s.Id); err != nil {
			k.log.Warn("remove old sandbox", "id", s.Id, "err", err)
		}
	}
}
