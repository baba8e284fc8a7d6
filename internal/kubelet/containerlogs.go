package kubelet

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubette/kubette/internal/kubelet/server"
)

// logLookupTimeout bounds the CRI calls made to find a log file.
const logLookupTimeout = 5 * time.Second

// ContainerLogs returns the CRI log file of a container of a pod on this node: the newest
// attempt's, or with previous the last terminated one's (previousAttempt). It implements
// server.LogLocator.
func (k *Kubelet) ContainerLogs(namespace, name, container string, previous bool) (string, error) {
	pod, err := k.podByName(namespace, name)
	if err != nil {
		return "", err
	}
	attempts, err := k.containerAttempts(pod, container)
	if err != nil {
		return "", err
	}
	var c *runtimeapi.Container
	switch {
	case previous:
		if c = previousAttempt(pod, container, attempts); c == nil {
			return "", fmt.Errorf("container %q in pod %q: %w", container, name, server.ErrNoPreviousContainer)
		}
	case len(attempts) == 0:
		reason := "ContainerCreating"
		if st := containerStatusByName(pod, container); st != nil && st.State.Waiting != nil && st.State.Waiting.Reason != "" {
			reason = st.State.Waiting.Reason
		}
		return "", fmt.Errorf("container %q in pod %q is waiting to start: %s", container, name, reason)
	default:
		c = attempts[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), logLookupTimeout)
	defer cancel()
	st, err := k.cfg.Runtime.ContainerStatus(ctx, c.Id, false)
	if err != nil {
		return "", fmt.Errorf("status of container %q in pod %q: %w", container, name, err)
	}
	path := st.GetStatus().GetLogPath()
	if path == "" {
		return "", fmt.Errorf("container %q in pod %q has no log file", container, name)
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(podLogDir(k.cfg.LogDir, pod), path)
	}
	return path, nil
}

// ContainerRunning reports whether the newest attempt of a container is running; it lets a
// followed log end when the container exits. It implements server.RunningChecker.
func (k *Kubelet) ContainerRunning(namespace, name, container string) bool {
	pod, err := k.podByName(namespace, name)
	if err != nil {
		return false
	}
	attempts, err := k.containerAttempts(pod, container)
	if err != nil || len(attempts) == 0 {
		return false
	}
	return attempts[0].State == runtimeapi.ContainerState_CONTAINER_RUNNING
}

// podByName returns a pod of this node from the informer's cache.
func (k *Kubelet) podByName(namespace, name string) (*v1.Pod, error) {
	obj, ok, err := k.podInformer.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", namespace, name, err)
	}
	if !ok {
		return nil, fmt.Errorf("pod %s/%s on node %s: %w", namespace, name, k.cfg.NodeName, server.ErrPodNotFound)
	}
	return obj.(*v1.Pod), nil
}

// containerAttempts lists the runtime's containers of one of pod's containers, newest
// attempt first.
func (k *Kubelet) containerAttempts(pod *v1.Pod, container string) ([]*runtimeapi.Container, error) {
	if !podHasContainer(pod, container) {
		return nil, fmt.Errorf("container %q in pod %q: %w", container, pod.Name, server.ErrContainerNotFound)
	}
	ctx, cancel := context.WithTimeout(context.Background(), logLookupTimeout)
	defer cancel()
	list, err := k.cfg.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{
		labelPodUID:        string(pod.UID),
		labelContainerName: container,
	}})
	if err != nil {
		return nil, fmt.Errorf("list containers of pod %q: %w", pod.Name, err)
	}
	slices.SortFunc(list, func(a, b *runtimeapi.Container) int {
		if d := int(b.GetMetadata().GetAttempt()) - int(a.GetMetadata().GetAttempt()); d != 0 {
			return d
		}
		switch {
		case a.CreatedAt > b.CreatedAt:
			return -1
		case a.CreatedAt < b.CreatedAt:
			return 1
		}
		return 0
	})
	return list, nil
}

// previousAttempt picks the attempt `kubectl logs --previous` shows, as upstream: the one the
// pod's status names as the container's last termination. While a crashed container waits
// out its back-off that is the newest attempt (its status is Waiting, its last termination
// the crash), not the one before it. When the status names none, or one the runtime no longer
// has (the status may lag the runtime by a sync), the attempt before the newest. nil: there is
// no previous attempt.
func previousAttempt(pod *v1.Pod, container string, attempts []*runtimeapi.Container) *runtimeapi.Container {
	if st := containerStatusByName(pod, container); st != nil && st.LastTerminationState.Terminated != nil {
		if id := st.LastTerminationState.Terminated.ContainerID; id != "" {
			_, bare, ok := strings.Cut(id, "://")
			if !ok {
				bare = id
			}
			for _, a := range attempts {
				if a.Id == bare {
					return a
				}
			}
		}
	}
	if len(attempts) < 2 {
		return nil
	}
	return attempts[1]
}

// podHasContainer reports whether pod declares a container (init, app or ephemeral) named name.
func podHasContainer(pod *v1.Pod, name string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// containerStatusByName returns the pod's reported status of a container, or nil.
func containerStatusByName(pod *v1.Pod, name string) *v1.ContainerStatus {
	for _, list := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}
