package printers

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// jobPrinter prints Jobs: NAME STATUS COMPLETIONS DURATION AGE | CONTAINERS IMAGES
// SELECTOR, as upstream 1.32.
func jobPrinter() Printer {
	specDoc := batchv1.JobSpec{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Status", "string", 0, "Status of the job."),
			column("Completions", "string", 0, batchv1.JobStatus{}.SwaggerDoc()["succeeded"]),
			column("Duration", "string", 0, "Time required to complete the job."),
			ageColumn(),
			column("Containers", "string", 1, "Names of each container in the template."),
			column("Images", "string", 1, "Images referenced by each container in the template."),
			column("Selector", "string", 1, specDoc["selector"]),
		},
		Row: rowFor(func(j *batchv1.Job, now time.Time) []interface{} {
			var completions string
			if j.Spec.Completions != nil {
				completions = fmt.Sprintf("%d/%d", j.Status.Succeeded, *j.Spec.Completions)
			} else if j.Spec.Parallelism != nil && *j.Spec.Parallelism > 1 {
				completions = fmt.Sprintf("%d/1 of %d", j.Status.Succeeded, *j.Spec.Parallelism)
			} else {
				completions = fmt.Sprintf("%d/1", j.Status.Succeeded)
			}
			var took string
			switch {
			case j.Status.StartTime == nil:
			case j.Status.CompletionTime == nil:
				took = duration.HumanDuration(now.Sub(j.Status.StartTime.Time))
			default:
				took = duration.HumanDuration(j.Status.CompletionTime.Sub(j.Status.StartTime.Time))
			}
			names, images := containerCells(j.Spec.Template.Spec.Containers)
			return []interface{}{
				j.Name, jobStatus(j), completions, took, translateTimestampSince(j.CreationTimestamp, now),
				names, images, metav1.FormatLabelSelector(j.Spec.Selector),
			}
		}),
	}
}

// jobStatus is the STATUS column: the terminal condition first, then a deletion in
// progress, then suspension and the interim conditions, else Running.
func jobStatus(j *batchv1.Job) string {
	has := func(t batchv1.JobConditionType) bool {
		for _, c := range j.Status.Conditions {
			if c.Type == t && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	}
	switch {
	case has(batchv1.JobComplete):
		return "Complete"
	case has(batchv1.JobFailed):
		return "Failed"
	case j.DeletionTimestamp != nil:
		return "Terminating"
	case has(batchv1.JobSuspended):
		return "Suspended"
	case has(batchv1.JobFailureTarget):
		return "FailureTarget"
	case has(batchv1.JobSuccessCriteriaMet):
		return "SuccessCriteriaMet"
	}
	return "Running"
}

// cronJobPrinter prints CronJobs: NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE
// AGE | CONTAINERS IMAGES SELECTOR, as upstream 1.32.
func cronJobPrinter() Printer {
	specDoc := batchv1.CronJobSpec{}.SwaggerDoc()
	statusDoc := batchv1.CronJobStatus{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			column("Schedule", "string", 0, specDoc["schedule"]),
			column("Timezone", "string", 0, specDoc["timeZone"]),
			column("Suspend", "boolean", 0, specDoc["suspend"]),
			column("Active", "integer", 0, statusDoc["active"]),
			column("Last Schedule", "string", 0, statusDoc["lastScheduleTime"]),
			ageColumn(),
			column("Containers", "string", 1, "Names of each container in the template."),
			column("Images", "string", 1, "Images referenced by each container in the template."),
			column("Selector", "string", 1, batchv1.JobSpec{}.SwaggerDoc()["selector"]),
		},
		Row: rowFor(func(cj *batchv1.CronJob, now time.Time) []interface{} {
			last := "<none>"
			if cj.Status.LastScheduleTime != nil {
				last = translateTimestampSince(*cj.Status.LastScheduleTime, now)
			}
			tz := "<none>"
			if cj.Spec.TimeZone != nil {
				tz = *cj.Spec.TimeZone
			}
			// Printed as the words True and False, as upstream's printBoolPtr.
			suspend := "False"
			if cj.Spec.Suspend != nil && *cj.Spec.Suspend {
				suspend = "True"
			}
			names, images := containerCells(cj.Spec.JobTemplate.Spec.Template.Spec.Containers)
			return []interface{}{
				cj.Name, cj.Spec.Schedule, tz, suspend, int64(len(cj.Status.Active)), last,
				translateTimestampSince(cj.CreationTimestamp, now),
				names, images, metav1.FormatLabelSelector(cj.Spec.JobTemplate.Spec.Selector),
			}
		}),
	}
}
