package apiserver_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kubette/kubette/internal/testenv"
	"github.com/kubette/kubette/internal/testenv/poll"
)

const crontabCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: crontabs, singular: crontab, kind: CronTab, shortNames: [ct]}
  versions:
  - name: v1
    served: true
    storage: true
    additionalPrinterColumns:
    - {name: Spec, type: string, jsonPath: .spec.cronSpec}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              cronSpec: {type: string}
              image: {type: string}
              replicas: {type: integer, default: 1}
`

const crontab = `apiVersion: stable.example.com/v1
kind: CronTab
metadata:
  name: my-new-cron-object
spec:
  cronSpec: "* * * * */5"
  image: my-awesome-cron-image
`

// TestCustomResourcesWithKubectl: the real kubectl applies a CRD and an object of
// it, lists it by its short name with the CRD's printer columns, applies a change
// (client-side apply: a merge patch) and deletes it.
func TestCustomResourcesWithKubectl(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("kubectl is not installed")
		}
		t.Skip("kubectl not installed")
	}
	env := testenv.Start(t, testenv.Options{})
	dir := t.TempDir()
	run := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", env.Kubeconfig, "-n", "default"}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+dir)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(crontabCRD, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply CRD: %v\n%s", err, out)
	}
	if out, err := run("", "wait", "--for=condition=Established", "crd/crontabs.stable.example.com", "--timeout=30s"); err != nil {
		t.Fatalf("wait: %v\n%s", err, out)
	}
	// kubectl's discovery cache may not have the new group yet: retry as a user would.
	poll.Until(t, "kubectl apply of a CronTab", func() error {
		out, err := run(crontab, "apply", "-f", "-")
		if err != nil {
			return &cmdError{out, err}
		}
		return nil
	})
	out, err := run("", "get", "ct")
	if err != nil {
		t.Fatalf("get: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME SPEC REPLICAS" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "my-new-cron-object * * * * */5 1") {
		t.Errorf("kubectl get ct:\n%s", out)
	}
	// The CRD's schema is published: kubectl explain reads it.
	out, err = run("", "explain", "crontabs.spec")
	if err != nil || !strings.Contains(out, "cronSpec") || !strings.Contains(out, "replicas") {
		t.Errorf("kubectl explain crontabs.spec: %v\n%s", err, out)
	}
	changed := strings.Replace(crontab, "my-awesome-cron-image", "another-image", 1)
	if out, err := run(changed, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply change: %v\n%s", err, out)
	}
	out, err = run("", "get", "crontab", "my-new-cron-object", "-o", "jsonpath={.spec.image} {.metadata.generation}")
	if err != nil || out != "another-image 2" {
		t.Errorf("after apply: %q %v", out, err)
	}
	if out, err := run("", "delete", "crontab", "my-new-cron-object"); err != nil {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	out, err = run("", "get", "crontabs")
	if err != nil || !strings.Contains(out, "No resources found") {
		t.Errorf("get after delete: %q %v", out, err)
	}
}

type cmdError struct {
	out string
	err error
}

func (e *cmdError) Error() string { return e.err.Error() + ": " + e.out }
