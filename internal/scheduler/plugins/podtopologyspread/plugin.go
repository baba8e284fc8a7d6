// Package podtopologyspread is the PodTopologySpread plugin: it keeps pods
// that match a selector evenly spread over topology domains (nodes sharing a
// label value). DoNotSchedule constraints filter nodes whose domain would
// exceed maxSkew; ScheduleAnyway constraints score nodes in emptier domains
// higher.
//
// Differences from upstream: the cluster-level default constraints (applied
// to pods without constraints, with selectors derived from their services and
// controllers) are not implemented, so a pod without topologySpreadConstraints
// is skipped; and there is no AddPod/RemovePod pre-filter extension, as
// kubette's framework has no preemption simulation yet. minDomains,
// matchLabelKeys and the node inclusion policies are always enabled (GA or
// on by default upstream).
package podtopologyspread

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

const (
	// Name is the plugin's name in the registry and in statuses.
	Name = "PodTopologySpread"

	// ErrReasonConstraintsNotMatch is the reason for a node whose domain would exceed maxSkew.
	ErrReasonConstraintsNotMatch = "node(s) didn't match pod topology spread constraints"
	// ErrReasonNodeLabelNotMatch is the reason for a node without a constraint's topology key.
	ErrReasonNodeLabelNotMatch = ErrReasonConstraintsNotMatch + " (missing required label)"
)

// PodTopologySpread is the plugin.
type PodTopologySpread struct {
	sharedLister framework.SharedLister
}

var (
	_ framework.PreFilterPlugin = (*PodTopologySpread)(nil)
	_ framework.FilterPlugin    = (*PodTopologySpread)(nil)
	_ framework.PreScorePlugin  = (*PodTopologySpread)(nil)
	_ framework.ScorePlugin     = (*PodTopologySpread)(nil)
	_ framework.ScoreExtensions = (*PodTopologySpread)(nil)
)

// New builds the plugin. It takes no arguments (args must be nil) and needs
// the handle's snapshot lister to count pods on every node.
func New(_ context.Context, args any, h framework.Handle) (framework.Plugin, error) {
	if args != nil {
		return nil, fmt.Errorf("%s: takes no args, got %T", Name, args)
	}
	if h == nil || h.SnapshotSharedLister() == nil {
		return nil, fmt.Errorf("%s: SnapshotSharedLister is nil", Name)
	}
	return &PodTopologySpread{sharedLister: h.SnapshotSharedLister()}, nil
}

// Name returns the plugin's name.
func (pl *PodTopologySpread) Name() string { return Name }

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
