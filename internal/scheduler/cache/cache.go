// Package cache is the scheduler's view of the cluster: the nodes and the pods
// bound to them, plus the pods the scheduler has chosen a node for but whose
// binding the informer has not shown yet ("assumed" pods). Assumed pods count
// against their node at once, so two pods never take capacity only one of them
// fits. At the start of every scheduling cycle the cache refreshes a Snapshot,
// copying only the nodes that changed since the last cycle.
package cache

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

// DefaultAssumedPodTTL is how long an assumed pod whose binding finished may stay
// unconfirmed by the informer before the cache forgets it.
const DefaultAssumedPodTTL = 30 * time.Second

// cleanupPeriod is how often expired assumed pods are looked for.
const cleanupPeriod = time.Second

// Options configure a Cache.
type Options struct {
	// TTL is how long an assumed pod whose binding finished is kept without the
	// informer confirming it (DefaultAssumedPodTTL when zero; negative never expires).
	TTL time.Duration
	// Clock is the time source (the real clock when nil).
	Clock clock.WithTicker
	// Logger receives the cache's logs (slog.Default when nil).
	Logger *slog.Logger
}

// Cache holds nodes and the pods on them. It is safe for concurrent use.
type Cache struct {
	ttl    time.Duration
	clock  clock.WithTicker
	logger *slog.Logger

	mu sync.RWMutex
	// assumedPods are the keys of podStates that are assumed, not yet confirmed.
	assumedPods map[types.UID]struct{}
	podStates   map[types.UID]*podState
	nodes       map[string]*nodeInfoListItem
	// headNode is the most recently changed node; the list runs from newest to oldest.
	headNode *nodeInfoListItem
	nodeTree *nodeTree
	// imageStates counts, per image name, the nodes that have it.
	imageStates map[string]*imageState
	// generation is the last generation handed to a NodeInfo.
	generation int64
	// imageGeneration changes whenever the image set of any node changes.
	imageGeneration int64
}

type podState struct {
	pod *corev1.Pod
	// bindingFinished is set once the bind call returned; only then can the pod expire.
	bindingFinished bool
	deadline        time.Time
}

type imageState struct {
	size  int64
	nodes sets.Set[string]
}

// nodeInfoListItem is an element of the doubly linked list of NodeInfos ordered by
// their last change, newest first.
type nodeInfoListItem struct {
	info       *framework.NodeInfo
	next, prev *nodeInfoListItem
}

// New returns an empty cache. Call Run to expire assumed pods.
func New(o Options) *Cache {
	if o.TTL == 0 {
		o.TTL = DefaultAssumedPodTTL
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Cache{
		ttl:         o.TTL,
		clock:       o.Clock,
		logger:      o.Logger,
		assumedPods: map[types.UID]struct{}{},
		podStates:   map[types.UID]*podState{},
		nodes:       map[string]*nodeInfoListItem{},
		nodeTree:    newNodeTree(),
		imageStates: map[string]*imageState{},
	}
}

// Run expires assumed pods every second until ctx is done.
func (c *Cache) Run(ctx context.Context) {
	t := c.clock.NewTicker(cleanupPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			c.CleanupExpiredAssumedPods()
		}
	}
}

func podKey(pod *corev1.Pod) (types.UID, error) {
	if pod.UID == "" {
		return "", fmt.Errorf("pod %s/%s has no UID: cannot be cached", pod.Namespace, pod.Name)
	}
	return pod.UID, nil
}

// touch gives the node a new generation and moves it to the head of the list.
// The caller holds c.mu.
func (c *Cache) touch(name string) {
	item, ok := c.nodes[name]
	if !ok {
		return
	}
	c.generation++
	item.info.Generation = c.generation
	if item == c.headNode {
		return
	}
	if item.prev != nil {
		item.prev.next = item.next
	}
	if item.next != nil {
		item.next.prev = item.prev
	}
	if c.headNode != nil {
		c.headNode.prev = item
	}
	item.next, item.prev = c.headNode, nil
	c.headNode = item
}

// unlink removes the node's item from the list and the map. The caller holds c.mu.
func (c *Cache) unlink(name string) {
	item, ok := c.nodes[name]
	if !ok {
		return
	}
	if item.prev != nil {
		item.prev.next = item.next
	}
	if item.next != nil {
		item.next.prev = item.prev
	}
	if item == c.headNode {
		c.headNode = item.next
	}
	delete(c.nodes, name)
}

// item returns the list item of a node, creating an empty one. The caller holds c.mu.
func (c *Cache) item(name string) *nodeInfoListItem {
	item, ok := c.nodes[name]
	if !ok {
		item = &nodeInfoListItem{info: framework.NewNodeInfo()}
		c.nodes[name] = item
	}
	return item
}

// AssumePod accounts for a pod on pod.Spec.NodeName before it is bound.
func (c *Cache) AssumePod(pod *corev1.Pod) error {
	key, err := podKey(pod)
	if err != nil {
		return err
	}
	if pod.Spec.NodeName == "" {
		return fmt.Errorf("pod %s/%s has no node: cannot be assumed", pod.Namespace, pod.Name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.podStates[key]; ok {
		return fmt.Errorf("pod %s/%s (%s) is in the cache already: cannot be assumed", pod.Namespace, pod.Name, key)
	}
	c.addPod(pod, true)
	return nil
}

// FinishBinding records that the bind call for an assumed pod returned; from now
// on the pod expires after the TTL unless the informer confirms it.
func (c *Cache) FinishBinding(pod *corev1.Pod) error {
	key, err := podKey(pod)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.podStates[key]
	if !ok {
		return nil
	}
	if _, assumed := c.assumedPods[key]; assumed {
		st.bindingFinished = true
		st.deadline = c.clock.Now().Add(c.ttl)
	}
	return nil
}

// ForgetPod undoes AssumePod (the bind failed).
func (c *Cache) ForgetPod(pod *corev1.Pod) error {
	key, err := podKey(pod)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.podStates[key]
	if !ok {
		return nil
	}
	if st.pod.Spec.NodeName != pod.Spec.NodeName {
		return fmt.Errorf("pod %s/%s was assumed on %s but is on %s", pod.Namespace, pod.Name, pod.Spec.NodeName, st.pod.Spec.NodeName)
	}
	if _, assumed := c.assumedPods[key]; !assumed {
		return fmt.Errorf("pod %s/%s is not assumed: cannot be forgotten", pod.Namespace, pod.Name)
	}
	return c.removePod(st.pod)
}

// addPod adds a pod to its node. The caller holds c.mu.
func (c *Cache) addPod(pod *corev1.Pod, assumed bool) {
	item := c.item(pod.Spec.NodeName)
	item.info.AddPod(pod)
	c.touch(pod.Spec.NodeName)
	c.podStates[pod.UID] = &podState{pod: pod}
	if assumed {
		c.assumedPods[pod.UID] = struct{}{}
	}
}

// removePod removes a pod from its node; a node that is gone and has no pods left
// is dropped. The caller holds c.mu.
func (c *Cache) removePod(pod *corev1.Pod) error {
	if item, ok := c.nodes[pod.Spec.NodeName]; ok {
		if err := item.info.RemovePod(pod); err != nil {
			return fmt.Errorf("remove pod from node info: %w", err)
		}
		if len(item.info.Pods) == 0 && item.info.Node() == nil {
			c.unlink(pod.Spec.NodeName)
		} else {
			c.touch(pod.Spec.NodeName)
		}
	}
	delete(c.podStates, pod.UID)
	delete(c.assumedPods, pod.UID)
	return nil
}

// AddPod records a pod the informer shows bound; it confirms an assumed pod.
func (c *Cache) AddPod(pod *corev1.Pod) error {
	key, err := podKey(pod)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.podStates[key]
	_, assumed := c.assumedPods[key]
	switch {
	case ok && assumed:
		return c.replacePod(st.pod, pod, slog.LevelWarn, "pod was bound to a different node than assumed")
	case !ok:
		// New, or an assumed pod that expired before the informer saw it.
		c.addPod(pod, false)
	default:
		return fmt.Errorf("pod %s/%s is in the cache already", pod.Namespace, pod.Name)
	}
	return nil
}

// UpdatePod replaces a bound pod.
func (c *Cache) UpdatePod(oldPod, newPod *corev1.Pod) error {
	key, err := podKey(oldPod)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.podStates[key]
	if !ok {
		return fmt.Errorf("pod %s/%s is not in the cache: cannot be updated", oldPod.Namespace, oldPod.Name)
	}
	if _, assumed := c.assumedPods[key]; assumed {
		return fmt.Errorf("assumed pod %s/%s cannot be updated", oldPod.Namespace, oldPod.Name)
	}
	return c.replacePod(st.pod, newPod, slog.LevelError, "pod moved between nodes: the cache follows the new node")
}

// replacePod swaps the cached copy old of a pod for newPod, confirmed (not
// assumed): old leaves its node and newPod joins its own. When the two nodes
// differ — the bind went elsewhere than assumed, or a bound pod moved — it logs
// msg at level. The caller holds c.mu.
func (c *Cache) replacePod(old, newPod *corev1.Pod, level slog.Level, msg string) error {
	if old.Spec.NodeName != newPod.Spec.NodeName {
		c.logger.Log(context.Background(), level, msg,
			"pod", newPod.Namespace+"/"+newPod.Name, "from", old.Spec.NodeName, "to", newPod.Spec.NodeName)
	}
	if err := c.removePod(old); err != nil {
		return err
	}
	c.addPod(newPod, false)
	return nil
}

// RemovePod forgets a pod that was deleted (bound or assumed).
func (c *Cache) RemovePod(pod *corev1.Pod) error {
	key, err := podKey(pod)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.podStates[key]
	if !ok {
		return fmt.Errorf("pod %s/%s is not in the cache: cannot be removed", pod.Namespace, pod.Name)
	}
	return c.removePod(st.pod)
}

// IsAssumedPod reports whether the pod is assumed and not yet confirmed.
func (c *Cache) IsAssumedPod(pod *corev1.Pod) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.assumedPods[pod.UID]
	return ok
}

// GetPod returns the cached version of a pod (with its node).
func (c *Cache) GetPod(pod *corev1.Pod) (*corev1.Pod, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	st, ok := c.podStates[pod.UID]
	if !ok {
		return nil, fmt.Errorf("pod %s/%s is not in the cache", pod.Namespace, pod.Name)
	}
	return st.pod, nil
}

// AddNode adds or replaces a node.
func (c *Cache) AddNode(node *corev1.Node) {
	c.UpdateNode(nil, node)
}

// UpdateNode replaces a node (oldNode may be nil).
func (c *Cache) UpdateNode(oldNode, newNode *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	item, known := c.nodes[newNode.Name]
	var prev *corev1.Node
	if known {
		prev = item.info.Node()
	} else {
		item = c.item(newNode.Name)
	}
	if prev == nil {
		c.nodeTree.addNode(newNode)
	} else {
		c.nodeTree.updateNode(prev, newNode)
	}
	if prev == nil || !sameImages(prev, newNode) {
		c.removeNodeImageStates(prev)
		c.addNodeImageStates(newNode, item.info)
		c.imageGeneration++
	}
	item.info.SetNode(newNode)
	c.touch(newNode.Name)
}

// RemoveNode removes a node. Its pods stay accounted (on a node-less entry that
// snapshots skip) until their own deletions arrive.
func (c *Cache) RemoveNode(node *corev1.Node) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	item, ok := c.nodes[node.Name]
	if !ok || item.info.Node() == nil {
		return fmt.Errorf("node %s is not in the cache", node.Name)
	}
	known := item.info.Node()
	if len(item.info.Pods) == 0 {
		c.unlink(node.Name)
	} else {
		pods := make([]*corev1.Pod, 0, len(item.info.Pods))
		for _, p := range item.info.Pods {
			pods = append(pods, p.Pod)
		}
		item.info = framework.NewNodeInfo(pods...)
		c.touch(node.Name)
	}
	c.nodeTree.removeNode(known)
	c.removeNodeImageStates(known)
	c.imageGeneration++
	return nil
}

func sameImages(a, b *corev1.Node) bool {
	ia, ib := a.Status.Images, b.Status.Images
	if len(ia) != len(ib) {
		return false
	}
	for i := range ia {
		if ia[i].SizeBytes != ib[i].SizeBytes || len(ia[i].Names) != len(ib[i].Names) {
			return false
		}
		for j := range ia[i].Names {
			if ia[i].Names[j] != ib[i].Names[j] {
				return false
			}
		}
	}
	return true
}

// addNodeImageStates counts the node's images and gives its NodeInfo one summary
// per image name (the snapshot replaces them with summaries holding NumNodes).
func (c *Cache) addNodeImageStates(node *corev1.Node, info *framework.NodeInfo) {
	var sums map[string]*framework.ImageStateSummary
	for _, image := range node.Status.Images {
		for _, name := range image.Names {
			st, ok := c.imageStates[name]
			if !ok {
				st = &imageState{size: image.SizeBytes, nodes: sets.New[string]()}
				c.imageStates[name] = st
			}
			st.nodes.Insert(node.Name)
			if sums == nil {
				sums = make(map[string]*framework.ImageStateSummary)
			}
			if _, ok := sums[name]; !ok {
				sums[name] = &framework.ImageStateSummary{Size: st.size, NumNodes: st.nodes.Len()}
			}
		}
	}
	info.ImageStates = sums
}

func (c *Cache) removeNodeImageStates(node *corev1.Node) {
	if node == nil {
		return
	}
	for _, image := range node.Status.Images {
		for _, name := range image.Names {
			if st, ok := c.imageStates[name]; ok {
				st.nodes.Delete(node.Name)
				if st.nodes.Len() == 0 {
					delete(c.imageStates, name)
				}
			}
		}
	}
}

// CleanupExpiredAssumedPods forgets the assumed pods whose binding finished more
// than the TTL ago without the informer confirming them, and returns them.
func (c *Cache) CleanupExpiredAssumedPods() []*corev1.Pod {
	if c.ttl < 0 {
		return nil
	}
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	var expired []*corev1.Pod
	for key := range c.assumedPods {
		st := c.podStates[key]
		if st == nil || !st.bindingFinished || !now.After(st.deadline) {
			continue
		}
		c.logger.Warn("assumed pod expired: its binding was never observed", "pod", st.pod.Namespace+"/"+st.pod.Name, "node", st.pod.Spec.NodeName)
		if err := c.removePod(st.pod); err != nil {
			c.logger.Error("expire assumed pod", "pod", st.pod.Namespace+"/"+st.pod.Name, "err", err)
			continue
		}
		expired = append(expired, st.pod)
	}
	return expired
}

// NodeCount returns the number of nodes known (including node-less entries that still have pods).
func (c *Cache) NodeCount() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.nodes)
}

// PodCount returns the number of pods in the cache, assumed ones included.
func (c *Cache) PodCount() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.podStates)
}

// AssumedPodCount returns the number of assumed, unconfirmed pods.
func (c *Cache) AssumedPodCount() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.assumedPods)
}

// NodeInfo returns a copy of one node's info (for tests and debugging).
func (c *Cache) NodeInfo(name string) (*framework.NodeInfo, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	item, ok := c.nodes[name]
	if !ok {
		return nil, fmt.Errorf("node %s is not in the cache", name)
	}
	return item.info.Clone(), nil
}
