package scheduler

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"

	"github.com/kubette/kubette/internal/scheduler/framework"
	"github.com/kubette/kubette/internal/scheduler/plugins"
)

// fakeFilter rejects the nodes fn returns a reason for (fn may be nil: all pass).
type fakeFilter struct {
	name  string
	fn    func(pod *corev1.Pod, ni *framework.NodeInfo) string
	code  framework.Code
	mu    sync.Mutex
	calls int
}

func (f *fakeFilter) Name() string { return f.name }

func (f *fakeFilter) Filter(_ context.Context, _ *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	if f.fn == nil {
		return nil
	}
	if reason := f.fn(pod, ni); reason != "" {
		code := f.code
		if code == framework.Success {
			code = framework.Unschedulable
		}
		return framework.NewStatus(code, reason)
	}
	return nil
}

// fitFilter is a small NodeResourcesFit: cpu requests against allocatable.
type fitFilter struct{}

func (fitFilter) Name() string { return "FakeFit" }

func (fitFilter) Filter(_ context.Context, _ *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	req := framework.PodRequests(pod)
	if len(ni.Pods)+1 > ni.Allocatable.AllowedPodNumber {
		return framework.NewStatus(framework.Unschedulable, "Too many pods")
	}
	if req.MilliCPU > ni.Allocatable.MilliCPU-ni.Requested.MilliCPU {
		return framework.NewStatus(framework.Unschedulable, "Insufficient cpu")
	}
	return nil
}

// fakePreFilter returns a fixed status.
type fakePreFilter struct {
	status *framework.Status
}

func (f *fakePreFilter) Name() string { return "FakePreFilter" }

func (f *fakePreFilter) PreFilter(context.Context, *framework.CycleState, *corev1.Pod) *framework.Status {
	return f.status
}

// fakePostFilter says preemption does not help, as upstream's DefaultPreemption would.
type fakePostFilter struct{}

func (fakePostFilter) Name() string { return "FakePreemption" }

func (fakePostFilter) PostFilter(_ context.Context, _ *framework.CycleState, _ *corev1.Pod, filtered framework.NodeToStatus) (*framework.PostFilterResult, *framework.Status) {
	return nil, framework.NewStatus(framework.Unschedulable,
		fmt.Sprintf("preemption: 0/%d nodes are available: %d Preemption is not helpful for scheduling.", len(filtered), len(filtered)))
}

// fakeScore scores with fn and, when normalize is set, scales scores so the
// highest becomes MaxNodeScore.
type fakeScore struct {
	name      string
	fn        func(ni *framework.NodeInfo) int64
	normalize bool
}

func (f *fakeScore) Name() string { return f.name }

func (f *fakeScore) Score(_ context.Context, _ *framework.CycleState, _ *corev1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	return f.fn(ni), nil
}

func (f *fakeScore) ScoreExtensions() framework.ScoreExtensions {
	if f.normalize {
		return f
	}
	return nil
}

func (f *fakeScore) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *corev1.Pod, scores []framework.NodeScore) *framework.Status {
	var highest int64
	for _, s := range scores {
		highest = max(highest, s.Score)
	}
	for i := range scores {
		if highest > 0 {
			scores[i].Score = scores[i].Score * framework.MaxNodeScore / highest
		}
	}
	return nil
}

// fakeBinder records binds; fail decides whether a bind fails.
type fakeBinder struct {
	mu    sync.Mutex
	bound map[string]string
	fail  func(pod *corev1.Pod) error
	delay time.Duration
}

func (b *fakeBinder) Name() string { return "FakeBinder" }

func (b *fakeBinder) Bind(_ context.Context, _ *framework.CycleState, pod *corev1.Pod, node string) *framework.Status {
	if b.delay > 0 {
		time.Sleep(b.delay)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail != nil {
		if err := b.fail(pod); err != nil {
			return framework.AsStatus(err)
		}
	}
	if b.bound == nil {
		b.bound = map[string]string{}
	}
	b.bound[pod.Name] = node
	return nil
}

func (b *fakeBinder) boundTo(pod string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bound[pod]
}

// testPlugins builds a registry and a profile from plugin instances, in order.
func testPlugins(pls ...framework.Plugin) (framework.Registry, []plugins.PluginConfig) {
	reg := framework.Registry{}
	var prof []plugins.PluginConfig
	for _, pl := range pls {
		weight := int64(0)
		if w, ok := pl.(interface{ weight() int64 }); ok {
			weight = w.weight()
		}
		reg[pl.Name()] = func(context.Context, any, framework.Handle) (framework.Plugin, error) { return pl, nil }
		prof = append(prof, plugins.PluginConfig{Name: pl.Name(), Weight: weight})
	}
	return reg, prof
}

type weighted struct {
	*fakeScore
	w int64
}

func (w weighted) weight() int64 { return w.w }

type testScheduler struct {
	*Scheduler
	client   *fake.Clientset
	recorder *events.FakeRecorder
}

// newTestScheduler builds a scheduler over a fake clientset whose informers are
// never started: tests feed the event handlers and the pod lister directly.
func newTestScheduler(t *testing.T, o Options, pls ...framework.Plugin) *testScheduler {
	t.Helper()
	client := fake.NewSimpleClientset()
	rec := events.NewFakeRecorder(1000)
	o.Client = client
	o.Informers = informers.NewSharedInformerFactory(client, 0)
	o.Recorder = rec
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Rand == nil {
		o.Rand = rand.New(rand.NewPCG(1, 2))
	}
	o.Registry, o.Profile = testPlugins(pls...)
	s, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return &testScheduler{Scheduler: s, client: client, recorder: rec}
}

func (ts *testScheduler) addNodes(nodes ...*corev1.Node) {
	for _, n := range nodes {
		ts.onNodeAdd(n)
	}
}

// addPod creates the pod as the informer would show it.
func (ts *testScheduler) addPod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if err := ts.podInformer.GetIndexer().Add(pod); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ts.onPodAdd(pod)
}

func (ts *testScheduler) events() []string {
	var out []string
	for {
		select {
		case e := <-ts.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func testNode(name, cpu string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourcePods: resource.MustParse("110"),
		}},
	}
}

func testPod(name, cpu string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Spec:       corev1.PodSpec{SchedulerName: DefaultSchedulerName, Containers: []corev1.Container{{Name: "c"}}},
	}
	if cpu != "" {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	}
	return p
}

func nodeNames(nis []*framework.NodeInfo) []string {
	var out []string
	for _, ni := range nis {
		out = append(out, ni.Node().Name)
	}
	return out
}

func nodeIndex(ni *framework.NodeInfo) int64 {
	var i int64
	_, _ = fmt.Sscanf(strings.TrimPrefix(ni.Node().Name, "n"), "%d", &i)
	return i
}
