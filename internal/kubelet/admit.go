package kubelet

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// admit is the kubelet's admission of a pod it has not run yet (upstream's canAdmitPod): a
// pod the node cannot run is rejected once, before anything of it starts, with a Warning
// event and the phase Failed, as upstream's rejectPod. The checks are the sysctls
// (sysctls.go), then the predicates (predicates.go) against the Node and the pods admitted
// before it. A pod that has sandboxes or containers in the runtime was admitted before (by
// this kubelet or the one it replaced).
func (k *Kubelet) admit(ctx context.Context, w *podWorker, pod *v1.Pod, rt *podRuntime) (rejected bool, err error) {
	if w.admitted {
		return false, nil
	}
	if !rt.empty() {
		k.markAdmitted(pod.UID)
		w.admitted = true
		return false, nil
	}
	reason, msg := k.sysctls.admitSysctls(pod)
	if reason == "" {
		if reason, msg, err = k.admitOnNode(pod); err != nil {
			return false, err
		}
	}
	if reason == "" {
		w.admitted = true
		return false, nil
	}
	k.log.Info("pod rejected", "pod", podFullName(pod), "reason", reason, "message", msg)
	st := pod.Status.DeepCopy()
	st.Phase, st.Reason, st.Message = v1.PodFailed, reason, "Pod was rejected: "+msg
	st.QOSClass = qosClass(pod)
	if st.StartTime == nil {
		t := apiTime(w.startTime)
		st.StartTime = &t
	}
	if err := k.writeStatus(ctx, pod, st); err != nil {
		return true, err
	}
	k.event(pod, "", v1.EventTypeWarning, reason, msg)
	w.admitted = true
	return true, nil
}

// admitOnNode runs the predicate admission against the pods admitted so far and, when the pod
// passes, adds it to them; one pod at a time, so that two pods cannot both take the last
// room or the same host port. A Node without a status yet (allocatable unknown) is not one to
// judge by: the sync is retried.
func (k *Kubelet) admitOnNode(pod *v1.Pod) (reason, message string, err error) {
	node := k.node()
	if node == nil || len(node.Status.Allocatable) == 0 {
		return "", "", fmt.Errorf("node %s is not registered with its status yet", k.cfg.NodeName)
	}
	k.admitMu.Lock()
	defer k.admitMu.Unlock()
	if reason, message = admitPredicates(pod, node, k.admittedPods(pod.UID)); reason == "" {
		k.markAdmitted(pod.UID)
	}
	return reason, message, nil
}

// The admitted pods (upstream's active pods, which admission counts against the node) are the
// pods of the API bound to this node that this kubelet admitted (or found running when it
// started) and whose containers are not known to be gone: a pod leaves them once it is
// terminal or being deleted and its containers stopped (forgetAdmitted), or when it is no
// longer in the API. A rejected pod never joins them.

// markAdmitted adds a pod to the admitted pods.
func (k *Kubelet) markAdmitted(uid types.UID) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.admitted[uid] = true
}

// forgetAdmitted removes a pod whose containers are gone for good from the admitted pods.
func (k *Kubelet) forgetAdmitted(uid types.UID) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.admitted, uid)
}

// admittedPods are the admitted pods the API has, but the one with UID except.
func (k *Kubelet) admittedPods(except types.UID) []*v1.Pod {
	k.mu.Lock()
	uids := make(map[types.UID]bool, len(k.admitted))
	for uid := range k.admitted {
		uids[uid] = uid != except
	}
	k.mu.Unlock()
	var pods []*v1.Pod
	for _, obj := range k.podInformer.GetStore().List() {
		if p := obj.(*v1.Pod); uids[p.UID] {
			pods = append(pods, k.newerPod(p))
		}
	}
	return pods
}

// seedAdmitted makes the pods a previous kubelet ran admitted pods before any pod is admitted
// (upstream re-admits every pod at start in creation order): every pod of the API with
// something in the runtime, unless it is terminal or being deleted and nothing of it runs.
func (k *Kubelet) seedAdmitted(ctx context.Context) error {
	sbs, err := k.cfg.Runtime.ListPodSandbox(ctx, nil)
	if err != nil {
		return fmt.Errorf("list sandboxes: %w", err)
	}
	cs, err := k.cfg.Runtime.ListContainers(ctx, nil)
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	present, running := map[types.UID]bool{}, map[types.UID]bool{}
	for _, sb := range sbs {
		uid := types.UID(sb.Labels[labelPodUID])
		if uid == "" {
			uid = types.UID(sb.GetMetadata().GetUid())
		}
		present[uid] = true
		running[uid] = running[uid] || sb.State == runtimeapi.PodSandboxState_SANDBOX_READY
	}
	for _, c := range cs {
		uid := types.UID(c.Labels[labelPodUID])
		present[uid] = true
		running[uid] = running[uid] || c.State == runtimeapi.ContainerState_CONTAINER_RUNNING || c.State == runtimeapi.ContainerState_CONTAINER_CREATED
	}
	for _, obj := range k.podInformer.GetStore().List() {
		p := k.newerPod(obj.(*v1.Pod))
		ended := p.DeletionTimestamp != nil || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
		if p.UID != "" && present[p.UID] && (running[p.UID] || !ended) {
			k.markAdmitted(p.UID)
		}
	}
	return nil
}
