package framework

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
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

// PreFilterPlugin computes per-pod state once before filtering (stored in the CycleState).
// Returning Skip means the plugin's Filter is not called for this pod; a rejection
// rejects the pod on every node.
type PreFilterPlugin interface {
	Plugin
	PreFilter(ctx context.Context, state *CycleState, pod *corev1.Pod) *Status
}

// FilterPlugin decides whether a pod can run on one node. Filter is called for many
// nodes in parallel and must not change nodeInfo or shared state.
type FilterPlugin interface {
	Plugin
	Filter(ctx context.Context, state *CycleState, pod *corev1.Pod, nodeInfo *NodeInfo) *Status
}

// NodeToStatus maps node names to why the pod did not fit them.
type NodeToStatus map[string]*Status

// PostFilterPlugin runs when no node fits (e.g. preemption); it may nominate a node.
type PostFilterPlugin interface {
	Plugin
	PostFilter(ctx context.Context, state *CycleState, pod *corev1.Pod, filtered NodeToStatus) (nominatedNode string, status *Status)
}

// PreScorePlugin computes per-pod state once before scoring the feasible nodes.
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
