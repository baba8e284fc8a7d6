package cronjob_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/testenv"
)

// TestKubectlCronJobsAndJobs drives the real kubectl against the API server: it
// creates a CronJob, instantiates a Job from it with `create job --from`, and reads
// both tables. It is skipped when kubectl is not installed.
func TestKubectlCronJobsAndJobs(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	env := testenv.Start(t, testenv.Options{})
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(kubectl, append([]string{"--kubeconfig", env.Kubeconfig, "-n", ns}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("create", "cronjob", "hello", "--image=busybox", "--schedule=*/5 * * * *", "--", "echo", "hi")
	out := run("get", "cronjobs")
	for _, want := range []string{"NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST SCHEDULE", "AGE", "hello", "*/5 * * * *", "<none>", "False"} {
		if !strings.Contains(out, want) {
			t.Errorf("get cronjobs lacks %q:\n%s", want, out)
		}
	}
	run("create", "job", "manual", "--from=cronjob/hello")
	j, err := env.Client.BatchV1().Jobs(ns).Get(context.Background(), "manual", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if j.Annotations["cronjob.kubernetes.io/instantiate"] != "manual" {
		t.Errorf("annotations %v", j.Annotations)
	}
	if ref := metav1.GetControllerOf(j); ref == nil || ref.Kind != "CronJob" || ref.Name != "hello" {
		t.Errorf("owner %+v", ref)
	}
	if j.Spec.Selector == nil || j.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel] != string(j.UID) {
		t.Errorf("selector %+v", j.Spec.Selector)
	}
	out = run("get", "jobs")
	for _, want := range []string{"NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE", "manual", "Running", "0/1"} {
		if !strings.Contains(out, want) {
			t.Errorf("get jobs lacks %q:\n%s", want, out)
		}
	}
	// Bad input is refused with upstream's causes.
	cmd := exec.Command(kubectl, "--kubeconfig", env.Kubeconfig, "-n", ns, "create", "cronjob", "bad", "--image=busybox", "--schedule=99 * * * *")
	bad, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(bad), "spec.schedule: Invalid value") {
		t.Errorf("invalid schedule accepted or wrong message: %v\n%s", err, bad)
	}
}
