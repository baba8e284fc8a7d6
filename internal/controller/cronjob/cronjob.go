// Package cronjob is the CronJob controller: it creates a CronJob's Jobs at the
// times of its schedule (five fields or the @ forms, in spec.timeZone, parsed by
// github.com/robfig/cron/v3 as upstream), honouring concurrencyPolicy,
// startingDeadlineSeconds and suspend, keeps status.active, lastScheduleTime and
// lastSuccessfulTime, and deletes finished Jobs beyond the history limits. It
// follows upstream's pkg/controller/cronjob (the v2 controller).
package cronjob

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/job"
	"github.com/kubette/kubette/internal/controller/ownerref"
	"github.com/kubette/kubette/internal/controller/worker"
)

// Name is the controller's name in the controller manager's registry.
const Name = "cronjob"

// ClientName is the name of the controller's client and ServiceAccount upstream.
const ClientName = "cronjob-controller"

// ScheduledTimestampAnnotation records on a Job the scheduled time it was created for.
const ScheduledTimestampAnnotation = "batch.kubernetes.io/cronjob-scheduled-timestamp"

// nextScheduleDelta is added to the wait for the next schedule time, as upstream,
// so that the sync runs just after it.
const nextScheduleDelta = 100 * time.Millisecond

// tooManyMissed is the count of missed start times above which the controller warns.
const tooManyMissed = 100

var controllerKind = batchv1.SchemeGroupVersion.WithKind("CronJob")

// Controller syncs CronJobs.
type Controller struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	log      *slog.Logger
	now      clock.PassiveClock

	cjLister  batchlisters.CronJobLister
	cjSynced  cache.InformerSynced
	jobLister batchlisters.JobLister
	jobSynced cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
}

var _ controller.Runner = (*Controller)(nil)

// New builds the controller on the shared informers of d.
func New(d controller.Deps) (controller.Runner, error) { return NewWithClock(d, clock.RealClock{}) }

// NewWithClock builds the controller reading the time from now (tests control it);
// the queue's delays run on the real clock.
func NewWithClock(d controller.Deps, now clock.PassiveClock) (*Controller, error) {
	if d.Client == nil || d.Informers == nil || d.Recorder == nil {
		return nil, fmt.Errorf("cronjob controller needs a client, informers and an event recorder")
	}
	cjInf := d.Informers.Batch().V1().CronJobs()
	jobInf := d.Informers.Batch().V1().Jobs()
	c := &Controller{
		client: d.Client, recorder: d.Recorder(ClientName), log: slog.Default().With("controller", Name), now: now,
		cjLister: cjInf.Lister(), cjSynced: cjInf.Informer().HasSynced,
		jobLister: jobInf.Lister(), jobSynced: jobInf.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: Name}),
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	if _, err := cjInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, cur any) { enqueue(cur) }, DeleteFunc: enqueue,
	}); err != nil {
		return nil, fmt.Errorf("failed to add CronJob event handler: %w", err)
	}
	enqueueOwner := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		j, ok := obj.(*batchv1.Job)
		if !ok {
			return
		}
		if ref := metav1.GetControllerOfNoCopy(j); ref != nil && ref.Kind == controllerKind.Kind {
			c.queue.Add(j.Namespace + "/" + ref.Name)
		}
	}
	if _, err := jobInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueueOwner, UpdateFunc: func(_, cur any) { enqueueOwner(cur) }, DeleteFunc: enqueueOwner,
	}); err != nil {
		return nil, fmt.Errorf("failed to add Job event handler: %w", err)
	}
	return c, nil
}

// Run runs workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, worker.Options{
		Name: Name, Workers: workers, Synced: []cache.InformerSynced{c.cjSynced, c.jobSynced}, Sync: c.Sync, Log: c.log,
	})
}

// Sync reconciles the CronJob of key: its status from its Jobs, then the Job of the
// latest missed schedule time, then the history.
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("invalid key %q: %w", key, err)
	}
	cached, err := c.cjLister.CronJobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get CronJob %s: %w", key, err)
	}
	all, err := c.jobLister.Jobs(ns).List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list Jobs of %s: %w", ns, err)
	}
	var jobs []*batchv1.Job
	for _, j := range all {
		if ref := metav1.GetControllerOfNoCopy(j); ref != nil && ref.UID == cached.UID {
			jobs = append(jobs, j)
		}
	}
	cj := cached.DeepCopy()
	now := c.now.Now()
	c.reconcileActive(ctx, cj, jobs)
	requeue, syncErr := c.schedule(ctx, cj, jobs, now)
	if !equality.Semantic.DeepEqual(cached.Status, cj.Status) {
		if _, err := c.client.BatchV1().CronJobs(ns).UpdateStatus(ctx, cj, metav1.UpdateOptions{}); err != nil {
			return errors.Join(syncErr, fmt.Errorf("update status of CronJob %s: %w", key, err))
		}
	}
	if cj.DeletionTimestamp == nil {
		c.cleanupHistory(ctx, cj, jobs)
	}
	if requeue > 0 {
		c.queue.AddAfter(key, requeue)
	}
	return syncErr
}

// reconcileActive drops finished and vanished Jobs from status.active and keeps
// lastSuccessfulTime.
func (c *Controller) reconcileActive(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) {
	owned := map[types.UID]bool{}
	for _, j := range jobs {
		owned[j.UID] = true
		active := inActive(cj, j.UID)
		done, _ := job.IsFinished(j)
		switch {
		case !active && !done:
			if at, err := time.Parse(time.RFC3339, j.Annotations[ScheduledTimestampAnnotation]); err == nil && j.Name == JobName(cj, at) {
				// Made by this controller, whose status update was lost (a conflict
				// or a crash right after the create): it is active.
				addActive(cj, j)
				if cj.Status.LastScheduleTime == nil || at.After(cj.Status.LastScheduleTime.Time) {
					t := metav1.NewTime(at)
					cj.Status.LastScheduleTime = &t
				}
				continue
			}
			c.recorder.Eventf(cj, corev1.EventTypeWarning, "UnexpectedJob", "Saw a job that the controller did not create or forgot: %s", j.Name)
		case active && done:
			removeActive(cj, j.UID)
			c.recorder.Eventf(cj, corev1.EventTypeNormal, "SawCompletedJob", "Saw completed job: %s, condition: %v", j.Name, finishedType(j))
		}
		if done && j.Status.CompletionTime != nil &&
			(cj.Status.LastSuccessfulTime == nil || j.Status.CompletionTime.After(cj.Status.LastSuccessfulTime.Time)) {
			t := *j.Status.CompletionTime
			cj.Status.LastSuccessfulTime = &t
		}
	}
	for _, ref := range append([]corev1.ObjectReference(nil), cj.Status.Active...) {
		if owned[ref.UID] {
			continue
		}
		// Not in the cache: ask the API server before dropping it.
		j, err := c.client.BatchV1().Jobs(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || err == nil && j.UID != ref.UID {
			c.recorder.Eventf(cj, corev1.EventTypeNormal, "MissingJob", "Active job went missing: %v", ref.Name)
			removeActive(cj, ref.UID)
		}
	}
}

func finishedType(j *batchv1.Job) batchv1.JobConditionType {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.Type
		}
	}
	return ""
}

// schedule creates the Job of the latest schedule time that has come, if it may, and
// returns when to look again.
func (c *Controller) schedule(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job, now time.Time) (time.Duration, error) {
	if cj.DeletionTimestamp != nil || cj.Spec.Suspend != nil && *cj.Spec.Suspend {
		return 0, nil
	}
	sched, err := parse(cj)
	if err != nil {
		// Validation lets no such schedule in; an old object may hold one.
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "UnparseableSchedule", "unparseable schedule: %q : %s", cj.Spec.Schedule, err)
		return 0, nil
	}
	scheduled, missed := mostRecentScheduleTime(cj, now, sched)
	next := sched.Next(now).Sub(now) + nextScheduleDelta
	if missed > tooManyMissed {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "TooManyMissedTimes",
			"too many missed start times: %d. Set or decrease .spec.startingDeadlineSeconds or check clock skew", missed)
	}
	if scheduled == nil {
		return next, nil
	}
	if cj.Spec.StartingDeadlineSeconds != nil &&
		scheduled.Add(time.Duration(*cj.Spec.StartingDeadlineSeconds)*time.Second).Before(now) {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "MissSchedule", "Missed scheduled time to start a job: %s", scheduled.UTC().Format(time.RFC1123Z))
		return next, nil
	}
	name := JobName(cj, *scheduled)
	for _, j := range jobs {
		if j.Name == name {
			return next, nil // already made
		}
	}
	switch {
	case cj.Spec.ConcurrencyPolicy == batchv1.ForbidConcurrent && len(cj.Status.Active) > 0:
		c.log.Info("not starting a Job: the prior one still runs and the policy is Forbid", "cronJob", cj.Namespace+"/"+cj.Name)
		return next, nil
	case cj.Spec.ConcurrencyPolicy == batchv1.ReplaceConcurrent:
		for _, ref := range append([]corev1.ObjectReference(nil), cj.Status.Active...) {
			if err := c.deleteJob(ctx, cj, ref.Name); err != nil {
				return 0, err
			}
			removeActive(cj, ref.UID)
		}
	}
	j, err := c.client.BatchV1().Jobs(cj.Namespace).Create(ctx, jobFor(cj, *scheduled), metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return next, nil
	case err != nil:
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedCreate", "Error creating job: %v", err)
		return 0, fmt.Errorf("create Job %s/%s: %w", cj.Namespace, name, err)
	}
	c.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulCreate", "Created job %v", j.Name)
	addActive(cj, j)
	t := metav1.NewTime(*scheduled)
	cj.Status.LastScheduleTime = &t
	return next, nil
}

// parse parses the schedule in the CronJob's time zone.
func parse(cj *batchv1.CronJob) (cron.Schedule, error) {
	if cj.Spec.TimeZone != nil {
		return cron.ParseStandard("TZ=" + *cj.Spec.TimeZone + " " + cj.Spec.Schedule)
	}
	return cron.ParseStandard(cj.Spec.Schedule)
}

// mostRecentScheduleTime is the latest schedule time after the last one (or the
// creation, or the starting deadline) and no later than now, with how many there were.
func mostRecentScheduleTime(cj *batchv1.CronJob, now time.Time, sched cron.Schedule) (*time.Time, int) {
	earliest := cj.CreationTimestamp.Time
	if cj.Status.LastScheduleTime != nil {
		earliest = cj.Status.LastScheduleTime.Time
	}
	if cj.Spec.StartingDeadlineSeconds != nil {
		if d := now.Add(-time.Duration(*cj.Spec.StartingDeadlineSeconds) * time.Second); d.After(earliest) {
			earliest = d
		}
	}
	var last *time.Time
	n := 0
	for t := sched.Next(earliest); !t.IsZero() && !t.After(now); t = sched.Next(t) {
		tt := t
		last = &tt
		n++
	}
	return last, n
}

// JobName is the name of the CronJob's Job for a scheduled time, as upstream: the
// CronJob's name and the time in minutes since the epoch.
func JobName(cj *batchv1.CronJob, scheduled time.Time) string {
	return cj.Name + "-" + strconv.FormatInt(scheduled.Unix()/60, 10)
}

// jobFor builds the CronJob's Job for a scheduled time from its template.
func jobFor(cj *batchv1.CronJob, scheduled time.Time) *batchv1.Job {
	tmpl := cj.Spec.JobTemplate.DeepCopy()
	annotations := tmpl.Annotations
	if annotations == nil {
		annotations = map[string]string{}
	}
	at := scheduled
	if cj.Spec.TimeZone != nil {
		if loc, err := time.LoadLocation(*cj.Spec.TimeZone); err == nil {
			at = scheduled.In(loc)
		}
	}
	annotations[ScheduledTimestampAnnotation] = at.Format(time.RFC3339)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: JobName(cj, scheduled), Namespace: cj.Namespace,
			Labels: tmpl.Labels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{*ownerref.NewControllerRef(cj, controllerKind)},
		},
		Spec: tmpl.Spec,
	}
}

// deleteJob deletes a Job of the CronJob with its pods.
func (c *Controller) deleteJob(ctx context.Context, cj *batchv1.CronJob, name string) error {
	policy := metav1.DeletePropagationBackground
	err := c.client.BatchV1().Jobs(cj.Namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &policy})
	if err != nil && !apierrors.IsNotFound(err) {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedDelete", "Deleted job: %v", err)
		return fmt.Errorf("delete Job %s/%s: %w", cj.Namespace, name, err)
	}
	c.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted job %v", name)
	return nil
}

// cleanupHistory deletes the oldest finished Jobs beyond the history limits.
func (c *Controller) cleanupHistory(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) {
	var succeeded, failed []*batchv1.Job
	for _, j := range jobs {
		switch finishedType(j) {
		case batchv1.JobComplete:
			succeeded = append(succeeded, j)
		case batchv1.JobFailed:
			failed = append(failed, j)
		}
	}
	prune := func(list []*batchv1.Job, limit *int32) {
		if limit == nil || len(list) <= int(*limit) {
			return
		}
		sort.Slice(list, func(a, b int) bool { return startTime(list[a]).Before(startTime(list[b])) })
		for _, j := range list[:len(list)-int(*limit)] {
			if j.DeletionTimestamp == nil {
				if err := c.deleteJob(ctx, cj, j.Name); err != nil {
					c.log.Error("history cleanup", "err", err)
				}
			}
		}
	}
	prune(succeeded, cj.Spec.SuccessfulJobsHistoryLimit)
	prune(failed, cj.Spec.FailedJobsHistoryLimit)
}

func startTime(j *batchv1.Job) time.Time {
	if j.Status.StartTime != nil {
		return j.Status.StartTime.Time
	}
	return j.CreationTimestamp.Time
}

func inActive(cj *batchv1.CronJob, uid types.UID) bool {
	for _, r := range cj.Status.Active {
		if r.UID == uid {
			return true
		}
	}
	return false
}

func addActive(cj *batchv1.CronJob, j *batchv1.Job) {
	cj.Status.Active = append(cj.Status.Active, corev1.ObjectReference{
		Kind: "Job", Namespace: j.Namespace, Name: j.Name, UID: j.UID, APIVersion: "batch/v1", ResourceVersion: j.ResourceVersion,
	})
}

func removeActive(cj *batchv1.CronJob, uid types.UID) {
	out := cj.Status.Active[:0]
	for _, r := range cj.Status.Active {
		if r.UID != uid {
			out = append(out, r)
		}
	}
	cj.Status.Active = out
	if len(out) == 0 {
		cj.Status.Active = nil
	}
}
