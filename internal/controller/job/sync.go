package job

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"

	"github.com/kubette/kubette/internal/controller/ownerref"
	"github.com/kubette/kubette/internal/controller/podstate"
)

// Condition reasons and messages, as upstream's.
const (
	reasonBackoffLimitExceeded     = "BackoffLimitExceeded"
	reasonDeadlineExceeded         = "DeadlineExceeded"
	reasonPodFailurePolicy         = "PodFailurePolicy"
	reasonMaxFailedIndexesExceeded = "MaxFailedIndexesExceeded"
	reasonFailedIndexes            = "FailedIndexes"
	reasonCompletionsReached       = "CompletionsReached"
	reasonSuccessPolicy            = "SuccessPolicy"
	reasonSuspended                = "JobSuspended"
	reasonResumed                  = "JobResumed"

	msgBackoffLimitExceeded     = "Job has reached the specified backoff limit"
	msgDeadlineExceeded         = "Job was active longer than specified deadline"
	msgMaxFailedIndexesExceeded = "Job has exceeded the specified maximal number of failed indexes"
	msgFailedIndexes            = "Job has failed indexes"
	msgCompletionsReached       = "Reached expected number of succeeded pods"
)

// maxPodCreateDeletePerSync bounds the pods one sync creates or deletes.
const maxPodCreateDeletePerSync = 500

// podIndexFailureCountAnnotation counts the earlier failures of a pod's index.
const podIndexFailureCountAnnotation = "batch.kubernetes.io/job-index-failure-count"

// syncState is what one sync of one Job works from.
type syncState struct {
	key         string
	job         *batchv1.Job
	pods        []*corev1.Pod
	now         time.Time
	uncountedS  sets.Set[types.UID]
	uncountedF  sets.Set[types.UID]
	completed   sets.Set[int] // Indexed: succeeded indexes
	failedIdx   sets.Set[int] // backoffLimitPerIndex: failed indexes
	stripOnly   []*corev1.Pod // finalizers to remove without counting the pod
	failJobMsg  string        // a FailJob rule matched
	newFailures []time.Time   // finish times of newly counted failures
	newSuccess  []time.Time
}

// Sync brings the Job of key ("namespace/name") towards its desired state.
func (c *Controller) Sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("invalid key %q: %w", key, err)
	}
	allPods, err := c.podLister.Pods(namespace).List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list pods of %s: %w", namespace, err)
	}
	cached, err := c.jobLister.Jobs(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.expectations.DeleteExpectations(key)
		// The Job is gone: its pods must not stay behind their finalizer.
		return c.stripFinalizers(ctx, key, ownedByName(allPods, name, ""))
	}
	if err != nil {
		return fmt.Errorf("get Job %s: %w", key, err)
	}
	if cached.Spec.ManagedBy != nil && *cached.Spec.ManagedBy != controllerName {
		return nil
	}
	// Pods of an earlier Job of the same name.
	if err := c.stripFinalizers(ctx, key, ownedByName(allPods, name, cached.UID)); err != nil {
		return err
	}
	job := cached.DeepCopy()
	if finished(job) {
		return c.stripFinalizers(ctx, key, withFinalizer(ownedBy(allPods, job.UID)))
	}
	pods, claimErr := c.claimPods(ctx, job, allPods)
	st := &syncState{
		key: key, job: job, pods: pods, now: c.clock.Now(),
		uncountedS: sets.New[types.UID](), uncountedF: sets.New[types.UID](),
		completed: sets.New[int](), failedIdx: sets.New[int](),
	}
	if u := job.Status.UncountedTerminatedPods; u != nil {
		st.uncountedS.Insert(u.Succeeded...)
		st.uncountedF.Insert(u.Failed...)
	}
	if isIndexed(job) {
		st.completed = parseIndexes(job.Status.CompletedIndexes, completions(job))
		if job.Status.FailedIndexes != nil {
			st.failedIdx = parseIndexes(*job.Status.FailedIndexes, completions(job))
		}
	}
	c.countResolved(st)
	if isIndexed(job) {
		for _, p := range pods {
			if st.uncountedS.Has(p.UID) {
				if i, ok := podIndex(p, completions(job)); ok {
					st.completed.Insert(i)
				}
			}
		}
	}
	c.findNewlyFinished(st)
	c.updateBackoff(st)

	status := &job.Status
	status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{
		Succeeded: sortedUIDs(st.uncountedS), Failed: sortedUIDs(st.uncountedF),
	}
	if len(status.UncountedTerminatedPods.Succeeded)+len(status.UncountedTerminatedPods.Failed) == 0 {
		status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	}
	succeeded := status.Succeeded + int32(st.uncountedS.Len())
	failed := status.Failed + int32(st.uncountedF.Len())

	var active, terminating []*corev1.Pod
	for _, p := range pods {
		switch {
		case podstate.IsPodTerminal(p):
		case p.DeletionTimestamp != nil:
			terminating = append(terminating, p)
		default:
			active = append(active, p)
		}
	}
	satisfied := c.expectations.SatisfiedExpectations(key)
	suspended := job.Spec.Suspend != nil && *job.Spec.Suspend

	// The start time: when the Job first runs, or runs again after a suspension.
	if !suspended && status.StartTime == nil {
		t := metav1.NewTime(st.now)
		status.StartTime = &t
	}

	target := findCondition(status, batchv1.JobFailureTarget)
	successMet := findCondition(status, batchv1.JobSuccessCriteriaMet)
	if target == nil && successMet == nil {
		if reason, msg := c.failureReason(st, failed); reason != "" {
			setCondition(status, batchv1.JobFailureTarget, reason, msg, st.now)
		} else if reason, msg := successReason(st, succeeded, len(active)); reason != "" {
			setCondition(status, batchv1.JobSuccessCriteriaMet, reason, msg, st.now)
		}
		target = findCondition(status, batchv1.JobFailureTarget)
		successMet = findCondition(status, batchv1.JobSuccessCriteriaMet)
	}

	var manageErr error
	created, deleted := 0, 0
	switch {
	case target != nil || successMet != nil:
		// Finishing: no new pods; the remaining ones go, and once every pod is
		// terminal and counted the Job takes its terminal condition.
		if len(active) > 0 && satisfied {
			deleted, manageErr = c.deletePods(ctx, st, active, false)
		}
		if len(active) == 0 && len(terminating) == 0 && satisfied && st.uncountedS.Len()+st.uncountedF.Len() == 0 &&
			len(st.stripOnly) == 0 {
			if target != nil {
				setCondition(status, batchv1.JobFailed, target.Reason, target.Message, st.now)
				c.recorder.Event(job, corev1.EventTypeWarning, target.Reason, target.Message)
			} else {
				setCondition(status, batchv1.JobComplete, successMet.Reason, successMet.Message, st.now)
				t := metav1.NewTime(st.now)
				status.CompletionTime = &t
				c.recorder.Event(job, corev1.EventTypeNormal, "Completed", "Job completed")
			}
		}
	case suspended:
		if len(active) > 0 && satisfied {
			deleted, manageErr = c.deletePods(ctx, st, active, true)
		}
		if cond := findCondition(status, batchv1.JobSuspended); cond == nil {
			setCondition(status, batchv1.JobSuspended, reasonSuspended, "Job suspended", st.now)
			c.recorder.Event(job, corev1.EventTypeNormal, "Suspended", "Job suspended")
		}
	default:
		if cond := findCondition(status, batchv1.JobSuspended); cond != nil {
			setConditionStatus(status, batchv1.JobSuspended, corev1.ConditionFalse, reasonResumed, "Job resumed", st.now)
			t := metav1.NewTime(st.now)
			status.StartTime = &t
			c.recorder.Event(job, corev1.EventTypeNormal, "Resumed", "Job resumed")
		}
		if satisfied {
			created, deleted, manageErr = c.manage(ctx, st, active, terminating, succeeded)
		}
	}
	status.Active = int32(len(active) + created - deleted)
	ready := int32(0)
	for _, p := range active {
		if podstate.IsPodReady(p) {
			ready++
		}
	}
	status.Ready = &ready
	term := int32(len(terminating) + deleted)
	status.Terminating = &term
	if isIndexed(job) {
		status.CompletedIndexes = formatIndexes(st.completed)
		if job.Spec.BackoffLimitPerIndex != nil {
			f := formatIndexes(st.failedIdx)
			status.FailedIndexes = &f
		}
	}

	if !equality.Semantic.DeepEqual(cached.Status, job.Status) {
		if _, err := c.client.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
			return errors.Join(manageErr, claimErr, fmt.Errorf("update status of Job %s: %w", key, err))
		}
	}
	// The status holds the finished pods now: their finalizers may go.
	var strip []*corev1.Pod
	for _, p := range pods {
		if hasTrackingFinalizer(p) && (st.uncountedS.Has(p.UID) || st.uncountedF.Has(p.UID)) {
			strip = append(strip, p)
		}
	}
	strip = append(strip, st.stripOnly...)
	if err := c.stripFinalizers(ctx, key, strip); err != nil {
		return errors.Join(manageErr, claimErr, err)
	}
	if len(strip) > 0 {
		c.queue.Add(key) // count them
	}
	c.requeueForTime(st)
	return errors.Join(manageErr, claimErr)
}

// requeueForTime looks at the Job again when its deadline passes.
func (c *Controller) requeueForTime(st *syncState) {
	job := st.job
	if finished(job) || job.Spec.ActiveDeadlineSeconds == nil || job.Status.StartTime == nil {
		return
	}
	deadline := job.Status.StartTime.Add(time.Duration(*job.Spec.ActiveDeadlineSeconds) * time.Second)
	if d := deadline.Sub(st.now); d > 0 {
		c.queue.AddAfter(st.key, d)
	}
}

// countResolved moves the uncounted pods whose finalizer is gone into the counters.
func (c *Controller) countResolved(st *syncState) {
	byUID := make(map[types.UID]*corev1.Pod, len(st.pods))
	for _, p := range st.pods {
		byUID[p.UID] = p
	}
	resolved := func(uid types.UID) (*corev1.Pod, bool) {
		p, ok := byUID[uid]
		return p, !ok || !hasTrackingFinalizer(p) || c.finalizerRemovalPending(st.key, uid)
	}
	for uid := range st.uncountedS {
		if p, ok := resolved(uid); ok {
			st.uncountedS.Delete(uid)
			st.job.Status.Succeeded++
			if p != nil && isIndexed(st.job) {
				if i, ok := podIndex(p, completions(st.job)); ok {
					st.completed.Insert(i)
				}
			}
		}
	}
	for uid := range st.uncountedF {
		if _, ok := resolved(uid); ok {
			st.uncountedF.Delete(uid)
			st.job.Status.Failed++
		}
	}
}

// findNewlyFinished records the terminal pods that still hold their finalizer and
// are not yet in the status, applying the pod failure policy to failed ones.
func (c *Controller) findNewlyFinished(st *syncState) {
	job := st.job
	for _, p := range st.pods {
		if !hasTrackingFinalizer(p) || c.finalizerRemovalPending(st.key, p.UID) ||
			st.uncountedS.Has(p.UID) || st.uncountedF.Has(p.UID) {
			continue
		}
		switch {
		case p.Status.Phase == corev1.PodSucceeded:
			if isIndexed(job) {
				i, ok := podIndex(p, completions(job))
				if !ok || st.completed.Has(i) {
					st.stripOnly = append(st.stripOnly, p) // a duplicate or stray index
					continue
				}
				st.completed.Insert(i)
			}
			st.uncountedS.Insert(p.UID)
			st.newSuccess = append(st.newSuccess, finishTime(p, st.now))
		case isPodFailed(p, job):
			action, msg := matchPodFailurePolicy(job, p)
			switch action {
			case batchv1.PodFailurePolicyActionIgnore:
				st.stripOnly = append(st.stripOnly, p)
				continue
			case batchv1.PodFailurePolicyActionFailJob:
				if st.failJobMsg == "" {
					st.failJobMsg = msg
				}
			}
			if job.Spec.BackoffLimitPerIndex != nil {
				if i, ok := podIndex(p, completions(job)); ok {
					if action == batchv1.PodFailurePolicyActionFailIndex ||
						indexFailureCount(p)+1 > *job.Spec.BackoffLimitPerIndex {
						st.failedIdx.Insert(i)
					}
				}
			}
			st.uncountedF.Insert(p.UID)
			if action != batchv1.PodFailurePolicyActionFailJob {
				st.newFailures = append(st.newFailures, finishTime(p, st.now))
			}
		}
	}
}

// isPodFailed is upstream's notion of a failed pod: phase Failed, or (without a pod
// failure policy and unless only failed pods are replaced) deleted before it succeeded.
func isPodFailed(p *corev1.Pod, job *batchv1.Job) bool {
	if p.Status.Phase == corev1.PodFailed {
		return true
	}
	if job.Spec.PodFailurePolicy != nil || onlyReplaceFailed(job) {
		return false
	}
	return p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded
}

func onlyReplaceFailed(job *batchv1.Job) bool {
	return job.Spec.PodReplacementPolicy != nil && *job.Spec.PodReplacementPolicy == batchv1.Failed
}

// finishTime is when the pod's last container ended (or now, if none says).
func finishTime(p *corev1.Pod, now time.Time) time.Time {
	var t time.Time
	for _, s := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if s.State.Terminated != nil && s.State.Terminated.FinishedAt.After(t) {
			t = s.State.Terminated.FinishedAt.Time
		}
	}
	if t.IsZero() {
		return now
	}
	return t
}

// updateBackoff keeps the number of failures since the last success.
func (c *Controller) updateBackoff(st *syncState) {
	if len(st.newFailures)+len(st.newSuccess) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.backoffs[st.key]
	var lastSuccess time.Time
	for _, t := range st.newSuccess {
		if t.After(lastSuccess) {
			lastSuccess = t
		}
	}
	if !lastSuccess.IsZero() {
		rec = backoffRecord{}
	}
	for _, t := range st.newFailures {
		if t.After(lastSuccess) {
			rec.failures++
			if t.After(rec.lastFailure) {
				rec.lastFailure = t
			}
		}
	}
	c.backoffs[st.key] = rec
}

// backoffRemaining is how long new pods of the Job must still wait.
func (c *Controller) backoffRemaining(key string, now time.Time) time.Duration {
	c.mu.Lock()
	rec := c.backoffs[key]
	c.mu.Unlock()
	if rec.failures == 0 {
		return 0
	}
	delay := c.backoff
	for i := 1; i < rec.failures && delay < c.maxDelay; i++ {
		delay *= 2
	}
	delay = min(delay, c.maxDelay)
	return rec.lastFailure.Add(delay).Sub(now)
}

// failureReason says why the Job fails, if it does.
func (c *Controller) failureReason(st *syncState, failed int32) (string, string) {
	job := st.job
	switch {
	case st.failJobMsg != "":
		return reasonPodFailurePolicy, st.failJobMsg
	case job.Spec.BackoffLimitPerIndex == nil && job.Spec.BackoffLimit != nil && failed > *job.Spec.BackoffLimit:
		return reasonBackoffLimitExceeded, msgBackoffLimitExceeded
	case job.Spec.BackoffLimitPerIndex != nil && job.Spec.MaxFailedIndexes != nil && int32(st.failedIdx.Len()) > *job.Spec.MaxFailedIndexes:
		return reasonMaxFailedIndexesExceeded, msgMaxFailedIndexesExceeded
	case job.Spec.ActiveDeadlineSeconds != nil && job.Status.StartTime != nil &&
		!st.now.Before(job.Status.StartTime.Add(time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second)):
		return reasonDeadlineExceeded, msgDeadlineExceeded
	case job.Spec.BackoffLimitPerIndex != nil && st.failedIdx.Len() > 0 &&
		int32(st.failedIdx.Len()+st.completed.Len()) >= completions(job):
		return reasonFailedIndexes, msgFailedIndexes
	}
	return "", ""
}

// successReason says why the Job succeeded, if it did.
func successReason(st *syncState, succeeded int32, active int) (string, string) {
	job := st.job
	if isIndexed(job) {
		if job.Spec.SuccessPolicy != nil {
			for i, rule := range job.Spec.SuccessPolicy.Rules {
				if successRuleMet(rule, st.completed, completions(job)) {
					return reasonSuccessPolicy, "Matched rules at index " + strconv.Itoa(i)
				}
			}
		}
		if st.failedIdx.Len() == 0 && int32(st.completed.Len()) >= completions(job) {
			return reasonCompletionsReached, msgCompletionsReached
		}
		return "", ""
	}
	if job.Spec.Completions != nil {
		if succeeded >= *job.Spec.Completions {
			return reasonCompletionsReached, msgCompletionsReached
		}
		return "", ""
	}
	// A work queue: done when one pod succeeded and none runs any more.
	if succeeded > 0 && active == 0 {
		return reasonCompletionsReached, msgCompletionsReached
	}
	return "", ""
}

func successRuleMet(rule batchv1.SuccessPolicyRule, completed sets.Set[int], n int32) bool {
	var want sets.Set[int]
	if rule.SucceededIndexes != nil {
		want = parseIndexes(*rule.SucceededIndexes, n)
	}
	if want != nil {
		got := completed.Intersection(want)
		if rule.SucceededCount == nil {
			return got.Len() == want.Len()
		}
		return int32(got.Len()) >= *rule.SucceededCount
	}
	return rule.SucceededCount != nil && int32(completed.Len()) >= *rule.SucceededCount
}

// manage creates or deletes pods so that the Job runs as many as it should. It
// returns how many pods it created and deleted.
func (c *Controller) manage(ctx context.Context, st *syncState, active, terminating []*corev1.Pod, succeeded int32) (int, int, error) {
	job := st.job
	parallelism := int32(1)
	if job.Spec.Parallelism != nil {
		parallelism = *job.Spec.Parallelism
	}
	want := parallelism
	switch {
	case isIndexed(job):
		want = min(parallelism, completions(job)-int32(st.completed.Len()+st.failedIdx.Len()))
	case job.Spec.Completions != nil:
		want = min(parallelism, *job.Spec.Completions-succeeded)
	case succeeded > 0:
		want = min(parallelism, int32(len(active)))
	}
	want = max(want, 0)

	// Excess pods: duplicates and out-of-range indexes first, then the newest.
	var excess []*corev1.Pod
	if isIndexed(job) {
		seen := sets.New[int]()
		var keep []*corev1.Pod
		for _, p := range sortByAge(active) {
			i, ok := podIndex(p, completions(job))
			if !ok || seen.Has(i) || st.completed.Has(i) || st.failedIdx.Has(i) {
				excess = append(excess, p)
				continue
			}
			seen.Insert(i)
			keep = append(keep, p)
		}
		active = keep
	}
	if int32(len(active)) > want {
		sorted := sortForDeletion(active)
		excess = append(excess, sorted[:int32(len(active))-want]...)
	}
	if len(excess) > 0 {
		n, err := c.deletePods(ctx, st, excess, false)
		return 0, n, err
	}
	occupied := int32(len(active))
	if onlyReplaceFailed(job) {
		occupied += int32(len(terminating))
	}
	diff := int(want - occupied)
	if diff <= 0 {
		return 0, 0, nil
	}
	if wait := c.backoffRemaining(st.key, st.now); wait > 0 {
		c.queue.AddAfter(st.key, wait)
		return 0, 0, nil
	}
	diff = min(diff, maxPodCreateDeletePerSync)
	var indexes []int
	if isIndexed(job) {
		busy := sets.New[int]()
		for _, p := range append(append([]*corev1.Pod(nil), active...), terminating...) {
			if i, ok := podIndex(p, completions(job)); ok && (onlyReplaceFailed(job) || p.DeletionTimestamp == nil) {
				busy.Insert(i)
			}
		}
		for i := 0; i < int(completions(job)) && len(indexes) < diff; i++ {
			if !st.completed.Has(i) && !st.failedIdx.Has(i) && !busy.Has(i) {
				indexes = append(indexes, i)
			}
		}
		diff = len(indexes)
	}
	if diff == 0 {
		return 0, 0, nil
	}
	c.expectations.ExpectCreations(st.key, diff)
	var errs []error
	created := 0
	for n := 0; n < diff; n++ {
		idx := -1
		if indexes != nil {
			idx = indexes[n]
		}
		pod := newPod(job, idx, st.pods)
		got, err := c.client.CoreV1().Pods(job.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			c.expectations.CreationObserved(st.key)
			if apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) && job.DeletionTimestamp != nil {
				continue
			}
			c.recorder.Eventf(job, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
			errs = append(errs, fmt.Errorf("create pod of Job %s: %w", st.key, err))
			// Stop creating after a failure; the rest waits for a retry.
			for rest := n + 1; rest < diff; rest++ {
				c.expectations.CreationObserved(st.key)
			}
			break
		}
		created++
		c.recorder.Eventf(job, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %v", got.Name)
	}
	return created, 0, errors.Join(errs...)
}

// newPod builds a pod of the Job (of completion index idx when idx >= 0).
func newPod(job *batchv1.Job, idx int, existing []*corev1.Pod) *corev1.Pod {
	tmpl := job.Spec.Template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    job.Name + "-",
			Namespace:       job.Namespace,
			Labels:          tmpl.Labels,
			Annotations:     tmpl.Annotations,
			Finalizers:      append(tmpl.Finalizers, batchv1.JobTrackingFinalizer),
			OwnerReferences: []metav1.OwnerReference{*ownerref.NewControllerRef(job, controllerKind)},
		},
		Spec: tmpl.Spec,
	}
	if idx < 0 {
		return pod
	}
	s := strconv.Itoa(idx)
	pod.GenerateName = job.Name + "-" + s + "-"
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Labels[batchv1.JobCompletionIndexAnnotation] = s
	pod.Annotations[batchv1.JobCompletionIndexAnnotation] = s
	if pod.Spec.Hostname == "" {
		pod.Spec.Hostname = job.Name + "-" + s
	}
	env := corev1.EnvVar{Name: "JOB_COMPLETION_INDEX", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
		FieldPath: "metadata.labels['" + batchv1.JobCompletionIndexAnnotation + "']",
	}}}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if !hasEnv(list[i].Env, env.Name) {
				list[i].Env = append(list[i].Env, env)
			}
		}
	}
	if job.Spec.BackoffLimitPerIndex != nil {
		count := int32(0)
		for _, p := range existing {
			if i, ok := podIndex(p, completions(job)); ok && i == idx && p.Status.Phase == corev1.PodFailed {
				count = max(count, indexFailureCount(p)+1)
			}
		}
		pod.Annotations[podIndexFailureCountAnnotation] = strconv.Itoa(int(count))
	}
	return pod
}

func hasEnv(env []corev1.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}

// deletePods deletes pods of the Job; with strip their finalizer goes first, so that
// they are not counted as failed (pods of a suspended Job).
func (c *Controller) deletePods(ctx context.Context, st *syncState, pods []*corev1.Pod, strip bool) (int, error) {
	pods = pods[:min(len(pods), maxPodCreateDeletePerSync)]
	if strip {
		if err := c.stripFinalizers(ctx, st.key, withFinalizer(pods)); err != nil {
			return 0, err
		}
	}
	keys := make([]string, len(pods))
	for i, p := range pods {
		keys[i] = podKey(p)
	}
	c.expectations.ExpectDeletions(st.key, keys)
	var errs []error
	deleted := 0
	for _, p := range pods {
		err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			c.expectations.DeletionObserved(st.key, podKey(p))
			c.recorder.Eventf(st.job, corev1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
			errs = append(errs, fmt.Errorf("delete pod %s of Job %s: %w", p.Name, st.key, err))
			continue
		}
		if err != nil {
			c.expectations.DeletionObserved(st.key, podKey(p))
		}
		deleted++
		c.recorder.Eventf(st.job, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %v", p.Name)
	}
	return deleted, errors.Join(errs...)
}

// stripFinalizers removes the tracking finalizer from pods that hold it.
func (c *Controller) stripFinalizers(ctx context.Context, key string, pods []*corev1.Pod) error {
	var errs []error
	for _, p := range pods {
		if !hasTrackingFinalizer(p) {
			continue
		}
		patch, err := finalizerPatch(p)
		if err != nil {
			return err
		}
		c.expectFinalizerRemoval(key, p.UID)
		_, err = c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			c.mu.Lock()
			c.removing[key].Delete(p.UID)
			c.mu.Unlock()
			errs = append(errs, fmt.Errorf("remove the tracking finalizer of pod %s: %w", podKey(p), err))
		}
	}
	return errors.Join(errs...)
}

// finalizerPatch is a JSON patch removing the tracking finalizer, guarded by a test
// of the pod's finalizers so that a concurrent change is not lost.
func finalizerPatch(p *corev1.Pod) ([]byte, error) {
	var rest []string
	for _, f := range p.Finalizers {
		if f != batchv1.JobTrackingFinalizer {
			rest = append(rest, f)
		}
	}
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/finalizers", "value": p.Finalizers},
		{"op": "replace", "path": "/metadata/finalizers", "value": rest},
	}
	if rest == nil {
		ops[1] = map[string]any{"op": "remove", "path": "/metadata/finalizers"}
	}
	return jsonMarshal(ops)
}

// claimPods adopts matching orphans and releases owned pods that no longer match.
func (c *Controller) claimPods(ctx context.Context, job *batchv1.Job, all []*corev1.Pod) ([]*corev1.Pod, error) {
	selector, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("invalid selector of Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	canAdopt := ownerref.RecheckOwner(job, func(ctx context.Context) (metav1.Object, error) {
		return c.client.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
	})
	adopt := func(ctx context.Context, pod *corev1.Pod) error {
		_, err := c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType,
			ownerref.AdoptPatch(job, controllerKind, pod.UID), metav1.PatchOptions{})
		return err
	}
	release := func(ctx context.Context, pod *corev1.Pod) error {
		_, err := c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType,
			ownerref.ReleasePatch(job.UID, pod.UID), metav1.PatchOptions{})
		if err == nil && hasTrackingFinalizer(pod) {
			err = c.stripFinalizers(ctx, job.Namespace+"/"+job.Name, []*corev1.Pod{pod})
		}
		return err
	}
	return ownerref.Claim(ctx, job, controllerKind, selector, all, adopt, release, canAdopt)
}

func ownedBy(pods []*corev1.Pod, uid types.UID) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if ref := metav1.GetControllerOfNoCopy(p); ref != nil && ref.UID == uid {
			out = append(out, p)
		}
	}
	return out
}

// ownedByName returns the pods controlled by a Job of that name other than except.
func ownedByName(pods []*corev1.Pod, name string, except types.UID) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		ref := metav1.GetControllerOfNoCopy(p)
		if ref != nil && ref.Kind == controllerKind.Kind && ref.Name == name && ref.UID != except && hasTrackingFinalizer(p) {
			out = append(out, p)
		}
	}
	return out
}

func withFinalizer(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if hasTrackingFinalizer(p) {
			out = append(out, p)
		}
	}
	return out
}

func sortByAge(pods []*corev1.Pod) []*corev1.Pod {
	out := append([]*corev1.Pod(nil), pods...)
	sort.SliceStable(out, func(i, j int) bool {
		return out[i].CreationTimestamp.Before(&out[j].CreationTimestamp)
	})
	return out
}

// sortForDeletion orders pods as upstream prefers to delete them: unscheduled, then
// not ready, then the newest.
func sortForDeletion(pods []*corev1.Pod) []*corev1.Pod {
	out := append([]*corev1.Pod(nil), pods...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
			return a.Spec.NodeName == ""
		}
		if podstate.IsPodReady(a) != podstate.IsPodReady(b) {
			return !podstate.IsPodReady(a)
		}
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	})
	return out
}

func sortedUIDs(s sets.Set[types.UID]) []types.UID {
	if s.Len() == 0 {
		return nil
	}
	out := s.UnsortedList()
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
