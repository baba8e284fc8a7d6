// Package interpodaffinity is the InterPodAffinity plugin: required pod
// affinity and anti-affinity of the incoming pod, and required anti-affinity
// of the pods already running, filter nodes by topology domain; preferred
// terms (the incoming pod's and, symmetrically, the running pods') score them.
//
// Differences from upstream: there is no AddPod/RemovePod pre-filter
// extension (kubette's framework has no preemption simulation yet); parsed
// terms of running pods are kept in a per-plugin TermCache instead of the
// framework's PodInfo; and matchLabelKeys/mismatchLabelKeys are merged into
// the selectors by the scheduler (see affinitymatch.ParsePodTerms).
package interpodaffinity

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/kubette/kubette/internal/scheduler/framework"
	"github.com/kubette/kubette/internal/scheduler/plugins/affinitymatch"
)

const (
	// Name is the plugin's name in the registry and in statuses.
	Name = "InterPodAffinity"

	// DefaultHardPodAffinityWeight is the score weight of a running pod's
	// required affinity term that the incoming pod matches.
	DefaultHardPodAffinityWeight int32 = 1
	// MaxHardPodAffinityWeight is the largest allowed HardPodAffinityWeight.
	MaxHardPodAffinityWeight int32 = 100
)

// Args configures the plugin. The zero value (or nil args) is the default.
type Args struct {
	// HardPodAffinityWeight weighs, in Score, the required affinity terms of
	// running pods that the incoming pod matches; nil means
	// DefaultHardPodAffinityWeight, 0 disables it. Valid range 0-100.
	HardPodAffinityWeight *int32
	// IgnorePreferredTermsOfExistingPods skips scoring (running pods'
	// preferred terms included) when the incoming pod has no preferred terms.
	IgnorePreferredTermsOfExistingPods bool
}

// InterPodAffinity is the plugin.
type InterPodAffinity struct {
	hardPodAffinityWeight              int32
	ignorePreferredTermsOfExistingPods bool
	sharedLister                       framework.SharedLister
	nsLister                           corelisters.NamespaceLister
	// terms caches the parsed terms of the pods already on nodes.
	terms *affinitymatch.TermCache
}

var (
	_ framework.PreFilterPlugin = (*InterPodAffinity)(nil)
	_ framework.FilterPlugin    = (*InterPodAffinity)(nil)
	_ framework.PreScorePlugin  = (*InterPodAffinity)(nil)
	_ framework.ScorePlugin     = (*InterPodAffinity)(nil)
	_ framework.ScoreExtensions = (*InterPodAffinity)(nil)
)

// New builds the plugin. args may be nil, Args or *Args. It needs the
// handle's snapshot lister and registers the namespace informer with the
// handle's informer factory (namespaceSelector needs namespace labels); the
// caller starts the factory.
func New(_ context.Context, args any, h framework.Handle) (framework.Plugin, error) {
	var a Args
	switch v := args.(type) {
	case nil:
	case Args:
		a = v
	case *Args:
		if v != nil {
			a = *v
		}
	default:
		return nil, fmt.Errorf("%s: args must be interpodaffinity.Args, got %T", Name, args)
	}
	weight := DefaultHardPodAffinityWeight
	if a.HardPodAffinityWeight != nil {
		weight = *a.HardPodAffinityWeight
	}
	if weight < 0 || weight > MaxHardPodAffinityWeight {
		return nil, fmt.Errorf("%s: hardPodAffinityWeight: Invalid value: %d: not in valid range [0-%d]", Name, weight, MaxHardPodAffinityWeight)
	}
	if h == nil || h.SnapshotSharedLister() == nil {
		return nil, fmt.Errorf("%s: SnapshotSharedLister is nil", Name)
	}
	if h.SharedInformerFactory() == nil {
		return nil, fmt.Errorf("%s: SharedInformerFactory is nil", Name)
	}
	return &InterPodAffinity{
		hardPodAffinityWeight:              weight,
		ignorePreferredTermsOfExistingPods: a.IgnorePreferredTermsOfExistingPods,
		sharedLister:                       h.SnapshotSharedLister(),
		nsLister:                           h.SharedInformerFactory().Core().V1().Namespaces().Lister(),
		terms:                              affinitymatch.NewTermCache(),
	}, nil
}

// Name returns the plugin's name.
func (pl *InterPodAffinity) Name() string { return Name }

// mergeNamespaceSelector resolves the namespace selector of an incoming
// pod's term into its namespace set, so that matching no longer needs the
// labels of each candidate pod's namespace. An empty selector (all
// namespaces) is kept as it is.
func (pl *InterPodAffinity) mergeNamespaceSelector(t *affinitymatch.Term) error {
	if t.NamespaceSelector.Empty() || labels.MatchesNothing(t.NamespaceSelector) {
		return nil
	}
	nss, err := pl.nsLister.List(t.NamespaceSelector)
	if err != nil {
		return err
	}
	for _, ns := range nss {
		t.Namespaces.Insert(ns.Name)
	}
	t.NamespaceSelector = labels.Nothing()
	return nil
}

// namespaceLabels returns a copy of the labels of namespace ns (nil when the
// namespace is unknown).
func (pl *InterPodAffinity) namespaceLabels(ns string) labels.Set {
	n, err := pl.nsLister.Get(ns)
	if err != nil {
		return nil
	}
	return labels.Merge(n.Labels, nil)
}

// parallelize calls work(i) for i in [0, n), spreading the calls over
// GOMAXPROCS goroutines when n is large; it returns when all calls are done
// or ctx is cancelled.
func parallelize(ctx context.Context, n int, work func(i int)) {
	const chunk = 32
	workers := min(runtime.GOMAXPROCS(0), (n+chunk-1)/chunk)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			work(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				start := int(next.Add(chunk)) - chunk
				if start >= n {
					return
				}
				for i := start; i < min(start+chunk, n); i++ {
					work(i)
				}
			}
		})
	}
	wg.Wait()
}
