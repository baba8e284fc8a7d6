package deployment_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
)

// kubectlPath is where the machines have the real kubectl.
const kubectlPath = "/usr/bin/kubectl"

// kubectl runs the real kubectl against the cluster in its namespace, with a
// private HOME and cache, and returns its combined output.
func (c *cluster) kubectl(args ...string) (string, error) {
	c.t.Helper()
	home := filepath.Join(c.t.TempDir(), "home")
	ctx, cancel := context.WithTimeout(c.ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectlPath, append([]string{"--kubeconfig", c.kubeconfig, "-n", c.ns}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+home, "KUBECACHEDIR="+filepath.Join(home, "cache"), "KUBECONFIG="+c.kubeconfig)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// mustKubectl runs kubectl and fails the test when it fails or its output
// does not match want.
func (c *cluster) mustKubectl(want string, args ...string) string {
	c.t.Helper()
	out, err := c.kubectl(args...)
	// kubette's API server answers a PATCH without a resourceVersion with 409
	// when another write lands between its read and its compare-and-swap
	// (upstream retries such a patch on the fresh object); the controller's
	// status writes make that likely here. Retry, as a person would.
	for i := 0; err != nil && strings.Contains(out, "Error from server (Conflict)") && i < 5; i++ {
		c.t.Logf("kubectl %s: conflict, retrying (known server bug): %s", strings.Join(args, " "), strings.TrimSpace(out))
		out, err = c.kubectl(args...)
	}
	if err != nil {
		c.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if !regexp.MustCompile(want).MatchString(out) {
		c.t.Fatalf("kubectl %s printed\n%s\nwant it to match %q", strings.Join(args, " "), out, want)
	}
	return out
}

// TestIntegrationKubectlRollout drives a Deployment with the real kubectl:
// create, rollout status, set image, rollout history, undo, restart, pause
// and resume.
func TestIntegrationKubectlRollout(t *testing.T) {
	if _, err := os.Stat(kubectlPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("kubectl is required in CI: %v", err)
		}
		t.Skipf("no kubectl: %v", err)
	}
	c := startCluster(t)

	c.mustKubectl(`deployment.apps/web created`, "create", "deployment", "web", "--image=example/web:v1", "--replicas=3")
	c.mustKubectl(`deployment "web" successfully rolled out`, "rollout", "status", "deployment/web", "--timeout=60s")

	// The change-cause goes to the current (new) ReplicaSet: annotate after
	// the image changed, or revision 1 would get it (as upstream).
	c.mustKubectl(`image updated`, "set", "image", "deployment/web", "web=example/web:v2")
	c.mustKubectl(`annotated`, "annotate", "deployment/web", "kubernetes.io/change-cause=image v2")
	c.mustKubectl(`deployment "web" successfully rolled out`, "rollout", "status", "deployment/web", "--timeout=60s")
	c.mustKubectl(`(?s)REVISION\s+CHANGE-CAUSE\s+1\s+<none>\s+2\s+image v2`, "rollout", "history", "deployment/web")
	c.mustKubectl(`(?s)revision #2.*example/web:v2`, "rollout", "history", "deployment/web", "--revision=2")

	c.mustKubectl(`rolled back`, "rollout", "undo", "deployment/web")
	c.mustKubectl(`deployment "web" successfully rolled out`, "rollout", "status", "deployment/web", "--timeout=60s")
	c.mustKubectl(`(?s)REVISION\s+CHANGE-CAUSE\s+2\s+image v2\s+3\s+<none>`, "rollout", "history", "deployment/web")
	if d := c.getDeployment("web"); d.Spec.Template.Spec.Containers[0].Image != "example/web:v1" {
		t.Errorf("image after undo = %q", d.Spec.Template.Spec.Containers[0].Image)
	}

	c.mustKubectl(`restarted`, "rollout", "restart", "deployment/web")
	c.mustKubectl(`deployment "web" successfully rolled out`, "rollout", "status", "deployment/web", "--timeout=60s")
	c.mustKubectl(`(?s)\s4\s`, "rollout", "history", "deployment/web")

	c.mustKubectl(`paused`, "rollout", "pause", "deployment/web")
	c.mustKubectl(`image updated`, "set", "image", "deployment/web", "web=example/web:v3")
	time.Sleep(500 * time.Millisecond)
	if rss := c.replicaSets(c.getDeployment("web")); len(rss) != 3 {
		t.Errorf("a paused deployment rolled out: %s", sizes(rss))
	}
	c.mustKubectl(`resumed`, "rollout", "resume", "deployment/web")
	c.mustKubectl(`deployment "web" successfully rolled out`, "rollout", "status", "deployment/web", "--timeout=60s")
	d := c.getDeployment("web")
	rss := c.replicaSets(d)
	latest := rss[len(rss)-1]
	if latest.Annotations[revisionKey] != "5" || latest.Spec.Template.Spec.Containers[0].Image != "example/web:v3" || *latest.Spec.Replicas != 3 {
		t.Errorf("latest replica set %s revision %q image %q", latest.Name, latest.Annotations[revisionKey], latest.Spec.Template.Spec.Containers[0].Image)
	}
	if cond := condition(d, appsv1.DeploymentProgressing); cond == nil || cond.Reason != "NewReplicaSetAvailable" {
		t.Errorf("Progressing = %+v", cond)
	}

	// kubectl scale goes through deployments/scale; the controller resizes.
	c.mustKubectl(`scaled`, "scale", "deployment/web", "--replicas=5")
	c.mustKubectl(`deployment "web" successfully rolled out`, "rollout", "status", "deployment/web", "--timeout=60s")
	c.mustKubectl(`web\s+5/5\s+5\s+5`, "get", "deployment", "web")
}
