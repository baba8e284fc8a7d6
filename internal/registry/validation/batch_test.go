package validation

import (
	"testing"

	"github.com/kubette/kubette/internal/registry/defaults"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const jobUID = types.UID("0c1d2e3f-0000-4000-8000-000000000001")

// validJob is a defaulted Job with the selector and labels the server generates.
func validJob(mut func(*batchv1.Job)) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: objectMeta("pi"),
		Spec: batchv1.JobSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: string(jobUID)}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
					batchv1.ControllerUidLabel: string(jobUID), "controller-uid": string(jobUID),
					batchv1.JobNameLabel: "pi", "job-name": "pi",
				}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "pi", Image: "perl"}}},
			},
		},
	}
	j.UID = jobUID
	if mut != nil {
		mut(j)
	}
	defaults.Apply(j)
	return j
}

func TestJobDefaults(t *testing.T) {
	j := &batchv1.Job{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
	}}}
	defaults.Apply(j)
	s := j.Spec
	if *s.Completions != 1 || *s.Parallelism != 1 || *s.BackoffLimit != 6 || *s.CompletionMode != batchv1.NonIndexedCompletion ||
		*s.Suspend || *s.PodReplacementPolicy != batchv1.TerminatingOrFailed || j.Labels["app"] != "x" {
		t.Errorf("defaults %+v labels %v", s, j.Labels)
	}
	only := &batchv1.Job{Spec: batchv1.JobSpec{Parallelism: ptr[int32](3), BackoffLimitPerIndex: ptr[int32](1),
		PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
			Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: "DisruptionTarget"}},
		}}}}}
	defaults.Apply(only)
	if only.Spec.Completions != nil || *only.Spec.BackoffLimit != 1<<31-1 || *only.Spec.PodReplacementPolicy != batchv1.Failed ||
		only.Spec.PodFailurePolicy.Rules[0].OnPodConditions[0].Status != corev1.ConditionTrue {
		t.Errorf("defaults %+v", only.Spec)
	}
	cj := &batchv1.CronJob{}
	defaults.Apply(cj)
	if cj.Spec.ConcurrencyPolicy != batchv1.AllowConcurrent || *cj.Spec.Suspend || *cj.Spec.SuccessfulJobsHistoryLimit != 3 || *cj.Spec.FailedJobsHistoryLimit != 1 {
		t.Errorf("CronJob defaults %+v", cj.Spec)
	}
}

func TestValidateJob(t *testing.T) {
	runCreateCases(t, []createCase{
		{name: "valid", obj: validJob(nil)},
		{name: "restartPolicy Always", obj: validJob(func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways }),
			errors: []want{unsup("spec.template.spec.restartPolicy")}},
		{name: "negative counts", obj: validJob(func(j *batchv1.Job) {
			j.Spec.Parallelism, j.Spec.Completions, j.Spec.BackoffLimit = ptr[int32](-1), ptr[int32](-1), ptr[int32](-1)
			j.Spec.ActiveDeadlineSeconds = ptr[int64](0)
		}), errors: []want{inv("spec.parallelism"), inv("spec.completions"), inv("spec.backoffLimit"), invd("spec.activeDeadlineSeconds", "greater than zero")}},
		{name: "indexed without completions", obj: validJob(func(j *batchv1.Job) {
			j.Spec.CompletionMode = ptr(batchv1.IndexedCompletion)
			j.Spec.Parallelism = ptr[int32](2)
		}), errors: []want{req("spec.completions")}},
		{name: "selector not generated", obj: validJob(func(j *batchv1.Job) {
			j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
			j.Spec.Template.Labels["app"] = "x"
		}), errors: []want{invd("spec.selector", "`selector` not auto-generated")}},
		{name: "manual selector not matching", obj: validJob(func(j *batchv1.Job) {
			j.Spec.ManualSelector = ptr(true)
			j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
		}), errors: []want{invd("spec.template.metadata.labels", "`selector` does not match template `labels`")}},
		{name: "wrong controller-uid label", obj: validJob(func(j *batchv1.Job) { j.Spec.Template.Labels["controller-uid"] = "other" }),
			errors: []want{invd("spec.template.metadata.labels[controller-uid]", "must be '"+string(jobUID)+"'")}},
		{name: "backoffLimitPerIndex without Indexed", obj: validJob(func(j *batchv1.Job) { j.Spec.BackoffLimitPerIndex = ptr[int32](1) }),
			errors: []want{forbd("spec.backoffLimitPerIndex", "requires indexed completion mode")}},
		{name: "pod failure policy", obj: validJob(func(j *batchv1.Job) {
			j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				{Action: "Retry", OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
					ContainerName: ptr("nope"), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{0, 3, 2}}},
				{Action: batchv1.PodFailurePolicyActionFailIndex, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: "DisruptionTarget", Status: "Maybe"}}},
				{Action: batchv1.PodFailurePolicyActionIgnore},
			}}
		}), errors: []want{
			invd("spec.template.spec.restartPolicy", "only \"Never\" is supported"),
			unsup("spec.podFailurePolicy.rules[0].action"),
			inv("spec.podFailurePolicy.rules[0].onExitCodes.containerName"),
			invd("spec.podFailurePolicy.rules[0].onExitCodes.values[0]", "must not be 0 for the In operator"),
			invd("spec.podFailurePolicy.rules[0].onExitCodes.values[2]", "must be ordered"),
			forb("spec.podFailurePolicy.rules[1].action"),
			unsup("spec.podFailurePolicy.rules[1].onPodConditions[0].status"),
			invd("spec.podFailurePolicy.rules[2]", "specifying one of OnExitCodes and OnPodConditions is required"),
		}},
	})
}

func TestValidateJobUpdate(t *testing.T) {
	storedJob := func(j *batchv1.Job) *batchv1.Job {
		s := stored(j)
		s.UID = jobUID
		return s
	}
	old := storedJob(validJob(nil))
	suspended := storedJob(validJob(func(j *batchv1.Job) { j.Spec.Suspend = ptr(true) }))
	runUpdateCases(t, []updateCase{
		{name: "parallelism changes", old: old, obj: func() *batchv1.Job { j := old.DeepCopy(); j.Spec.Parallelism = ptr[int32](5); return j }()},
		{name: "template is immutable", old: old, obj: func() *batchv1.Job {
			j := old.DeepCopy()
			j.Spec.Template.Spec.Containers[0].Image = "perl:2"
			return j
		}(), errors: []want{immutable("spec.template")}},
		{name: "completions are immutable", old: old, obj: func() *batchv1.Job { j := old.DeepCopy(); j.Spec.Completions = ptr[int32](4); return j }(),
			errors: []want{immutable("spec.completions")}},
		{name: "selector is immutable", old: old, obj: func() *batchv1.Job {
			j := old.DeepCopy()
			j.Spec.ManualSelector = ptr(true)
			j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"job-name": "pi"}}
			return j
		}(), errors: []want{immutable("spec.selector")}},
		{name: "a suspended Job's scheduling directives change", old: suspended, obj: func() *batchv1.Job {
			j := suspended.DeepCopy()
			j.Spec.Template.Spec.NodeSelector = map[string]string{"zone": "a"}
			j.Spec.Template.Annotations = map[string]string{"a": "b"}
			return j
		}()},
		{name: "negative status", status: true, old: old, obj: func() *batchv1.Job { j := old.DeepCopy(); j.Status.Succeeded = -1; return j }(),
			errors: []want{inv("status.succeeded")}},
	})
}

func validCronJob(mut func(*batchv1.CronJob)) *batchv1.CronJob {
	cj := &batchv1.CronJob{
		ObjectMeta: objectMeta("hello"),
		Spec: batchv1.CronJobSpec{Schedule: "*/1 * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyOnFailure,
				Containers: []corev1.Container{{Name: "hello", Image: "busybox"}}}},
		}}},
	}
	if mut != nil {
		mut(cj)
	}
	defaults.Apply(cj)
	return cj
}

func TestValidateCronJob(t *testing.T) {
	runCreateCases(t, []createCase{
		{name: "valid", obj: validCronJob(nil)},
		{name: "@hourly with a time zone", obj: validCronJob(func(cj *batchv1.CronJob) {
			cj.Spec.Schedule, cj.Spec.TimeZone = "@hourly", ptr("Europe/Berlin")
		})},
		{name: "bad schedule", obj: validCronJob(func(cj *batchv1.CronJob) { cj.Spec.Schedule = "61 * * * *" }),
			errors: []want{inv("spec.schedule")}},
		{name: "TZ in schedule", obj: validCronJob(func(cj *batchv1.CronJob) { cj.Spec.Schedule = "TZ=UTC 0 * * * *" }),
			errors: []want{invd("spec.schedule", "cannot use TZ or CRON_TZ in schedule")}},
		{name: "unknown time zone", obj: validCronJob(func(cj *batchv1.CronJob) { cj.Spec.TimeZone = ptr("Mars/Olympus") }),
			errors: []want{inv("spec.timeZone")}},
		{name: "long name", obj: validCronJob(func(cj *batchv1.CronJob) { cj.Name = "a1234567890123456789012345678901234567890123456789012" }),
			errors: []want{invd("metadata.name", "must be no more than 52 characters")}},
		{name: "bad policy and limits", obj: validCronJob(func(cj *batchv1.CronJob) {
			cj.Spec.ConcurrencyPolicy = "Sometimes"
			cj.Spec.SuccessfulJobsHistoryLimit = ptr[int32](-1)
			cj.Spec.StartingDeadlineSeconds = ptr[int64](-1)
		}), errors: []want{unsup("spec.concurrencyPolicy"), inv("spec.successfulJobsHistoryLimit"), inv("spec.startingDeadlineSeconds")}},
		{name: "job template restartPolicy", obj: validCronJob(func(cj *batchv1.CronJob) {
			cj.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		}), errors: []want{unsup("spec.jobTemplate.spec.template.spec.restartPolicy")}},
	})
}
