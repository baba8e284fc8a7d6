package kubelet

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// Labels and annotations the kubelet puts on sandboxes and containers, as upstream's, so that a
// restarted kubelet (or upstream tooling such as crictl) recognises them.
const (
	labelPodName       = "io.kubernetes.pod.name"
	labelPodNamespace  = "io.kubernetes.pod.namespace"
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"

	annotationHash                   = "io.kubernetes.container.hash"
	annotationRestartCount           = "io.kubernetes.container.restartCount"
	annotationTerminationMessagePath = "io.kubernetes.container.terminationMessagePath"
	annotationTerminationPolicy      = "io.kubernetes.container.terminationMessagePolicy"
	annotationPodGracePeriod         = "io.kubernetes.pod.terminationGracePeriod"
	annotationContainerPorts         = "io.kubernetes.container.ports"
	annotationPodDeletionGrace       = "io.kubernetes.pod.deletionGracePeriod"
)

// podLabels are the labels of a pod's sandbox: the pod's own and its identity.
func podLabels(pod *v1.Pod) map[string]string {
	l := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		l[k] = v
	}
	l[labelPodName] = pod.Name
	l[labelPodNamespace] = pod.Namespace
	l[labelPodUID] = string(pod.UID)
	return l
}

// containerLabels identify a container's pod and name.
func containerLabels(pod *v1.Pod, c *v1.Container) map[string]string {
	return map[string]string{
		labelPodName:       pod.Name,
		labelPodNamespace:  pod.Namespace,
		labelPodUID:        string(pod.UID),
		labelContainerName: c.Name,
	}
}

// containerAnnotations carry what a restarted kubelet needs to know about a container.
func containerAnnotations(pod *v1.Pod, c *v1.Container, restartCount int) map[string]string {
	a := map[string]string{
		annotationHash:                   strconv.FormatUint(containerHash(c), 16),
		annotationRestartCount:           strconv.Itoa(restartCount),
		annotationTerminationMessagePath: c.TerminationMessagePath,
		annotationTerminationPolicy:      string(c.TerminationMessagePolicy),
	}
	if pod.DeletionGracePeriodSeconds != nil {
		a[annotationPodDeletionGrace] = strconv.FormatInt(*pod.DeletionGracePeriodSeconds, 10)
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		a[annotationPodGracePeriod] = strconv.FormatInt(*pod.Spec.TerminationGracePeriodSeconds, 10)
	}
	if len(c.Ports) > 0 {
		if b, err := json.Marshal(c.Ports); err == nil {
			a[annotationContainerPorts] = string(b)
		}
	}
	return a
}

// containerHash fingerprints a container's spec: a running container whose hash differs
// from the spec's is restarted.
func containerHash(c *v1.Container) uint64 {
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("marshal container %s: %v", c.Name, err)) // a v1.Container always marshals
	}
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// restartCountOf reads a container's restart count from its annotations (0 when absent).
func restartCountOf(annotations map[string]string) int {
	n, err := strconv.Atoi(annotations[annotationRestartCount])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// graceFromAnnotations reads the grace period a container's pod had (default 30 s).
func graceFromAnnotations(annotations map[string]string) int64 {
	for _, k := range []string{annotationPodDeletionGrace, annotationPodGracePeriod} {
		if n, err := strconv.ParseInt(annotations[k], 10, 64); err == nil && n >= 0 {
			return n
		}
	}
	return 30
}
