package defaultpreemption

import (
	"context"
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

// Messages, exactly as upstream.
const (
	// ErrNoVictims is the status of a node with no lower-priority pod to evict.
	ErrNoVictims = "No preemption victims found for incoming pod"
	// ErrNotHelpful is the status of a node the filters rejected as
	// UnschedulableAndUnresolvable: evicting pods cannot make the pod fit it.
	ErrNotHelpful = "Preemption is not helpful for scheduling"
)

// Candidate is a node where preemption makes the pod fit, with the pods to evict.
type Candidate struct {
	// Name is the node's name.
	Name string
	// Victims are the pods to evict, from the highest priority down.
	Victims []*corev1.Pod
	// NumPDBViolations counts victims whose eviction a PodDisruptionBudget
	// forbids; always 0 here, as kubette has no PodDisruptionBudget resource.
	NumPDBViolations int
}

// podPriority is spec.priority, 0 when unset (as upstream's corev1helpers.PodPriority).
func podPriority(p *corev1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// startTime is the pod's status.startTime; a pod that has not started
// (assumed, or bound and not yet running) started "now", later than any other.
func startTime(p *corev1.Pod) (t int64, started bool) {
	if p.Status.StartTime == nil {
		return math.MaxInt64, false
	}
	return p.Status.StartTime.UnixNano(), true
}

// moreImportant orders pods as upstream's MoreImportantPod: higher priority
// first, then the one that started earlier.
func moreImportant(a, b *corev1.Pod) bool {
	pa, pb := podPriority(a), podPriority(b)
	if pa != pb {
		return pa > pb
	}
	ta, _ := startTime(a)
	tb, _ := startTime(b)
	return ta < tb
}

// filterRunner is the part of the framework's handle victim selection needs.
type filterRunner interface {
	RunFilterPluginsWithNominatedPods(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, nodeInfo *framework.NodeInfo) *framework.Status
	RunPreFilterExtensionAddPod(ctx context.Context, state *framework.CycleState, podToSchedule, podToAdd *corev1.Pod, nodeInfo *framework.NodeInfo) *framework.Status
	RunPreFilterExtensionRemovePod(ctx context.Context, state *framework.CycleState, podToSchedule, podToRemove *corev1.Pod, nodeInfo *framework.NodeInfo) *framework.Status
}

// selectVictimsOnNode finds the fewest lower-priority pods to evict from the
// node for pod to fit, as upstream: remove every pod of lower priority; if the
// pod still does not fit, the node cannot help (the filter's status is
// returned); otherwise add the removed pods back one at a time, the most
// important first, keeping each that still leaves room — the others are the
// victims, most important first. nodeInfo and state are the caller's copies
// and are changed. PodDisruptionBudgets are not considered: kubette has none.
func selectVictimsOnNode(ctx context.Context, fh filterRunner, state *framework.CycleState, pod *corev1.Pod, nodeInfo *framework.NodeInfo) ([]*corev1.Pod, *framework.Status) {
	remove := func(p *corev1.Pod) *framework.Status {
		if err := nodeInfo.RemovePod(p); err != nil {
			return framework.AsStatus(err)
		}
		return fh.RunPreFilterExtensionRemovePod(ctx, state, pod, p, nodeInfo)
	}
	add := func(p *corev1.Pod) *framework.Status {
		nodeInfo.AddPod(p)
		return fh.RunPreFilterExtensionAddPod(ctx, state, pod, p, nodeInfo)
	}
	prio := podPriority(pod)
	var potential []*corev1.Pod
	for _, pi := range nodeInfo.Pods {
		if podPriority(pi.Pod) < prio {
			potential = append(potential, pi.Pod)
		}
	}
	if len(potential) == 0 {
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrNoVictims)
	}
	for _, p := range potential {
		if st := remove(p); !st.IsSuccess() {
			return nil, st
		}
	}
	if st := fh.RunFilterPluginsWithNominatedPods(ctx, state, pod, nodeInfo); !st.IsSuccess() {
		return nil, st
	}
	sort.SliceStable(potential, func(i, j int) bool { return moreImportant(potential[i], potential[j]) })
	var victims []*corev1.Pod
	for _, p := range potential {
		if st := add(p); !st.IsSuccess() {
			return nil, st
		}
		st := fh.RunFilterPluginsWithNominatedPods(ctx, state, pod, nodeInfo)
		if st.IsSuccess() {
			continue // reprieved
		}
		if st.Code() == framework.Error {
			return nil, st
		}
		if st := remove(p); !st.IsSuccess() {
			return nil, st
		}
		victims = append(victims, p)
	}
	return victims, nil
}

// earliestStartOfMostImportant is the earliest start time among the victims of
// the highest priority (upstream's GetEarliestPodStartTime).
func earliestStartOfMostImportant(victims []*corev1.Pod) int64 {
	best := podPriority(victims[0])
	earliest, _ := startTime(victims[0])
	for _, v := range victims[1:] {
		t, _ := startTime(v)
		switch p := podPriority(v); {
		case p > best:
			best, earliest = p, t
		case p == best && t < earliest:
			earliest = t
		}
	}
	return earliest
}

// pickOneNodeForPreemption chooses among the candidates as upstream: a node
// that needs no victim at once; otherwise, keeping at each step only the best,
// the fewest PodDisruptionBudget violations, the lowest highest victim
// priority, the smallest sum of victim priorities, the fewest victims, and the
// latest start of the highest-priority victims; ties go to the first candidate.
func pickOneNodeForPreemption(candidates []*Candidate) *Candidate {
	if len(candidates) == 0 {
		return nil
	}
	for _, c := range candidates {
		if len(c.Victims) == 0 {
			return c
		}
	}
	scores := []func(c *Candidate) int64{
		func(c *Candidate) int64 { return -int64(c.NumPDBViolations) },
		func(c *Candidate) int64 { return -int64(podPriority(c.Victims[0])) },
		func(c *Candidate) int64 {
			var sum int64
			for _, v := range c.Victims {
				// Shifted so every term is positive, as upstream.
				sum += int64(podPriority(v)) + math.MaxInt32 + 1
			}
			return -sum
		},
		func(c *Candidate) int64 { return -int64(len(c.Victims)) },
		earliestStartOfMostImportantScore,
	}
	left := candidates
	for _, score := range scores {
		best := int64(math.MinInt64)
		var kept []*Candidate
		for _, c := range left {
			switch s := score(c); {
			case s > best:
				best, kept = s, []*Candidate{c}
			case s == best:
				kept = append(kept, c)
			}
		}
		left = kept
		if len(left) == 1 {
			break
		}
	}
	return left[0]
}

func earliestStartOfMostImportantScore(c *Candidate) int64 {
	return earliestStartOfMostImportant(c.Victims)
}
