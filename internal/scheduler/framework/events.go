package framework

import corev1 "k8s.io/api/core/v1"

// EventResource names a kind of cluster object whose changes the scheduler
// watches on behalf of plugins (see EnqueueExtensions).
type EventResource string

// The resources plugins may register events for. Nodes and pods are not among
// them: the scheduler watches those itself, and their changes move every
// unschedulable pod they may help (see package queue).
const (
	PersistentVolume      EventResource = "PersistentVolume"
	PersistentVolumeClaim EventResource = "PersistentVolumeClaim"
	StorageClass          EventResource = "storage.k8s.io/StorageClass"
	CSINode               EventResource = "storage.k8s.io/CSINode"
	CSIDriver             EventResource = "storage.k8s.io/CSIDriver"
	CSIStorageCapacity    EventResource = "storage.k8s.io/CSIStorageCapacity"
)

// ActionType is a set of the things that can happen to an object.
type ActionType uint

// The actions, as bits of an ActionType.
const (
	Add ActionType = 1 << iota
	Update
	Delete
)

// String names the action (Add, Update, Delete), or lists a set's with "|".
func (a ActionType) String() string {
	var out string
	for _, n := range []struct {
		bit  ActionType
		name string
	}{{Add, "Add"}, {Update, "Update"}, {Delete, "Delete"}} {
		if a&n.bit != 0 {
			if out != "" {
				out += "|"
			}
			out += n.name
		}
	}
	return out
}

// ClusterEvent is a change of some objects of one resource.
type ClusterEvent struct {
	Resource   EventResource
	ActionType ActionType
}

// QueueingHintFn reports whether a change of an object (oldObj is nil for an
// add, newObj nil for a delete) may make pod, which the plugin rejected,
// schedulable. It must be cheap and must not block: the queue calls it for
// every pod the plugin rejected, under its lock.
type QueueingHintFn func(pod *corev1.Pod, oldObj, newObj any) bool

// ClusterEventWithHint is an event a plugin registers, with the hint that
// filters it per pod; a nil hint means every such event may help.
type ClusterEventWithHint struct {
	Event          ClusterEvent
	QueueingHintFn QueueingHintFn
}

// EnqueueExtensions is implemented by plugins whose rejections changes of
// other objects than nodes and pods may resolve (a PersistentVolume appears, a
// claim is bound). The scheduler watches the registered resources, and on each
// event moves back to the queue the unschedulable pods that the plugin rejected
// and whose hint says the event may help them, as upstream's queueing hints.
type EnqueueExtensions interface {
	Plugin
	EventsToRegister() []ClusterEventWithHint
}
