package why

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"

	"github.com/kubette/kubette/internal/scheduler/cache"
	"github.com/kubette/kubette/internal/scheduler/framework"
	"github.com/kubette/kubette/internal/scheduler/plugins"
	"github.com/kubette/kubette/internal/scheduler/plugins/noderesources"
)

// Cluster is the listed state the scheduling explanation reads.
type Cluster struct {
	Nodes      []*corev1.Node
	Pods       []*corev1.Pod
	Namespaces []*corev1.Namespace
}

// filterSet is the default profile's PreFilter and Filter plugins, built once
// over one snapshot.
type filterSet struct {
	preFilter []framework.PreFilterPlugin
	filter    []framework.FilterPlugin
}

// whyHandle is the framework handle the plugins get: the snapshot of the listed
// cluster, the client, and an informer factory whose namespace lister is filled
// from the listed namespaces (its informers are never started). Nothing here
// binds, preempts or records events.
type whyHandle struct {
	snapshot  *cache.Snapshot
	client    kubernetes.Interface
	informers informers.SharedInformerFactory
	nominated map[string][]*corev1.Pod
}

func (h *whyHandle) SnapshotSharedLister() framework.SharedLister           { return h.snapshot }
func (h *whyHandle) ClientSet() kubernetes.Interface                        { return h.client }
func (h *whyHandle) SharedInformerFactory() informers.SharedInformerFactory { return h.informers }
func (h *whyHandle) EventRecorder() events.EventRecorder                    { return nil }
func (h *whyHandle) Parallelism() int                                       { return 1 }
func (h *whyHandle) NominatedPodsForNode(node string) []*corev1.Pod         { return h.nominated[node] }
func (h *whyHandle) RunFilterPluginsWithNominatedPods(context.Context, *framework.CycleState, *corev1.Pod, *framework.NodeInfo) *framework.Status {
	return framework.NewStatus(framework.Error, "why does not run preemption")
}
func (h *whyHandle) RunPreFilterExtensionAddPod(context.Context, *framework.CycleState, *corev1.Pod, *corev1.Pod, *framework.NodeInfo) *framework.Status {
	return framework.NewStatus(framework.Error, "why does not run preemption")
}
func (h *whyHandle) RunPreFilterExtensionRemovePod(context.Context, *framework.CycleState, *corev1.Pod, *corev1.Pod, *framework.NodeInfo) *framework.Status {
	return framework.NewStatus(framework.Error, "why does not run preemption")
}
func (h *whyHandle) GetWaitingPod(types.UID) framework.WaitingPod      { return nil }
func (h *whyHandle) IterateOverWaitingPods(func(framework.WaitingPod)) {}
func (h *whyHandle) RejectWaitingPod(types.UID) bool                   { return false }

var _ framework.Handle = (*whyHandle)(nil)

// terminal pods hold no resources; the scheduler leaves them out of its cache.
func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// newFilterSet builds the default profile's filtering plugins over a snapshot of
// the cluster made as the scheduler's cache makes it.
func newFilterSet(ctx context.Context, client kubernetes.Interface, c Cluster) (*filterSet, *whyHandle, error) {
	var bound []*corev1.Pod
	nominated := map[string][]*corev1.Pod{}
	for _, p := range c.Pods {
		if terminal(p) {
			continue
		}
		if p.Spec.NodeName != "" {
			bound = append(bound, p)
		} else if n := p.Status.NominatedNodeName; n != "" {
			nominated[n] = append(nominated[n], p)
		}
	}
	h := &whyHandle{
		snapshot:  cache.NewSnapshot(bound, c.Nodes),
		client:    client,
		informers: informers.NewSharedInformerFactory(client, 0),
		nominated: nominated,
	}
	nsIndexer := h.informers.Core().V1().Namespaces().Informer().GetIndexer()
	for _, ns := range c.Namespaces {
		if err := nsIndexer.Add(ns); err != nil {
			return nil, nil, fmt.Errorf("index namespace %s: %w", ns.Name, err)
		}
	}
	registry := plugins.NewInTreeRegistry()
	fs := &filterSet{}
	for _, pc := range plugins.DefaultProfile() {
		factory, ok := registry[pc.Name]
		if !ok {
			return nil, nil, fmt.Errorf("plugin %q of the default profile is not in the registry", pc.Name)
		}
		pl, err := factory(ctx, pc.Args, h)
		if err != nil {
			return nil, nil, fmt.Errorf("build plugin %q: %w", pc.Name, err)
		}
		if x, ok := pl.(framework.PreFilterPlugin); ok {
			fs.preFilter = append(fs.preFilter, x)
		}
		if x, ok := pl.(framework.FilterPlugin); ok {
			fs.filter = append(fs.filter, x)
		}
	}
	return fs, h, nil
}

func rejection(s *framework.Status, plugin string) Rejection {
	r := Rejection{Plugin: plugin, Reason: s.Message(), Unresolvable: s.Code() == framework.UnschedulableAndUnresolvable}
	if !s.IsRejected() {
		r.Error = true
		if err := s.AsError(); err != nil {
			r.Reason = err.Error()
		}
	}
	return r
}

// explainScheduling runs the default profile's PreFilter plugins once and every
// Filter plugin on every node, recording each rejection (the scheduler stops at
// the first; all are shown so a node with two problems names both).
func explainScheduling(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, c Cluster) (*Scheduling, error) {
	fs, h, err := newFilterSet(ctx, client, c)
	if err != nil {
		return nil, err
	}
	sched := &Scheduling{SchedulerName: pod.Spec.SchedulerName, NominatedNode: pod.Status.NominatedNodeName}
	if sched.SchedulerName == "" {
		sched.SchedulerName = corev1.DefaultSchedulerName
	}
	state := framework.NewCycleState()
	for _, pl := range fs.preFilter {
		s := pl.PreFilter(ctx, state, pod)
		switch {
		case s.IsSuccess():
		case s.IsSkip():
			state.SkipFilterPlugins[pl.Name()] = true
		default:
			r := rejection(s, pl.Name())
			if sched.PreFilter == nil || r.Unresolvable {
				sched.PreFilter = &r
			}
		}
	}
	nodes, err := h.snapshot.List()
	if err != nil {
		return nil, fmt.Errorf("list snapshot nodes: %w", err)
	}
	podReq := framework.PodRequests(pod)
	for _, ni := range nodes {
		v := NodeVerdict{Node: ni.Node().Name}
		if sched.PreFilter != nil {
			v.Rejections = append(v.Rejections, *sched.PreFilter)
		} else {
			v.Rejections = fs.filterNode(ctx, state, pod, podReq, ni, h.nominated[ni.Node().Name])
		}
		if len(v.Rejections) == 0 {
			sched.Fits = append(sched.Fits, v.Node)
		}
		sched.Nodes = append(sched.Nodes, v)
	}
	sort.Slice(sched.Nodes, func(i, j int) bool { return sched.Nodes[i].Node < sched.Nodes[j].Node })
	sort.Strings(sched.Fits)
	return sched, nil
}

// resourceDetail gives the numbers behind NodeResourcesFit's reasons:
// "requests 8, allocatable 2, in use 1.5" for each short resource.
func resourceDetail(reasons []string, req framework.Resource, ni *framework.NodeInfo) string {
	var parts []string
	for _, r := range reasons {
		if r == noderesources.ErrReasonTooManyPods {
			parts = append(parts, fmt.Sprintf("pods: allocatable %d, in use %d", ni.Allocatable.AllowedPodNumber, len(ni.Pods)))
			continue
		}
		name, ok := strings.CutPrefix(r, "Insufficient ")
		if !ok {
			continue
		}
		var want, alloc, used string
		switch corev1.ResourceName(name) {
		case corev1.ResourceCPU:
			want, alloc, used = cores(req.MilliCPU), cores(ni.Allocatable.MilliCPU), cores(ni.Requested.MilliCPU)
		case corev1.ResourceMemory:
			want, alloc, used = bytes(req.Memory), bytes(ni.Allocatable.Memory), bytes(ni.Requested.Memory)
		case corev1.ResourceEphemeralStorage:
			want, alloc, used = bytes(req.EphemeralStorage), bytes(ni.Allocatable.EphemeralStorage), bytes(ni.Requested.EphemeralStorage)
		default:
			rn := corev1.ResourceName(name)
			want = strconv.FormatInt(req.ScalarResources[rn], 10)
			alloc = strconv.FormatInt(ni.Allocatable.ScalarResources[rn], 10)
			used = strconv.FormatInt(ni.Requested.ScalarResources[rn], 10)
		}
		d := fmt.Sprintf("requests %s, allocatable %s, in use %s", want, alloc, used)
		if len(reasons) > 1 {
			d = name + ": " + d
		}
		parts = append(parts, d)
	}
	return strings.Join(parts, "; ")
}

func cores(milli int64) string {
	return strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64)
}

func bytes(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}

// filterNode runs every Filter plugin on one node and returns all rejections.
// As the scheduler does, when pods of at least the pod's priority are nominated
// for the node (preemption made room for them), the filters first run with
// those pods added to a copy of the node, and, if that passes, without them.
func (fs *filterSet) filterNode(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, podReq framework.Resource, ni *framework.NodeInfo, nominated []*corev1.Pod) []Rejection {
	niWith, stateWith := ni, state
	var counted []string
	prio := priority(pod)
	for _, np := range nominated {
		if np.UID == pod.UID || priority(np) < prio {
			continue
		}
		if niWith == ni {
			niWith, stateWith = ni.Clone(), state.Clone()
		}
		niWith.AddPod(np)
		counted = append(counted, np.Namespace+"/"+np.Name)
		for _, pl := range fs.preFilter {
			ext, ok := pl.(framework.PreFilterExtensions)
			if !ok || stateWith.SkipFilterPlugins[pl.Name()] {
				continue
			}
			if st := ext.AddPod(ctx, stateWith, pod, np, niWith); !st.IsSuccess() {
				return []Rejection{{Plugin: pl.Name(), Error: true,
					Reason: fmt.Sprintf("add nominated pod %s/%s: %s", np.Namespace, np.Name, st.Message())}}
			}
		}
	}
	rejections := fs.runFilters(ctx, stateWith, pod, podReq, niWith)
	if len(rejections) > 0 || niWith == ni {
		if niWith != ni {
			note := "counting " + strings.Join(counted, ", ") + ", nominated for this node"
			for i := range rejections {
				rejections[i].Detail = strings.TrimPrefix(rejections[i].Detail+"; "+note, "; ")
			}
		}
		return rejections
	}
	return fs.runFilters(ctx, state, pod, podReq, ni)
}

// runFilters runs every Filter plugin that PreFilter did not skip on one node.
func (fs *filterSet) runFilters(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, podReq framework.Resource, ni *framework.NodeInfo) []Rejection {
	var out []Rejection
	for _, pl := range fs.filter {
		if state.SkipFilterPlugins[pl.Name()] {
			continue
		}
		s := pl.Filter(ctx, state, pod, ni)
		if s.IsSuccess() {
			continue
		}
		r := rejection(s, pl.Name())
		if pl.Name() == noderesources.NameFit {
			r.Detail = resourceDetail(s.Reasons(), podReq, ni)
		}
		out = append(out, r)
	}
	return out
}

func priority(p *corev1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}
