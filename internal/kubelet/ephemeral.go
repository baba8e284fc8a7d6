package kubelet

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Ephemeral containers (kubectl debug) join a running pod through the pods/ephemeralcontainers
// subresource. As upstream's kubelet, this one starts each once, in the pod's current sandbox
// (its network namespace, its volumes), even before the init containers are done, and never
// restarts one. One with a targetContainerName asks the runtime for that container's PID
// namespace (NamespaceMode TARGET), which kubette's runtime and containerd both honour.

// ephemeralContainer returns the ephemeral container of pod named name as a Container, or nil.
func ephemeralContainer(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.EphemeralContainers {
		if ec := &pod.Spec.EphemeralContainers[i]; ec.Name == name {
			return (*v1.Container)(&ec.EphemeralContainerCommon)
		}
	}
	return nil
}

// containerSpec finds the container of pod named name: an app, init or ephemeral one.
func containerSpec(pod *v1.Pod, name string) *v1.Container {
	for _, cs := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	return ephemeralContainer(pod, name)
}

// startEphemeralContainers starts the ephemeral containers that never ran in any of the
// pod's sandboxes.
func (k *Kubelet) startEphemeralContainers(ctx context.Context, w *podWorker, pod *v1.Pod, sb *podSandbox, rt *podRuntime) error {
	var errs []error
	for i := range pod.Spec.EphemeralContainers {
		c := (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		if rt.latest(c.Name) != nil {
			continue
		}
		errs = append(errs, k.startContainer(ctx, w, pod, sb, rt, c))
	}
	return errors.Join(errs...)
}

// targetNamespace points an ephemeral container's PID namespace at its target container's,
// as upstream: NamespaceMode TARGET with the target's newest instance. Other containers are
// left as they are.
func targetNamespace(pod *v1.Pod, c *v1.Container, rt *podRuntime, cfg *runtimeapi.ContainerConfig) error {
	var target string
	for i := range pod.Spec.EphemeralContainers {
		if ec := &pod.Spec.EphemeralContainers[i]; ec.Name == c.Name {
			target = ec.TargetContainerName
		}
	}
	if target == "" {
		return nil
	}
	inst := rt.latest(target)
	if inst == nil {
		return fmt.Errorf("unable to find target container %s", target)
	}
	ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns == nil {
		return nil
	}
	ns.Pid = runtimeapi.NamespaceMode_TARGET
	ns.TargetId = inst.id()
	return nil
}

// ephemeralStatuses are the statuses of the pod's ephemeral containers. As upstream, they
// are never ready and carry no started field.
func (k *Kubelet) ephemeralStatuses(pod *v1.Pod, rt *podRuntime, w *podWorker) []v1.ContainerStatus {
	var out []v1.ContainerStatus
	for i := range pod.Spec.EphemeralContainers {
		cs := k.containerStatus(pod, rt, w, (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon), false)
		cs.Ready, cs.Started = false, nil
		out = append(out, cs)
	}
	return out
}
