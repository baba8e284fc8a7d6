package kubelet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

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
	var restartCount int
	if l := rt.latest(c.Name); l != nil {
		restartCount = l.restartCount + 1
	} else {
		// No record of an earlier attempt: after a reboot the runtime has none, but the
		// container's log directory still has one log file per attempt.
		n, err := restartCountFromLogs(filepath.Join(sb.config.LogDirectory, c.Name))
		if err != nil {
			return fmt.Errorf("container %s of %s: %w", c.Name, podFullName(pod), err)
		}
		restartCount = n
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
	env, err := containerEnv(ctx, envInputs{client: k.cfg.Client, podIPs: sb.podIPs, hostIPs: sb.hostIPs, allocatable: alloc, services: k.services}, pod, c)
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
	hosts, err := k.hostsMount(pod, c, sb.podIPs)
	if err != nil {
		return fail(reasonCreateContainerConfigError, err)
	}
	if hosts != nil {
		mounts = append(mounts, hosts)
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
	if err := targetNamespace(pod, c, rt, cfg); err != nil {
		return fail(reasonCreateContainerConfigError, err)
	}
	id, err := k.cfg.Runtime.CreateContainer(ctx, sb.id, cfg, sb.config)
	if err != nil {
		return fail(reasonCreateContainerError, errors.New(criMessage(err)))
	}
	k.event(pod, fp, v1.EventTypeNormal, "Created", "Created container: "+c.Name)
	if err := k.cfg.Runtime.StartContainer(ctx, id); err != nil {
		return fail(reasonRunContainerError, errors.New(criMessage(err)))
	}
	k.event(pod, fp, v1.EventTypeNormal, "Started", "Started container "+c.Name)
	if err := k.runPostStart(ctx, w, pod, c, id, sb.id, sb.podIPs); err != nil {
		return err
	}
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
	if ephemeralContainer(pod, c.Name) != nil {
		return "spec.ephemeralContainers{" + c.Name + "}"
	}
	return "spec.containers{" + c.Name + "}"
}
