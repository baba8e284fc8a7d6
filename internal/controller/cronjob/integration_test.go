package cronjob_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubette/kubette/internal/controller"
	"github.com/kubette/kubette/internal/controller/cronjob"
	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

const ns = "default"

// start runs the CronJob controller, reading the time from clk, until the test ends.
func start(t *testing.T, clk *clocktesting.FakePassiveClock) kubernetes.Interface {
	t.Helper()
	env := testenv.Start(t, testenv.Options{})
	deps, starter, err := controller.NewDeps(env.Config, "cronjob-test")
	if err != nil {
		t.Fatal(err)
	}
	c, err := cronjob.NewWithClock(deps, clk)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	starter.Start(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx, 2)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return env.Client
}

func newCronJob(name string, policy batchv1.ConcurrencyPolicy) *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.CronJobSpec{
			Schedule: "*/1 * * * *", ConcurrencyPolicy: policy,
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyOnFailure,
					Containers:    []corev1.Container{{Name: "c", Image: "busybox"}},
				}}},
			},
		},
	}
}

// touch changes an annotation of the CronJob, so that the controller syncs it now.
func touch(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	poll.Until(t, "touch "+name, func() error {
		cj, err := c.BatchV1().CronJobs(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cj.Annotations == nil {
			cj.Annotations = map[string]string{}
		}
		cj.Annotations["touched"] = time.Now().String()
		_, err = c.BatchV1().CronJobs(ns).Update(context.Background(), cj, metav1.UpdateOptions{})
		return err
	})
}

// jobsOf waits until exactly the named Jobs of the CronJob exist (not being deleted).
func jobsOf(t *testing.T, c kubernetes.Interface, cj string, names ...string) []batchv1.Job {
	t.Helper()
	var out []batchv1.Job
	poll.Until(t, fmt.Sprintf("Jobs %v of %s", names, cj), func() error {
		list, err := c.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + cj})
		if err != nil {
			return err
		}
		out = out[:0]
		got := map[string]bool{}
		for _, j := range list.Items {
			if j.DeletionTimestamp == nil {
				out = append(out, j)
				got[j.Name] = true
			}
		}
		if len(got) != len(names) {
			return fmt.Errorf("jobs %v", got)
		}
		for _, n := range names {
			if !got[n] {
				return fmt.Errorf("jobs %v", got)
			}
		}
		return nil
	})
	return out
}

func waitActive(t *testing.T, c kubernetes.Interface, name string, jobs ...string) *batchv1.CronJob {
	t.Helper()
	var cj *batchv1.CronJob
	poll.Until(t, fmt.Sprintf("active %v of %s", jobs, name), func() error {
		var err error
		if cj, err = c.BatchV1().CronJobs(ns).Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			return err
		}
		if len(cj.Status.Active) != len(jobs) {
			return fmt.Errorf("active %+v", cj.Status.Active)
		}
		for i, n := range jobs {
			if cj.Status.Active[i].Name != n {
				return fmt.Errorf("active %+v", cj.Status.Active)
			}
		}
		return nil
	})
	return cj
}

// minuteAfter is the first whole minute after t, and the name of its Job.
func minuteAfter(t time.Time, cj string, n int) (time.Time, string) {
	m := t.Truncate(time.Minute).Add(time.Duration(n) * time.Minute)
	return m, fmt.Sprintf("%s-%d", cj, m.Unix()/60)
}

func complete(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	poll.Until(t, "complete "+name, func() error {
		j, err := c.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		j.Status.StartTime = &now
		j.Status.CompletionTime = &now
		j.Status.Succeeded = 1
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
		_, err = c.BatchV1().Jobs(ns).UpdateStatus(context.Background(), j, metav1.UpdateOptions{})
		return err
	})
}

func TestCronJobForbid(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	c := start(t, clk)
	cj, err := c.BatchV1().CronJobs(ns).Create(context.Background(), newCronJob("forbid", batchv1.ForbidConcurrent), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first, firstName := minuteAfter(cj.CreationTimestamp.Time, "forbid", 1)
	clk.SetTime(first.Add(5 * time.Second))
	touch(t, c, "forbid")
	jobs := jobsOf(t, c, "forbid", firstName)
	j := jobs[0]
	ref := metav1.GetControllerOf(&j)
	if ref == nil || ref.UID != cj.UID || ref.Kind != "CronJob" {
		t.Errorf("Job controller %+v", ref)
	}
	if got := j.Annotations[cronjob.ScheduledTimestampAnnotation]; got != first.Format(time.RFC3339) {
		t.Errorf("scheduled timestamp %q, want %q", got, first.Format(time.RFC3339))
	}
	st := waitActive(t, c, "forbid", firstName)
	if st.Status.LastScheduleTime == nil || !st.Status.LastScheduleTime.Time.Equal(first) {
		t.Errorf("lastScheduleTime %v, want %v", st.Status.LastScheduleTime, first)
	}

	// The next minute comes while the first Job runs: Forbid starts none.
	second, secondName := minuteAfter(cj.CreationTimestamp.Time, "forbid", 2)
	clk.SetTime(second.Add(5 * time.Second))
	touch(t, c, "forbid")
	// Once the first Job completes, the missed time is caught up.
	complete(t, c, firstName)
	jobsOf(t, c, "forbid", firstName, secondName)
	done := waitActive(t, c, "forbid", secondName)
	if done.Status.LastSuccessfulTime == nil {
		t.Errorf("no lastSuccessfulTime: %+v", done.Status)
	}
}

func TestCronJobReplaceAndSuspend(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	c := start(t, clk)
	cj, err := c.BatchV1().CronJobs(ns).Create(context.Background(), newCronJob("replace", batchv1.ReplaceConcurrent), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first, firstName := minuteAfter(cj.CreationTimestamp.Time, "replace", 1)
	clk.SetTime(first.Add(time.Second))
	touch(t, c, "replace")
	jobsOf(t, c, "replace", firstName)
	waitActive(t, c, "replace", firstName)
	second, secondName := minuteAfter(cj.CreationTimestamp.Time, "replace", 2)
	clk.SetTime(second.Add(time.Second))
	touch(t, c, "replace")
	jobsOf(t, c, "replace", secondName)
	waitActive(t, c, "replace", secondName)

	// Suspended: no Job at the next time.
	poll.Until(t, "suspend", func() error {
		cur, err := c.BatchV1().CronJobs(ns).Get(context.Background(), "replace", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Suspend = ptr.To(true)
		_, err = c.BatchV1().CronJobs(ns).Update(context.Background(), cur, metav1.UpdateOptions{})
		return err
	})
	third, _ := minuteAfter(cj.CreationTimestamp.Time, "replace", 3)
	clk.SetTime(third.Add(time.Second))
	touch(t, c, "replace")
	// Resume with a starting deadline that the third time has missed by now: no Job for it.
	fourth, fourthName := minuteAfter(cj.CreationTimestamp.Time, "replace", 4)
	clk.SetTime(fourth.Add(2 * time.Second))
	poll.Until(t, "resume", func() error {
		cur, err := c.BatchV1().CronJobs(ns).Get(context.Background(), "replace", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Suspend = ptr.To(false)
		cur.Spec.StartingDeadlineSeconds = ptr.To[int64](10)
		_, err = c.BatchV1().CronJobs(ns).Update(context.Background(), cur, metav1.UpdateOptions{})
		return err
	})
	jobsOf(t, c, "replace", fourthName)
	waitActive(t, c, "replace", fourthName)
}

// TestCronJobRecoversItsOwnJob: a Job the controller made whose status update was
// lost is found again and listed as active, not made twice.
func TestCronJobRecoversItsOwnJob(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	c := start(t, clk)
	cj, err := c.BatchV1().CronJobs(ns).Create(context.Background(), newCronJob("lost", batchv1.AllowConcurrent), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first, firstName := minuteAfter(cj.CreationTimestamp.Time, "lost", 1)
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: firstName, Namespace: ns, Labels: map[string]string{"app": "lost"},
			Annotations: map[string]string{cronjob.ScheduledTimestampAnnotation: first.Format(time.RFC3339)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: "lost", UID: cj.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: cj.Spec.JobTemplate.Spec,
	}
	if _, err := c.BatchV1().Jobs(ns).Create(context.Background(), j, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(first.Add(time.Second))
	touch(t, c, "lost")
	got := waitActive(t, c, "lost", firstName)
	if got.Status.LastScheduleTime == nil || !got.Status.LastScheduleTime.Time.Equal(first) {
		t.Errorf("lastScheduleTime %v", got.Status.LastScheduleTime)
	}
	jobsOf(t, c, "lost", firstName)
}
