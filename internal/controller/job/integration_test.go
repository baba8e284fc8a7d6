package job_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/garbagecollector"
	"github.com/kubette/kubette/internal/controller/job"
	"github.com/kubette/kubette/internal/controller/ttlafterfinished"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

const ns = "default"

// start runs the Job, TTL-after-finished and garbage collector controllers against a
// fresh control plane until the test ends. The back-off is shortened so that retries
// do not make the test slow.
func start(t *testing.T) kubernetes.Interface {
	t.Helper()
	env := testenv.Start(t, testenv.Options{})
	deps, starter, err := controller.NewDeps(env.Config, "job-test")
	if err != nil {
		t.Fatal(err)
	}
	jc, err := job.NewWith(deps, job.Options{Backoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ttl, err := ttlafterfinished.New(deps)
	if err != nil {
		t.Fatal(err)
	}
	gc, err := garbagecollector.New(deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	starter.Start(ctx)
	done := make(chan struct{}, 3)
	for _, r := range []controller.Runner{jc, ttl, gc} {
		go func() {
			r.Run(ctx, 2)
			done <- struct{}{}
		}()
	}
	t.Cleanup(func() {
		cancel()
		for range 3 {
			<-done
		}
	})
	return env.Client
}

func newJob(name string, completions, parallelism int32) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.JobSpec{
			Completions: ptr.To(completions), Parallelism: ptr.To(parallelism),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "work", Image: "example/work:1"}},
			}},
		},
	}
}

func create(t *testing.T, c kubernetes.Interface, j *batchv1.Job) *batchv1.Job {
	t.Helper()
	got, err := c.BatchV1().Jobs(ns).Create(context.Background(), j, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// activePods waits until the Job has exactly n pods that are neither terminal nor
// being deleted, and returns them.
func activePods(t *testing.T, c kubernetes.Interface, j *batchv1.Job, n int) []corev1.Pod {
	t.Helper()
	var out []corev1.Pod
	poll.Until(t, fmt.Sprintf("%d active pods of %s", n, j.Name), func() error {
		list, err := c.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{
			LabelSelector: batchv1.ControllerUidLabel + "=" + string(j.UID),
		})
		if err != nil {
			return err
		}
		out = out[:0]
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				out = append(out, p)
			}
		}
		if len(out) != n {
			return fmt.Errorf("%d active pods", len(out))
		}
		return nil
	})
	return out
}

// finish ends the pod as a kubelet would: phase and the container's exit code.
func finish(t *testing.T, c kubernetes.Interface, name string, exitCode int32) {
	t.Helper()
	poll.Until(t, "finish "+name, func() error {
		p, err := c.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Status.Phase = corev1.PodSucceeded
		reason := "Completed"
		if exitCode != 0 {
			p.Status.Phase, reason = corev1.PodFailed, "Error"
		}
		now := metav1.Now()
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: exitCode, Reason: reason, StartedAt: now, FinishedAt: now,
			}},
		}}
		_, err = c.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
		return err
	})
}

// waitCondition waits for the Job's condition of type ct with status True and returns the Job.
func waitCondition(t *testing.T, c kubernetes.Interface, name string, ct batchv1.JobConditionType) *batchv1.Job {
	t.Helper()
	var j *batchv1.Job
	poll.Until(t, fmt.Sprintf("%s condition of %s", ct, name), func() error {
		var err error
		if j, err = c.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			return err
		}
		for _, cond := range j.Status.Conditions {
			if cond.Type == ct && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v, status %+v", j.Status.Conditions, j.Status)
	})
	return j
}

func conditionTypes(j *batchv1.Job) []batchv1.JobConditionType {
	var out []batchv1.JobConditionType
	for _, c := range j.Status.Conditions {
		out = append(out, c.Type)
	}
	return out
}

func condition(j *batchv1.Job, ct batchv1.JobConditionType) batchv1.JobCondition {
	for _, c := range j.Status.Conditions {
		if c.Type == ct {
			return c
		}
	}
	return batchv1.JobCondition{}
}

func TestJobRunsToCompletion(t *testing.T) {
	c := start(t)
	j := create(t, c, newJob("three", 3, 2))
	if j.Spec.Selector == nil || j.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel] != string(j.UID) {
		t.Fatalf("selector not generated: %+v", j.Spec.Selector)
	}
	pods := activePods(t, c, j, 2)
	for _, p := range pods {
		if !slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) {
			t.Errorf("pod %s has no tracking finalizer: %v", p.Name, p.Finalizers)
		}
		if p.Labels[batchv1.JobNameLabel] != "three" || !strings.HasPrefix(p.Name, "three-") {
			t.Errorf("pod %s labels %v", p.Name, p.Labels)
		}
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.UID != j.UID || ref.Kind != "Job" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
			t.Errorf("pod %s controller %+v", p.Name, ref)
		}
		finish(t, c, p.Name, 0)
	}
	last := activePods(t, c, j, 1)
	finish(t, c, last[0].Name, 0)
	done := waitCondition(t, c, "three", batchv1.JobComplete)
	if got := conditionTypes(done); !slices.Equal(got, []batchv1.JobConditionType{batchv1.JobSuccessCriteriaMet, batchv1.JobComplete}) {
		t.Errorf("conditions %v, want SuccessCriteriaMet then Complete", got)
	}
	if r := condition(done, batchv1.JobComplete).Reason; r != "CompletionsReached" {
		t.Errorf("Complete reason %q", r)
	}
	s := done.Status
	if s.Succeeded != 3 || s.Failed != 0 || s.Active != 0 || s.CompletionTime == nil || s.StartTime == nil ||
		len(s.UncountedTerminatedPods.Succeeded)+len(s.UncountedTerminatedPods.Failed) != 0 {
		t.Errorf("status %+v", s)
	}
	poll.Until(t, "finalizers removed", func() error {
		list, err := c.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=three"})
		if err != nil {
			return err
		}
		for _, p := range list.Items {
			if len(p.Finalizers) > 0 {
				return fmt.Errorf("pod %s finalizers %v", p.Name, p.Finalizers)
			}
		}
		if len(list.Items) != 3 {
			return fmt.Errorf("%d pods", len(list.Items))
		}
		return nil
	})

	t.Run("deleting the Job deletes its pods", func(t *testing.T) {
		policy := metav1.DeletePropagationForeground
		if err := c.BatchV1().Jobs(ns).Delete(context.Background(), "three", metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, "pods gone", func() error {
			list, err := c.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=three"})
			if err != nil {
				return err
			}
			if len(list.Items) > 0 {
				return fmt.Errorf("%d pods left", len(list.Items))
			}
			return nil
		})
	})
}

func TestJobBackoffLimitExceeded(t *testing.T) {
	c := start(t)
	spec := newJob("failing", 1, 1)
	spec.Spec.BackoffLimit = ptr.To[int32](1)
	j := create(t, c, spec)
	for range 2 {
		p := activePods(t, c, j, 1)
		finish(t, c, p[0].Name, 1)
	}
	failed := waitCondition(t, c, "failing", batchv1.JobFailed)
	if got := conditionTypes(failed); !slices.Equal(got, []batchv1.JobConditionType{batchv1.JobFailureTarget, batchv1.JobFailed}) {
		t.Errorf("conditions %v, want FailureTarget then Failed", got)
	}
	cond := condition(failed, batchv1.JobFailed)
	if cond.Reason != "BackoffLimitExceeded" || cond.Message != "Job has reached the specified backoff limit" {
		t.Errorf("Failed condition %+v", cond)
	}
	if failed.Status.Failed != 2 || failed.Status.Succeeded != 0 || failed.Status.CompletionTime != nil {
		t.Errorf("status %+v", failed.Status)
	}
	// A failed Job makes no more pods.
	list, err := c.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=failing"})
	if err != nil || len(list.Items) != 2 {
		t.Errorf("%d pods (%v), want the 2 failed ones", len(list.Items), err)
	}
}

func TestIndexedJob(t *testing.T) {
	c := start(t)
	spec := newJob("idx", 3, 3)
	spec.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	j := create(t, c, spec)
	pods := activePods(t, c, j, 3)
	seen := map[string]bool{}
	for _, p := range pods {
		idx := p.Annotations[batchv1.JobCompletionIndexAnnotation]
		seen[idx] = true
		if p.Labels[batchv1.JobCompletionIndexAnnotation] != idx || p.Spec.Hostname != "idx-"+idx ||
			!strings.HasPrefix(p.Name, "idx-"+idx+"-") {
			t.Errorf("pod %s: index %q label %q hostname %q", p.Name, idx, p.Labels[batchv1.JobCompletionIndexAnnotation], p.Spec.Hostname)
		}
		env := p.Spec.Containers[0].Env
		if len(env) != 1 || env[0].Name != "JOB_COMPLETION_INDEX" || env[0].ValueFrom == nil || env[0].ValueFrom.FieldRef == nil ||
			env[0].ValueFrom.FieldRef.FieldPath != "metadata.labels['batch.kubernetes.io/job-completion-index']" {
			t.Errorf("pod %s env %+v", p.Name, env)
		}
	}
	if !seen["0"] || !seen["1"] || !seen["2"] {
		t.Fatalf("indexes %v", seen)
	}
	for _, p := range pods {
		finish(t, c, p.Name, 0)
	}
	done := waitCondition(t, c, "idx", batchv1.JobComplete)
	if done.Status.CompletedIndexes != "0-2" || done.Status.Succeeded != 3 {
		t.Errorf("status %+v", done.Status)
	}
}

func TestJobSuspendAndResume(t *testing.T) {
	c := start(t)
	spec := newJob("sus", 2, 2)
	spec.Spec.Suspend = ptr.To(true)
	j := create(t, c, spec)
	sus := waitCondition(t, c, "sus", batchv1.JobSuspended)
	if cond := condition(sus, batchv1.JobSuspended); cond.Reason != "JobSuspended" || sus.Status.StartTime != nil {
		t.Errorf("suspended: %+v, start %v", cond, sus.Status.StartTime)
	}
	activePods(t, c, j, 0)
	poll.Until(t, "resume", func() error {
		cur, err := c.BatchV1().Jobs(ns).Get(context.Background(), "sus", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Suspend = ptr.To(false)
		_, err = c.BatchV1().Jobs(ns).Update(context.Background(), cur, metav1.UpdateOptions{})
		return err
	})
	activePods(t, c, j, 2)
	poll.Until(t, "resumed condition", func() error {
		cur, err := c.BatchV1().Jobs(ns).Get(context.Background(), "sus", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cond := condition(cur, batchv1.JobSuspended)
		if cond.Status != corev1.ConditionFalse || cond.Reason != "JobResumed" || cur.Status.StartTime == nil {
			return fmt.Errorf("condition %+v, start %v", cond, cur.Status.StartTime)
		}
		return nil
	})
	// Suspending again deletes the active pods without counting them as failures.
	poll.Until(t, "suspend", func() error {
		cur, err := c.BatchV1().Jobs(ns).Get(context.Background(), "sus", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Suspend = ptr.To(true)
		_, err = c.BatchV1().Jobs(ns).Update(context.Background(), cur, metav1.UpdateOptions{})
		return err
	})
	activePods(t, c, j, 0)
	again := waitCondition(t, c, "sus", batchv1.JobSuspended)
	if again.Status.Failed != 0 {
		t.Errorf("failed %d after suspension", again.Status.Failed)
	}
}

func TestPodFailurePolicyFailJob(t *testing.T) {
	c := start(t)
	spec := newJob("pfp", 2, 1)
	spec.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{Action: batchv1.PodFailurePolicyActionIgnore, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{7}}},
		{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}}},
	}}
	j := create(t, c, spec)
	// An ignored failure is replaced and not counted.
	first := activePods(t, c, j, 1)
	finish(t, c, first[0].Name, 7)
	poll.Until(t, "replacement", func() error {
		pods := activePods(t, c, j, 1)
		if pods[0].Name == first[0].Name {
			return fmt.Errorf("not replaced")
		}
		return nil
	})
	second := activePods(t, c, j, 1)
	finish(t, c, second[0].Name, 42)
	failed := waitCondition(t, c, "pfp", batchv1.JobFailed)
	cond := condition(failed, batchv1.JobFailed)
	want := fmt.Sprintf("Container work for pod %s/%s failed with exit code 42 matching FailJob rule at index 1", ns, second[0].Name)
	if cond.Reason != "PodFailurePolicy" || cond.Message != want {
		t.Errorf("Failed condition %+v, want message %q", cond, want)
	}
	if failed.Status.Failed != 1 {
		t.Errorf("failed %d, want 1 (the ignored failure is not counted)", failed.Status.Failed)
	}
}

func TestJobActiveDeadline(t *testing.T) {
	c := start(t)
	spec := newJob("late", 1, 1)
	spec.Spec.ActiveDeadlineSeconds = ptr.To[int64](1)
	j := create(t, c, spec)
	activePods(t, c, j, 1)
	failed := waitCondition(t, c, "late", batchv1.JobFailed)
	if cond := condition(failed, batchv1.JobFailed); cond.Reason != "DeadlineExceeded" || cond.Message != "Job was active longer than specified deadline" {
		t.Errorf("Failed condition %+v", cond)
	}
	activePods(t, c, j, 0)
}

func TestTTLAfterFinished(t *testing.T) {
	c := start(t)
	spec := newJob("ttl", 1, 1)
	spec.Spec.TTLSecondsAfterFinished = ptr.To[int32](0)
	j := create(t, c, spec)
	p := activePods(t, c, j, 1)
	finish(t, c, p[0].Name, 0)
	poll.Until(t, "the finished Job deleted", func() error {
		_, err := c.BatchV1().Jobs(ns).Get(context.Background(), "ttl", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}

// TestJobAdoptsAndReleases: an orphaned pod that matches is adopted again, and a pod
// whose labels stop matching is released (its finalizer with it) and replaced.
func TestJobAdoptsAndReleases(t *testing.T) {
	c := start(t)
	j := create(t, c, newJob("adopt", 2, 2))
	pods := activePods(t, c, j, 2)
	ctx := context.Background()
	orphan := pods[0].Name
	if _, err := c.CoreV1().Pods(ns).Patch(ctx, orphan, "application/merge-patch+json",
		[]byte(`{"metadata":{"ownerReferences":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "orphan adopted", func() error {
		p, err := c.CoreV1().Pods(ns).Get(ctx, orphan, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != j.UID {
			return fmt.Errorf("controller %+v", ref)
		}
		return nil
	})
	released := pods[1].Name
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"other"}}}`, batchv1.ControllerUidLabel)
	if _, err := c.CoreV1().Pods(ns).Patch(ctx, released, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "pod released", func() error {
		p, err := c.CoreV1().Pods(ns).Get(ctx, released, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(p); ref != nil || len(p.Finalizers) > 0 {
			return fmt.Errorf("controller %+v finalizers %v", ref, p.Finalizers)
		}
		return nil
	})
	activePods(t, c, j, 2) // the replacement, selected by the Job's labels
}
