package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"

	"github.com/kubette/kubette/internal/scheduler/framework"
	"github.com/kubette/kubette/internal/scheduler/plugins"
)

// profile is the instantiated plugin set of one scheduler name, split by
// extension point in the configured order, and the code that runs each point.
type profile struct {
	preEnqueue []framework.PreEnqueuePlugin
	preFilter  []framework.PreFilterPlugin
	filter     []framework.FilterPlugin
	postFilter []framework.PostFilterPlugin
	preScore   []framework.PreScorePlugin
	score      []weightedScorePlugin
	reserve    []framework.ReservePlugin
	permit     []framework.PermitPlugin
	preBind    []framework.PreBindPlugin
	bind       []framework.BindPlugin
	postBind   []framework.PostBindPlugin
	// enqueueExtensions are the plugins that register cluster events.
	enqueueExtensions []framework.EnqueueExtensions
	parallelism       int

	// nominator gives the pods nominated for each node (the queue).
	nominator nominatedPodLister
	// waitingPods holds the pods Permit plugins asked to wait.
	waitingPods *framework.WaitingPods
	// scoreBuf holds runScore's lists between cycles (the scheduling goroutine's).
	scoreBuf scoreBuffers
}

// nominatedPodLister is the queue as filtering sees it.
type nominatedPodLister interface {
	NominatedPodsForNode(nodeName string) []*corev1.Pod
	// HasNominatedPods reports whether any pod is nominated (cheaply: filtering
	// asks for every node).
	HasNominatedPods() bool
}

type weightedScorePlugin struct {
	framework.ScorePlugin
	weight int64
}

// handle is what plugins get from the scheduler; profile is set once the
// plugins are built.
type handle struct {
	snapshot  framework.SharedLister
	client    kubernetes.Interface
	informers informers.SharedInformerFactory
	recorder  events.EventRecorder
	profile   *profile
}

// SnapshotSharedLister returns the snapshot of the current scheduling cycle.
func (h *handle) SnapshotSharedLister() framework.SharedLister { return h.snapshot }

// ClientSet returns the scheduler's client.
func (h *handle) ClientSet() kubernetes.Interface { return h.client }

// SharedInformerFactory returns the scheduler's informer factory.
func (h *handle) SharedInformerFactory() informers.SharedInformerFactory { return h.informers }

// EventRecorder returns the scheduler's event recorder.
func (h *handle) EventRecorder() events.EventRecorder { return h.recorder }

// Parallelism returns how many goroutines filter and score.
func (h *handle) Parallelism() int { return h.profile.parallelism }

// NominatedPodsForNode returns the pods nominated for the node.
func (h *handle) NominatedPodsForNode(nodeName string) []*corev1.Pod {
	return h.profile.nominator.NominatedPodsForNode(nodeName)
}

// RunFilterPluginsWithNominatedPods filters as the scheduling cycle does.
func (h *handle) RunFilterPluginsWithNominatedPods(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	return h.profile.runFilterWithNominatedPods(ctx, state, pod, ni)
}

// RunPreFilterExtensionAddPod tells the PreFilter extensions about an added pod.
func (h *handle) RunPreFilterExtensionAddPod(ctx context.Context, state *framework.CycleState, podToSchedule, podToAdd *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	return h.profile.runPreFilterExtensionAddPod(ctx, state, podToSchedule, podToAdd, ni)
}

// RunPreFilterExtensionRemovePod tells the PreFilter extensions about a removed pod.
func (h *handle) RunPreFilterExtensionRemovePod(ctx context.Context, state *framework.CycleState, podToSchedule, podToRemove *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	return h.profile.runPreFilterExtensionRemovePod(ctx, state, podToSchedule, podToRemove, ni)
}

// GetWaitingPod returns the pod waiting on Permit plugins, or nil.
func (h *handle) GetWaitingPod(uid types.UID) framework.WaitingPod {
	return h.profile.waitingPods.Get(uid)
}

// IterateOverWaitingPods calls fn for every waiting pod.
func (h *handle) IterateOverWaitingPods(fn func(framework.WaitingPod)) {
	h.profile.waitingPods.Iterate(fn)
}

// RejectWaitingPod rejects a waiting pod and reports whether it was waiting.
func (h *handle) RejectWaitingPod(uid types.UID) bool {
	wp := h.profile.waitingPods.Get(uid)
	if wp == nil {
		return false
	}
	wp.Reject("", "removed")
	return true
}

var _ framework.Handle = (*handle)(nil)

// newProfile builds every configured plugin once from the registry.
func newProfile(ctx context.Context, registry framework.Registry, configs []plugins.PluginConfig, h *handle, nominator nominatedPodLister, parallelism int) (*profile, error) {
	p := &profile{parallelism: parallelism, nominator: nominator, waitingPods: framework.NewWaitingPods()}
	h.profile = p
	seen := map[string]bool{}
	for _, c := range configs {
		if seen[c.Name] {
			return nil, fmt.Errorf("plugin %q is configured twice", c.Name)
		}
		seen[c.Name] = true
		factory, ok := registry[c.Name]
		if !ok {
			return nil, fmt.Errorf("plugin %q does not exist in the registry", c.Name)
		}
		if c.Weight < 0 {
			return nil, fmt.Errorf("plugin %q: negative score weight %d", c.Name, c.Weight)
		}
		pl, err := factory(ctx, c.Args, h)
		if err != nil {
			return nil, fmt.Errorf("build plugin %q: %w", c.Name, err)
		}
		if pl.Name() != c.Name {
			return nil, fmt.Errorf("plugin %q calls itself %q", c.Name, pl.Name())
		}
		used := false
		if x, ok := pl.(framework.PreEnqueuePlugin); ok {
			p.preEnqueue, used = append(p.preEnqueue, x), true
		}
		if x, ok := pl.(framework.PreFilterPlugin); ok {
			p.preFilter, used = append(p.preFilter, x), true
		}
		if x, ok := pl.(framework.FilterPlugin); ok {
			p.filter, used = append(p.filter, x), true
		}
		if x, ok := pl.(framework.PostFilterPlugin); ok {
			p.postFilter, used = append(p.postFilter, x), true
		}
		if x, ok := pl.(framework.PreScorePlugin); ok {
			p.preScore, used = append(p.preScore, x), true
		}
		if x, ok := pl.(framework.ScorePlugin); ok {
			w := c.Weight
			if w == 0 {
				w = 1
			}
			if w > math.MaxInt64/framework.MaxNodeScore/int64(len(configs)+1) {
				return nil, fmt.Errorf("plugin %q: score weight %d overflows", c.Name, w)
			}
			p.score, used = append(p.score, weightedScorePlugin{ScorePlugin: x, weight: w}), true
		}
		if x, ok := pl.(framework.ReservePlugin); ok {
			p.reserve, used = append(p.reserve, x), true
		}
		if x, ok := pl.(framework.PermitPlugin); ok {
			p.permit, used = append(p.permit, x), true
		}
		if x, ok := pl.(framework.PreBindPlugin); ok {
			p.preBind, used = append(p.preBind, x), true
		}
		if x, ok := pl.(framework.BindPlugin); ok {
			p.bind, used = append(p.bind, x), true
		}
		if x, ok := pl.(framework.PostBindPlugin); ok {
			p.postBind, used = append(p.postBind, x), true
		}
		if !used {
			return nil, fmt.Errorf("plugin %q implements no extension point", c.Name)
		}
		if x, ok := pl.(framework.EnqueueExtensions); ok {
			p.enqueueExtensions = append(p.enqueueExtensions, x)
		}
	}
	if len(p.bind) == 0 {
		return nil, errors.New("the profile has no bind plugin")
	}
	return p, nil
}

// runPreEnqueue reports whether every PreEnqueue plugin lets the pod into the active
// queue; the first that does not is logged with its reason.
func (p *profile) runPreEnqueue(ctx context.Context, pod *corev1.Pod, log func(plugin, reason string)) bool {
	for _, pl := range p.preEnqueue {
		if st := pl.PreEnqueue(ctx, pod); !st.IsSuccess() {
			log(pl.Name(), st.Message())
			return false
		}
	}
	return true
}

// parallelizeN runs work for pieces 0..n-1 on up to p.parallelism goroutines, in
// chunks of about √n as upstream; it stops handing out pieces once ctx is done.
func (p *profile) parallelizeN(ctx context.Context, n int, work func(i int)) {
	chunk := int(math.Sqrt(float64(n)))
	if r := n/p.parallelism + 1; chunk > r {
		chunk = r
	}
	runChunks(ctx, p.parallelism, n, chunk, func(lo, hi int) bool {
		for i := lo; i < hi; i++ {
			work(i)
		}
		return true
	})
}

// runPreFilter runs the PreFilter plugins. A plugin that returns Skip has its
// Filter skipped for this pod. UnschedulableAndUnresolvable stops at once;
// Unschedulable lets the other PreFilters run (their state serves PostFilter).
func (p *profile) runPreFilter(ctx context.Context, state *framework.CycleState, pod *corev1.Pod) *framework.Status {
	var rejected *framework.Status
	for _, pl := range p.preFilter {
		s := pl.PreFilter(ctx, state, pod)
		switch {
		case s.IsSuccess():
		case s.IsSkip():
			state.SkipFilterPlugins[pl.Name()] = true
		case s.Code() == framework.UnschedulableAndUnresolvable:
			return framework.NewStatus(s.Code(), s.Reasons()...).WithPlugin(pl.Name())
		case s.Code() == framework.Unschedulable:
			rejected = framework.NewStatus(s.Code(), s.Reasons()...).WithPlugin(pl.Name())
		default:
			return framework.AsStatus(fmt.Errorf("running PreFilter plugin %q: %w", pl.Name(), s.AsError())).WithPlugin(pl.Name())
		}
	}
	return rejected
}

// activeFilters returns the Filter plugins that run in this cycle: those whose
// PreFilter did not say Skip. Filtering works it out once per cycle, not per node.
func (p *profile) activeFilters(state *framework.CycleState) []framework.FilterPlugin {
	if len(state.SkipFilterPlugins) == 0 {
		return p.filter
	}
	out := make([]framework.FilterPlugin, 0, len(p.filter))
	for _, pl := range p.filter {
		if !state.SkipFilterPlugins[pl.Name()] {
			out = append(out, pl)
		}
	}
	return out
}

// runFilter runs the cycle's Filter plugins on one node and returns the first rejection.
func (p *profile) runFilter(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	return p.runFilterPlugins(ctx, state, pod, ni, p.activeFilters(state))
}

// runFilterPlugins runs filters (the cycle's active Filter plugins) on one node
// and returns the first rejection. It is called for many nodes at once.
func (p *profile) runFilterPlugins(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo, filters []framework.FilterPlugin) *framework.Status {
	for _, pl := range filters {
		s := pl.Filter(ctx, state, pod, ni)
		if s.IsSuccess() {
			continue
		}
		if s.IsRejected() {
			// A copy: plugins may hand out shared statuses, and many nodes run at once.
			return framework.NewStatus(s.Code(), s.Reasons()...).WithPlugin(pl.Name())
		}
		return framework.AsStatus(fmt.Errorf("running %q filter plugin: %w", pl.Name(), s.AsError())).WithPlugin(pl.Name())
	}
	return nil
}

// runPostFilter runs the PostFilter plugins until one succeeds (or declares the
// pod unresolvable); otherwise their reasons are joined into one Unschedulable
// status, with the last nomination a plugin made (nil: leave it alone).
func (p *profile) runPostFilter(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, filtered framework.NodeToStatus) (*framework.PostFilterResult, *framework.Status) {
	var reasons []string
	var rejector string
	var result *framework.PostFilterResult
	for _, pl := range p.postFilter {
		r, s := pl.PostFilter(ctx, state, pod, filtered)
		if s.IsSuccess() {
			return r, s
		}
		if s.Code() == framework.UnschedulableAndUnresolvable {
			return r, framework.NewStatus(s.Code(), s.Reasons()...).WithPlugin(pl.Name())
		}
		if !s.IsRejected() {
			return nil, framework.AsStatus(fmt.Errorf("running PostFilter plugin %q: %w", pl.Name(), s.AsError())).WithPlugin(pl.Name())
		}
		reasons = append(reasons, s.Reasons()...)
		if rejector == "" {
			rejector = pl.Name()
		}
		if r != nil && r.Mode() != framework.ModeNoop {
			result = r
		}
	}
	return result, framework.NewStatus(framework.Unschedulable, reasons...).WithPlugin(rejector)
}

// runPreScore runs the PreScore plugins; Skip drops the plugin's Score for this pod.
func (p *profile) runPreScore(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, nodes []*framework.NodeInfo) *framework.Status {
	for _, pl := range p.preScore {
		s := pl.PreScore(ctx, state, pod, nodes)
		if s.IsSkip() {
			state.SkipScorePlugins[pl.Name()] = true
			continue
		}
		if !s.IsSuccess() {
			return framework.AsStatus(fmt.Errorf("running PreScore plugin %q: %w", pl.Name(), s.AsError())).WithPlugin(pl.Name())
		}
	}
	return nil
}

// runScore scores the nodes with every Score plugin in parallel, normalises each
// plugin's scores, checks they lie in [MinNodeScore, MaxNodeScore], multiplies
// them by the plugin's weight and returns the per-node totals (in nodes' order).
// Only the scheduling goroutine calls it: the per-plugin score lists and the
// totals live in buffers reused by the next cycle (a cycle at 5000 nodes scores
// 500, and fresh lists were most of the cycle's allocations), so the result is
// valid until the next call. The parallel section writes bare int64 scores;
// only plugins that normalise get a NodeScore list (names included), built
// after it, and the normalisations run on this goroutine when at most one
// plugin has them (the default profile for a pod without affinity or spread
// constraints: TaintToleration alone), not in a parallel section of their own.
func (p *profile) runScore(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, nodes []*framework.NodeInfo) ([]framework.NodeScore, *framework.Status) {
	buf := &p.scoreBuf
	n := len(nodes)
	active := buf.active[:0]
	for _, pl := range p.score {
		if !state.SkipScorePlugins[pl.Name()] {
			active = append(active, pl)
		}
	}
	buf.active = active
	totals := buf.totals[:0]
	if len(active) == 0 {
		for _, ni := range nodes {
			totals = append(totals, framework.NodeScore{Name: ni.NodeName()})
		}
		buf.totals = totals
		return totals, nil
	}
	for len(buf.raw) < len(active) {
		buf.raw = append(buf.raw, nil)
	}
	raw := buf.raw[:len(active)]
	for j := range active {
		raw[j] = grow(raw[j], n)
	}
	var (
		errOnce  sync.Once
		firstErr error
	)
	fail := func(cancel context.CancelFunc, err error) {
		errOnce.Do(func() { firstErr = err })
		cancel()
	}
	scoreCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.parallelizeN(scoreCtx, n, func(i int) {
		ni := nodes[i]
		for j, pl := range active {
			s, st := pl.Score(scoreCtx, state, pod, ni)
			if !st.IsSuccess() {
				fail(cancel, fmt.Errorf("running Score plugin %q: %w", pl.Name(), st.AsError()))
				return
			}
			raw[j][i] = s
		}
	})
	if firstErr != nil {
		return nil, framework.AsStatus(firstErr)
	}

	// Normalisation: a NodeScore list per plugin that has ScoreExtensions.
	norm := buf.norm[:0]
	for j, pl := range active {
		ext := pl.ScoreExtensions()
		if ext == nil {
			continue
		}
		k := len(norm)
		if k == len(buf.normLists) {
			buf.normLists = append(buf.normLists, nil)
		}
		list := buf.normLists[k][:0]
		for i, ni := range nodes {
			list = append(list, framework.NodeScore{Name: ni.NodeName(), Score: raw[j][i]})
		}
		buf.normLists[k] = list
		norm = append(norm, normalizing{index: j, ext: ext, list: list})
	}
	buf.norm = norm
	normalize := func(k int) {
		nz := &norm[k]
		if st := nz.ext.NormalizeScore(scoreCtx, state, pod, nz.list); !st.IsSuccess() {
			fail(cancel, fmt.Errorf("running Normalize on Score plugin %q: %w", active[nz.index].Name(), st.AsError()))
			return
		}
		r := raw[nz.index]
		for i := range nz.list {
			r[i] = nz.list[i].Score
		}
	}
	if len(norm) == 1 {
		normalize(0)
	} else if len(norm) > 1 {
		p.parallelizeN(scoreCtx, len(norm), normalize)
	}
	if firstErr != nil {
		return nil, framework.AsStatus(firstErr)
	}

	for _, ni := range nodes {
		totals = append(totals, framework.NodeScore{Name: ni.NodeName()})
	}
	buf.totals = totals
	for j, pl := range active {
		for i, s := range raw[j] {
			if s < framework.MinNodeScore || s > framework.MaxNodeScore {
				return nil, framework.AsStatus(fmt.Errorf("plugin %q returns an invalid score %d, it should in the range of [%d, %d] after normalizing",
					pl.Name(), s, framework.MinNodeScore, framework.MaxNodeScore))
			}
			totals[i].Score += s * pl.weight
		}
	}
	return totals, nil
}

// scoreBuffers are runScore's lists, kept from one cycle to the next.
type scoreBuffers struct {
	active []weightedScorePlugin
	// raw holds each active plugin's scores by node (normalised in place).
	raw [][]int64
	// norm and normLists are the plugins that normalise and their NodeScore lists.
	norm      []normalizing
	normLists [][]framework.NodeScore
	totals    []framework.NodeScore
}

// normalizing is one active Score plugin with ScoreExtensions and its list.
type normalizing struct {
	index int // in the active plugins
	ext   framework.ScoreExtensions
	list  []framework.NodeScore
}

// grow returns s resized to n zeroed elements, reusing its array when it is large enough.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// runBind runs the Bind plugins until one does not Skip.
func (p *profile) runBind(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, nodeName string) *framework.Status {
	for _, pl := range p.bind {
		s := pl.Bind(ctx, state, pod, nodeName)
		if s.IsSkip() {
			continue
		}
		if s.IsSuccess() {
			return nil
		}
		if s.IsRejected() {
			return framework.NewStatus(s.Code(), s.Reasons()...).WithPlugin(pl.Name())
		}
		return framework.AsStatus(fmt.Errorf("running Bind plugin %q: %w", pl.Name(), s.AsError())).WithPlugin(pl.Name())
	}
	return framework.AsStatus(fmt.Errorf("every bind plugin skipped pod %s/%s", pod.Namespace, pod.Name))
}

func (p *profile) hasScorePlugins() bool      { return len(p.score) > 0 }
func (p *profile) hasFilterPlugins() bool     { return len(p.filter) > 0 }
func (p *profile) hasPostFilterPlugins() bool { return len(p.postFilter) > 0 }
