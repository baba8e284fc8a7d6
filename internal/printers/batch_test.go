package printers

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestJobRows(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	start := metav1.NewTime(now.Add(-90 * time.Second))
	end := metav1.NewTime(now.Add(-30 * time.Second))
	cond := func(ct batchv1.JobConditionType) []batchv1.JobCondition {
		return []batchv1.JobCondition{{Type: ct, Status: corev1.ConditionTrue}}
	}
	i32 := func(v int32) *int32 { return &v }
	cases := []struct {
		job                         batchv1.Job
		status, completions, within string
	}{
		{batchv1.Job{Spec: batchv1.JobSpec{Completions: i32(3)}, Status: batchv1.JobStatus{Succeeded: 3, StartTime: &start, CompletionTime: &end, Conditions: cond(batchv1.JobComplete)}},
			"Complete", "3/3", "60s"},
		{batchv1.Job{Spec: batchv1.JobSpec{Parallelism: i32(4)}, Status: batchv1.JobStatus{StartTime: &start, Conditions: cond(batchv1.JobFailureTarget)}},
			"FailureTarget", "0/1 of 4", "90s"},
		{batchv1.Job{Spec: batchv1.JobSpec{Completions: i32(1)}, Status: batchv1.JobStatus{Conditions: cond(batchv1.JobSuspended)}},
			"Suspended", "0/1", ""},
		{batchv1.Job{Status: batchv1.JobStatus{Conditions: cond(batchv1.JobFailed)}}, "Failed", "0/1", ""},
		{batchv1.Job{Status: batchv1.JobStatus{Conditions: cond(batchv1.JobSuccessCriteriaMet)}}, "SuccessCriteriaMet", "0/1", ""},
	}
	for _, tc := range cases {
		table, err := Table(jobPrinter(), []runtime.Object{&tc.job}, now)
		if err != nil {
			t.Fatal(err)
		}
		cells := table.Rows[0].Cells
		if cells[1] != tc.status || cells[2] != tc.completions || cells[3] != tc.within {
			t.Errorf("cells %v, want status %q completions %q duration %q", cells[:4], tc.status, tc.completions, tc.within)
		}
	}
}

func TestCronJobRow(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	last := metav1.NewTime(now.Add(-2 * time.Minute))
	tz, yes := "Etc/UTC", true
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "c", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Spec:       batchv1.CronJobSpec{Schedule: "@hourly", TimeZone: &tz, Suspend: &yes},
		Status:     batchv1.CronJobStatus{Active: []corev1.ObjectReference{{Name: "c-1"}}, LastScheduleTime: &last},
	}
	table, err := Table(cronJobPrinter(), []runtime.Object{cj}, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []interface{}{"c", "@hourly", "Etc/UTC", "True", int64(1), "2m", "60m"}
	for i, w := range want {
		if table.Rows[0].Cells[i] != w {
			t.Errorf("cell %d = %v, want %v", i, table.Rows[0].Cells[i], w)
		}
	}
}
