package defaults

import (
	"maps"
	"math"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// setJob defaults a Job as upstream's SetDefaults_Job: completions and
// parallelism 1 when neither is set (parallelism 1 when only it is missing),
// backoffLimit 6 (the largest int32 with backoffLimitPerIndex), completionMode
// NonIndexed, suspend false, pod failure policy rules on pod conditions to status
// True, podReplacementPolicy (Failed with a pod failure policy, else
// TerminatingOrFailed), the labels from the template when the Job has none, and
// the template's pod spec.
func setJob(job *batchv1.Job) {
	spec := &job.Spec
	if spec.Completions == nil && spec.Parallelism == nil {
		spec.Completions = int32Ptr(1)
		spec.Parallelism = int32Ptr(1)
	}
	if spec.Parallelism == nil {
		spec.Parallelism = int32Ptr(1)
	}
	if spec.BackoffLimit == nil {
		if spec.BackoffLimitPerIndex != nil {
			spec.BackoffLimit = int32Ptr(math.MaxInt32)
		} else {
			spec.BackoffLimit = int32Ptr(6)
		}
	}
	if len(job.Labels) == 0 && len(spec.Template.Labels) > 0 {
		job.Labels = maps.Clone(spec.Template.Labels)
	}
	if spec.CompletionMode == nil {
		mode := batchv1.NonIndexedCompletion
		spec.CompletionMode = &mode
	}
	if spec.Suspend == nil {
		f := false
		spec.Suspend = &f
	}
	if spec.PodFailurePolicy != nil {
		for i := range spec.PodFailurePolicy.Rules {
			for j := range spec.PodFailurePolicy.Rules[i].OnPodConditions {
				if p := &spec.PodFailurePolicy.Rules[i].OnPodConditions[j]; p.Status == "" {
					p.Status = corev1.ConditionTrue
				}
			}
		}
	}
	if spec.PodReplacementPolicy == nil {
		policy := batchv1.TerminatingOrFailed
		if spec.PodFailurePolicy != nil {
			policy = batchv1.Failed
		}
		spec.PodReplacementPolicy = &policy
	}
	setPodSpec(&spec.Template.Spec)
}

// setCronJob defaults a CronJob as upstream's SetDefaults_CronJob: concurrencyPolicy
// Allow, suspend false, history limits of 3 successful and 1 failed Jobs, and the
// job template's pod spec.
func setCronJob(cj *batchv1.CronJob) {
	spec := &cj.Spec
	if spec.ConcurrencyPolicy == "" {
		spec.ConcurrencyPolicy = batchv1.AllowConcurrent
	}
	if spec.Suspend == nil {
		f := false
		spec.Suspend = &f
	}
	if spec.SuccessfulJobsHistoryLimit == nil {
		spec.SuccessfulJobsHistoryLimit = int32Ptr(3)
	}
	if spec.FailedJobsHistoryLimit == nil {
		spec.FailedJobsHistoryLimit = int32Ptr(1)
	}
	setPodSpec(&spec.JobTemplate.Spec.Template.Spec)
}
