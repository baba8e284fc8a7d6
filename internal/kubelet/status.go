package kubelet

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
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
	host, err := os.Hostname()
	if err != nil {
		host = k.cfg.NodeName
	}
	return sandboxConfig(pod, attempt, k.cfg.LogDir, dns, host), nil
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

	initDone := true
	st.InitContainerStatuses = nil
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := k.containerStatus(pod, rt, w, c, true, true)
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
		if isSidecar(c) {
			if cs.State.Running == nil || cs.Started == nil || !*cs.Started {
				initDone = false
			}
		} else if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
			initDone = false
		}
	}
	st.ContainerStatuses = nil
	for i := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, k.containerStatus(pod, rt, w, &pod.Spec.Containers[i], false, initDone))
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
	if initDone {
		setCondition(st, old, v1.PodInitialized, v1.ConditionTrue, "", "", now)
	} else {
		setCondition(st, old, v1.PodInitialized, v1.ConditionFalse, "ContainersNotInitialized",
			"containers with incomplete status: "+unreadyList(pod.Spec.InitContainers, st.InitContainerStatuses, true), now)
	}
	ready, reason, msg := containersReady(pod, st)
	if phase == v1.PodSucceeded || phase == v1.PodFailed {
		ready, reason, msg = false, "PodCompleted", ""
	}
	setCondition(st, old, v1.ContainersReady, boolStatus(ready), reason, msg, now)
	podReady, reason, msg := ready, reason, msg
	if ready {
		var missing []string
		for _, g := range pod.Spec.ReadinessGates {
			ok := false
			for _, c := range old.Conditions {
				ok = ok || (c.Type == g.ConditionType && c.Status == v1.ConditionTrue)
			}
			if !ok {
				missing = append(missing, string(g.ConditionType))
			}
		}
		if len(missing) > 0 {
			podReady, reason, msg = false, "ReadinessGatesNotReady", "corresponding condition of pod readiness gate "+quoteList(missing)+" does not exist."
		}
	}
	setCondition(st, old, v1.PodReady, boolStatus(podReady), reason, msg, now)
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

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return "[" + strings.Join(q, " ") + "]"
}

// unreadyList names the containers that are not ready (or, for init containers, not done):
// "[a b]".
func unreadyList(specs []v1.Container, statuses []v1.ContainerStatus, init bool) string {
	var names []string
	for i, s := range statuses {
		done := s.Ready
		if init && !isSidecar(&specs[i]) {
			done = s.State.Terminated != nil && s.State.Terminated.ExitCode == 0
		}
		if !done {
			names = append(names, s.Name)
		}
	}
	return "[" + strings.Join(names, " ") + "]"
}

// containersReady: every app container and every sidecar is ready.
func containersReady(pod *v1.Pod, st *v1.PodStatus) (bool, string, string) {
	var unready []string
	for i, s := range st.InitContainerStatuses {
		if isSidecar(&pod.Spec.InitContainers[i]) && !s.Ready {
			unready = append(unready, s.Name)
		}
	}
	for _, s := range st.ContainerStatuses {
		if !s.Ready {
			unready = append(unready, s.Name)
		}
	}
	if len(unready) == 0 {
		return true, "", ""
	}
	return false, "ContainersNotReady", "containers with unready status: [" + strings.Join(unready, " ") + "]"
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
func (k *Kubelet) containerStatus(pod *v1.Pod, rt *podRuntime, w *podWorker, c *v1.Container, isInit, initDone bool) v1.ContainerStatus {
	cs := v1.ContainerStatus{Name: c.Name, Image: c.Image}
	f := false
	cs.Started = &f
	insts := rt.instances(c.Name)
	wr, hasReason := w.waiting[c.Name]
	if len(insts) == 0 {
		reason := reasonContainerCreating
		if !isInit && !initDone {
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
		cs.Ready = started && k.ready(pod, c)
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		t := k.terminated(pod, c, l)
		// As upstream, the reason it does not run (RunContainerError, CrashLoopBackOff) shows
		// only for a container that will be restarted; one that will not stays Terminated
		// (a StartError with restartPolicy Never).
		if hasReason && pod.DeletionTimestamp == nil && (isSidecar(c) || shouldRestart(pod.Spec.RestartPolicy, l)) {
			cs.State.Waiting = &v1.ContainerStateWaiting{Reason: wr.reason, Message: wr.message}
			cs.LastTerminationState = v1.ContainerState{Terminated: t}
		} else {
			cs.State.Terminated = t
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
