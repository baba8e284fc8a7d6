package cache

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

// Snapshot is the copy of the cache that one scheduling cycle reads: plugins see it
// through framework.SharedLister. Cache.UpdateSnapshot refreshes it in place,
// copying only the NodeInfos whose generation is newer than the snapshot's.
// A Snapshot is used by one goroutine at a time (the scheduling loop).
type Snapshot struct {
	nodeInfoMap  map[string]*framework.NodeInfo
	nodeInfoList []*framework.NodeInfo
	// havePodsWithAffinity and havePodsWithRequiredAntiAffinity are subsets of nodeInfoList.
	havePodsWithAffinity             []*framework.NodeInfo
	havePodsWithRequiredAntiAffinity []*framework.NodeInfo
	// images are the summaries shared by every NodeInfo of the snapshot, one per image name.
	images          map[string]*framework.ImageStateSummary
	generation      int64
	imageGeneration int64
}

var (
	_ framework.SharedLister   = (*Snapshot)(nil)
	_ framework.NodeInfoLister = (*Snapshot)(nil)
)

// NewEmptySnapshot returns a snapshot to be filled by Cache.UpdateSnapshot.
func NewEmptySnapshot() *Snapshot {
	return &Snapshot{
		nodeInfoMap: map[string]*framework.NodeInfo{},
		images:      map[string]*framework.ImageStateSummary{},
	}
}

// NewSnapshot builds a snapshot of the given nodes and pods (for tests of plugins).
// Pods bound to nodes that are not listed are ignored; pods without a UID get
// namespace/name as one.
func NewSnapshot(pods []*corev1.Pod, nodes []*corev1.Node) *Snapshot {
	c := New(Options{TTL: -1})
	for _, n := range nodes {
		c.AddNode(n)
	}
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			continue
		}
		if p.UID == "" {
			cp := *p
			cp.UID = types.UID(p.Namespace + "/" + p.Name)
			p = &cp
		}
		_ = c.AddPod(p)
	}
	s := NewEmptySnapshot()
	_ = c.UpdateSnapshot(s)
	return s
}

// NodeInfos returns the snapshot as a NodeInfoLister.
func (s *Snapshot) NodeInfos() framework.NodeInfoLister { return s }

// NumNodes returns the number of nodes in the snapshot.
func (s *Snapshot) NumNodes() int { return len(s.nodeInfoList) }

// Generation returns the cache generation the snapshot reflects.
func (s *Snapshot) Generation() int64 { return s.generation }

// List returns every node, zones interleaved.
func (s *Snapshot) List() ([]*framework.NodeInfo, error) { return s.nodeInfoList, nil }

// HavePodsWithAffinityList returns the nodes with pods that have (anti-)affinity.
func (s *Snapshot) HavePodsWithAffinityList() ([]*framework.NodeInfo, error) {
	return s.havePodsWithAffinity, nil
}

// HavePodsWithRequiredAntiAffinityList returns the nodes with pods that have required anti-affinity.
func (s *Snapshot) HavePodsWithRequiredAntiAffinityList() ([]*framework.NodeInfo, error) {
	return s.havePodsWithRequiredAntiAffinity, nil
}

// Get returns one node's info.
func (s *Snapshot) Get(nodeName string) (*framework.NodeInfo, error) {
	if ni, ok := s.nodeInfoMap[nodeName]; ok && ni.Node() != nil {
		return ni, nil
	}
	return nil, fmt.Errorf("nodeinfo not found for node name %q", nodeName)
}

// UpdateSnapshot brings the snapshot up to date with the cache. Only NodeInfos
// changed since the snapshot's generation are copied; the node list is rebuilt only
// when nodes were added or removed. Copies replace the snapshot's NodeInfo structs
// in place (NodeInfo.CopyInto, reusing their pod lists and maps), so slices handed
// out earlier see the new content.
func (c *Cache) UpdateSnapshot(s *Snapshot) error {
	c.mu.Lock()
	defer c.mu.Unlock()

	if s.imageGeneration != c.imageGeneration {
		for name, st := range c.imageStates {
			sum, ok := s.images[name]
			if !ok {
				sum = &framework.ImageStateSummary{}
				s.images[name] = sum
			}
			sum.Size, sum.NumNodes = st.size, st.nodes.Len()
		}
		for name := range s.images {
			if _, ok := c.imageStates[name]; !ok {
				delete(s.images, name)
			}
		}
		s.imageGeneration = c.imageGeneration
	}

	updateAll, updateAffinity := false, false
	for item := c.headNode; item != nil; item = item.next {
		if item.info.Generation <= s.generation {
			break
		}
		node := item.info.Node()
		if node == nil {
			continue
		}
		existing, ok := s.nodeInfoMap[node.Name]
		if !ok {
			updateAll = true
			existing = &framework.NodeInfo{}
			s.nodeInfoMap[node.Name] = existing
		}
		hadAffinity, hadAnti := len(existing.PodsWithAffinity) > 0, len(existing.PodsWithRequiredAntiAffinity) > 0
		item.info.CopyInto(existing)
		for name, sum := range existing.ImageStates {
			shared, ok := s.images[name]
			if !ok {
				shared = &framework.ImageStateSummary{Size: sum.Size, NumNodes: 1}
				s.images[name] = shared
			}
			existing.ImageStates[name] = shared
		}
		if hadAffinity != (len(existing.PodsWithAffinity) > 0) || hadAnti != (len(existing.PodsWithRequiredAntiAffinity) > 0) {
			updateAffinity = true
		}
	}
	if c.headNode != nil {
		s.generation = c.headNode.info.Generation
	}

	if len(s.nodeInfoMap) > c.nodeTree.numNodes {
		for name := range s.nodeInfoMap {
			if item, ok := c.nodes[name]; !ok || item.info.Node() == nil {
				delete(s.nodeInfoMap, name)
			}
		}
		updateAll = true
	}
	if updateAll || updateAffinity {
		c.updateSnapshotLists(s, updateAll)
	}
	if len(s.nodeInfoList) != c.nodeTree.numNodes {
		c.updateSnapshotLists(s, true)
		return fmt.Errorf("snapshot was inconsistent (%d nodes listed, %d in the cache): rebuilt", len(s.nodeInfoList), c.nodeTree.numNodes)
	}
	return nil
}

// updateSnapshotLists rebuilds the node list (when all is set) and the affinity subsets.
func (c *Cache) updateSnapshotLists(s *Snapshot, all bool) {
	if all {
		s.nodeInfoList = make([]*framework.NodeInfo, 0, c.nodeTree.numNodes)
		for _, name := range c.nodeTree.list() {
			if ni := s.nodeInfoMap[name]; ni != nil {
				s.nodeInfoList = append(s.nodeInfoList, ni)
			}
		}
	}
	s.havePodsWithAffinity, s.havePodsWithRequiredAntiAffinity = nil, nil
	for _, ni := range s.nodeInfoList {
		if len(ni.PodsWithAffinity) > 0 {
			s.havePodsWithAffinity = append(s.havePodsWithAffinity, ni)
		}
		if len(ni.PodsWithRequiredAntiAffinity) > 0 {
			s.havePodsWithRequiredAntiAffinity = append(s.havePodsWithRequiredAntiAffinity, ni)
		}
	}
}
