package statefulset_test

import (
	"os/exec"
	"strings"
	"testing"
)

// kubectl returns a function running the real kubectl against c; the test is skipped
// when kubectl is not installed.
func kubectl(t *testing.T, c *cluster) func(args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	return func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append([]string{"--kubeconfig", c.kubeconfig, "-n", ns}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
}

// TestKubectlRolloutAndScale drives kubectl rollout status, history and undo and
// kubectl scale on a StatefulSet, and reads the kubectl get table.
func TestKubectlRolloutAndScale(t *testing.T) {
	c := start(t)
	run := kubectl(t, c)
	c.create(newSet("web", "web:1", 2))
	if out := run("rollout", "status", "sts/web", "--timeout=60s"); !strings.Contains(out, "partitioned roll out complete") && !strings.Contains(out, "rolling update complete") {
		t.Errorf("rollout status: %s", out)
	}
	run("set", "image", "sts/web", "c=web:2")
	run("rollout", "status", "sts/web", "--timeout=60s")
	c.want("web", "web-0:web:2:R web-1:web:2:R")
	out := run("rollout", "history", "sts/web")
	if !strings.Contains(out, "REVISION") || !strings.Contains(out, "1 ") || !strings.Contains(out, "2 ") {
		t.Errorf("rollout history:\n%s", out)
	}
	if out := run("rollout", "history", "sts/web", "--revision=2"); !strings.Contains(out, "web:2") {
		t.Errorf("revision 2:\n%s", out)
	}
	if out := run("rollout", "undo", "sts/web"); !strings.Contains(out, "statefulset.apps/web rolled back") {
		t.Errorf("undo: %s", out)
	}
	c.want("web", "web-0:web:1:R web-1:web:1:R")
	run("rollout", "status", "sts/web", "--timeout=60s")

	if out := run("scale", "sts/web", "--replicas=3"); !strings.Contains(out, "statefulset.apps/web scaled") {
		t.Errorf("scale: %s", out)
	}
	c.want("web", "web-0:web:1:R web-1:web:1:R web-2:web:1:R")
	c.status("web", rolledOut(3))
	out = run("get", "sts")
	for _, want := range []string{"NAME", "READY", "AGE", "web", "3/3"} {
		if !strings.Contains(out, want) {
			t.Errorf("get sts lacks %q:\n%s", want, out)
		}
	}
}
