package kubelet

import (
	"context"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// containerIDPrefix marks the runtime in a status's containerID.
const containerIDPrefix = "kubette://"

// hostIPs are the node's InternalIP addresses (none before the node is registered).
func (k *Kubelet) hostIPs() []string {
	n := k.node()
	if n == nil {
		return nil
	}
	var ips []string
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			ips = append(ips, a.Address)
		}
	}
	return ips
}

// sandboxConfig builds the pod's sandbox configuration with the host's DNS settings.
func (k *Kubelet) sandboxConfig(pod *v1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	dns, err := podDNS(pod, k.cfg.ResolvConf, k.cfg.ClusterDNS, k.cfg.ClusterDomain)
	if err != nil {
		return nil, fmt.Errorf("dns of %s: %w", podFullName(pod), err)
	}
	hostname, domain, err := podHostname(pod, k.cfg.ClusterDomain)
	if err != nil {
		return nil, fmt.Errorf("sandbox config of %s: %w", podFullName(pod), err)
	}
	if hostname, err = kernelHostname(hostname, domain, pod.Spec.SetHostnameAsFQDN); err != nil {
		return nil, fmt.Errorf("sandbox config of %s: %w", podFullName(pod), err)
	}
	return sandboxConfig(pod, attempt, k.cfg.LogDir, dns, hostname), nil
}

// sandboxIPs are the pod's IPs: the sandbox's, or the node's for host-network pods.
func sandboxIPs(pod *v1.Pod, st *runtimeapi.PodSandboxStatus, hostIPs []string) []string {
	if pod.Spec.HostNetwork {
		return hostIPs
	}
	n := st.GetNetwork()
	if n == nil || n.Ip == "" {
		return nil
	}
	ips := []string{n.Ip}
	for _, ip := range n.AdditionalIps {
		ips = append(ips, ip.Ip)
	}
	return ips
}

// podStatus computes the pod's status from the runtime (upstream's generateAPIPodStatus):
// container statuses, phase, conditions, IPs, start time and QoS class. terminal says the
// pod is being terminated, so that its containers are not going to restart.
func (k *Kubelet) podStatus(pod *v1.Pod, rt *podRuntime, w *podWorker, terminal bool) *v1.PodStatus {
	old := pod.Status
	st := old.DeepCopy()
	hostIPs := k.hostIPs()
	st.HostIP, st.HostIPs = "", nil
	if len(hostIPs) > 0 {
		st.HostIP = hostIPs[0]
		for _, ip := range hostIPs {
			st.HostIPs = append(st.HostIPs, v1.HostIP{IP: ip})
		}
	}
	st.PodIP, st.PodIPs = "", nil
	if sb := rt.latestSandbox(); sb != nil && sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
		for _, ip := range sandboxIPs(pod, sb, hostIPs) {
			st.PodIPs = append(st.PodIPs, v1.PodIP{IP: ip})
		}
		if len(st.PodIPs) > 0 {
			st.PodIP = st.PodIPs[0].IP
		}
	} else if len(old.PodIPs) > 0 && len(rt.sandboxes) > 0 {
		// A stopped sandbox keeps its address in the status, as upstream does.
		st.PodIP, st.PodIPs = old.PodIP, old.PodIPs
	}
	if st.StartTime == nil {
		t := apiTime(w.startTime)
		if w.startTime.IsZero() {
			t = apiTime(k.clock.Now())
		}
		st.StartTime = &t
	}
	st.QOSClass = qosClass(pod)

	st.InitContainerStatuses = nil
	for i := range pod.Spec.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, k.containerStatus(pod, rt, w, &pod.Spec.InitContainers[i], true))
	}
	st.ContainerStatuses = nil
	for i := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, k.containerStatus(pod, rt, w, &pod.Spec.Containers[i], false))
	}
	st.EphemeralContainerStatuses = k.ephemeralStatuses(pod, rt, w)
	all := append(append([]v1.ContainerStatus(nil), st.InitContainerStatuses...), st.ContainerStatuses...)
	phase := getPhase(pod, all, terminal)
	if old.Phase == v1.PodSucceeded || old.Phase == v1.PodFailed {
		phase = old.Phase // a terminal phase is final
	}
	st.Phase = phase

	now := apiTime(k.clock.Now())
	setCondition(st, old, v1.PodReadyToStartContainers, boolStatus(rt.sandboxReady()), "", "", now)
	for _, c := range []v1.PodCondition{
		initializedCondition(&pod.Spec, all, phase),
		podReadyCondition(&pod.Spec, old.Conditions, all, phase),
		containersReadyCondition(&pod.Spec, all, phase),
	} {
		setCondition(st, old, c.Type, c.Status, c.Reason, c.Message, now)
	}
	scheduled := false
	for _, c := range st.Conditions {
		scheduled = scheduled || c.Type == v1.PodScheduled
	}
	if !scheduled { // bound without a scheduler: the kubelet says it is scheduled, as upstream
		st.Conditions = append(st.Conditions, v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now})
	}
	sortConditions(st)
	return st
}

func boolStatus(b bool) v1.ConditionStatus {
	if b {
		return v1.ConditionTrue
	}
	return v1.ConditionFalse
}

// setCondition sets a condition, keeping its transition time when its status is unchanged.
func setCondition(st *v1.PodStatus, old v1.PodStatus, t v1.PodConditionType, status v1.ConditionStatus, reason, msg string, now metav1.Time) {
	c := v1.PodCondition{Type: t, Status: status, Reason: reason, Message: msg, LastTransitionTime: now}
	for _, o := range old.Conditions {
		if o.Type == t && o.Status == status {
			c.LastTransitionTime = o.LastTransitionTime
			c.LastProbeTime = o.LastProbeTime
		}
	}
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}

// containerStatus is the API status of one container from its instances in the runtime and
// the reasons the kubelet recorded for it not running.
func (k *Kubelet) containerStatus(pod *v1.Pod, rt *podRuntime, w *podWorker, c *v1.Container, isInit bool) v1.ContainerStatus {
	cs := v1.ContainerStatus{Name: c.Name, Image: c.Image}
	f := false
	cs.Started = &f
	insts := rt.instances(c.Name)
	wr, hasReason := w.waiting[c.Name]
	if len(insts) == 0 {
		// As upstream, every container of a pod with init containers waits "PodInitializing"
		// until it is created, the others "ContainerCreating".
		reason := reasonContainerCreating
		if len(pod.Spec.InitContainers) > 0 {
			reason = reasonPodInitializing
		}
		var msg string
		if hasReason {
			reason, msg = wr.reason, wr.message
		}
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: reason, Message: msg}
		return cs
	}
	l := insts[0]
	cs.RestartCount = int32(l.restartCount)
	cs.ContainerID = containerIDPrefix + l.id()
	cs.ImageID = l.status.ImageRef
	if len(insts) > 1 {
		if t := k.terminated(pod, c, insts[1]); t != nil {
			cs.LastTerminationState.Terminated = t
		}
	}
	switch l.status.State {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: apiTime(time.Unix(0, l.status.StartedAt))}
		started := k.started(pod, c)
		cs.Started = &started
		// A regular init container is ready only once it completed.
		cs.Ready = started && k.ready(pod, c) && (!isInit || isSidecar(c))
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		t := k.terminated(pod, c, l)
		// As upstream, the reason it does not run (RunContainerError, CrashLoopBackOff) shows
		// only for a container that will be restarted; one that will not stays Terminated
		// (a StartError with restartPolicy Never).
		completedInit := isInit && !isSidecar(c) && l.status.ExitCode == 0
		if hasReason && !completedInit && pod.DeletionTimestamp == nil && (isSidecar(c) || shouldRestart(pod.Spec.RestartPolicy, l)) {
			cs.State.Waiting = &v1.ContainerStateWaiting{Reason: wr.reason, Message: wr.message}
			cs.LastTerminationState = v1.ContainerState{Terminated: t}
		} else {
			cs.State.Terminated = t
			// An init container that completed is ready, as upstream's prober manager says.
			cs.Ready = completedInit
		}
	default:
		reason, msg := reasonContainerCreating, ""
		if hasReason {
			reason, msg = wr.reason, wr.message
		}
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: reason, Message: msg}
	}
	return cs
}

// writeStatus writes the pod's status through the status subresource when it changed,
// retrying on conflicts with the pod's latest version (same UID only).
func (k *Kubelet) writeStatus(ctx context.Context, pod *v1.Pod, st *v1.PodStatus) error {
	if apiequality.Semantic.DeepEqual(&pod.Status, st) {
		return nil
	}
	cur := pod.DeepCopy()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur.Status = *st
		updated, err := k.cfg.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if err == nil {
			k.noteWritten(updated)
		}
		if apierrors.IsConflict(err) {
			fresh, gerr := k.cfg.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if gerr != nil {
				return gerr
			}
			if fresh.UID != pod.UID {
				return apierrors.NewNotFound(v1.Resource("pods"), pod.Name)
			}
			// Keep the conditions others own (readiness gates, scheduling, disruption).
			mergeForeignConditions(st, fresh.Status.Conditions)
			cur = fresh
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile; the informer will say so
	}
	if err != nil {
		return fmt.Errorf("update status of %s: %w", podFullName(pod), err)
	}
	return nil
}

// kubeletCondition tells whether the kubelet owns a pod condition.
func kubeletCondition(t v1.PodConditionType) bool {
	switch t {
	case v1.PodReadyToStartContainers, v1.PodInitialized, v1.ContainersReady, v1.PodReady:
		return true
	}
	return false
}

func mergeForeignConditions(st *v1.PodStatus, fresh []v1.PodCondition) {
	var own []v1.PodCondition
	for _, c := range st.Conditions {
		if kubeletCondition(c.Type) {
			own = append(own, c)
		}
	}
	for _, c := range fresh {
		if !kubeletCondition(c.Type) {
			own = append(own, c)
		}
	}
	st.Conditions = own
	sortConditions(st)
}

// sortConditions puts conditions in the order upstream reports them.
func sortConditions(st *v1.PodStatus) {
	order := map[v1.PodConditionType]int{
		v1.PodReadyToStartContainers: 0, v1.PodInitialized: 1, v1.PodReady: 2, v1.ContainersReady: 3, v1.PodScheduled: 4,
	}
	rank := func(t v1.PodConditionType) int {
		if r, ok := order[t]; ok {
			return r
		}
		return 5
	}
	sort.SliceStable(st.Conditions, func(i, j int) bool { return rank(st.Conditions[i].Type) < rank(st.Conditions[j].Type) })
}

// apiTime is t as the API stores it (whole seconds), so that a status read back compares
// equal to the one computed.
func apiTime(t time.Time) metav1.Time { return metav1.NewTime(t).Rfc3339Copy() }
