package kubelet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// HTTPHookRunner sends the GET of httpGet lifecycle hooks. internal/kubelet/prober's Manager
// implements it with the HTTP probes' code; that package imports this one, so the node agent
// hands it in (Config.HTTPHooks).
type HTTPHookRunner interface {
	// RunHTTPHook sends g's GET to the container (to podIP when g names no host). As
	// upstream's, it fails only when no answer comes, whatever the status code. fallback,
	// when not empty, says that an HTTPS hook answered in plain HTTP and was retried over
	// HTTP (upstream's LifecycleHTTPFallback event).
	RunHTTPHook(ctx context.Context, pod *v1.Pod, c *v1.Container, g *v1.HTTPGetAction, podIP string) (fallback string, err error)
}

// Lifecycle hook reasons and events, as upstream's.
const (
	reasonPostStartHookError   = "PostStartHookError"
	eventFailedPostStartHook   = "FailedPostStartHook"
	eventFailedPreStopHook     = "FailedPreStopHook"
	eventLifecycleHTTPFallback = "LifecycleHTTPFallback"
	// minimumGracePeriod is what a container is left to stop in after a preStop hook took
	// (up to) all of its grace period, as upstream's minimumGracePeriodInSeconds.
	minimumGracePeriod = 2
)

// errSleepInterrupted is a sleep hook's error when it is cut short.
var errSleepInterrupted = errors.New("container terminated before sleep hook finished")

// runHook runs a lifecycle handler for a container instance until it ends or ctx does. On
// failure msg is upstream's message for it (which upstream keeps out of the events, since a
// hook's output may hold secrets).
func (k *Kubelet) runHook(ctx context.Context, pod *v1.Pod, c *v1.Container, containerID, podIP string, h *v1.LifecycleHandler) (msg string, err error) {
	switch {
	case h.Exec != nil:
		timeout := time.Duration(0) // as upstream: no timeout of its own
		if dl, ok := ctx.Deadline(); ok {
			timeout = max(time.Until(dl), time.Second)
		}
		stdout, stderr, err := k.cfg.Runtime.ExecSync(ctx, containerID, h.Exec.Command, timeout)
		if err == nil {
			return "", nil
		}
		return fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v, message: %q",
			h.Exec.Command, c.Name, podFullName(pod), execError(h.Exec.Command, err, stderr), string(stdout)+string(stderr)), err
	case h.HTTPGet != nil:
		err := k.runHTTPHook(ctx, pod, c, h.HTTPGet, podIP)
		if err == nil {
			return "", nil
		}
		return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v",
			h.HTTPGet.Path, c.Name, podFullName(pod), err), err
	case h.Sleep != nil:
		if h.Sleep.Seconds <= 0 {
			return "", nil
		}
		t := k.clock.NewTimer(time.Duration(h.Sleep.Seconds) * time.Second)
		defer t.Stop()
		select {
		case <-t.C():
			return "", nil
		case <-ctx.Done():
			return fmt.Sprintf("Sleep lifecycle hook (%d) for Container %q in Pod %q failed - error: %v",
				h.Sleep.Seconds, c.Name, podFullName(pod), errSleepInterrupted), errSleepInterrupted
		}
	}
	err = errors.New("invalid handler: no exec, httpGet or sleep action")
	return "Cannot run handler: " + err.Error(), err
}

// execError words a failed exec hook's error as upstream's runtime client does:
// "command '<cmd>' exited with <code>: <stderr>".
func execError(cmd []string, err error, stderr []byte) error {
	var exit interface{ ExitStatus() int }
	if errors.As(err, &exit) {
		return fmt.Errorf("command '%s' exited with %d: %s", strings.Join(cmd, " "), exit.ExitStatus(), stderr)
	}
	return err
}

// runHTTPHook sends an httpGet hook through the configured runner.
func (k *Kubelet) runHTTPHook(ctx context.Context, pod *v1.Pod, c *v1.Container, g *v1.HTTPGetAction, podIP string) error {
	if k.cfg.HTTPHooks == nil {
		return errors.New("this kubelet has no HTTP hook runner")
	}
	if g.Host == "" && podIP == "" {
		return errors.New("failed to find networking container: the pod has no IP")
	}
	fallback, err := k.cfg.HTTPHooks.RunHTTPHook(ctx, pod, c, g, podIP)
	if err == nil && fallback != "" {
		k.event(pod, "", v1.EventTypeWarning, eventLifecycleHTTPFallback, fallback)
	}
	return err
}

// runPostStart runs a just started container's postStart hook, if it has one. The sync that
// started it waits for the hook, so the container is reported running (and started) only
// after it. On failure, as upstream: a FailedPostStartHook event, the container killed (its
// preStop hook included), and PostStartHookError with the hook's message as its waiting
// reason until it runs again.
func (k *Kubelet) runPostStart(ctx context.Context, w *podWorker, pod *v1.Pod, c *v1.Container, id, sandboxID string, podIPs []string) error {
	if c.Lifecycle == nil || c.Lifecycle.PostStart == nil {
		return nil
	}
	podIP := ""
	if len(podIPs) > 0 {
		podIP = podIPs[0]
	}
	msg, err := k.runHook(ctx, pod, c, id, podIP, c.Lifecycle.PostStart)
	if err == nil {
		return nil
	}
	k.log.Info("postStart hook failed", "pod", podFullName(pod), "container", c.Name, "message", msg)
	k.event(pod, fieldPath(pod, c), v1.EventTypeWarning, eventFailedPostStartHook, "PostStartHook failed")
	w.waiting[c.Name] = waitingReason{reasonPostStartHookError, msg}
	kerr := k.killContainer(ctx, pod, id, c.Name, sandboxID, gracePeriod(pod), eventFailedPostStartHook)
	return errors.Join(fmt.Errorf("postStart hook of container %s of %s: %w", c.Name, podFullName(pod), err), kerr)
}

// killContainer stops one container instance, as upstream's killContainer: the Killing event
// (msg, or "Stopping container <name>"), the container's preStop hook when the pod declares
// one and there is grace left, then the runtime's stop with the rest of the grace.
func (k *Kubelet) killContainer(ctx context.Context, pod *v1.Pod, id, name, sandboxID string, grace int64, msg string) error {
	if pod != nil {
		if msg == "" {
			msg = "Stopping container " + name
		}
		k.event(pod, fieldPath(pod, &v1.Container{Name: name}), v1.EventTypeNormal, "Killing", msg)
		if c := containerSpec(pod, name); c != nil && c.Lifecycle != nil && c.Lifecycle.PreStop != nil && grace > 0 {
			grace = max(grace-k.runPreStop(ctx, pod, c, id, sandboxID, grace), minimumGracePeriod)
		}
	}
	if err := k.cfg.Runtime.StopContainer(ctx, id, grace); err != nil {
		return fmt.Errorf("stop container %s: %w", id, err)
	}
	k.mu.Lock()
	delete(k.probeKills, id)
	k.mu.Unlock()
	return nil
}

// runPreStop runs a container's preStop hook for at most grace seconds and returns the whole
// seconds it took, which upstream takes off the grace the container gets after it. A hook
// still running when the grace is over is cut short (upstream leaves it running, unowned);
// only a hook that failed on its own records FailedPreStopHook.
func (k *Kubelet) runPreStop(ctx context.Context, pod *v1.Pod, c *v1.Container, id, sandboxID string, grace int64) int64 {
	start := k.clock.Now()
	hookCtx, cancel := context.WithTimeout(ctx, time.Duration(grace)*time.Second)
	defer cancel()
	podIP := ""
	if c.Lifecycle.PreStop.HTTPGet != nil && c.Lifecycle.PreStop.HTTPGet.Host == "" {
		podIP = k.sandboxIP(ctx, pod, sandboxID)
	}
	type outcome struct {
		msg string
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		msg, err := k.runHook(hookCtx, pod, c, id, podIP, c.Lifecycle.PreStop)
		done <- outcome{msg, err}
	}()
	timer := k.clock.NewTimer(time.Duration(grace) * time.Second)
	defer timer.Stop()
	select {
	case o := <-done:
		if o.err != nil && hookCtx.Err() == nil {
			k.log.Info("preStop hook failed", "pod", podFullName(pod), "container", c.Name, "message", o.msg)
			k.event(pod, fieldPath(pod, c), v1.EventTypeWarning, eventFailedPreStopHook, "PreStopHook failed")
		}
	case <-timer.C():
		k.log.Info("preStop hook did not complete in the grace period", "pod", podFullName(pod), "container", c.Name, "grace", grace)
		cancel()
		<-done // the hook's calls end with its context
	}
	return int64(k.clock.Since(start) / time.Second)
}

// sandboxIP is the first IP of a pod's sandbox (the node's for host-network pods): where
// an httpGet hook without a host goes.
func (k *Kubelet) sandboxIP(ctx context.Context, pod *v1.Pod, sandboxID string) string {
	if sandboxID != "" {
		st, err := k.cfg.Runtime.PodSandboxStatus(ctx, sandboxID, false)
		if err == nil && st.GetStatus().GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			if ips := sandboxIPs(pod, st.GetStatus(), k.hostIPs()); len(ips) > 0 {
				return ips[0]
			}
		}
	}
	return pod.Status.PodIP
}
