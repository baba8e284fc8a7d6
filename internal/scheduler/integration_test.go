package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kubette/kubette/internal/scheduler"
	"github.com/kubette/kubette/internal/scheduler/framework"
	"github.com/kubette/kubette/internal/scheduler/plugins"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// registry is the in-tree registry and the default profile.
func registry() (framework.Registry, []plugins.PluginConfig) {
	return plugins.NewInTreeRegistry(), plugins.DefaultProfile()
}

func quietLogger() *slog.Logger {
	if os.Getenv("SCHEDULER_TEST_LOGS") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startScheduler runs a scheduler against env until the test ends.
func startScheduler(t *testing.T, env *testenv.Env, o scheduler.Options) {
	t.Helper()
	o.Registry, o.Profile = registry()
	if o.Logger == nil {
		o.Logger = quietLogger()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- scheduler.RunWithLeaderElection(ctx, env.Config, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("scheduler: %v", err)
		}
	})
}

type nodeSpec struct {
	name      string
	cpu, mem  string
	pods      string
	labels    map[string]string
	taints    []corev1.Taint
	hostnames bool
}

func createNode(t *testing.T, c kubernetes.Interface, s nodeSpec) {
	t.Helper()
	if s.pods == "" {
		s.pods = "110"
	}
	if s.mem == "" {
		s.mem = "64Gi"
	}
	labels := map[string]string{corev1.LabelHostname: s.name}
	for k, v := range s.labels {
		labels[k] = v
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(s.cpu), corev1.ResourceMemory: resource.MustParse(s.mem),
		corev1.ResourcePods: resource.MustParse(s.pods),
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: s.name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: s.taints},
		Status: corev1.NodeStatus{
			Capacity: res, Allocatable: res,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		},
	}
	ctx := context.Background()
	created, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node %s: %v", s.name, err)
	}
	if created.Status.Allocatable.Cpu().Cmp(resource.MustParse(s.cpu)) != 0 {
		created.Status = n.Status
		if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("node %s status: %v", s.name, err)
		}
	}
}

func newPod(name, cpu string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"app": "test"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: "registry.local/pause:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
		}}},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func createPod(t *testing.T, c kubernetes.Interface, p *corev1.Pod) {
	t.Helper()
	if _, err := c.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s: %v", p.Name, err)
	}
}

func nodeOf(t *testing.T, c kubernetes.Interface, name string) string {
	t.Helper()
	var node string
	poll.Until(t, "pod "+name+" bound", poll.Check(func() (bool, error) {
		p, err := c.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = p.Spec.NodeName
		return node != "", nil
	}))
	return node
}

func scheduledCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// waitUnschedulable waits for PodScheduled=False/Unschedulable and returns its message.
func waitUnschedulable(t *testing.T, c kubernetes.Interface, name string) string {
	t.Helper()
	var msg string
	poll.Until(t, "pod "+name+" unschedulable", poll.Check(func() (bool, error) {
		p, err := c.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond := scheduledCondition(p)
		if cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != corev1.PodReasonUnschedulable {
			return false, fmt.Errorf("condition %+v", cond)
		}
		msg = cond.Message
		return true, nil
	}))
	return msg
}

// noVictims is DefaultPreemption's tail when no node has a pod of lower priority.
func noVictims(nodes int) string {
	return fmt.Sprintf(" preemption: 0/%d nodes are available: %d No preemption victims found for incoming pod..", nodes, nodes)
}

// eventNotes returns the notes of the pod's events with the given reason (events.k8s.io/v1).
func eventNotes(c kubernetes.Interface, pod, reason string) ([]string, error) {
	list, err := c.EventsV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == pod && e.Reason == reason {
			out = append(out, e.Note)
		}
	}
	return out, nil
}

func TestPodsLandOnlyWhereTheyFit(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c := env.Client
	createNode(t, c, nodeSpec{name: "small", cpu: "1"})
	createNode(t, c, nodeSpec{name: "big", cpu: "4"})
	createNode(t, c, nodeSpec{name: "ssd", cpu: "2", labels: map[string]string{"disk": "ssd"}})
	createNode(t, c, nodeSpec{name: "gpu", cpu: "16", taints: []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}})
	startScheduler(t, env, scheduler.Options{})

	createPod(t, c, newPod("needs-3-cpu", "3"))
	createPod(t, c, newPod("wants-ssd", "100m", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }))
	createPod(t, c, newPod("tolerates-gpu", "8", func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}))
	for pod, want := range map[string]string{"needs-3-cpu": "big", "wants-ssd": "ssd", "tolerates-gpu": "gpu"} {
		if got := nodeOf(t, c, pod); got != want {
			t.Errorf("%s on %s, want %s", pod, got, want)
		}
	}
	// The Scheduled event and the PodScheduled condition the binding set.
	poll.Until(t, "Scheduled event", poll.Check(func() (bool, error) {
		notes, err := eventNotes(c, "needs-3-cpu", "Scheduled")
		return len(notes) == 1 && notes[0] == "Successfully assigned default/needs-3-cpu to big", err
	}))
	p, err := c.CoreV1().Pods("default").Get(context.Background(), "needs-3-cpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cond := scheduledCondition(p); cond == nil || cond.Status != corev1.ConditionTrue {
		t.Errorf("PodScheduled %+v", cond)
	}

	// Pods of another scheduler are left alone.
	createPod(t, c, newPod("not-mine", "100m", func(p *corev1.Pod) { p.Spec.SchedulerName = "other-scheduler" }))
	time.Sleep(500 * time.Millisecond)
	if p, err := c.CoreV1().Pods("default").Get(context.Background(), "not-mine", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
		t.Errorf("another scheduler's pod was bound: %v %v", p.Spec.NodeName, err)
	}
}

func TestUnschedulableUntilANodeFits(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c := env.Client
	createNode(t, c, nodeSpec{name: "w1", cpu: "1"})
	createNode(t, c, nodeSpec{name: "w2", cpu: "1"})
	createNode(t, c, nodeSpec{name: "cp", cpu: "32", labels: map[string]string{"node-role.kubernetes.io/control-plane": ""},
		taints: []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}})
	startScheduler(t, env, scheduler.Options{})

	createPod(t, c, newPod("huge", "2"))
	// DefaultPreemption adds upstream's tail: no node can be helped (the taint,
	// and a request above the workers' allocatable, are unresolvable).
	want := "0/3 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 2 Insufficient cpu." +
		" preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.."
	if msg := waitUnschedulable(t, c, "huge"); msg != want {
		t.Fatalf("message %q\nwant    %q", msg, want)
	}
	poll.Until(t, "FailedScheduling event", poll.Check(func() (bool, error) {
		notes, err := eventNotes(c, "huge", "FailedScheduling")
		if err != nil || len(notes) == 0 {
			return false, err
		}
		if notes[0] != want {
			return false, fmt.Errorf("note %q", notes[0])
		}
		return true, nil
	}))
	// Still unschedulable a while later (not retried in a loop: one event, one condition).
	time.Sleep(1500 * time.Millisecond)
	if p, _ := c.CoreV1().Pods("default").Get(context.Background(), "huge", metav1.GetOptions{}); p.Spec.NodeName != "" {
		t.Fatal("bound without room")
	}

	start := time.Now()
	createNode(t, c, nodeSpec{name: "w3", cpu: "4"})
	if got := nodeOf(t, c, "huge"); got != "w3" {
		t.Fatalf("huge on %s", got)
	}
	t.Logf("bound %v after the fitting node was added", time.Since(start).Round(time.Millisecond))
}

func TestSchedulingGatesHoldAPodBack(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c := env.Client
	ctx := context.Background()
	createNode(t, c, nodeSpec{name: "n1", cpu: "4"})
	startScheduler(t, env, scheduler.Options{})

	createPod(t, c, newPod("gated", "100m", func(p *corev1.Pod) {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota"}, {Name: "example.com/approval"}}
	}))
	// A pod created after it is bound: the scheduler has seen the gated one by then.
	createPod(t, c, newPod("free", "100m"))
	if got := nodeOf(t, c, "free"); got != "n1" {
		t.Fatalf("free on %s", got)
	}
	p, err := c.CoreV1().Pods("default").Get(ctx, "gated", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cond := scheduledCondition(p); p.Spec.NodeName != "" || cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != corev1.PodReasonSchedulingGated {
		t.Fatalf("gated pod: node %q PodScheduled %+v, want unbound and SchedulingGated", p.Spec.NodeName, cond)
	}
	if notes, err := eventNotes(c, "gated", "FailedScheduling"); err != nil || len(notes) != 0 {
		t.Fatalf("a gated pod was tried: FailedScheduling %v %v", notes, err)
	}
	// Gates go one at a time; the pod is bound once the last one went.
	p.Spec.SchedulingGates = p.Spec.SchedulingGates[1:]
	if p, err = c.CoreV1().Pods("default").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p.Spec.SchedulingGates = nil
	if _, err := c.CoreV1().Pods("default").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := nodeOf(t, c, "gated"); got != "n1" {
		t.Fatalf("gated on %s once its gates went", got)
	}
}

func TestHostPortConflictsNeverBound(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c := env.Client
	createNode(t, c, nodeSpec{name: "a", cpu: "4"})
	createNode(t, c, nodeSpec{name: "b", cpu: "4"})
	startScheduler(t, env, scheduler.Options{})
	withPort := func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}}
	}
	for i := range 3 {
		createPod(t, c, newPod(fmt.Sprintf("web-%d", i), "100m", withPort))
	}
	var unschedulable []string
	nodes := map[string]bool{}
	poll.Until(t, "two bound, one unschedulable", poll.Check(func() (bool, error) {
		list, err := c.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		unschedulable, nodes = nil, map[string]bool{}
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				nodes[p.Spec.NodeName] = true
			} else if cond := scheduledCondition(&p); cond != nil && cond.Reason == corev1.PodReasonUnschedulable {
				unschedulable = append(unschedulable, cond.Message)
			}
		}
		return len(nodes) == 2 && len(unschedulable) == 1, nil
	}))
	if want := "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports." + noVictims(2); unschedulable[0] != want {
		t.Fatalf("message %q", unschedulable[0])
	}
}

// createPods creates pods with 16 workers.
func createPods(t *testing.T, c kubernetes.Interface, pods []*corev1.Pod) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(pods))
	work := make(chan *corev1.Pod)
	for range 16 {
		wg.Go(func() {
			for p := range work {
				if _, err := c.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		})
	}
	for _, p := range pods {
		work <- p
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("create: %v", err)
	}
}

// checkNoOvercommit sums the requests of the bound pods per node.
func checkNoOvercommit(t *testing.T, c kubernetes.Interface) (bound int, perNode map[string]int) {
	t.Helper()
	ctx := context.Background()
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]*framework.Resource{}
	perNode = map[string]int{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			continue
		}
		bound++
		perNode[p.Spec.NodeName]++
		r := used[p.Spec.NodeName]
		if r == nil {
			r = &framework.Resource{}
			used[p.Spec.NodeName] = r
		}
		r.AddResource(framework.PodRequests(&p))
	}
	for _, n := range nodes.Items {
		alloc := framework.NewResource(n.Status.Allocatable)
		u := used[n.Name]
		if u == nil {
			continue
		}
		if u.MilliCPU > alloc.MilliCPU || u.Memory > alloc.Memory || perNode[n.Name] > alloc.AllowedPodNumber {
			t.Errorf("node %s over-committed: cpu %dm/%dm, memory %d/%d, pods %d/%d",
				n.Name, u.MilliCPU, alloc.MilliCPU, u.Memory, alloc.Memory, perNode[n.Name], alloc.AllowedPodNumber)
		}
	}
	return bound, perNode
}

func TestFiveHundredPodsAtOnceNeverOvercommit(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c := env.Client
	// 5 nodes of 9 cpu: room for 450 pods of 100m, 90 per node; 50 must stay pending.
	for i := range 5 {
		createNode(t, c, nodeSpec{name: fmt.Sprintf("node-%d", i), cpu: "9", mem: "32Gi", pods: "110"})
	}
	startScheduler(t, env, scheduler.Options{})
	pods := make([]*corev1.Pod, 500)
	for i := range pods {
		pods[i] = newPod(fmt.Sprintf("burst-%03d", i), "100m", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("64Mi")
		})
	}
	start := time.Now()
	createPods(t, c, pods)
	created := time.Since(start)
	var bound int
	poll.Until(t, "450 pods bound and 50 unschedulable", poll.Check(func() (bool, error) {
		list, err := c.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		bound = 0
		unschedulable := 0
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				bound++
			} else if cond := scheduledCondition(&p); cond != nil && cond.Reason == corev1.PodReasonUnschedulable {
				unschedulable++
			}
		}
		if bound > 450 {
			return false, errors.New("more than 450 pods bound")
		}
		return bound == 450 && unschedulable == 50, nil
	}))
	t.Logf("500 pods created in %v; 450 bound and 50 unschedulable %v after the first create", created.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	n, perNode := checkNoOvercommit(t, c)
	if n != 450 {
		t.Fatalf("%d bound", n)
	}
	for node, count := range perNode {
		if count != 90 {
			t.Errorf("node %s has %d pods, want 90 (its cpu fits exactly 90)", node, count)
		}
	}
	// Nothing more gets bound later.
	time.Sleep(2 * time.Second)
	if n, _ := checkNoOvercommit(t, c); n != 450 {
		t.Fatalf("%d bound after a while", n)
	}
	list, err := c.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		if p.Spec.NodeName != "" {
			continue
		}
		if cond := scheduledCondition(&p); cond.Message != "0/5 nodes are available: 5 Insufficient cpu."+noVictims(5) {
			t.Fatalf("pending pod %s: %q", p.Name, cond.Message)
		}
	}
}

// TestThroughput creates pods for a scheduler that is not running yet, then
// starts it and measures pods bound per second (first bind to last bind as seen
// by a watch). Figures go to the log.
func TestThroughput(t *testing.T) {
	if testing.Short() {
		t.Skip("throughput run")
	}
	for _, tc := range []struct{ nodes, pods int }{{5, 1000}, {100, 2000}, {1000, 3000}} {
		t.Run(fmt.Sprintf("%dnodes", tc.nodes), func(t *testing.T) {
			if raceEnabled && tc.nodes > 5 {
				t.Skip("too slow under the race detector")
			}
			env := testenv.Start(t, testenv.Options{})
			c := env.Client
			for i := range tc.nodes {
				createNode(t, c, nodeSpec{name: fmt.Sprintf("node-%03d", i), cpu: "64", mem: "256Gi", pods: "1000"})
			}
			pods := make([]*corev1.Pod, tc.pods)
			for i := range pods {
				pods[i] = newPod(fmt.Sprintf("p-%05d", i), "10m")
			}
			createPods(t, c, pods)
			// An informer (not a bare watch: the server may close a watch that lags).
			var mu sync.Mutex
			var binds []time.Time
			seen := map[string]bool{}
			record := func(obj any) {
				p, ok := obj.(*corev1.Pod)
				if !ok || p.Spec.NodeName == "" {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if !seen[p.Name] {
					seen[p.Name] = true
					binds = append(binds, time.Now())
				}
			}
			factory := informers.NewSharedInformerFactory(c, 0)
			if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
				AddFunc: record, UpdateFunc: func(_, obj any) { record(obj) },
			}); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			defer func() { close(stop); factory.Shutdown() }()
			factory.Start(stop)
			factory.WaitForCacheSync(stop)
			startScheduler(t, env, scheduler.Options{})
			started := time.Now()
			poll.UntilWithin(t, 120*time.Second, "every pod bound", poll.Check(func() (bool, error) {
				mu.Lock()
				defer mu.Unlock()
				return len(seen) == tc.pods, fmt.Errorf("%d of %d bound", len(seen), tc.pods)
			}))
			mu.Lock()
			defer mu.Unlock()
			sort.Slice(binds, func(i, j int) bool { return binds[i].Before(binds[j]) })
			span := binds[len(binds)-1].Sub(binds[0])
			t.Logf("%d nodes: %d pods bound in %v from the first bind (%.0f pods/s); %v after start",
				tc.nodes, tc.pods, span.Round(time.Millisecond), float64(tc.pods-1)/span.Seconds(), time.Since(started).Round(time.Millisecond))
			checkNoOvercommit(t, c)
		})
	}
}

func TestLeaderElection(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c := env.Client
	createNode(t, c, nodeSpec{name: "n1", cpu: "4"})
	startScheduler(t, env, scheduler.Options{LeaderElect: true, Identity: "sched-a",
		LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond})
	createPod(t, c, newPod("p", "100m"))
	if got := nodeOf(t, c, "p"); got != "n1" {
		t.Fatalf("p on %s", got)
	}
	lease, err := c.CoordinationV1().Leases("kube-system").Get(context.Background(), "kube-scheduler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "sched-a" {
		t.Fatalf("lease holder %v", lease.Spec.HolderIdentity)
	}
}

// A pod that finishes leaves the scheduler's informer (its field selector drops
// terminal pods): its room goes to a pending pod.
func TestFinishedPodFreesItsRoom(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c := env.Client
	ctx := context.Background()
	createNode(t, c, nodeSpec{name: "only", cpu: "1"})
	startScheduler(t, env, scheduler.Options{})
	createPod(t, c, newPod("job", "1"))
	nodeOf(t, c, "job")
	createPod(t, c, newPod("next", "1"))
	if msg := waitUnschedulable(t, c, "next"); msg != "0/1 nodes are available: 1 Insufficient cpu."+noVictims(1) {
		t.Fatalf("message %q", msg)
	}
	job, err := c.CoreV1().Pods("default").Get(ctx, "job", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job.Status.Phase = corev1.PodSucceeded
	if _, err := c.CoreV1().Pods("default").UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := nodeOf(t, c, "next"); got != "only" {
		t.Fatalf("next on %q", got)
	}
}

// Two schedulers with leader election: only the holder schedules; when it stops
// (releasing the lease) the other takes over.
func TestLeaderHandOver(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c := env.Client
	ctx := context.Background()
	createNode(t, c, nodeSpec{name: "n1", cpu: "4"})
	le := func(id string) scheduler.Options {
		return scheduler.Options{LeaderElect: true, Identity: id,
			LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond}
	}
	holder := func() string {
		lease, err := c.CoordinationV1().Leases("kube-system").Get(ctx, "kube-scheduler", metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil {
			return ""
		}
		return *lease.Spec.HolderIdentity
	}
	reg, prof := registry()
	aCtx, stopA := context.WithCancel(ctx)
	aDone := make(chan error, 1)
	go func() {
		o := le("a")
		o.Registry, o.Profile, o.Logger = reg, prof, quietLogger()
		aDone <- scheduler.RunWithLeaderElection(aCtx, env.Config, o)
	}()
	poll.Until(t, "a leads", poll.True(func() bool { return holder() == "a" }))
	startScheduler(t, env, le("b"))
	createPod(t, c, newPod("first", "100m"))
	nodeOf(t, c, "first")
	time.Sleep(500 * time.Millisecond)
	if h := holder(); h != "a" {
		t.Fatalf("holder %q while a runs", h)
	}
	stopA()
	if err := <-aDone; err != nil {
		t.Fatalf("a: %v", err)
	}
	poll.Until(t, "b leads", poll.True(func() bool { return holder() == "b" }))
	createPod(t, c, newPod("second", "100m"))
	if got := nodeOf(t, c, "second"); got != "n1" {
		t.Fatalf("second on %q", got)
	}
}
