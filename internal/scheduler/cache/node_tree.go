package cache

import (
	corev1 "k8s.io/api/core/v1"
)

// nodeTree keeps node names grouped by zone so that the snapshot's node list
// interleaves zones, as upstream does: when only a percentage of the nodes is
// filtered, the nodes examined come from every zone.
type nodeTree struct {
	tree     map[string][]string // zone key → node names
	zones    []string            // zone keys in the order they were first seen
	numNodes int
}

func newNodeTree() *nodeTree {
	return &nodeTree{tree: map[string][]string{}}
}

// zoneKey is region and zone joined by a separator that cannot occur in label values.
func zoneKey(node *corev1.Node) string {
	labels := node.Labels
	region := labels[corev1.LabelTopologyRegion]
	if region == "" {
		region = labels[corev1.LabelFailureDomainBetaRegion]
	}
	zone := labels[corev1.LabelTopologyZone]
	if zone == "" {
		zone = labels[corev1.LabelFailureDomainBetaZone]
	}
	if region == "" && zone == "" {
		return ""
	}
	return region + ":\x00:" + zone
}

func (t *nodeTree) addNode(node *corev1.Node) {
	zone := zoneKey(node)
	names, ok := t.tree[zone]
	if ok {
		for _, n := range names {
			if n == node.Name {
				return
			}
		}
	} else {
		t.zones = append(t.zones, zone)
	}
	t.tree[zone] = append(names, node.Name)
	t.numNodes++
}

func (t *nodeTree) removeNode(node *corev1.Node) bool {
	zone := zoneKey(node)
	names := t.tree[zone]
	for i, n := range names {
		if n != node.Name {
			continue
		}
		names = append(names[:i], names[i+1:]...)
		if len(names) == 0 {
			delete(t.tree, zone)
			for j, z := range t.zones {
				if z == zone {
					t.zones = append(t.zones[:j], t.zones[j+1:]...)
					break
				}
			}
		} else {
			t.tree[zone] = names
		}
		t.numNodes--
		return true
	}
	return false
}

func (t *nodeTree) updateNode(oldNode, newNode *corev1.Node) {
	if oldNode != nil && zoneKey(oldNode) == zoneKey(newNode) {
		return
	}
	if oldNode != nil {
		t.removeNode(oldNode)
	}
	t.addNode(newNode)
}

// list returns the node names, taking one node of each zone in turn.
func (t *nodeTree) list() []string {
	out := make([]string, 0, t.numNodes)
	longest := 0
	for _, names := range t.tree {
		longest = max(longest, len(names))
	}
	for i := 0; i < longest; i++ {
		for _, zone := range t.zones {
			if names := t.tree[zone]; i < len(names) {
				out = append(out, names[i])
			}
		}
	}
	return out
}
