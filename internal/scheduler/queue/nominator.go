package queue

import (
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

// nominator keeps the pods nominated to run on each node, as upstream's: a pod
// is nominated by its status.nominatedNodeName or, before that status lands, by
// the node preemption chose for it. Filtering counts the nominated pods of at
// least the pod's priority against their node, so that the room preemption made
// for a pod is not taken by a lower-priority one. It has its own lock: filters
// read it from many goroutines while the queue changes.
type nominator struct {
	mu sync.RWMutex
	// byNode lists the nominated pods of each node; byUID is the node of each.
	byNode map[string][]*corev1.Pod
	byUID  map[types.UID]string
	// count is len(byUID), read without the lock on the filters' fast path.
	count atomic.Int64
}

func newNominator() *nominator {
	return &nominator{byNode: map[string][]*corev1.Pod{}, byUID: map[types.UID]string{}}
}

// add nominates pod for ni's node when ni overrides, else for its
// status.nominatedNodeName; a pod with neither is not nominated. The caller holds n.mu.
func (n *nominator) addLocked(pod *corev1.Pod, ni *framework.NominatingInfo) {
	n.deleteLocked(pod)
	node := pod.Status.NominatedNodeName
	if ni.Mode() == framework.ModeOverride {
		node = ni.NominatedNodeName
	}
	if node == "" || pod.Spec.NodeName != "" {
		return
	}
	n.byUID[pod.UID] = node
	n.byNode[node] = append(n.byNode[node], pod)
	n.count.Store(int64(len(n.byUID)))
}

// deleteLocked forgets the pod's nomination. The caller holds n.mu.
func (n *nominator) deleteLocked(pod *corev1.Pod) {
	node, ok := n.byUID[pod.UID]
	if !ok {
		return
	}
	delete(n.byUID, pod.UID)
	list := n.byNode[node]
	for i, p := range list {
		if p.UID == pod.UID {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(n.byNode, node)
	} else {
		n.byNode[node] = list
	}
	n.count.Store(int64(len(n.byUID)))
}

// update replaces oldPod's nomination with newPod's. A nomination made in
// memory survives an update that carries no status.nominatedNodeName on either
// side (the status patch has not arrived yet).
func (n *nominator) update(oldPod, newPod *corev1.Pod) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var ni *framework.NominatingInfo
	if oldPod != nil && oldPod.Status.NominatedNodeName == "" && newPod.Status.NominatedNodeName == "" {
		if node, ok := n.byUID[newPod.UID]; ok {
			ni = &framework.NominatingInfo{NominatedNodeName: node, NominatingMode: framework.ModeOverride}
		}
	}
	if oldPod != nil {
		n.deleteLocked(oldPod)
	}
	n.addLocked(newPod, ni)
}

// AddNominatedPod nominates the pod: for ni's node when ni overrides, else
// for its status.nominatedNodeName.
func (q *PriorityQueue) AddNominatedPod(pod *corev1.Pod, ni *framework.NominatingInfo) {
	q.nominator.mu.Lock()
	defer q.nominator.mu.Unlock()
	q.nominator.addLocked(pod, ni)
}

// DeleteNominatedPodIfExists forgets the pod's nomination (it was assumed,
// bound or deleted).
func (q *PriorityQueue) DeleteNominatedPodIfExists(pod *corev1.Pod) {
	q.nominator.mu.Lock()
	defer q.nominator.mu.Unlock()
	q.nominator.deleteLocked(pod)
}

// HasNominatedPods reports whether any pod is nominated, without the lock.
func (q *PriorityQueue) HasNominatedPods() bool { return q.nominator.count.Load() > 0 }

// NominatedPodsForNode returns a copy of the pods nominated for the node.
func (q *PriorityQueue) NominatedPodsForNode(nodeName string) []*corev1.Pod {
	if q.nominator.count.Load() == 0 {
		return nil
	}
	q.nominator.mu.RLock()
	defer q.nominator.mu.RUnlock()
	list := q.nominator.byNode[nodeName]
	if len(list) == 0 {
		return nil
	}
	return append([]*corev1.Pod(nil), list...)
}

// NominatedNodeName returns the node the pod is nominated for ("" if none).
func (q *PriorityQueue) NominatedNodeName(pod *corev1.Pod) string {
	q.nominator.mu.RLock()
	defer q.nominator.mu.RUnlock()
	return q.nominator.byUID[pod.UID]
}
