package kubelet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// killContainers stops running containers in parallel with the grace period, each as
// killContainer does (Killing event with msg, preStop hook, stop).
func (k *Kubelet) killContainers(ctx context.Context, pod *v1.Pod, cs []*containerState, grace int64, msg string) error {
	var wg sync.WaitGroup
	errs := make([]error, len(cs))
	for i, c := range cs {
		if !c.running() && c.status.State != runtimeapi.ContainerState_CONTAINER_CREATED {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = k.killContainer(ctx, pod, c.id(), c.name(), c.sandboxID, grace, msg)
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

// stopEnded stops a pod that will not run again (terminal, or being deleted) within its grace
// period; once nothing of it runs, it no longer counts against the node's admission.
func (k *Kubelet) stopEnded(ctx context.Context, pod *v1.Pod, rt *podRuntime) error {
	if err := k.stopPod(ctx, pod, rt, gracePeriod(pod)); err != nil {
		return err
	}
	k.forgetAdmitted(pod.UID)
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
	if len(errs) == 0 {
		for _, s := range rt.sandboxes {
			removePodCgroup(cgroupRoot, types.UID(s.GetMetadata().GetUid()))
		}
	}
	return errors.Join(errs...)
}

// terminatePod carries out a graceful deletion: stop the containers within the grace period,
// report the final status, remove everything, tear the volumes down and delete the pod
// object for good (grace 0, only this UID).
func (k *Kubelet) terminatePod(ctx context.Context, w *podWorker, pod *v1.Pod, rt *podRuntime) error {
	if err := k.stopEnded(ctx, pod, rt); err != nil {
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
