package kubelet

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

// admit is the kubelet's admission of a pod it has not run yet (upstream's canAdmitPod): a
// pod the node cannot run is rejected once, before anything of it starts, with a Warning
// event and the phase Failed, as upstream's rejectPod. A pod that has sandboxes or containers
// in the runtime was admitted before (by this kubelet or the one it replaced).
func (k *Kubelet) admit(ctx context.Context, w *podWorker, pod *v1.Pod, rt *podRuntime) (rejected bool, err error) {
	if w.admitted {
		return false, nil
	}
	if len(rt.sandboxes) > 0 || len(rt.containers) > 0 {
		w.admitted = true
		return false, nil
	}
	reason, msg := k.sysctls.admitSysctls(pod)
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
