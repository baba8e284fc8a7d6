package scheduler

import (
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kubette/kubette/internal/scheduler/framework"
	"github.com/kubette/kubette/internal/scheduler/queue"
)

// addEventHandlers splits the pod informer as upstream: pods with a node update
// the cache, pods without one that name this scheduler go to the queue. Node
// events update the cache and retry unschedulable pods when the node may fit more.
func (s *Scheduler) addEventHandlers(pods, nodes toolscache.SharedIndexInformer) error {
	reg, err := pods.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    s.onPodAdd,
		UpdateFunc: s.onPodUpdate,
		DeleteFunc: s.onPodDelete,
	})
	if err != nil {
		return fmt.Errorf("add pod event handler: %w", err)
	}
	s.handlers = append(s.handlers, reg)
	reg, err = nodes.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    s.onNodeAdd,
		UpdateFunc: s.onNodeUpdate,
		DeleteFunc: s.onNodeDelete,
	})
	if err != nil {
		return fmt.Errorf("add node event handler: %w", err)
	}
	s.handlers = append(s.handlers, reg)
	return nil
}

func assigned(pod *corev1.Pod) bool { return pod.Spec.NodeName != "" }

// terminal pods hold no resources (the informer normally leaves them out).
func terminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

func (s *Scheduler) responsibleFor(pod *corev1.Pod) bool {
	return pod.Spec.SchedulerName == s.schedulerName
}

func (s *Scheduler) onPodAdd(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || terminal(pod) {
		return
	}
	switch {
	case assigned(pod):
		s.addAssignedPod(pod)
	case s.responsibleFor(pod):
		s.queue.Add(pod)
	}
}

func (s *Scheduler) addAssignedPod(pod *corev1.Pod) {
	if err := s.cache.AddPod(pod); err != nil {
		s.logger.Error("cache: add pod", "pod", podRef(pod), "err", err)
	}
	s.queue.AssignedPodAdded(pod)
}

func (s *Scheduler) onPodUpdate(oldObj, newObj any) {
	oldPod, ok1 := oldObj.(*corev1.Pod)
	newPod, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 || oldPod.ResourceVersion == newPod.ResourceVersion {
		return
	}
	if terminal(newPod) {
		// Left the informer's selection: it is gone for the scheduler.
		if !terminal(oldPod) {
			s.onPodDelete(oldPod)
		}
		return
	}
	switch {
	case assigned(oldPod):
		if err := s.cache.UpdatePod(oldPod, newPod); err != nil {
			s.logger.Error("cache: update pod", "pod", podRef(newPod), "err", err)
		}
		s.queue.AssignedPodUpdated(oldPod, newPod)
	case assigned(newPod):
		// The pod was bound: it confirms the assumed pod, and leaves the queue.
		s.addAssignedPod(newPod)
		if s.responsibleFor(oldPod) {
			s.queue.Delete(oldPod)
		}
	case s.responsibleFor(oldPod):
		if s.cache.IsAssumedPod(newPod) {
			// Being bound: the binding cycle decides what happens next.
			return
		}
		s.queue.Update(oldPod, newPod)
	}
}

func (s *Scheduler) onPodDelete(obj any) {
	var pod *corev1.Pod
	switch t := obj.(type) {
	case *corev1.Pod:
		pod = t
	case toolscache.DeletedFinalStateUnknown:
		p, ok := t.Obj.(*corev1.Pod)
		if !ok {
			return
		}
		pod = p
		// The last known state may be stale: the pod may be bound since.
		if cached, err := s.cache.GetPod(pod); err == nil && !s.cache.IsAssumedPod(pod) {
			pod = cached
		}
	default:
		return
	}
	if assigned(pod) {
		if err := s.cache.RemovePod(pod); err != nil {
			s.logger.Error("cache: remove pod", "pod", podRef(pod), "err", err)
		}
		s.queue.MoveAllToActiveOrBackoffQueue(queue.EventAssignedPodDelete, nil)
		return
	}
	if !s.responsibleFor(pod) {
		return
	}
	s.queue.Delete(pod)
	// A pod waiting on Permit plugins fails its binding at once, as upstream.
	if wp := s.profile.waitingPods.Get(pod.UID); wp != nil {
		wp.Reject("", "removed")
	}
	if s.cache.IsAssumedPod(pod) {
		// Deleted while being bound: free its room now (the bind will fail).
		if cached, err := s.cache.GetPod(pod); err == nil {
			if err := s.cache.ForgetPod(cached); err != nil {
				s.logger.Error("cache: forget deleted assumed pod", "pod", podRef(pod), "err", err)
			}
		}
		s.queue.MoveAllToActiveOrBackoffQueue(queue.EventAssignedPodDelete, nil)
	}
}

func (s *Scheduler) onNodeAdd(obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	s.cache.AddNode(node)
	s.queue.MoveAllToActiveOrBackoffQueue(queue.EventNodeAdd, nil)
}

func (s *Scheduler) onNodeUpdate(oldObj, newObj any) {
	oldNode, ok1 := oldObj.(*corev1.Node)
	newNode, ok2 := newObj.(*corev1.Node)
	if !ok1 || !ok2 {
		return
	}
	s.cache.UpdateNode(oldNode, newNode)
	if nodeSchedulingPropertiesChanged(oldNode, newNode) {
		s.queue.MoveAllToActiveOrBackoffQueue(queue.EventNodeUpdate, nil)
	}
}

func (s *Scheduler) onNodeDelete(obj any) {
	var node *corev1.Node
	switch t := obj.(type) {
	case *corev1.Node:
		node = t
	case toolscache.DeletedFinalStateUnknown:
		n, ok := t.Obj.(*corev1.Node)
		if !ok {
			return
		}
		node = n
	default:
		return
	}
	if err := s.cache.RemoveNode(node); err != nil {
		s.logger.Error("cache: remove node", "node", node.Name, "err", err)
	}
	s.queue.MoveAllToActiveOrBackoffQueue(queue.EventNodeDelete, nil)
}

// nodeSchedulingPropertiesChanged reports whether a node update may let more pods
// fit, as upstream's NodeSchedulingPropertiesChange: it became schedulable, or its
// allocatable, labels, taints, condition statuses or annotations changed.
// Heartbeats alone (condition times) do not count.
func nodeSchedulingPropertiesChanged(oldNode, newNode *corev1.Node) bool {
	if oldNode.Spec.Unschedulable != newNode.Spec.Unschedulable && !newNode.Spec.Unschedulable {
		return true
	}
	if !reflect.DeepEqual(oldNode.Status.Allocatable, newNode.Status.Allocatable) ||
		!reflect.DeepEqual(oldNode.Labels, newNode.Labels) ||
		!reflect.DeepEqual(oldNode.Spec.Taints, newNode.Spec.Taints) ||
		!reflect.DeepEqual(oldNode.Annotations, newNode.Annotations) {
		return true
	}
	conditions := func(n *corev1.Node) map[corev1.NodeConditionType]corev1.ConditionStatus {
		m := make(map[corev1.NodeConditionType]corev1.ConditionStatus, len(n.Status.Conditions))
		for _, c := range n.Status.Conditions {
			m[c.Type] = c.Status
		}
		return m
	}
	return !reflect.DeepEqual(conditions(oldNode), conditions(newNode))
}

// pluginEvent is one event a plugin of the profile registered.
type pluginEvent struct {
	plugin  string
	actions framework.ActionType
	hint    framework.QueueingHintFn
}

// addPluginEventHandlers watches the resources the profile's EnqueueExtensions
// plugins registered, one handler per resource: each event moves back the
// unschedulable pods that a registering plugin rejected and whose hint says the
// event may help (upstream's queueing hints).
func (s *Scheduler) addPluginEventHandlers(f informers.SharedInformerFactory) error {
	byResource := map[framework.EventResource][]pluginEvent{}
	var order []framework.EventResource
	for _, pl := range s.profile.enqueueExtensions {
		for _, e := range pl.EventsToRegister() {
			r := e.Event.Resource
			if _, ok := byResource[r]; !ok {
				order = append(order, r)
			}
			byResource[r] = append(byResource[r], pluginEvent{plugin: pl.Name(), actions: e.Event.ActionType, hint: e.QueueingHintFn})
		}
	}
	for _, r := range order {
		inf, err := informerFor(f, r)
		if err != nil {
			return err
		}
		events := byResource[r]
		handle := func(action framework.ActionType, oldObj, newObj any) {
			name := string(r) + action.String()
			s.queue.MoveRejectedPods(name, func(plugin string, pod *corev1.Pod) bool {
				for _, e := range events {
					if e.plugin == plugin && e.actions&action != 0 && (e.hint == nil || e.hint(pod, oldObj, newObj)) {
						return true
					}
				}
				return false
			})
		}
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { handle(framework.Add, nil, obj) },
			UpdateFunc: func(oldObj, newObj any) { handle(framework.Update, oldObj, newObj) },
			DeleteFunc: func(obj any) {
				if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
					obj = t.Obj
				}
				handle(framework.Delete, obj, nil)
			},
		})
		if err != nil {
			return fmt.Errorf("add %s event handler: %w", r, err)
		}
		s.handlers = append(s.handlers, reg)
	}
	return nil
}

// informerFor returns the shared informer of a resource plugins may register events for.
func informerFor(f informers.SharedInformerFactory, r framework.EventResource) (toolscache.SharedIndexInformer, error) {
	switch r {
	case framework.PersistentVolume:
		return f.Core().V1().PersistentVolumes().Informer(), nil
	case framework.PersistentVolumeClaim:
		return f.Core().V1().PersistentVolumeClaims().Informer(), nil
	case framework.StorageClass:
		return f.Storage().V1().StorageClasses().Informer(), nil
	case framework.CSINode:
		return f.Storage().V1().CSINodes().Informer(), nil
	case framework.CSIDriver:
		return f.Storage().V1().CSIDrivers().Informer(), nil
	case framework.CSIStorageCapacity:
		return f.Storage().V1().CSIStorageCapacities().Informer(), nil
	}
	return nil, fmt.Errorf("plugins cannot register events of %q", r)
}
