// Package defaultpreemption is the DefaultPreemption PostFilter plugin, as
// upstream's: when no node fits a pod of some priority whose preemptionPolicy
// is PreemptLowerPriority, it looks for nodes where evicting lower-priority
// pods makes room, picks the node whose eviction hurts least, marks each victim
// with a DisruptionTarget condition and deletes it, clears the nominations of
// lower-priority pods on that node, and nominates the node for the pod
// (the scheduler writes status.nominatedNodeName); the pod is scheduled there
// once the victims are gone.
//
// kubette has no PodDisruptionBudget resource, so no victim ever violates one
// (upstream's first ordering criterion is always 0), and no PriorityClass
// resource yet: priorities are spec.priority as stored on the pod.
package defaultpreemption

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubette/kubette/internal/scheduler/framework"
)

// Name is the plugin's registered name.
const Name = "DefaultPreemption"

// Defaults of Args, as upstream.
const (
	DefaultMinCandidateNodesPercentage = 10
	DefaultMinCandidateNodesAbsolute   = 100
)

// Reasons and messages, exactly as upstream.
const (
	// ReasonNotEligibleNever is why a pod with preemptionPolicy Never does not preempt.
	ReasonNotEligibleNever = "not eligible due to preemptionPolicy=Never."
	// ReasonNotEligibleTerminating is why a pod whose nominated node still has a
	// lower-priority pod terminating after preemption does not preempt again.
	ReasonNotEligibleTerminating = "not eligible due to a terminating pod on the nominated node."
)

// Args configures the plugin (upstream's DefaultPreemptionArgs). The dry run
// stops once it has found max(nodes·MinCandidateNodesPercentage/100,
// MinCandidateNodesAbsolute) candidates (at most the number of nodes).
type Args struct {
	// MinCandidateNodesPercentage is in [0, 100] (default 10).
	MinCandidateNodesPercentage *int32
	// MinCandidateNodesAbsolute is at least 0 (default 100); both may not be 0.
	MinCandidateNodesAbsolute *int32
}

// DefaultPreemption evicts lower-priority pods to make room.
type DefaultPreemption struct {
	fh         framework.Handle
	percentage int32
	absolute   int32
	// offset picks where among the potential nodes the dry run starts (random
	// as upstream, so that preemption spreads over the cluster).
	offset func(n int) int
}

var _ framework.PostFilterPlugin = (*DefaultPreemption)(nil)

// New builds the plugin from Args or *Args (nil for the defaults).
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
		return nil, fmt.Errorf("%s: want Args, got %T", Name, args)
	}
	if h == nil {
		return nil, fmt.Errorf("%s: a framework handle is required", Name)
	}
	pl := &DefaultPreemption{fh: h, percentage: DefaultMinCandidateNodesPercentage, absolute: DefaultMinCandidateNodesAbsolute,
		offset: func(n int) int { return rand.IntN(n) }}
	if a.MinCandidateNodesPercentage != nil {
		pl.percentage = *a.MinCandidateNodesPercentage
	}
	if a.MinCandidateNodesAbsolute != nil {
		pl.absolute = *a.MinCandidateNodesAbsolute
	}
	if pl.percentage < 0 || pl.percentage > 100 {
		return nil, fmt.Errorf("%s: minCandidateNodesPercentage %d is not in [0, 100]", Name, pl.percentage)
	}
	if pl.absolute < 0 {
		return nil, fmt.Errorf("%s: minCandidateNodesAbsolute %d is negative", Name, pl.absolute)
	}
	if pl.percentage == 0 && pl.absolute == 0 {
		return nil, fmt.Errorf("%s: minCandidateNodesPercentage and minCandidateNodesAbsolute cannot both be zero", Name)
	}
	return pl, nil
}

// Name returns Name.
func (pl *DefaultPreemption) Name() string { return Name }

// PostFilter preempts for the pod; its message gets upstream's "preemption: " prefix.
func (pl *DefaultPreemption) PostFilter(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, m framework.NodeToStatus) (*framework.PostFilterResult, *framework.Status) {
	res, st := pl.preempt(ctx, state, pod, m)
	if msg := st.Message(); msg != "" {
		if st.Code() == framework.Error {
			return res, framework.AsStatus(fmt.Errorf("preemption: %w", st.AsError()))
		}
		return res, framework.NewStatus(st.Code(), "preemption: "+msg)
	}
	return res, st
}

// preempt is upstream's Evaluator.Preempt.
func (pl *DefaultPreemption) preempt(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, m framework.NodeToStatus) (*framework.PostFilterResult, *framework.Status) {
	if ok, msg := pl.eligible(pod, m[pod.Status.NominatedNodeName]); !ok {
		return nil, framework.NewStatus(framework.Unschedulable, msg)
	}
	allNodes, err := pl.fh.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	candidates, statuses, err := pl.findCandidates(ctx, state, pod, allNodes, m)
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	if len(candidates) == 0 {
		// Clear a nomination the pod may have: no node can take it.
		return framework.NewPostFilterResultWithNominatedNode(""),
			framework.NewStatus(framework.Unschedulable, framework.FitMessage(len(allNodes), statuses, nil))
	}
	best := pickOneNodeForPreemption(candidates)
	if st := pl.prepareCandidate(ctx, best, pod); !st.IsSuccess() {
		return nil, st
	}
	return framework.NewPostFilterResultWithNominatedNode(best.Name), nil
}

// eligible is upstream's PodEligibleToPreemptOthers: not with preemptionPolicy
// Never, and not while a lower-priority pod preempted for it still terminates
// on its nominated node (unless the filters now reject that node for good).
func (pl *DefaultPreemption) eligible(pod *corev1.Pod, nominatedStatus *framework.Status) (bool, string) {
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == corev1.PreemptNever {
		return false, ReasonNotEligibleNever
	}
	nominated := pod.Status.NominatedNodeName
	if nominated == "" || nominatedStatus.Code() == framework.UnschedulableAndUnresolvable {
		return true, ""
	}
	ni, err := pl.fh.SnapshotSharedLister().NodeInfos().Get(nominated)
	if err != nil || ni == nil {
		return true, ""
	}
	prio := podPriority(pod)
	for _, pi := range ni.Pods {
		if podPriority(pi.Pod) < prio && terminatingByPreemption(pi.Pod) {
			return false, ReasonNotEligibleTerminating
		}
	}
	return true, ""
}

// terminatingByPreemption reports whether the pod is being deleted after the
// scheduler preempted it.
func terminatingByPreemption(p *corev1.Pod) bool {
	if p.DeletionTimestamp == nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			return c.Status == corev1.ConditionTrue && c.Reason == corev1.PodReasonPreemptionByScheduler
		}
	}
	return false
}

// numCandidates is how many candidates the dry run looks for.
func (pl *DefaultPreemption) numCandidates(numNodes int) int {
	n := numNodes * int(pl.percentage) / 100
	return min(max(n, int(pl.absolute)), numNodes)
}

// findCandidates dry-runs preemption on the nodes where it may help, in
// parallel from a random offset, until enough candidates are found. It returns
// them with the status of every node that is not one.
func (pl *DefaultPreemption) findCandidates(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, allNodes []*framework.NodeInfo, m framework.NodeToStatus) ([]*Candidate, framework.NodeToStatus, error) {
	statuses := framework.NodeToStatus{}
	var potential []*framework.NodeInfo
	for _, ni := range allNodes {
		name := ni.Node().Name
		if m[name].Code() == framework.UnschedulableAndUnresolvable {
			statuses[name] = framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrNotHelpful)
			continue
		}
		potential = append(potential, ni)
	}
	if len(potential) == 0 {
		return nil, statuses, nil
	}
	offset, want := pl.offset(len(potential)), pl.numCandidates(len(potential))

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu         sync.Mutex
		candidates []*Candidate
		errs       []error
	)
	check := func(i int) {
		ni := potential[(offset+i)%len(potential)].Clone()
		name := ni.Node().Name
		victims, st := selectVictimsOnNode(runCtx, pl.fh, state.Clone(), pod, ni)
		if st.IsSuccess() && len(victims) == 0 {
			st = framework.AsStatus(fmt.Errorf("expected at least one victim pod on node %q", name))
		}
		mu.Lock()
		defer mu.Unlock()
		if st.IsSuccess() {
			candidates = append(candidates, &Candidate{Name: name, Victims: victims})
			if len(candidates) >= want {
				cancel()
			}
			return
		}
		if st.Code() == framework.Error {
			errs = append(errs, st.AsError())
		}
		statuses[name] = st
	}
	workqueue.ParallelizeUntil(runCtx, max(1, pl.fh.Parallelism()), len(potential), check)
	if len(errs) > 0 {
		return nil, nil, fmt.Errorf("dry run preemption: %w", errors.Join(errs...))
	}
	return candidates, statuses, nil
}

// prepareCandidate evicts the victims — rejecting those waiting on Permit
// plugins, marking the others with a DisruptionTarget condition and deleting
// them — records a Preempted event on each, and clears the nominations of the
// lower-priority pods nominated for the node, which may no longer fit there.
func (pl *DefaultPreemption) prepareCandidate(ctx context.Context, c *Candidate, pod *corev1.Pod) *framework.Status {
	cs := pl.fh.ClientSet()
	var (
		mu   sync.Mutex
		errs []error
	)
	workqueue.ParallelizeUntil(ctx, max(1, pl.fh.Parallelism()), len(c.Victims), func(i int) {
		victim := c.Victims[i]
		if wp := pl.fh.GetWaitingPod(victim.UID); wp != nil {
			wp.Reject(Name, "preempted")
		} else if err := evict(ctx, cs, victim, pod); err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
			return
		}
		pl.fh.EventRecorder().Eventf(victim, pod, corev1.EventTypeNormal, "Preempted", "Preempting", "Preempted by pod %v on node %v", pod.UID, c.Name)
	})
	if len(errs) > 0 {
		return framework.AsStatus(errors.Join(errs...))
	}
	prio := podPriority(pod)
	for _, np := range pl.fh.NominatedPodsForNode(c.Name) {
		if podPriority(np) >= prio || np.UID == pod.UID {
			continue
		}
		// Not critical, as upstream: the pod is retried anyway.
		_ = patchStatus(ctx, cs, np, func(s *corev1.PodStatus) { s.NominatedNodeName = "" })
	}
	return nil
}

// evict sets the DisruptionTarget condition on the victim, then deletes it
// (a victim already gone is fine).
func evict(ctx context.Context, cs kubernetes.Interface, victim, preemptor *corev1.Pod) error {
	cond := corev1.PodCondition{
		Type:               corev1.DisruptionTarget,
		Status:             corev1.ConditionTrue,
		Reason:             corev1.PodReasonPreemptionByScheduler,
		Message:            fmt.Sprintf("%s: preempting to accommodate a higher priority pod", preemptor.Spec.SchedulerName),
		LastTransitionTime: metav1.Now(),
	}
	err := patchStatus(ctx, cs, victim, func(s *corev1.PodStatus) { setCondition(s, cond) })
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("preempt %s/%s: %w", victim.Namespace, victim.Name, err)
	}
	uid := victim.UID
	err = cs.CoreV1().Pods(victim.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete victim %s/%s: %w", victim.Namespace, victim.Name, err)
	}
	return nil
}

// setCondition replaces the condition of the same type (keeping its transition
// time when its status is unchanged) or appends it.
func setCondition(s *corev1.PodStatus, cond corev1.PodCondition) {
	for i := range s.Conditions {
		if s.Conditions[i].Type != cond.Type {
			continue
		}
		if s.Conditions[i].Status == cond.Status {
			cond.LastTransitionTime = s.Conditions[i].LastTransitionTime
		}
		s.Conditions[i] = cond
		return
	}
	s.Conditions = append(s.Conditions, cond)
}

// patchStatus changes the pod's status with a strategic merge patch of the difference.
func patchStatus(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, change func(*corev1.PodStatus)) error {
	newStatus := pod.Status.DeepCopy()
	change(newStatus)
	oldData, err := json.Marshal(corev1.Pod{Status: pod.Status})
	if err != nil {
		return fmt.Errorf("marshal pod status: %w", err)
	}
	newData, err := json.Marshal(corev1.Pod{Status: *newStatus})
	if err != nil {
		return fmt.Errorf("marshal pod status: %w", err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, &corev1.Pod{})
	if err != nil {
		return fmt.Errorf("status patch for pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if string(patch) == "{}" {
		return nil
	}
	_, err = cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}
