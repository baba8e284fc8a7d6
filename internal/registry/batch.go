package registry

import (
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var batchV1 = schema.GroupVersion{Group: "batch", Version: "v1"}

// Labels the API server puts on a Job's pod template (and selector) unless the Job
// asks for a manual selector, as upstream's job strategy does.
const (
	legacyControllerUIDLabel = "controller-uid"
	legacyJobNameLabel       = "job-name"
)

// batchResources are the batch/v1 kinds: Jobs and CronJobs.
func batchResources() []*Resource {
	return []*Resource{
		{
			GroupVersion: batchV1, Kind: "Job", ListKind: "JobList", Plural: "jobs", Singular: "job", Namespaced: true,
			Categories: []string{"all"}, StoragePrefix: "/registry/jobs", Subresources: []string{"status"},
			Strategy: Strategy{PrepareForCreate: prepareJobForCreate, PrepareForUpdate: prepareJobForUpdate},
			New:      func() runtime.Object { return &batchv1.Job{} }, NewList: func() runtime.Object { return &batchv1.JobList{} },
			Fields: func(obj runtime.Object) fields.Set {
				j, _ := obj.(*batchv1.Job)
				if j == nil {
					j = &batchv1.Job{}
				}
				return fields.Set{"status.successful": strconv.Itoa(int(j.Status.Succeeded))}
			},
		},
		{
			GroupVersion: batchV1, Kind: "CronJob", ListKind: "CronJobList", Plural: "cronjobs", Singular: "cronjob", Namespaced: true,
			ShortNames: []string{"cj"}, Categories: []string{"all"}, StoragePrefix: "/registry/cronjobs", Subresources: []string{"status"},
			Strategy: Strategy{PrepareForCreate: prepareCronJobForCreate},
			New:      func() runtime.Object { return &batchv1.CronJob{} }, NewList: func() runtime.Object { return &batchv1.CronJobList{} },
		},
	}
}

// prepareJobForCreate clears the status and, unless spec.manualSelector is true,
// generates the selector and the template labels from the Job's UID and name, as
// upstream's job strategy (the server has set the UID before this runs).
func prepareJobForCreate(obj runtime.Object) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return
	}
	job.Status = batchv1.JobStatus{}
	if job.Spec.ManualSelector != nil && *job.Spec.ManualSelector {
		return
	}
	generateJobSelector(job)
}

// generateJobSelector adds the controller-uid and job-name labels to the template
// and makes the selector match the controller-uid label alone. Labels a user set to
// other values are left for validation to reject.
func generateJobSelector(job *batchv1.Job) {
	uid := string(job.UID)
	if job.Spec.Template.Labels == nil {
		job.Spec.Template.Labels = map[string]string{}
	}
	for _, kv := range [][2]string{
		{legacyJobNameLabel, job.Name}, {batchv1.JobNameLabel, job.Name},
		{legacyControllerUIDLabel, uid}, {batchv1.ControllerUidLabel, uid},
	} {
		if _, set := job.Spec.Template.Labels[kv[0]]; !set {
			job.Spec.Template.Labels[kv[0]] = kv[1]
		}
	}
	if job.Spec.Selector == nil {
		job.Spec.Selector = &metav1.LabelSelector{}
	}
	if len(job.Spec.Selector.MatchLabels)+len(job.Spec.Selector.MatchExpressions) == 0 {
		job.Spec.Selector.MatchLabels = map[string]string{batchv1.ControllerUidLabel: uid}
	}
}

// prepareJobForUpdate keeps a generated selector when an update leaves it out, as
// kubectl replace does with a Job read from a file.
func prepareJobForUpdate(obj, old runtime.Object) {
	job, ok1 := obj.(*batchv1.Job)
	prev, ok2 := old.(*batchv1.Job)
	if !ok1 || !ok2 {
		return
	}
	if job.Spec.Selector == nil && (prev.Spec.ManualSelector == nil || !*prev.Spec.ManualSelector) {
		job.Spec.Selector = prev.Spec.Selector.DeepCopy()
	}
}

func prepareCronJobForCreate(obj runtime.Object) {
	if cj, ok := obj.(*batchv1.CronJob); ok {
		cj.Status = batchv1.CronJobStatus{}
	}
}
