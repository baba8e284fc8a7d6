package sim_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/sim"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// startSim runs a simulator until the returned stop is called (or the test
// ends) and waits until its nodes are registered. stop returns Run's error.
func startSim(t *testing.T, cfg *rest.Config, o sim.Options) (*sim.Sim, func() error) {
	t.Helper()
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s, err := sim.New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	select {
	case <-s.Ready():
	case err := <-done:
		t.Fatalf("simulator stopped before its nodes registered: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("nodes not registered after 60s")
	}
	return s, stop
}

func newPod(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}},
		},
	}
}

func createNamespace(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	if _, err := c.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runningPods waits until every pod of ns is Running and Ready and returns them.
func runningPods(t *testing.T, c kubernetes.Interface, ns string, want int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	poll.Until(t, fmt.Sprintf("%d pods Running in %s", want, ns), poll.Check(func() (bool, error) {
		list, err := c.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pods = list.Items
		if len(pods) != want {
			return false, nil
		}
		for _, p := range pods {
			if p.Status.Phase != corev1.PodRunning || !podReady(&p) {
				return false, nil
			}
		}
		return true, nil
	}))
	return pods
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func createPods(t *testing.T, c kubernetes.Interface, ns string, n, nodes int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, err := c.CoreV1().Pods(ns).Create(context.Background(), newPod(ns, fmt.Sprintf("p%d", i), fmt.Sprintf("sim-node-%d", i%nodes)), metav1.CreateOptions{})
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("create pod: %v", err)
	}
}

// checkIPs checks that every pod has an address of its node's pod CIDR that no
// other pod has, and returns the addresses by pod name.
func checkIPs(t *testing.T, c kubernetes.Interface, pods []corev1.Pod) map[string]string {
	t.Helper()
	nodes, err := c.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cidrs := map[string]netip.Prefix{}
	for _, n := range nodes.Items {
		cidrs[n.Name] = netip.MustParsePrefix(n.Spec.PodCIDR)
	}
	owner := map[string]string{}
	byPod := map[string]string{}
	for _, p := range pods {
		ip, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil {
			t.Fatalf("pod %s: podIP %q: %v", p.Name, p.Status.PodIP, err)
		}
		if !cidrs[p.Spec.NodeName].Contains(ip) {
			t.Fatalf("pod %s: podIP %s outside the pod CIDR %s of its node %s", p.Name, ip, cidrs[p.Spec.NodeName], p.Spec.NodeName)
		}
		if other, dup := owner[p.Status.PodIP]; dup {
			t.Fatalf("pods %s and %s both have %s", other, p.Name, ip)
		}
		owner[p.Status.PodIP] = p.Name
		byPod[p.Name] = p.Status.PodIP
	}
	return byPod
}

func TestSimulatedNodesAndPods(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c := env.Client
	ctx := context.Background()
	const nodes = 50
	start := time.Now()
	s, stop := startSim(t, env.Config, sim.Options{
		Nodes: nodes, Zones: 3, Labels: map[string]string{"pool": "sim"},
		Taints:        []corev1.Taint{{Key: "sim", Value: "yes", Effect: corev1.TaintEffectPreferNoSchedule}},
		LeaseDuration: 4 * time.Second, LeaseRenewInterval: time.Second,
	})
	t.Logf("%d nodes registered in %v", nodes, time.Since(start))

	// Nodes: registered Ready, as a kubelet registers them.
	list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sim.LabelSimulated + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != nodes {
		t.Fatalf("%d simulated nodes, want %d", len(list.Items), nodes)
	}
	cidrs := map[string]bool{}
	zones := map[string]int{}
	for _, n := range list.Items {
		conds := map[corev1.NodeConditionType]corev1.ConditionStatus{}
		for _, cond := range n.Status.Conditions {
			conds[cond.Type] = cond.Status
		}
		if conds[corev1.NodeReady] != corev1.ConditionTrue || conds[corev1.NodeMemoryPressure] != corev1.ConditionFalse ||
			conds[corev1.NodeDiskPressure] != corev1.ConditionFalse || conds[corev1.NodePIDPressure] != corev1.ConditionFalse {
			t.Fatalf("node %s conditions %v", n.Name, conds)
		}
		if n.Status.Capacity.Cpu().String() != "32" || n.Status.Allocatable.Memory().String() != "256Gi" ||
			n.Status.Capacity.Pods().String() != "110" || n.Status.Capacity.StorageEphemeral().String() != "100Gi" {
			t.Fatalf("node %s capacity %v allocatable %v", n.Name, n.Status.Capacity, n.Status.Allocatable)
		}
		if n.Status.NodeInfo.KubeletVersion != sim.KubeletVersion || n.Labels["kubernetes.io/hostname"] != n.Name ||
			n.Labels["kubernetes.io/os"] != "linux" || n.Labels["kubernetes.io/arch"] != "amd64" || n.Labels["pool"] != "sim" {
			t.Fatalf("node %s: nodeInfo %+v labels %v", n.Name, n.Status.NodeInfo, n.Labels)
		}
		if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "sim" {
			t.Fatalf("node %s taints %v", n.Name, n.Spec.Taints)
		}
		p := netip.MustParsePrefix(n.Spec.PodCIDR)
		if p.Bits() != 24 || !netip.MustParsePrefix(sim.DefaultPodCIDRBase).Contains(p.Addr()) || cidrs[n.Spec.PodCIDR] || n.Spec.PodCIDRs[0] != n.Spec.PodCIDR {
			t.Fatalf("node %s podCIDR %s podCIDRs %v: want a /24 of %s of its own", n.Name, n.Spec.PodCIDR, n.Spec.PodCIDRs, sim.DefaultPodCIDRBase)
		}
		cidrs[n.Spec.PodCIDR] = true
		if len(n.Status.Addresses) == 0 || n.Status.Addresses[0].Type != corev1.NodeInternalIP ||
			!netip.MustParseAddr(n.Status.Addresses[0].Address).IsLoopback() {
			t.Fatalf("node %s addresses %v: want a loopback InternalIP", n.Name, n.Status.Addresses)
		}
		if port := n.Status.DaemonEndpoints.KubeletEndpoint.Port; port <= 0 || port == 10250 {
			t.Fatalf("node %s kubelet port %d: want the simulator's own", n.Name, port)
		}
		zones[n.Labels["topology.kubernetes.io/zone"]]++
	}
	if len(zones) != 3 || zones["sim-zone-0"] != 17 || zones["sim-zone-2"] != 16 {
		t.Fatalf("zones %v: want 17, 17, 16 nodes over sim-zone-0..2", zones)
	}

	// Leases: one per node, owned by it, renewed.
	leases, err := c.CoordinationV1().Leases(sim.LeaseNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) != nodes {
		t.Fatalf("%d leases, want %d", len(leases.Items), nodes)
	}
	first := map[string]time.Time{}
	for _, l := range leases.Items {
		if ptr.Deref(l.Spec.HolderIdentity, "") != l.Name || ptr.Deref(l.Spec.LeaseDurationSeconds, 0) != 4 ||
			len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" || l.OwnerReferences[0].UID == "" {
			t.Fatalf("lease %s: holder %v duration %v owners %v", l.Name, l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.OwnerReferences)
		}
		first[l.Name] = l.Spec.RenewTime.Time
	}
	poll.Until(t, "every lease renewed", poll.Check(func() (bool, error) {
		leases, err := c.CoordinationV1().Leases(sim.LeaseNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, l := range leases.Items {
			if !l.Spec.RenewTime.Time.After(first[l.Name]) {
				return false, nil
			}
		}
		return true, nil
	}))

	// One pod: Running and Ready with an address of its node.
	createNamespace(t, c, "one")
	if _, err := c.CoreV1().Pods("one").Create(ctx, newPod("one", "web", "sim-node-7"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := runningPods(t, c, "one", 1)[0]
	node, err := c.CoreV1().Nodes().Get(ctx, "sim-node-7", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conds := map[corev1.PodConditionType]corev1.ConditionStatus{}
	for _, cond := range pod.Status.Conditions {
		conds[cond.Type] = cond.Status
	}
	for _, ct := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		if conds[ct] != corev1.ConditionTrue {
			t.Fatalf("pod condition %s = %q, want True (all: %v)", ct, conds[ct], conds)
		}
	}
	if len(pod.Status.ContainerStatuses) != 1 {
		t.Fatalf("container statuses %v", pod.Status.ContainerStatuses)
	}
	cs := pod.Status.ContainerStatuses[0]
	if !cs.Ready || !ptr.Deref(cs.Started, false) || cs.State.Running == nil || cs.Image != "registry.example/app:1" || cs.ImageID == "" || cs.ContainerID == "" {
		t.Fatalf("container status %+v", cs)
	}
	if !netip.MustParsePrefix(node.Spec.PodCIDR).Contains(netip.MustParseAddr(pod.Status.PodIP)) ||
		pod.Status.HostIP != node.Status.Addresses[0].Address || pod.Status.StartTime == nil || len(pod.Status.PodIPs) != 1 {
		t.Fatalf("podIP %s hostIP %s startTime %v: want an address of %s on %s", pod.Status.PodIP, pod.Status.HostIP, pod.Status.StartTime, node.Spec.PodCIDR, node.Status.Addresses[0].Address)
	}
	// Deleted with the default grace period (30s): gone after MaxDeletionGrace (1s)
	// plus at most the second deletionTimestamp's truncation took off.
	deleted := time.Now()
	if err := c.CoreV1().Pods("one").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if p, err := c.CoreV1().Pods("one").Get(ctx, "web", metav1.GetOptions{}); err != nil || p.DeletionTimestamp == nil {
		t.Fatalf("right after a graceful delete: %v, %v; want the pod Terminating", p, err)
	}
	poll.Until(t, "deleted pod gone", poll.Check(func() (bool, error) {
		_, err := c.CoreV1().Pods("one").Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}))
	t.Logf("deleted pod gone after %v", time.Since(deleted))

	// A pod bound through pods/binding (as a scheduler binds) runs too: it
	// enters the simulator's field selector with an ADDED event.
	if _, err := c.CoreV1().Pods("one").Create(ctx, newPod("one", "bound", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().Pods("one").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "bound"},
		Target: corev1.ObjectReference{Kind: "Node", Name: "sim-node-9"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	runningPods(t, c, "one", 1)
	if err := c.CoreV1().Pods("one").Delete(ctx, "bound", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}

	// A host-network pod has its node's address; a pod of another node stays Pending;
	// a pod that asks to exit Succeeds.
	hostNet := newPod("one", "hostnet", "sim-node-3")
	hostNet.Spec.HostNetwork = true
	other := newPod("one", "elsewhere", "real-node")
	job := newPod("one", "job", "sim-node-4")
	job.Spec.RestartPolicy = corev1.RestartPolicyNever
	job.Annotations = map[string]string{sim.AnnotationExitAfter: "1s"}
	job.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "registry.example/init:1"}}
	for _, p := range []*corev1.Pod{hostNet, other, job} {
		if _, err := c.CoreV1().Pods("one").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, "job Succeeded", poll.Check(func() (bool, error) {
		p, err := c.CoreV1().Pods("one").Get(ctx, "job", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Status.Phase == corev1.PodSucceeded, nil
	}))
	job, _ = c.CoreV1().Pods("one").Get(ctx, "job", metav1.GetOptions{})
	if st := job.Status.ContainerStatuses; len(st) != 1 || st[0].State.Terminated == nil || st[0].State.Terminated.ExitCode != 0 ||
		len(job.Status.InitContainerStatuses) != 1 || job.Status.InitContainerStatuses[0].State.Terminated == nil || podReady(job) {
		t.Fatalf("succeeded job: containers %+v init %+v", job.Status.ContainerStatuses, job.Status.InitContainerStatuses)
	}
	hostNet, _ = c.CoreV1().Pods("one").Get(ctx, "hostnet", metav1.GetOptions{})
	if hostNet.Status.Phase != corev1.PodRunning || hostNet.Status.PodIP != hostNet.Status.HostIP {
		t.Fatalf("host-network pod: phase %s podIP %s hostIP %s", hostNet.Status.Phase, hostNet.Status.PodIP, hostNet.Status.HostIP)
	}
	other, _ = c.CoreV1().Pods("one").Get(ctx, "elsewhere", metav1.GetOptions{})
	if other.Status.Phase != corev1.PodPending || other.Status.PodIP != "" {
		t.Fatalf("pod of a node that is not simulated: phase %s podIP %q", other.Status.Phase, other.Status.PodIP)
	}

	// 500 pods: distinct addresses, each of its node; deleted and created
	// again, they get the released addresses back.
	createNamespace(t, c, "many")
	createPods(t, c, "many", 500, nodes)
	firstIPs := checkIPs(t, c, runningPods(t, c, "many", 500))
	if err := c.CoreV1().Pods("many").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "500 pods gone", poll.Check(func() (bool, error) {
		list, err := c.CoreV1().Pods("many").List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0, err
	}))
	createPods(t, c, "many", 500, nodes)
	secondIPs := checkIPs(t, c, runningPods(t, c, "many", 500))
	reused := 0
	inFirst := map[string]bool{}
	for _, ip := range firstIPs {
		inFirst[ip] = true
	}
	for _, ip := range secondIPs {
		if inFirst[ip] {
			reused++
		}
	}
	if reused != 500 {
		t.Fatalf("%d of 500 addresses reused after release, want all (lowest free first)", reused)
	}

	st := s.Stats()
	if st.Nodes != nodes || st.LeaseRenewals < nodes || st.PodsStarted < 1004 || st.PodsDeleted < 501 || st.PodsCompleted != 1 {
		t.Fatalf("stats %+v", st)
	}
	t.Logf("stats %+v", st)

	// Stopping the simulator leaves the nodes, as a kubelet does.
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	list, err = c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sim.LabelSimulated + "=true"})
	if err != nil || len(list.Items) != nodes {
		t.Fatalf("after stop: %d nodes (%v), want %d left", len(list.Items), err, nodes)
	}
}

func TestSimAdoptsNodesAndPodsAndCleansUp(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c := env.Client
	ctx := context.Background()
	_, stop := startSim(t, env.Config, sim.Options{Nodes: 3, Labels: map[string]string{"run": "1"}})
	createNamespace(t, c, "ns")
	if _, err := c.CoreV1().Pods("ns").Create(ctx, newPod("ns", "old", "sim-node-1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	runningPods(t, c, "ns", 1)
	before, err := c.CoreV1().Nodes().Get(ctx, "sim-node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Someone else labels and taints the node meanwhile.
	before.Labels["team"] = "a"
	before.Spec.Taints = append(before.Spec.Taints, corev1.Taint{Key: "team", Effect: corev1.TaintEffectNoSchedule})
	if _, err := c.CoreV1().Nodes().Update(ctx, before, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// A second run adopts the nodes (same UIDs, CIDRs, others' labels and
	// taints kept) and the running pod's address.
	_, stop = startSim(t, env.Config, sim.Options{Nodes: 3, Labels: map[string]string{"run": "2"}, Cleanup: true})
	after, err := c.CoreV1().Nodes().Get(ctx, "sim-node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.UID != before.UID || after.Spec.PodCIDR != before.Spec.PodCIDR || after.Labels["team"] != "a" || after.Labels["run"] != "2" || len(after.Spec.Taints) != 1 {
		t.Fatalf("adopted node: uid %s→%s podCIDR %s→%s labels %v taints %v", before.UID, after.UID, before.Spec.PodCIDR, after.Spec.PodCIDR, after.Labels, after.Spec.Taints)
	}
	if _, err := c.CoreV1().Pods("ns").Create(ctx, newPod("ns", "new", "sim-node-1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	checkIPs(t, c, runningPods(t, c, "ns", 2))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// With Cleanup the nodes and their leases are gone.
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 0 {
		t.Fatalf("after cleanup: %d nodes (%v), want none", len(nodes.Items), err)
	}
	leases, err := c.CoordinationV1().Leases(sim.LeaseNamespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(leases.Items) != 0 {
		t.Fatalf("after cleanup: %d leases (%v), want none", len(leases.Items), err)
	}
}

func TestSimLeavesDeletedNodeAlone(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c := env.Client
	ctx := context.Background()
	s, _ := startSim(t, env.Config, sim.Options{Nodes: 2, LeaseDuration: 2 * time.Second, LeaseRenewInterval: 200 * time.Millisecond, StatusInterval: 300 * time.Millisecond})
	readyHeartbeat := func(name string) time.Time {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.LastHeartbeatTime.Time
			}
		}
		t.Fatalf("node %s has no Ready condition", name)
		return time.Time{}
	}
	registered := readyHeartbeat("sim-node-1")
	poll.Until(t, "Ready heartbeat refreshed", poll.Check(func() (bool, error) {
		return readyHeartbeat("sim-node-1").After(registered), nil
	}))
	if err := c.CoreV1().Nodes().Delete(ctx, "sim-node-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoordinationV1().Leases(sim.LeaseNamespace).Delete(ctx, "sim-node-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "deleted node given up", poll.Check(func() (bool, error) {
		return s.Stats().Nodes == 1, nil
	}))
	time.Sleep(500 * time.Millisecond)
	if _, err := c.CoordinationV1().Leases(sim.LeaseNamespace).Get(ctx, "sim-node-0", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("lease of the deleted node: %v, want NotFound (not recreated)", err)
	}
	if _, err := c.CoreV1().Nodes().Get(ctx, "sim-node-0", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("deleted node: %v, want NotFound (not registered again)", err)
	}
}
