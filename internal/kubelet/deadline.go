package kubelet

import (
	"context"
	"errors"
	"time"

	v1 "k8s.io/api/core/v1"
)

// spec.activeDeadlineSeconds, as upstream's active deadline handler: a pod active on the node
// longer than that since its status's startTime fails with these.
const (
	reasonDeadlineExceeded  = "DeadlineExceeded"
	messageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// activeDeadline tells whether the pod is past its activeDeadlineSeconds and, when it is not
// yet, how long it has left (zero: no deadline, or no start time yet).
func (k *Kubelet) activeDeadline(pod *v1.Pod, w *podWorker) (exceeded bool, left time.Duration) {
	if pod.Spec.ActiveDeadlineSeconds == nil {
		return false, 0
	}
	start := w.startTime
	if pod.Status.StartTime != nil {
		start = pod.Status.StartTime.Time
	}
	if start.IsZero() {
		return false, 0
	}
	left = time.Duration(*pod.Spec.ActiveDeadlineSeconds)*time.Second - k.clock.Since(start)
	if left <= 0 {
		return true, 0
	}
	return false, left
}

// failPastDeadline fails a pod past its active deadline: the DeadlineExceeded event, the
// phase Failed with upstream's reason and message reported at once, then its containers
// stopped within the grace period (preStop hooks included) and their final states reported.
func (k *Kubelet) failPastDeadline(ctx context.Context, w *podWorker, pod *v1.Pod, rt *podRuntime) error {
	k.event(pod, "", v1.EventTypeNormal, reasonDeadlineExceeded, messageDeadlineExceeded)
	k.log.Info("pod past its active deadline", "pod", podFullName(pod), "activeDeadlineSeconds", *pod.Spec.ActiveDeadlineSeconds)
	st := k.podStatus(pod, rt, w, true)
	st.Phase, st.Reason, st.Message = v1.PodFailed, reasonDeadlineExceeded, messageDeadlineExceeded
	if err := k.writeStatus(ctx, pod, st); err != nil {
		return err
	}
	failed := pod.DeepCopy()
	failed.Status = *st
	stopErr := k.stopEnded(ctx, failed, rt)
	rt, err := readRuntime(ctx, k.cfg.Runtime, pod.UID)
	if err != nil {
		return errors.Join(stopErr, err)
	}
	// podStatus keeps the terminal phase, the reason and the message it starts from.
	return errors.Join(stopErr, k.writeStatus(ctx, failed, k.podStatus(failed, rt, w, true)))
}
