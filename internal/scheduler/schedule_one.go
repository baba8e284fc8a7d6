package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/util/retry"

	"github.com/kubette/kubette/internal/scheduler/framework"
	"github.com/kubette/kubette/internal/scheduler/queue"
)

// As upstream: at least this many nodes, and this percentage of them, are
// searched for feasibility in each cycle.
const (
	minFeasibleNodesToFind           = 100
	minFeasibleNodesPercentageToFind = 5
)

// noteLengthLimit is the longest event note the API accepts.
const noteLengthLimit = 1024

// scheduleResult is the outcome of a successful scheduling algorithm run.
type scheduleResult struct {
	host           string
	evaluatedNodes int
	feasibleNodes  int
}

// scheduleOne pops one pod and runs its scheduling cycle; on success it assumes
// the pod and starts its binding cycle on another goroutine.
func (s *Scheduler) scheduleOne(ctx context.Context) {
	pInfo, err := s.queue.Pop(ctx)
	if err != nil {
		return
	}
	cycle := s.queue.SchedulingCycle()
	pod := pInfo.Pod
	if s.skipPodSchedule(pod) {
		return
	}
	state := framework.NewCycleState()
	result, err := s.schedulePod(ctx, state, pod)
	if err != nil {
		var nominating *framework.NominatingInfo
		var fitErr *FitError
		if errors.As(err, &fitErr) && s.profile.hasPostFilterPlugins() {
			res, st := s.profile.runPostFilter(ctx, state, pod, s.postFilterStatuses(fitErr))
			fitErr.Diagnosis.PostFilterMsg = st.Message()
			if st.Code() == framework.Error {
				s.logger.Error("PostFilter failed", "pod", podRef(pod), "err", st.AsError())
			}
			if res != nil {
				nominating = res.NominatingInfo
			}
		}
		s.handleSchedulingFailure(ctx, pInfo, err, isRejection(err), cycle, nominating)
		return
	}

	// Assume, Reserve and Permit: a failure undoes what came before and retries
	// the pod with its nomination cleared, as upstream.
	// The assumed pod is the informer's with the node name set: a copy of the Pod
	// struct only, sharing its maps and slices, which nothing here writes (the
	// informer's objects are never mutated, and neither are assumed pods). Upstream
	// deep-copies; the copy was ~2 KB per bound pod.
	shallow := *pod
	assumed := &shallow
	assumed.Spec.NodeName = result.host
	if err := s.cache.AssumePod(assumed); err != nil {
		s.handleSchedulingFailure(ctx, pInfo, fmt.Errorf("assume pod: %w", err), false, cycle, clearNominatedNode())
		return
	}
	s.queue.DeleteNominatedPodIfExists(pod)
	if st := s.profile.runReserve(ctx, state, assumed, result.host); !st.IsSuccess() {
		s.undoAssume(ctx, state, assumed, result.host, false)
		s.handleSchedulingFailure(ctx, pInfo, statusError(st, pod, result.host), st.IsRejected(), cycle, clearNominatedNode())
		return
	}
	if st := s.profile.runPermit(ctx, state, assumed, result.host); !st.IsSuccess() && !st.IsWait() {
		s.undoAssume(ctx, state, assumed, result.host, false)
		s.handleSchedulingFailure(ctx, pInfo, statusError(st, pod, result.host), st.IsRejected(), cycle, clearNominatedNode())
		return
	}
	select {
	case s.bindSlots <- struct{}{}:
	case <-ctx.Done():
		s.profile.waitingPods.Remove(assumed.UID)
		s.undoAssume(ctx, state, assumed, result.host, false)
		return
	}
	s.startBind(ctx, func() { s.bindingCycle(ctx, state, pInfo, assumed, result) })
}

// clearNominatedNode clears a pod's nomination when its attempt fails after
// the scheduling algorithm found it a node.
func clearNominatedNode() *framework.NominatingInfo {
	return &framework.NominatingInfo{NominatingMode: framework.ModeOverride}
}

// undoAssume runs Unreserve and forgets the assumed pod; moved says whether to
// tell the queue that its room is free again (it was counted during a bind).
func (s *Scheduler) undoAssume(ctx context.Context, state *framework.CycleState, assumed *corev1.Pod, host string, moved bool) {
	s.profile.runUnreserve(ctx, state, assumed, host)
	if err := s.cache.ForgetPod(assumed); err != nil {
		s.logger.Error("forget assumed pod", "pod", podRef(assumed), "err", err)
		return
	}
	if moved {
		// Forgetting an assumed pod frees room, like the deletion of a bound pod.
		s.queue.MoveAllToActiveOrBackoffQueue(queue.EventAssignedPodDelete, func(p *corev1.Pod) bool { return p.UID != assumed.UID })
	}
}

// statusError turns a failure after the scheduling algorithm into the error
// handleSchedulingFailure reports: a rejection becomes a FitError on the one
// node, as upstream.
func statusError(st *framework.Status, pod *corev1.Pod, host string) error {
	if st.IsRejected() {
		fitErr := &FitError{Pod: pod, NumAllNodes: 1, Diagnosis: Diagnosis{NodeToStatus: framework.NodeToStatus{host: st}}}
		fitErr.Diagnosis.addPluginStatus(st)
		return fitErr
	}
	if err := st.AsError(); err != nil {
		return err
	}
	return errors.New(st.Message())
}

func isRejection(err error) bool {
	var fitErr *FitError
	return errors.As(err, &fitErr) || errors.Is(err, ErrNoNodesAvailable)
}

// postFilterStatuses gives PostFilter plugins the status of every node.
func (s *Scheduler) postFilterStatuses(f *FitError) framework.NodeToStatus {
	if f.Diagnosis.AbsentNodesStatus == nil {
		return f.Diagnosis.NodeToStatus
	}
	out := make(framework.NodeToStatus, f.NumAllNodes)
	nodes, _ := s.snapshot.List()
	for _, ni := range nodes {
		out[ni.Node().Name] = f.Diagnosis.AbsentNodesStatus
	}
	for n, st := range f.Diagnosis.NodeToStatus {
		out[n] = st
	}
	return out
}

// skipPodSchedule reports whether a popped pod needs no cycle: it is being
// deleted, or it is assumed already (an update re-queued it during its last cycle).
func (s *Scheduler) skipPodSchedule(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		s.recorder.Eventf(pod, nil, corev1.EventTypeWarning, "FailedScheduling", "Scheduling", "skip schedule deleting pod: %v/%v", pod.Namespace, pod.Name)
		return true
	}
	return s.cache.IsAssumedPod(pod)
}

// schedulePod refreshes the snapshot and finds the best node for the pod, or
// returns a *FitError saying why none fits.
func (s *Scheduler) schedulePod(ctx context.Context, state *framework.CycleState, pod *corev1.Pod) (scheduleResult, error) {
	if err := s.cache.UpdateSnapshot(s.snapshot); err != nil {
		return scheduleResult{}, fmt.Errorf("update snapshot: %w", err)
	}
	if s.snapshot.NumNodes() == 0 {
		return scheduleResult{}, ErrNoNodesAvailable
	}
	feasible, diagnosis, err := s.findNodesThatFitPod(ctx, state, pod)
	if err != nil {
		return scheduleResult{}, err
	}
	if len(feasible) == 0 {
		return scheduleResult{}, &FitError{Pod: pod, NumAllNodes: s.snapshot.NumNodes(), Diagnosis: diagnosis}
	}
	evaluated := len(feasible) + len(diagnosis.NodeToStatus)
	if len(feasible) == 1 {
		return scheduleResult{host: feasible[0].Node().Name, evaluatedNodes: evaluated, feasibleNodes: 1}, nil
	}
	scores, err := s.prioritizeNodes(ctx, state, pod, feasible)
	if err != nil {
		return scheduleResult{}, err
	}
	return scheduleResult{host: s.selectHost(scores), evaluatedNodes: evaluated, feasibleNodes: len(feasible)}, nil
}

// findNodesThatFitPod runs PreFilter, then Filter on the snapshot's nodes.
func (s *Scheduler) findNodesThatFitPod(ctx context.Context, state *framework.CycleState, pod *corev1.Pod) ([]*framework.NodeInfo, Diagnosis, error) {
	diagnosis := Diagnosis{NodeToStatus: framework.NodeToStatus{}}
	allNodes, err := s.snapshot.List()
	if err != nil {
		return nil, diagnosis, err
	}
	if st := s.profile.runPreFilter(ctx, state, pod); !st.IsSuccess() {
		if !st.IsRejected() {
			return nil, diagnosis, st.AsError()
		}
		diagnosis.AbsentNodesStatus = st
		diagnosis.PreFilterMsg = st.Message()
		diagnosis.addPluginStatus(st)
		return nil, diagnosis, nil
	}
	// A node nominated in an earlier cycle (after preemption) is likely the
	// only one that fits: try it alone first, as upstream.
	if nominated := pod.Status.NominatedNodeName; nominated != "" {
		if ni, err := s.snapshot.Get(nominated); err == nil {
			st := s.profile.runFilterWithNominatedPods(ctx, state, pod, ni)
			if st.IsSuccess() {
				return []*framework.NodeInfo{ni}, diagnosis, nil
			}
			if st.Code() == framework.Error {
				s.logger.Error("evaluate nominated node", "pod", podRef(pod), "node", nominated, "err", st.AsError())
			}
		}
	}
	feasible, err := s.findNodesThatPassFilters(ctx, state, pod, &diagnosis, allNodes)
	// Move the start on even after an error, so that every node gets its turn.
	processed := len(feasible) + len(diagnosis.NodeToStatus)
	s.nextStartNodeIndex = (s.nextStartNodeIndex + processed) % len(allNodes)
	if err != nil {
		return nil, diagnosis, err
	}
	return feasible, diagnosis, nil
}

// findNodesThatPassFilters filters the nodes in parallel, in rotation order from
// nextStartNodeIndex, until numFeasibleNodesToFind nodes fit. Workers take chunks
// of consecutive nodes and count what fits once per chunk (a shared counter
// bumped per node costs more than the filters on two cores); the result is the
// first numToFind feasible nodes in rotation order and the rejections before the
// last of them, so that the next cycle starts right after it.
func (s *Scheduler) findNodesThatPassFilters(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, diagnosis *Diagnosis, nodes []*framework.NodeInfo) ([]*framework.NodeInfo, error) {
	numAll := len(nodes)
	numToFind := int(s.numFeasibleNodesToFind(int32(numAll)))
	if !s.profile.hasScorePlugins() {
		numToFind = 1
	}
	start := s.nextStartNodeIndex
	if !s.profile.hasFilterPlugins() {
		feasible := make([]*framework.NodeInfo, numToFind)
		for i := range feasible {
			feasible[i] = nodes[(start+i)%numAll]
		}
		return feasible, nil
	}
	// Per offset from start: nil and false until examined.
	if cap(s.filterStatuses) < numAll {
		s.filterStatuses, s.filterPassed = make([]*framework.Status, numAll), make([]bool, numAll)
	}
	statuses, passed := s.filterStatuses[:numAll], s.filterPassed[:numAll]
	clear(statuses)
	clear(passed)

	filters := s.profile.activeFilters(state)
	// Nominated pods are looked up per node only when some pod is nominated
	// (asked once per cycle: nominations are made by this goroutine's PostFilter
	// or arrive with pod updates, and a cycle sees the queue as it was at its start).
	withNominated := s.profile.nominator != nil && s.profile.nominator.HasNominatedPods()
	p := s.profile.parallelism
	chunk := max(1, min(int(math.Sqrt(float64(numAll))), numToFind/(2*p)))
	var (
		found    atomic.Int64
		errOnce  sync.Once
		firstErr error
	)
	handedOut := runChunks(ctx, p, numAll, chunk, func(lo, hi int) bool {
		fit := 0
		for i := lo; i < hi; i++ {
			var st *framework.Status
			if ni := nodes[(start+i)%numAll]; withNominated {
				st = s.profile.filterWithNominatedPods(ctx, state, pod, ni, filters)
			} else {
				st = s.profile.runFilterPlugins(ctx, state, pod, ni, filters)
			}
			switch {
			case st.IsSuccess():
				passed[i] = true
				fit++
			case st.Code() == framework.Error:
				errOnce.Do(func() { firstErr = st.AsError() })
				return false
			default:
				statuses[i] = st
			}
		}
		return found.Add(int64(fit)) < int64(numToFind)
	})

	// Every chunk handed out was examined whole (unless an error stopped it).
	examined := handedOut
	feasible := s.feasible[:0]
	cut := examined
	for i := 0; i < examined; i++ {
		if passed[i] {
			feasible = append(feasible, nodes[(start+i)%numAll])
			if len(feasible) == numToFind {
				cut = i + 1
				break
			}
		}
	}
	s.feasible = feasible
	for i := 0; i < cut; i++ {
		if st := statuses[i]; st != nil {
			diagnosis.NodeToStatus[nodes[(start+i)%numAll].NodeName()] = st
			diagnosis.addPluginStatus(st)
		}
	}
	if firstErr != nil {
		return feasible, firstErr
	}
	if err := ctx.Err(); err != nil {
		return feasible, fmt.Errorf("filter: %w", err)
	}
	return feasible, nil
}

// numFeasibleNodesToFind returns how many feasible nodes end the search, as upstream.
func (s *Scheduler) numFeasibleNodesToFind(numAllNodes int32) int32 {
	if numAllNodes < minFeasibleNodesToFind {
		return numAllNodes
	}
	percentage := s.percentage
	if percentage == 0 {
		percentage = max(int32(50)-numAllNodes/125, minFeasibleNodesPercentageToFind)
	}
	return max(numAllNodes*percentage/100, minFeasibleNodesToFind)
}

// prioritizeNodes runs PreScore and Score; without Score plugins every node scores 1.
func (s *Scheduler) prioritizeNodes(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, nodes []*framework.NodeInfo) ([]framework.NodeScore, error) {
	if !s.profile.hasScorePlugins() {
		out := make([]framework.NodeScore, len(nodes))
		for i, ni := range nodes {
			out[i] = framework.NodeScore{Name: ni.NodeName(), Score: 1}
		}
		return out, nil
	}
	if st := s.profile.runPreScore(ctx, state, pod, nodes); !st.IsSuccess() {
		return nil, st.AsError()
	}
	scores, st := s.profile.runScore(ctx, state, pod, nodes)
	if !st.IsSuccess() {
		return nil, st.AsError()
	}
	return scores, nil
}

// selectHost returns the node with the highest total score; ties are broken
// uniformly at random by reservoir sampling.
func (s *Scheduler) selectHost(scores []framework.NodeScore) string {
	best := scores[0]
	ties := 1
	for _, ns := range scores[1:] {
		switch {
		case ns.Score > best.Score:
			best, ties = ns, 1
		case ns.Score == best.Score:
			ties++
			if s.rand.IntN(ties) == 0 {
				best = ns
			}
		}
	}
	return best.Name
}

// bindingCycle waits for the Permit plugins, runs PreBind, binds the assumed
// pod with the Bind plugins, runs PostBind and reports the result.
func (s *Scheduler) bindingCycle(ctx context.Context, state *framework.CycleState, pInfo *queue.QueuedPodInfo, assumed *corev1.Pod, result scheduleResult) {
	st := s.profile.waitOnPermit(ctx, assumed)
	if st.IsSuccess() {
		st = s.profile.runPreBind(ctx, state, assumed, result.host)
	}
	if st.IsSuccess() {
		st = s.profile.runBind(ctx, state, assumed, result.host)
		if err := s.cache.FinishBinding(assumed); err != nil {
			s.logger.Error("finish binding", "pod", podRef(assumed), "err", err)
		}
	}
	if !st.IsSuccess() {
		s.handleBindingCycleError(ctx, state, pInfo, assumed, result.host, st)
		return
	}
	s.logger.Debug("bound pod", "pod", podRef(assumed), "node", result.host,
		"evaluatedNodes", result.evaluatedNodes, "feasibleNodes", result.feasibleNodes)
	s.recorder.Eventf(assumed, nil, corev1.EventTypeNormal, "Scheduled", "Binding", "Successfully assigned %v/%v to %v", assumed.Namespace, assumed.Name, result.host)
	s.profile.runPostBind(ctx, state, assumed, result.host)
}

// handleBindingCycleError runs Unreserve, frees the assumed pod's capacity,
// tells the queue (the freed room may fit other pods) and retries the pod after
// a backoff with its nomination cleared.
func (s *Scheduler) handleBindingCycleError(ctx context.Context, state *framework.CycleState, pInfo *queue.QueuedPodInfo, assumed *corev1.Pod, host string, st *framework.Status) {
	s.undoAssume(ctx, state, assumed, host, true)
	s.handleSchedulingFailure(ctx, pInfo, statusError(st, pInfo.Pod, host), st.IsRejected(), s.queue.SchedulingCycle(), clearNominatedNode())
}

// handleSchedulingFailure puts the pod back in the queue (unless it is gone or
// bound meanwhile) with the nomination the attempt made, records a
// FailedScheduling event and sets the pod's PodScheduled condition to False
// with the reason and message — and its status.nominatedNodeName when
// nominating overrides it — in one status patch.
func (s *Scheduler) handleSchedulingFailure(ctx context.Context, pInfo *queue.QueuedPodInfo, err error, rejected bool, cycle int64, nominating *framework.NominatingInfo) {
	pod := pInfo.Pod
	reason := corev1.PodReasonSchedulerError
	if rejected {
		reason = corev1.PodReasonUnschedulable
	}
	var fitErr *FitError
	pInfo.UnschedulablePlugins = sets.New[string]()
	switch {
	case errors.Is(err, ErrNoNodesAvailable):
		s.logger.Info("unable to schedule pod: no nodes are registered; waiting", "pod", podRef(pod))
	case errors.As(err, &fitErr):
		pInfo.UnschedulablePlugins = fitErr.Diagnosis.UnschedulablePlugins.Clone()
		if pInfo.UnschedulablePlugins == nil {
			pInfo.UnschedulablePlugins = sets.New[string]()
		}
		s.logger.Debug("unable to schedule pod: no fit; waiting", "pod", podRef(pod), "err", err)
	default:
		s.logger.Error("error scheduling pod; retrying", "pod", podRef(pod), "err", err)
	}

	cached, getErr := s.podLister.Pods(pod.Namespace).Get(pod.Name)
	switch {
	case getErr != nil:
		s.logger.Debug("pod is gone from the informer: not requeued", "pod", podRef(pod))
	case cached.UID != pod.UID:
		s.logger.Debug("pod was recreated: not requeued", "pod", podRef(pod))
	case cached.Spec.NodeName != "":
		s.logger.Debug("pod is bound already: not requeued", "pod", podRef(pod), "node", cached.Spec.NodeName)
	default:
		pInfo.Pod = cached
		if err := s.queue.AddUnschedulableIfNotPresent(pInfo, cycle); err != nil {
			s.logger.Debug("requeue pod", "pod", podRef(pod), "err", err)
		}
		s.queue.AddNominatedPod(cached, nominating)
	}

	msg := err.Error()
	note := msg
	if len(note) > noteLengthLimit {
		note = note[:noteLengthLimit-len(" ...")] + " ..."
	}
	s.recorder.Eventf(pod, nil, corev1.EventTypeWarning, "FailedScheduling", "Scheduling", "%s", note)
	cond := &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: pod.Generation}
	if err := s.updatePodStatus(ctx, pod, cond, nominating); err != nil && !apierrors.IsNotFound(err) {
		s.logger.Error("update pod condition", "pod", podRef(pod), "err", err)
	}
}

// updatePodStatus sets a condition on the pod's status, and the nominated node
// when nominating overrides a different one, with a strategic merge patch —
// unless nothing changes (the same condition, the same nomination).
func (s *Scheduler) updatePodStatus(ctx context.Context, pod *corev1.Pod, cond *corev1.PodCondition, nominating *framework.NominatingInfo) error {
	newStatus := pod.Status.DeepCopy()
	nominate := nominating.Mode() == framework.ModeOverride && pod.Status.NominatedNodeName != nominating.NominatedNodeName
	if !setPodCondition(newStatus, cond, metav1.NewTime(s.clock.Now())) && !nominate {
		return nil
	}
	if nominate {
		newStatus.NominatedNodeName = nominating.NominatedNodeName
	}
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
		return fmt.Errorf("create status patch for pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if string(patch) == "{}" {
		return nil
	}
	retriable := func(err error) bool {
		return apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) ||
			apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err)
	}
	return retry.OnError(retry.DefaultBackoff, retriable, func() error {
		_, err := s.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		if err != nil {
			return fmt.Errorf("patch status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		return nil
	})
}

// setPodCondition sets cond in status as upstream's UpdatePodCondition: the
// transition time changes only with the status; it reports whether anything changed.
func setPodCondition(status *corev1.PodStatus, cond *corev1.PodCondition, now metav1.Time) bool {
	cond.LastTransitionTime = now
	for i := range status.Conditions {
		old := &status.Conditions[i]
		if old.Type != cond.Type {
			continue
		}
		if old.Status == cond.Status {
			cond.LastTransitionTime = old.LastTransitionTime
		}
		same := old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message &&
			old.LastProbeTime.Equal(&cond.LastProbeTime) && old.LastTransitionTime.Equal(&cond.LastTransitionTime) &&
			old.ObservedGeneration == cond.ObservedGeneration
		*old = *cond
		return !same
	}
	status.Conditions = append(status.Conditions, *cond)
	return true
}

// podRef names a pod in logs as namespace/name.
func podRef(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }
