package defaultpreemption

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"

	"github.com/kubette/kubette/internal/scheduler/cache"
	"github.com/kubette/kubette/internal/scheduler/framework"
	"github.com/kubette/kubette/internal/scheduler/plugins/noderesources"
)

// testHandle is a framework.Handle over a snapshot, a fake clientset and the
// real NodeResourcesFit as the only filter; nominated maps nodes to their
// nominated pods. The embedded Handle (nil) stands for the methods the plugin
// never calls.
type testHandle struct {
	framework.Handle
	snap      *cache.Snapshot
	client    *fake.Clientset
	recorder  *events.FakeRecorder
	fit       *noderesources.Fit
	nominated map[string][]*corev1.Pod
	waiting   *framework.WaitingPods
}

func newTestHandle(t *testing.T, nodes []*corev1.Node, pods []*corev1.Pod) *testHandle {
	t.Helper()
	fit, err := noderesources.NewFit(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	objs := make([]runtime.Object, 0, len(pods))
	for _, p := range pods {
		objs = append(objs, p)
	}
	return &testHandle{
		snap:     cache.NewSnapshot(pods, nodes),
		client:   fake.NewClientset(objs...),
		recorder: events.NewFakeRecorder(100),
		fit:      fit.(*noderesources.Fit),
		waiting:  framework.NewWaitingPods(),
	}
}

func (h *testHandle) SnapshotSharedLister() framework.SharedLister { return h.snap }
func (h *testHandle) ClientSet() kubernetes.Interface              { return h.client }
func (h *testHandle) EventRecorder() events.EventRecorder          { return h.recorder }
func (h *testHandle) Parallelism() int                             { return 4 }
func (h *testHandle) NominatedPodsForNode(node string) []*corev1.Pod {
	return h.nominated[node]
}
func (h *testHandle) GetWaitingPod(uid types.UID) framework.WaitingPod { return h.waiting.Get(uid) }

// RunFilterPluginsWithNominatedPods runs Fit with the node's nominated pods
// of at least the pod's priority added, then without them (as the scheduler).
func (h *testHandle) RunFilterPluginsWithNominatedPods(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	with := ni
	for _, np := range h.nominated[ni.Node().Name] {
		if np.UID != pod.UID && podPriority(np) >= podPriority(pod) {
			if with == ni {
				with = ni.Clone()
			}
			with.AddPod(np)
		}
	}
	if st := h.fit.Filter(ctx, state, pod, with); !st.IsSuccess() || with == ni {
		return st
	}
	return h.fit.Filter(ctx, state, pod, ni)
}

func (h *testHandle) RunPreFilterExtensionAddPod(context.Context, *framework.CycleState, *corev1.Pod, *corev1.Pod, *framework.NodeInfo) *framework.Status {
	return nil
}

func (h *testHandle) RunPreFilterExtensionRemovePod(context.Context, *framework.CycleState, *corev1.Pod, *corev1.Pod, *framework.NodeInfo) *framework.Status {
	return nil
}

// preFilter runs Fit's PreFilter for pod into a new state.
func (h *testHandle) preFilter(t *testing.T, pod *corev1.Pod) *framework.CycleState {
	t.Helper()
	state := framework.NewCycleState()
	if st := h.fit.PreFilter(context.Background(), state, pod); !st.IsSuccess() {
		t.Fatalf("PreFilter: %v", st.AsError())
	}
	return state
}

func node(name, cpu string) *corev1.Node {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110")}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Capacity: res, Allocatable: res}}
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// pod returns a pod requesting cpu with a priority, bound to nodeName ("" for
// none), started start seconds after t0 (negative: not started).
func pod(name, nodeName, cpu string, prio int32, start int) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: nodeName, Priority: &prio, SchedulerName: corev1.DefaultSchedulerName,
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
	}
	if start >= 0 {
		st := metav1.NewTime(t0.Add(time.Duration(start) * time.Second))
		p.Status.StartTime = &st
	}
	return p
}

func names(pods []*corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}
