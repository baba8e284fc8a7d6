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
		var fitErr *FitError
		if errors.As(err, &fitErr) && s.profile.hasPostFilterPlugins() {
			nominated, st := s.profile.runPostFilter(ctx, state, pod, s.postFilterStatuses(fitErr))
			fitErr.Diagnosis.PostFilterMsg = st.Message()
			if st.Code() == framework.Error {
				s.logger.Error("PostFilter failed", "pod", podRef(pod), "err", st.AsError())
			} else if nominated != "" {
				s.logger.Debug("PostFilter nominated a node; nomination is not implemented", "pod", podRef(pod), "node", nominated)
			}
		}
		s.handleSchedulingFailure(ctx, pInfo, err, isRejection(err), cycle)
		return
	}

	assumed := pod.DeepCopy()
	assumed.Spec.NodeName = result.host
	if err := s.cache.AssumePod(assumed); err != nil {
		s.handleSchedulingFailure(ctx, pInfo, fmt.Errorf("assume pod: %w", err), false, cycle)
		return
	}
	select {
	case s.bindSlots <- struct{}{}:
	case <-ctx.Done():
		if err := s.cache.ForgetPod(assumed); err != nil {
			s.logger.Error("forget assumed pod", "pod", podRef(pod), "err", err)
		}
		return
	}
	s.binds.Add(1)
	go func() {
		defer s.binds.Done()
		defer func() { <-s.bindSlots }()
		s.bindingCycle(ctx, state, pInfo, assumed, result)
	}()
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

	p := s.profile.parallelism
	chunk := max(1, min(int(math.Sqrt(float64(numAll))), numToFind/(2*p)))
	workers := min(p, (numAll+chunk-1)/chunk)
	var (
		next, found atomic.Int64
		stop        atomic.Bool
		errOnce     sync.Once
		firstErr    error
		wg          sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for !stop.Load() && ctx.Err() == nil {
				lo := int(next.Add(int64(chunk))) - chunk
				if lo >= numAll {
					return
				}
				fit := 0
				for i := lo; i < min(lo+chunk, numAll); i++ {
					st := s.profile.runFilter(ctx, state, pod, nodes[(start+i)%numAll])
					switch {
					case st.IsSuccess():
						passed[i] = true
						fit++
					case st.Code() == framework.Error:
						errOnce.Do(func() { firstErr = st.AsError() })
						stop.Store(true)
						return
					default:
						statuses[i] = st
					}
				}
				if found.Add(int64(fit)) >= int64(numToFind) {
					stop.Store(true)
				}
			}
		})
	}
	wg.Wait()

	// Every chunk handed out was examined whole (unless an error stopped it).
	examined := min(int(next.Load()), numAll)
	feasible := make([]*framework.NodeInfo, 0, min(numToFind, examined))
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
	for i := 0; i < cut; i++ {
		if st := statuses[i]; st != nil {
			diagnosis.NodeToStatus[nodes[(start+i)%numAll].Node().Name] = st
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
			out[i] = framework.NodeScore{Name: ni.Node().Name, Score: 1}
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

// bindingCycle binds the assumed pod with the Bind plugins and reports the result.
func (s *Scheduler) bindingCycle(ctx context.Context, state *framework.CycleState, pInfo *queue.QueuedPodInfo, assumed *corev1.Pod, result scheduleResult) {
	st := s.profile.runBind(ctx, state, assumed, result.host)
	if err := s.cache.FinishBinding(assumed); err != nil {
		s.logger.Error("finish binding", "pod", podRef(assumed), "err", err)
	}
	if !st.IsSuccess() {
		s.handleBindingCycleError(ctx, pInfo, assumed, st)
		return
	}
	s.logger.Debug("bound pod", "pod", podRef(assumed), "node", result.host,
		"evaluatedNodes", result.evaluatedNodes, "feasibleNodes", result.feasibleNodes)
	s.recorder.Eventf(assumed, nil, corev1.EventTypeNormal, "Scheduled", "Binding", "Successfully assigned %v/%v to %v", assumed.Namespace, assumed.Name, result.host)
}

// handleBindingCycleError frees the assumed pod's capacity, tells the queue (the
// freed room may fit other pods) and retries the pod after a backoff.
func (s *Scheduler) handleBindingCycleError(ctx context.Context, pInfo *queue.QueuedPodInfo, assumed *corev1.Pod, st *framework.Status) {
	if err := s.cache.ForgetPod(assumed); err != nil {
		s.logger.Error("forget assumed pod", "pod", podRef(assumed), "err", err)
	} else {
		s.queue.MoveAllToActiveOrBackoffQueue(queue.EventAssignedPodDelete, func(p *corev1.Pod) bool { return p.UID != assumed.UID })
	}
	err := st.AsError()
	if err == nil {
		err = errors.New(st.Message())
	}
	s.handleSchedulingFailure(ctx, pInfo, err, st.IsRejected(), s.queue.SchedulingCycle())
}

// handleSchedulingFailure puts the pod back in the queue (unless it is gone or
// bound meanwhile), records a FailedScheduling event and sets the pod's
// PodScheduled condition to False with the reason and message.
func (s *Scheduler) handleSchedulingFailure(ctx context.Context, pInfo *queue.QueuedPodInfo, err error, rejected bool, cycle int64) {
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
	}

	msg := err.Error()
	note := msg
	if len(note) > noteLengthLimit {
		note = note[:noteLengthLimit-len(" ...")] + " ..."
	}
	s.recorder.Eventf(pod, nil, corev1.EventTypeWarning, "FailedScheduling", "Scheduling", "%s", note)
	cond := &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: pod.Generation}
	if err := s.updatePodCondition(ctx, pod, cond); err != nil && !apierrors.IsNotFound(err) {
		s.logger.Error("update pod condition", "pod", podRef(pod), "err", err)
	}
}

// updatePodCondition sets a condition on the pod's status with a strategic merge
// patch, unless the pod has it already (same status, reason and message).
func (s *Scheduler) updatePodCondition(ctx context.Context, pod *corev1.Pod, cond *corev1.PodCondition) error {
	newStatus := pod.Status.DeepCopy()
	if !setPodCondition(newStatus, cond, metav1.NewTime(s.clock.Now())) {
		return nil
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
