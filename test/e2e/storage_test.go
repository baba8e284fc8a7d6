package e2e

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRestartPersistence stops a cluster with SIGTERM and starts `kubette up` again on
// the same data dir and port: everything created before is still there.
func TestRestartPersistence(t *testing.T) {
	requireTools(t)
	t.Parallel()
	c := startCluster(t)

	c.expectOutput(t, "namespace/keep created", "create", "namespace", "keep")
	c.expectOutput(t, "configmap/settings created", "create", "configmap", "settings", "-n", "keep", "--from-literal=color=blue")
	c.expectOutput(t, "deployment.apps/web created", "apply", "-n", "keep", "-f", writeFile(t, "web.yaml", deploymentManifest("web")))
	c.expectOutput(t, "deployment.apps/web scaled", "scale", "-n", "keep", "deploy", "web", "--replicas=2")
	c.expectOutput(t, "configmap/gone created", "create", "configmap", "gone", "-n", "keep")
	c.expectOutput(t, `configmap "gone" deleted`, "delete", "configmap", "gone", "-n", "keep")
	rvBefore := c.jsonpath(t, "{.metadata.resourceVersion}", "configmap", "settings", "-n", "keep")

	c.stop(t)
	c.restart(t)

	if v := c.jsonpath(t, "{.status.phase}", "namespace", "keep"); v != "Active" {
		t.Errorf("after a restart, namespace keep has phase %q, want Active", v)
	}
	if v := c.jsonpath(t, "{.data.color}", "configmap", "settings", "-n", "keep"); v != "blue" {
		t.Errorf("after a restart, configmap settings has data.color %q, want blue", v)
	}
	if v := c.jsonpath(t, "{.metadata.resourceVersion}", "configmap", "settings", "-n", "keep"); v != rvBefore {
		t.Errorf("after a restart, configmap settings has resourceVersion %q, want %q as before", v, rvBefore)
	}
	if v := c.jsonpath(t, "{.spec.replicas}/{.metadata.generation}", "deploy", "web", "-n", "keep"); v != "2/2" {
		t.Errorf("after a restart, deploy web has replicas/generation %q, want 2/2", v)
	}
	// Besides the root CA publisher's kube-root-ca.crt (in every namespace, as upstream),
	// only settings is left.
	out := c.must(t, "get", "cm", "-n", "keep", "--field-selector", "metadata.name!=kube-root-ca.crt")
	if rows := tableRows(out); len(rows) != 2 || rows[1][0] != "settings" {
		t.Errorf("after a restart, kubectl get cm -n keep must list settings only (gone was deleted):\n%s", out)
	}
	out = c.must(t, "get", "deploy", "-n", "keep")
	if rows := tableRows(out); len(rows) != 2 || rows[1][0] != "web" || rows[1][1] != "0/2" {
		t.Errorf("after a restart, kubectl get deploy -n keep must list web 0/2:\n%s", out)
	}
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		c.must(t, "get", "namespace", ns)
	}

	// The restarted cluster takes writes, and stops cleanly a second time.
	c.expectOutput(t, "configmap/after created", "create", "configmap", "after", "-n", "keep")
	c.stop(t)
}

// TestExternalEtcd runs `kubette apiserver` against a real etcd, and checks the objects
// land under the upstream key layout.
func TestExternalEtcd(t *testing.T) {
	requireTools(t)
	etcdBin := requireBinary(t, "etcd", "apt-get install etcd-server")
	t.Parallel()

	clientPort, peerPort := freePort(t), freePort(t)
	client := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peer := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	etcd := startProc(t, "etcd", false, etcdBin,
		"--data-dir", filepath.Join(t.TempDir(), "etcd"),
		"--name", "default",
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "default="+peer)
	healthy := poll(20*time.Second, func() bool {
		resp, err := http.Get(client + "/health")
		if err != nil {
			return etcd.exited()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"health":"true"`)
	})
	if !healthy || etcd.exited() {
		t.Fatalf("etcd did not become healthy at %s within 20 s (exited: %v, %v); output:\n%s", client, etcd.exited(), etcd.err, etcd.out.String())
	}

	c := startControlPlane(t, "apiserver", "--etcd-servers", client)
	if _, err := os.Stat(filepath.Join(c.dataDir, "etcd")); err == nil {
		t.Errorf("kubette apiserver --etcd-servers created an embedded etcd under %s", c.dataDir)
	}
	c.expectOutput(t, "configmap/external created", "create", "configmap", "external", "--from-literal=where=outside")
	if v := c.jsonpath(t, "{.data.where}", "configmap", "external"); v != "outside" {
		t.Errorf("configmap external read back data.where = %q, want outside", v)
	}

	t.Run("etcdctl sees the key", func(t *testing.T) {
		etcdctl := requireBinary(t, "etcdctl", "Debian ships it in etcd-client: apt-get install etcd-client")
		cmd := exec.Command(etcdctl, "--endpoints", client, "get", "--prefix", "--keys-only", "/registry/configmaps/")
		cmd.Env = append(os.Environ(), "ETCDCTL_API=3")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("ETCDCTL_API=3 %s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
		}
		keys := strings.Fields(string(out))
		if !slices.Contains(keys, "/registry/configmaps/default/external") {
			t.Errorf("etcd has no key /registry/configmaps/default/external; etcdctl get --prefix --keys-only /registry/configmaps/ printed:\n%s", out)
		}
		for _, k := range keys {
			if !regexp.MustCompile(`^/registry/configmaps/[a-z0-9-]+/[a-z0-9.-]+$`).MatchString(k) {
				t.Errorf("etcd key %q under /registry/configmaps/ is not /registry/configmaps/<namespace>/<name>", k)
			}
		}
	})

	c.stop(t)
	etcd.stop(t, false) // etcd re-raises SIGTERM after its shutdown, so it never exits 0
}
