package cache

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func testCache(t *testing.T, ttl time.Duration) (*Cache, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	c := New(Options{TTL: ttl, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(func() { checkConsistent(t, c) })
	return c, clk
}

// checkConsistent verifies the cache's invariants: every pod state is on its node's
// info, the list holds every node exactly once in decreasing generation, and the
// assumed set is a subset of the pod states.
func checkConsistent(t *testing.T, c *Cache) {
	t.Helper()
	c.mu.RLock()
	defer c.mu.RUnlock()
	seen := map[string]bool{}
	last := int64(1<<62 - 1)
	for item := c.headNode; item != nil; item = item.next {
		if item.info.Generation >= last {
			t.Errorf("list not ordered by generation")
		}
		last = item.info.Generation
		name := ""
		if n := item.info.Node(); n != nil {
			name = n.Name
		} else if len(item.info.Pods) > 0 {
			name = item.info.Pods[0].Pod.Spec.NodeName
		}
		if seen[name] {
			t.Errorf("node %q twice in the list", name)
		}
		seen[name] = true
	}
	if len(seen) != len(c.nodes) {
		t.Errorf("list has %d nodes, map %d", len(seen), len(c.nodes))
	}
	for key, st := range c.podStates {
		item, ok := c.nodes[st.pod.Spec.NodeName]
		if !ok {
			t.Errorf("pod %s: node %s missing", key, st.pod.Spec.NodeName)
			continue
		}
		found := false
		for _, p := range item.info.Pods {
			if p.Pod.UID == key {
				found = true
			}
		}
		if !found {
			t.Errorf("pod %s not on node %s", key, st.pod.Spec.NodeName)
		}
	}
	for key := range c.assumedPods {
		if _, ok := c.podStates[key]; !ok {
			t.Errorf("assumed pod %s has no state", key)
		}
	}
}

func node(name string, cpu string, labels map[string]string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourcePods: resource.MustParse("110"),
		}},
	}
}

func pod(name, nodeName, cpu string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{
			Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
		}}},
	}
}

func requestedCPU(t *testing.T, c *Cache, nodeName string) int64 {
	t.Helper()
	ni, err := c.NodeInfo(nodeName)
	if err != nil {
		t.Fatal(err)
	}
	return ni.Requested.MilliCPU
}

func TestAssumeConfirmForget(t *testing.T) {
	c, _ := testCache(t, time.Minute)
	c.AddNode(node("n1", "4", nil))
	p := pod("a", "n1", "1")
	if err := c.AssumePod(p); err != nil {
		t.Fatal(err)
	}
	if got := requestedCPU(t, c, "n1"); got != 1000 {
		t.Fatalf("assumed pod not counted: %d", got)
	}
	if !c.IsAssumedPod(p) {
		t.Fatal("pod not assumed")
	}
	if err := c.AssumePod(p); err == nil {
		t.Fatal("assuming twice must fail")
	}
	// The informer confirms it: counted once, no longer assumed.
	if err := c.AddPod(p.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if got := requestedCPU(t, c, "n1"); got != 1000 {
		t.Fatalf("confirmed pod counted %d", got)
	}
	if c.IsAssumedPod(p) || c.AssumedPodCount() != 0 {
		t.Fatal("pod still assumed after confirmation")
	}
	if err := c.ForgetPod(p); err == nil {
		t.Fatal("forgetting a confirmed pod must fail")
	}

	// Forget after a failed bind frees the capacity.
	q := pod("b", "n1", "2")
	if err := c.AssumePod(q); err != nil {
		t.Fatal(err)
	}
	if got := requestedCPU(t, c, "n1"); got != 3000 {
		t.Fatalf("requested %d", got)
	}
	if err := c.ForgetPod(q); err != nil {
		t.Fatal(err)
	}
	if got := requestedCPU(t, c, "n1"); got != 1000 {
		t.Fatalf("forgotten pod still counted: %d", got)
	}
	if c.PodCount() != 1 {
		t.Fatalf("pod count %d", c.PodCount())
	}
}

func TestConfirmOnOtherNode(t *testing.T) {
	c, _ := testCache(t, time.Minute)
	c.AddNode(node("n1", "4", nil))
	c.AddNode(node("n2", "4", nil))
	p := pod("a", "n1", "1")
	if err := c.AssumePod(p); err != nil {
		t.Fatal(err)
	}
	bound := pod("a", "n2", "1")
	if err := c.AddPod(bound); err != nil {
		t.Fatal(err)
	}
	if requestedCPU(t, c, "n1") != 0 || requestedCPU(t, c, "n2") != 1000 {
		t.Fatal("pod must follow the node the informer shows")
	}
}

func TestAssumedPodExpiry(t *testing.T) {
	c, clk := testCache(t, 10*time.Second)
	c.AddNode(node("n1", "4", nil))
	inFlight := pod("inflight", "n1", "1")
	bound := pod("bound", "n1", "1")
	for _, p := range []*corev1.Pod{inFlight, bound} {
		if err := c.AssumePod(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.FinishBinding(bound); err != nil {
		t.Fatal(err)
	}
	clk.Step(5 * time.Second)
	if got := c.CleanupExpiredAssumedPods(); len(got) != 0 {
		t.Fatalf("expired too early: %v", got)
	}
	clk.Step(6 * time.Second)
	got := c.CleanupExpiredAssumedPods()
	if len(got) != 1 || got[0].Name != "bound" {
		t.Fatalf("expired %v, want only the pod whose binding finished", got)
	}
	// A pod still binding never expires.
	clk.Step(time.Hour)
	if got := c.CleanupExpiredAssumedPods(); len(got) != 0 {
		t.Fatalf("in-flight pod expired: %v", got)
	}
	if got := requestedCPU(t, c, "n1"); got != 1000 {
		t.Fatalf("requested %d after expiry", got)
	}
	// An expired pod the informer shows later is added back.
	if err := c.AddPod(bound); err != nil {
		t.Fatal(err)
	}
	if got := requestedCPU(t, c, "n1"); got != 2000 {
		t.Fatalf("requested %d", got)
	}
	// Confirmed pods do not expire.
	if err := c.AddPod(inFlight); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Hour)
	if got := c.CleanupExpiredAssumedPods(); len(got) != 0 {
		t.Fatalf("confirmed pod expired: %v", got)
	}
}

func TestUpdateAndRemovePod(t *testing.T) {
	c, _ := testCache(t, time.Minute)
	c.AddNode(node("n1", "4", nil))
	p := pod("a", "n1", "1")
	if err := c.AddPod(p); err != nil {
		t.Fatal(err)
	}
	if err := c.AddPod(p); err == nil {
		t.Fatal("adding twice must fail")
	}
	bigger := pod("a", "n1", "3")
	if err := c.UpdatePod(p, bigger); err != nil {
		t.Fatal(err)
	}
	if got := requestedCPU(t, c, "n1"); got != 3000 {
		t.Fatalf("requested %d", got)
	}
	if err := c.RemovePod(bigger); err != nil {
		t.Fatal(err)
	}
	if got := requestedCPU(t, c, "n1"); got != 0 {
		t.Fatalf("requested %d", got)
	}
	if err := c.RemovePod(bigger); err == nil {
		t.Fatal("removing twice must fail")
	}
	// An assumed pod that is deleted before its binding is seen is removed too.
	q := pod("b", "n1", "1")
	if err := c.AssumePod(q); err != nil {
		t.Fatal(err)
	}
	if err := c.RemovePod(q); err != nil {
		t.Fatal(err)
	}
	if c.PodCount() != 0 || c.AssumedPodCount() != 0 {
		t.Fatal("pods left")
	}
}

func TestNodeRemovedBeforeItsPods(t *testing.T) {
	c, _ := testCache(t, time.Minute)
	n := node("n1", "4", nil)
	// A pod may be seen before its node.
	p := pod("a", "n1", "1")
	if err := c.AddPod(p); err != nil {
		t.Fatal(err)
	}
	s := NewEmptySnapshot()
	if err := c.UpdateSnapshot(s); err != nil {
		t.Fatal(err)
	}
	if s.NumNodes() != 0 {
		t.Fatal("a node-less entry must not be in the snapshot")
	}
	c.AddNode(n)
	if err := c.UpdateSnapshot(s); err != nil {
		t.Fatal(err)
	}
	if ni, err := s.Get("n1"); err != nil || len(ni.Pods) != 1 || ni.Requested.MilliCPU != 1000 {
		t.Fatalf("snapshot node %v %v", ni, err)
	}
	// The node goes first: its pods stay accounted until they go, but the node leaves the snapshot.
	if err := c.RemoveNode(n); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateSnapshot(s); err != nil {
		t.Fatal(err)
	}
	if s.NumNodes() != 0 {
		t.Fatal("removed node still in snapshot")
	}
	if _, err := s.Get("n1"); err == nil {
		t.Fatal("removed node still gettable")
	}
	if c.NodeCount() != 1 || c.PodCount() != 1 {
		t.Fatalf("nodes %d pods %d", c.NodeCount(), c.PodCount())
	}
	if err := c.RemovePod(p); err != nil {
		t.Fatal(err)
	}
	if c.NodeCount() != 0 {
		t.Fatal("empty removed node kept")
	}
	// The node comes back.
	c.AddNode(n)
	if err := c.UpdateSnapshot(s); err != nil {
		t.Fatal(err)
	}
	if s.NumNodes() != 1 {
		t.Fatal("re-added node missing")
	}
	if err := c.RemoveNode(n); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveNode(n); err == nil {
		t.Fatal("removing twice must fail")
	}
}

func TestSnapshotIncremental(t *testing.T) {
	c, _ := testCache(t, time.Minute)
	for i := range 10 {
		c.AddNode(node(fmt.Sprintf("n%d", i), "8", nil))
		if err := c.AddPod(pod(fmt.Sprintf("p%d", i), fmt.Sprintf("n%d", i), "1")); err != nil {
			t.Fatal(err)
		}
	}
	s := NewEmptySnapshot()
	if err := c.UpdateSnapshot(s); err != nil {
		t.Fatal(err)
	}
	if s.NumNodes() != 10 {
		t.Fatalf("%d nodes", s.NumNodes())
	}
	list, _ := s.List()
	backing := map[string]any{}
	for _, ni := range list {
		backing[ni.Node().Name] = &ni.Pods[0]
	}
	gen := s.Generation()

	// Change one node: only it is copied, the list keeps its pointers.
	if err := c.AssumePod(pod("x", "n3", "2")); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateSnapshot(s); err != nil {
		t.Fatal(err)
	}
	if s.Generation() <= gen {
		t.Fatal("generation did not advance")
	}
	list2, _ := s.List()
	for i, ni := range list2 {
		if ni != list[i] {
			t.Fatal("NodeInfo pointers must stay stable across updates")
		}
		name := ni.Node().Name
		copied := backing[name] != any(&ni.Pods[0])
		if copied != (name == "n3") {
			t.Errorf("node %s copied=%v", name, copied)
		}
	}
	n3, _ := s.Get("n3")
	if n3.Requested.MilliCPU != 3000 || len(n3.Pods) != 2 {
		t.Fatalf("n3 requested %d pods %d", n3.Requested.MilliCPU, len(n3.Pods))
	}

	// Nothing changed: nothing copied.
	gen = s.Generation()
	if err := c.UpdateSnapshot(s); err != nil {
		t.Fatal(err)
	}
	if s.Generation() != gen || s.nodeInfoMap["n3"] != n3 || &n3.Pods[0] != &s.nodeInfoMap["n3"].Pods[0] {
		t.Fatal("an unchanged cache changed the snapshot")
	}

	// The snapshot never sees changes made after it was taken.
	if err := c.AddPod(pod("y", "n4", "1")); err != nil {
		t.Fatal(err)
	}
	if n4, _ := s.Get("n4"); len(n4.Pods) != 1 {
		t.Fatal("snapshot changed without UpdateSnapshot")
	}

	// Nodes added and removed between updates.
	c.AddNode(node("n10", "8", nil))
	if err := c.RemoveNode(node("n0", "8", nil)); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateSnapshot(s); err != nil {
		t.Fatal(err)
	}
	if s.NumNodes() != 10 {
		t.Fatalf("%d nodes", s.NumNodes())
	}
	if _, err := s.Get("n0"); err == nil {
		t.Fatal("n0 still there")
	}
	if _, err := s.Get("n10"); err != nil {
		t.Fatal(err)
	}
	if n4, _ := s.Get("n4"); len(n4.Pods) != 2 {
		t.Fatal("n4 not updated")
	}
}

func TestSnapshotAffinityLists(t *testing.T) {
	c, _ := testCache(t, time.Minute)
	c.AddNode(node("n1", "8", nil))
	c.AddNode(node("n2", "8", nil))
	s := NewEmptySnapshot()
	_ = c.UpdateSnapshot(s)
	if l, _ := s.HavePodsWithAffinityList(); len(l) != 0 {
		t.Fatal("no affinity pods yet")
	}
	p := pod("anti", "n2", "1")
	p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "kubernetes.io/hostname"}},
	}}
	if err := c.AddPod(p); err != nil {
		t.Fatal(err)
	}
	_ = c.UpdateSnapshot(s)
	l, _ := s.HavePodsWithAffinityList()
	r, _ := s.HavePodsWithRequiredAntiAffinityList()
	if len(l) != 1 || len(r) != 1 || l[0].Node().Name != "n2" {
		t.Fatalf("affinity lists %d %d", len(l), len(r))
	}
	if err := c.RemovePod(p); err != nil {
		t.Fatal(err)
	}
	_ = c.UpdateSnapshot(s)
	if l, _ := s.HavePodsWithAffinityList(); len(l) != 0 {
		t.Fatal("affinity list not cleared")
	}
}

func TestSnapshotImageStates(t *testing.T) {
	c, _ := testCache(t, time.Minute)
	img := func(n *corev1.Node, names ...string) *corev1.Node {
		for _, name := range names {
			n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{name}, SizeBytes: 100})
		}
		return n
	}
	c.AddNode(img(node("n1", "1", nil), "nginx", "redis"))
	c.AddNode(img(node("n2", "1", nil), "nginx"))
	s := NewEmptySnapshot()
	_ = c.UpdateSnapshot(s)
	n1, _ := s.Get("n1")
	n2, _ := s.Get("n2")
	if n1.ImageStates["nginx"].NumNodes != 2 || n1.ImageStates["redis"].NumNodes != 1 || n2.ImageStates["nginx"].NumNodes != 2 {
		t.Fatalf("image counts %+v %+v", n1.ImageStates, n2.ImageStates)
	}
	// A third node with nginx: the count seen through the unchanged n1 follows.
	c.AddNode(img(node("n3", "1", nil), "nginx"))
	_ = c.UpdateSnapshot(s)
	if n1.ImageStates["nginx"].NumNodes != 3 {
		t.Fatalf("nginx on %d nodes", n1.ImageStates["nginx"].NumNodes)
	}
	if err := c.RemoveNode(node("n2", "1", nil)); err != nil {
		t.Fatal(err)
	}
	// The removed node still listed its images in the cache (RemoveNode gets the cached node).
	_ = c.UpdateSnapshot(s)
	if n1.ImageStates["nginx"].NumNodes != 2 {
		t.Fatalf("nginx on %d nodes after removal", n1.ImageStates["nginx"].NumNodes)
	}
	// A status update without image changes keeps the counts.
	upd := img(node("n1", "2", nil), "nginx", "redis")
	c.UpdateNode(nil, upd)
	_ = c.UpdateSnapshot(s)
	if n1.ImageStates["redis"].NumNodes != 1 || n1.Allocatable.MilliCPU != 2000 {
		t.Fatalf("after update: %+v", n1.ImageStates)
	}
}

func TestNodeTreeInterleavesZones(t *testing.T) {
	c, _ := testCache(t, time.Minute)
	zone := func(z string) map[string]string { return map[string]string{corev1.LabelTopologyZone: z} }
	for _, n := range []*corev1.Node{
		node("a1", "1", zone("a")), node("a2", "1", zone("a")), node("a3", "1", zone("a")),
		node("b1", "1", zone("b")), node("c1", "1", zone("c")), node("c2", "1", zone("c")),
	} {
		c.AddNode(n)
	}
	s := NewEmptySnapshot()
	_ = c.UpdateSnapshot(s)
	list, _ := s.List()
	var names []string
	for _, ni := range list {
		names = append(names, ni.Node().Name)
	}
	want := "[a1 b1 c1 a2 c2 a3]"
	if fmt.Sprint(names) != want {
		t.Fatalf("order %v, want %s", names, want)
	}
	// Moving a node to another zone.
	c.UpdateNode(node("a3", "1", zone("a")), node("a3", "1", zone("b")))
	_ = c.UpdateSnapshot(s)
	if got := fmt.Sprint(c.nodeTree.list()); got != "[a1 b1 c1 a2 a3 c2]" {
		t.Fatalf("order after a zone change %s", got)
	}
}

func TestNewSnapshot(t *testing.T) {
	p := pod("a", "n1", "1")
	p.UID = ""
	s := NewSnapshot([]*corev1.Pod{p, pod("b", "", "1"), pod("c", "missing", "1")}, []*corev1.Node{node("n1", "4", nil), node("n2", "4", nil)})
	if s.NumNodes() != 2 {
		t.Fatalf("%d nodes", s.NumNodes())
	}
	n1, err := s.NodeInfos().Get("n1")
	if err != nil || len(n1.Pods) != 1 {
		t.Fatalf("n1: %v %v", n1, err)
	}
}
