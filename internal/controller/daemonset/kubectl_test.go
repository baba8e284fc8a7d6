package daemonset_test

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

// TestKubectlRollout drives kubectl rollout status, history and undo on a DaemonSet,
// which read its ControllerRevisions, and reads the kubectl get tables.
func TestKubectlRollout(t *testing.T) {
	c := start(t, node("n1", nil), node("n2", nil))
	run := kubectl(t, c)
	c.create(newDaemonSet("agent", "agent:1"))
	if out := run("rollout", "status", "ds/agent", "--timeout=60s"); !strings.Contains(out, `daemon set "agent" successfully rolled out`) {
		t.Errorf("rollout status: %s", out)
	}
	run("set", "image", "ds/agent", "c=agent:2")
	run("annotate", "ds/agent", "kubernetes.io/change-cause=image 2")
	run("rollout", "status", "ds/agent", "--timeout=60s")
	c.runsOn("agent", "agent:2", "n1", "n2")
	out := run("rollout", "history", "ds/agent")
	for _, want := range []string{"REVISION", "CHANGE-CAUSE", "1 ", "2 "} {
		if !strings.Contains(out, want) {
			t.Errorf("rollout history lacks %q:\n%s", want, out)
		}
	}
	if out := run("rollout", "history", "ds/agent", "--revision=1"); !strings.Contains(out, "agent:1") {
		t.Errorf("revision 1:\n%s", out)
	}
	if out := run("rollout", "undo", "ds/agent"); !strings.Contains(out, "daemonset.apps/agent rolled back") {
		t.Errorf("undo: %s", out)
	}
	c.runsOn("agent", "agent:1", "n1", "n2")
	run("rollout", "status", "ds/agent", "--timeout=60s")
	out = run("get", "ds")
	for _, want := range []string{"NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE SELECTOR", "agent", "<none>"} {
		if !strings.Contains(out, want) {
			t.Errorf("get ds lacks %q:\n%s", want, out)
		}
	}
	out = run("get", "controllerrevisions")
	for _, want := range []string{"CONTROLLER", "REVISION", "daemonset.apps/agent", " 3 "} {
		if !strings.Contains(out, want) {
			t.Errorf("get controllerrevisions lacks %q:\n%s", want, out)
		}
	}
}
