package framework

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
)

// MaxNodeScore is the highest score a Score plugin gives after normalisation; MinNodeScore the lowest.
const (
	MaxNodeScore int64 = 100
	MinNodeScore int64 = 0
)

// Plugin is implemented by every plugin.
type Plugin interface {
	// Name is the plugin's registered name, e.g. "NodeResourcesFit".
	Name() string
}

// PreEnqueuePlugin decides whether a pod may be tried at all. A pod that any of them
// rejects is gated: it stays out of the active queue, untried and with no status
// written, until an update of the pod itself passes them all.
type PreEnqueuePlugin interface {
	Plugin
	PreEnqueue(ctx context.Context, pod *corev1.Pod) *Status
}

// PreFilterPlugin computes per-pod state once before filtering (stored in the CycleState).
// Returning Skip means the plugin's Filter is not called for this pod; a rejection
// rejects the pod on every node.
type PreFilterPlugin interface {
	Plugin
	PreFilter(ctx context.Context, state *CycleState, pod *corev1.Pod) *Status
}

// PreFilterExtensions is implemented by PreFilter plugins whose cycle state
// depends on the pods already placed: preemption and the nominated-pods pass of
// filtering call AddPod and RemovePod to keep that state in step with a NodeInfo
// they change (pods added to or removed from nodeInfo, which already holds the change).
type PreFilterExtensions interface {
	AddPod(ctx context.Context, state *CycleState, podToSchedule, podToAdd *corev1.Pod, nodeInfo *NodeInfo) *Status
	RemovePod(ctx context.Context, state *CycleState, podToSchedule, podToRemove *corev1.Pod, nodeInfo *NodeInfo) *Status
}

// FilterPlugin decides whether a pod can run on one node. Filter is called for many
// nodes in parallel and must not change nodeInfo or shared state.
type FilterPlugin interface {
	Plugin
	Filter(ctx context.Context, state *CycleState, pod *corev1.Pod, nodeInfo *NodeInfo) *Status
}

// NodeToStatus maps node names to why the pod did not fit them.
type NodeToStatus map[string]*Status

// NominatingMode says what a scheduling failure does to the pod's nominated node.
type NominatingMode int

const (
	// ModeNoop leaves the pod's nominated node as it is.
	ModeNoop NominatingMode = iota
	// ModeOverride sets the nominated node to NominatingInfo.NominatedNodeName
	// (clears it when that is empty).
	ModeOverride
)

// NominatingInfo is the nomination a scheduling attempt leaves on a pod.
type NominatingInfo struct {
	NominatedNodeName string
	NominatingMode    NominatingMode
}

// Mode returns the mode (ModeNoop for nil).
func (n *NominatingInfo) Mode() NominatingMode {
	if n == nil {
		return ModeNoop
	}
	return n.NominatingMode
}

// PostFilterResult is what a PostFilter plugin gives back: the node it
// nominated the pod for (nil NominatingInfo leaves the nomination alone).
type PostFilterResult struct {
	*NominatingInfo
}

// NewPostFilterResultWithNominatedNode returns a result that sets the pod's
// nominated node to name ("" clears it).
func NewPostFilterResultWithNominatedNode(name string) *PostFilterResult {
	return &PostFilterResult{NominatingInfo: &NominatingInfo{NominatedNodeName: name, NominatingMode: ModeOverride}}
}

// PostFilterPlugin runs when no node fits (e.g. preemption). filtered holds the
// status of every node; the result may nominate a node for the pod.
type PostFilterPlugin interface {
	Plugin
	PostFilter(ctx context.Context, state *CycleState, pod *corev1.Pod, filtered NodeToStatus) (*PostFilterResult, *Status)
}

// PreScorePlugin computes per-pod state once before scoring the feasible nodes. The
// nodes slice is the scheduler's, reused by the next cycle: a plugin must not keep it.
type PreScorePlugin interface {
	Plugin
	PreScore(ctx context.Context, state *CycleState, pod *corev1.Pod, nodes []*NodeInfo) *Status
}

// NodeScore is one node's score from one plugin.
type NodeScore struct {
	Name  string
	Score int64
}

// ScorePlugin ranks feasible nodes. Scores are normalised to [MinNodeScore, MaxNodeScore]
// (by NormalizeScore when ScoreExtensions is non-nil) and multiplied by the plugin's weight.
type ScorePlugin interface {
	Plugin
	Score(ctx context.Context, state *CycleState, pod *corev1.Pod, nodeInfo *NodeInfo) (int64, *Status)
	// ScoreExtensions returns the normaliser, or nil when scores are already in range.
	ScoreExtensions() ScoreExtensions
}

// ScoreExtensions normalises the scores of one plugin across all feasible nodes, in place.
type ScoreExtensions interface {
	NormalizeScore(ctx context.Context, state *CycleState, pod *corev1.Pod, scores []NodeScore) *Status
}

// ReservePlugin keeps plugin state in step with the scheduler's cache: Reserve
// runs once the pod is assumed on nodeName; Unreserve undoes it when any later
// step (Reserve of another plugin, Permit, PreBind, Bind) fails. Unreserve must
// be idempotent and may be called without Reserve having succeeded.
type ReservePlugin interface {
	Plugin
	Reserve(ctx context.Context, state *CycleState, pod *corev1.Pod, nodeName string) *Status
	Unreserve(ctx context.Context, state *CycleState, pod *corev1.Pod, nodeName string)
}

// PermitPlugin approves, rejects or delays the binding of a reserved pod. Wait
// with a timeout parks the pod among the waiting pods until every waiting plugin
// calls Allow, one calls Reject, or the timeout passes (a rejection).
type PermitPlugin interface {
	Plugin
	Permit(ctx context.Context, state *CycleState, pod *corev1.Pod, nodeName string) (*Status, time.Duration)
}

// PreBindPlugin runs in the binding cycle before the pod is bound (e.g. to
// provision a volume); a failure unreserves the pod and retries it.
type PreBindPlugin interface {
	Plugin
	PreBind(ctx context.Context, state *CycleState, pod *corev1.Pod, nodeName string) *Status
}

// PostBindPlugin is told that the pod was bound (for clean-up; it cannot fail).
type PostBindPlugin interface {
	Plugin
	PostBind(ctx context.Context, state *CycleState, pod *corev1.Pod, nodeName string)
}

// WaitingPod is a pod held by Permit plugins that returned Wait.
type WaitingPod interface {
	// GetPod returns the waiting (assumed) pod.
	GetPod() *corev1.Pod
	// GetPendingPlugins lists the plugins that have not allowed the pod yet.
	GetPendingPlugins() []string
	// Allow records that pluginName allows the pod; the pod is bound once
	// every waiting plugin has allowed it.
	Allow(pluginName string)
	// Reject fails the pod's binding with an Unschedulable status from pluginName.
	Reject(pluginName, msg string)
}

// BindPlugin binds a pod to a node (the default POSTs pods/binding). Skip passes to the next binder.
type BindPlugin interface {
	Plugin
	Bind(ctx context.Context, state *CycleState, pod *corev1.Pod, nodeName string) *Status
}

// Handle is what the scheduler gives plugins.
type Handle interface {
	// SnapshotSharedLister is the node snapshot of the current scheduling cycle.
	SnapshotSharedLister() SharedLister
	// ClientSet talks to the API server.
	ClientSet() kubernetes.Interface
	// SharedInformerFactory gives listers (e.g. for namespaces used by pod affinity).
	SharedInformerFactory() informers.SharedInformerFactory
	// EventRecorder records events (e.g. Preempted on victims).
	EventRecorder() events.EventRecorder
	// Parallelism is how many goroutines plugins may use for work over nodes.
	Parallelism() int

	// NominatedPodsForNode returns the pods nominated to run on the node
	// (status.nominatedNodeName, or a nomination the scheduler made in memory).
	NominatedPodsForNode(nodeName string) []*corev1.Pod
	// RunFilterPluginsWithNominatedPods runs the Filter plugins on nodeInfo as
	// the scheduling cycle does: first with the nominated pods of at least the
	// pod's priority added to the node, then, if that passed, without them.
	RunFilterPluginsWithNominatedPods(ctx context.Context, state *CycleState, pod *corev1.Pod, nodeInfo *NodeInfo) *Status
	// RunPreFilterExtensionAddPod and RunPreFilterExtensionRemovePod tell every
	// PreFilter plugin with PreFilterExtensions that podToAdd was added to (or
	// podToRemove removed from) nodeInfo.
	RunPreFilterExtensionAddPod(ctx context.Context, state *CycleState, podToSchedule, podToAdd *corev1.Pod, nodeInfo *NodeInfo) *Status
	RunPreFilterExtensionRemovePod(ctx context.Context, state *CycleState, podToSchedule, podToRemove *corev1.Pod, nodeInfo *NodeInfo) *Status

	// GetWaitingPod returns the pod waiting on Permit plugins, or nil.
	GetWaitingPod(uid types.UID) WaitingPod
	// IterateOverWaitingPods calls fn for every waiting pod.
	IterateOverWaitingPods(fn func(WaitingPod))
	// RejectWaitingPod rejects a waiting pod and reports whether it was waiting.
	RejectWaitingPod(uid types.UID) bool
}

// NodeInfoLister reads the snapshot.
type NodeInfoLister interface {
	// List returns every node in the snapshot.
	List() ([]*NodeInfo, error)
	// HavePodsWithAffinityList returns the nodes with pods that have (anti-)affinity.
	HavePodsWithAffinityList() ([]*NodeInfo, error)
	// HavePodsWithRequiredAntiAffinityList returns the nodes with pods that have required anti-affinity.
	HavePodsWithRequiredAntiAffinityList() ([]*NodeInfo, error)
	// Get returns one node's info.
	Get(nodeName string) (*NodeInfo, error)
}

// SharedLister is the snapshot as seen by plugins.
type SharedLister interface {
	NodeInfos() NodeInfoLister
}

// Factory builds a plugin. args are the plugin's configuration (nil for defaults).
type Factory func(ctx context.Context, args any, h Handle) (Plugin, error)

// Registry maps plugin names to factories; the scheduler builds one in a single function.
type Registry map[string]Factory

// DefaultNormalizeScore scales scores in place so that the highest becomes maxPriority
// (all stay 0 when every score is 0); reverse then subtracts each from maxPriority, so
// all-zero scores become maxPriority. It is upstream's helper for count-based scorers.
func DefaultNormalizeScore(maxPriority int64, reverse bool, scores []NodeScore) {
	var maxCount int64
	for i := range scores {
		maxCount = max(maxCount, scores[i].Score)
	}
	if maxCount == 0 {
		if reverse {
			for i := range scores {
				scores[i].Score = maxPriority
			}
		}
		return
	}
	for i := range scores {
		score := maxPriority * scores[i].Score / maxCount
		if reverse {
			score = maxPriority - score
		}
		scores[i].Score = score
	}
}
