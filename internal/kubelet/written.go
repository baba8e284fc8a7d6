package kubelet

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// The informer learns of the kubelet's own status writes only through the watch, moments
// later; a sync that starts in between would compute the status against the older pod, find
// it changed, and write with a stale resourceVersion: a conflict, a read and a second write
// per pod start. So the kubelet remembers the pod each successful status write returned, and
// podByUID hands out whichever of that and the informer's copy is newer.

// noteWritten remembers the pod a status write returned.
func (k *Kubelet) noteWritten(pod *v1.Pod) {
	if pod == nil || pod.UID == "" {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.written[pod.UID] = pod
}

// newerPod returns the written pod instead of the informer's when it is the same pod at a later
// resourceVersion (etcd revisions, compared as numbers), and the informer's otherwise.
func (k *Kubelet) newerPod(informer *v1.Pod) *v1.Pod {
	k.mu.Lock()
	w := k.written[informer.UID]
	k.mu.Unlock()
	if w == nil {
		return informer
	}
	wrv, err1 := strconv.ParseUint(w.ResourceVersion, 10, 64)
	irv, err2 := strconv.ParseUint(informer.ResourceVersion, 10, 64)
	if err1 != nil || err2 != nil || wrv <= irv {
		return informer
	}
	return w
}

// isOwnWrite reports whether an informer's pod is the very pod a status write of the kubelet
// returned (same UID and resourceVersion): the watch's echo of that write. It carries nothing
// the kubelet does not know, so it triggers no sync. Without this, each status write cost one
// more sync, and a failing sync, which writes the status before its retry is scheduled, was
// retried at once by its own write's echo instead of after its back-off delay.
func (k *Kubelet) isOwnWrite(pod *v1.Pod) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	w := k.written[pod.UID]
	return w != nil && pod.ResourceVersion != "" && w.ResourceVersion == pod.ResourceVersion
}
