package scheduler_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubette/kubette/internal/scheduler"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

// podHistory is what a watch saw of the pods of the default namespace.
type podHistory struct {
	mu sync.Mutex
	// nominated holds every status.nominatedNodeName a pod had.
	nominated map[string]map[string]bool
	// disrupted holds the pods seen with DisruptionTarget=True/PreemptionByScheduler
	// while being deleted, with the condition's message.
	disrupted map[string]string
	deleted   map[string]bool
}

func (h *podHistory) nominatedFor(pod, node string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nominated[pod][node]
}

func (h *podHistory) disruption(pod string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	msg, ok := h.disrupted[pod]
	return msg, ok
}

func (h *podHistory) wasDeleted(pod string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.deleted[pod]
}

// watchPods records the pods' history and stands in for the kubelet of the
// nodes, which exist only as API objects: a pod marked for graceful deletion
// is deleted for good at once.
func watchPods(t *testing.T, c kubernetes.Interface) *podHistory {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	h := &podHistory{nominated: map[string]map[string]bool{}, disrupted: map[string]string{}, deleted: map[string]bool{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			h.mu.Lock()
			if h.nominated[p.Name] == nil {
				h.nominated[p.Name] = map[string]bool{}
			}
			h.nominated[p.Name][p.Status.NominatedNodeName] = true
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.DisruptionTarget && cond.Status == corev1.ConditionTrue &&
					cond.Reason == corev1.PodReasonPreemptionByScheduler && p.DeletionTimestamp != nil {
					h.disrupted[p.Name] = cond.Message
				}
			}
			if ev.Type == watch.Deleted {
				h.deleted[p.Name] = true
			}
			h.mu.Unlock()
			if ev.Type == watch.Modified && p.DeletionTimestamp != nil {
				zero := int64(0)
				uid := p.UID
				err := c.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
				if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
					t.Errorf("stand-in kubelet: delete %s: %v", p.Name, err)
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return h
}

// withPriority gives the pod the PriorityClass prio-<prio>, which
// createPriorityClasses makes; the Priority admission plugin sets spec.priority.
func withPriority(prio int32, node string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.PriorityClassName = fmt.Sprintf("prio-%d", prio)
		if node != "" {
			p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
		}
	}
}

func TestPreemption(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	c := env.Client
	ctx := context.Background()
	createNode(t, c, nodeSpec{name: "n1", cpu: "2"})
	createNode(t, c, nodeSpec{name: "n2", cpu: "2"})
	history := watchPods(t, c)
	startScheduler(t, env, scheduler.Options{})

	createPriorityClasses(t, c, 0, 1, 5, 10, 100)
	createPod(t, c, newPod("low-1", "1", withPriority(1, "n1")))
	createPod(t, c, newPod("low-2", "1", withPriority(1, "n1")))
	createPod(t, c, newPod("mid-1", "1", withPriority(5, "n2")))
	createPod(t, c, newPod("mid-2", "1", withPriority(5, "n2")))
	for _, name := range []string{"low-1", "low-2", "mid-1", "mid-2"} {
		nodeOf(t, c, name)
	}

	// Both nodes need both their pods evicted; n1's victims have the lower priority.
	createPod(t, c, newPod("high", "2", withPriority(10, "")))
	if got := nodeOf(t, c, "high"); got != "n1" {
		t.Fatalf("high on %s, want n1", got)
	}
	high, err := c.CoreV1().Pods("default").Get(ctx, "high", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if high.Spec.Priority == nil || *high.Spec.Priority != 10 {
		t.Fatalf("the API server did not keep spec.priority: %v", high.Spec.Priority)
	}
	poll.Until(t, "the nomination seen by the watch", poll.Check(func() (bool, error) {
		return history.nominatedFor("high", "n1"), nil
	}))
	for _, v := range []string{"low-1", "low-2"} {
		msg, ok := history.disruption(v)
		if !ok || msg != "default-scheduler: preempting to accommodate a higher priority pod" {
			t.Errorf("victim %s: DisruptionTarget seen %v with message %q", v, ok, msg)
		}
		if !history.wasDeleted(v) {
			t.Errorf("victim %s not deleted", v)
		}
		poll.Until(t, "Preempted event on "+v, poll.Check(func() (bool, error) {
			notes, err := eventNotes(c, v, "Preempted")
			want := fmt.Sprintf("Preempted by pod %s on node n1", high.UID)
			if err != nil || len(notes) != 1 || notes[0] != want {
				return false, fmt.Errorf("notes %q, want [%q] (%v)", notes, want, err)
			}
			return true, nil
		}))
	}
	for _, name := range []string{"mid-1", "mid-2"} {
		p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			t.Errorf("%s was disturbed: %v", name, err)
		}
	}

	// Pods preemption cannot help keep upstream's message, and preempt nothing.
	never := corev1.PreemptNever
	if _, err := c.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "prio-100-never"}, Value: 100, PreemptionPolicy: &never,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		// More than a node's allocatable: NodeResourcesFit says UnschedulableAndUnresolvable.
		"too-big": {newPod("too-big", "3", withPriority(100, "")),
			"0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.."},
		"picky": {newPod("picky", "1", withPriority(100, ""), func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }),
			"0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.."},
		"never": {newPod("never", "1", func(p *corev1.Pod) { p.Spec.PriorityClassName = "prio-100-never" }),
			"0/2 nodes are available: 2 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never.."},
		"lowest": {newPod("lowest", "1", withPriority(0, "")),
			"0/2 nodes are available: 2 Insufficient cpu." + noVictims(2)},
	}
	for _, tc := range cases {
		createPod(t, c, tc.pod)
	}
	for name, tc := range cases {
		if msg := waitUnschedulable(t, c, name); msg != tc.want {
			t.Errorf("%s: message %q\nwant %q", name, msg, tc.want)
		}
	}
	for _, name := range []string{"high", "mid-1", "mid-2"} {
		p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			t.Errorf("%s was preempted by a pod preemption cannot help: %v", name, err)
		}
	}
}

// createPriorityClasses makes a PriorityClass prio-<v> of value v for each v.
func createPriorityClasses(t *testing.T, c kubernetes.Interface, values ...int32) {
	t.Helper()
	for _, v := range values {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("prio-%d", v)}, Value: v}
		if _, err := c.SchedulingV1().PriorityClasses().Create(context.Background(), pc, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create PriorityClass %s: %v", pc.Name, err)
		}
	}
}
