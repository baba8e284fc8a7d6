package e2e

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/testenv/testimage"
)

// followLogs runs `kubectl logs -f` on a pod's container, waits until it printed its first
// line (so that it follows before the pod goes), and delivers all it printed once the
// container ends. The follow stops with the test at the latest.
func (nc *nodeCluster) followLogs(t *testing.T, pod, container string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cmd := nc.kubectlCmd(ctx, nil, "logs", "-f", pod, "-c", container)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatalf("kubectl logs -f %s: %v", pod, err)
	}
	done := make(chan string, 1)
	go func() {
		_ = cmd.Wait()
		done <- out.String()
	}()
	if !poll(60*time.Second, func() bool { return strings.Contains(out.String(), "\n") }) {
		t.Fatalf("kubectl logs -f %s printed nothing", pod)
	}
	return done
}

// eventsOf lists a pod's events as "<type> <reason>: <message>" lines.
func (nc *nodeCluster) eventsOf(t *testing.T, pod string) string {
	t.Helper()
	return nc.must(t, "get", "events", "--field-selector", "involvedObject.name="+pod,
		"-o", `jsonpath={range .items[*]}{.type} {.reason}: {.message}{"\n"}{end}`)
}

// TestLifecycleHooksDeadlineAndDebug runs on a real node: a postStart hook writing a file the
// main process reads, exec and httpGet preStop hooks that run before SIGTERM, a failing
// postStart hook, activeDeadlineSeconds, and kubectl debug adding an ephemeral container
// that shares the pod's network namespace.
func TestLifecycleHooksDeadlineAndDebug(t *testing.T) {
	nc := startNodeCluster(t)
	registry := testimage.Registry(t)
	testimage.Push(t, registry, "kubette/busybox:v1", testimage.Busybox(t))
	testimage.Push(t, registry, "kubette/server:v1", testimage.HTTPServer(t))
	bb, server := registry+"/kubette/busybox:v1", registry+"/kubette/server:v1"

	nc.must(t, "apply", "-f", writeFile(t, "pods.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: hooks}
spec:
  terminationGracePeriodSeconds: 20
  containers:
  - name: main
    image: %[1]s
    command: [sh, -c, 'trap "echo main got TERM; exit 0" TERM; while [ ! -f /tmp/poststart ]; do sleep 1; done; echo "main read: $(cat /tmp/poststart)"; while true; do sleep 1; done']
    lifecycle:
      postStart: {exec: {command: [sh, -c, 'echo written by postStart > /tmp/poststart']}}
      preStop: {exec: {command: [sh, -c, 'echo preStop ran > /proc/1/fd/1']}}
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  terminationGracePeriodSeconds: 20
  containers:
  - name: server
    image: %[2]s
    lifecycle:
      preStop: {httpGet: {path: /before-sigterm, port: 8080}}
---
apiVersion: v1
kind: Pod
metadata: {name: badhook}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %[1]s
    command: [sleep, "1000"]
    lifecycle:
      postStart: {exec: {command: [sh, -c, 'echo hook says no >&2; exit 7']}}
---
apiVersion: v1
kind: Pod
metadata: {name: deadline}
spec:
  activeDeadlineSeconds: 5
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %[1]s
    command: [sleep, "1000"]
`, bb, server)))

	// postStart ran before the pod was reported running, and the main process read its file.
	nc.waitPod(t, "hooks", "Running", 90*time.Second, running)
	if !poll(30*time.Second, func() bool {
		return strings.Contains(nc.kubectl(t, "logs", "hooks").stdout, "main read: written by postStart\n")
	}) {
		t.Errorf("the main process did not read the postStart file; logs:\n%s", nc.kubectl(t, "logs", "hooks"))
	}

	// The failing postStart hook: the event, the container killed, the pod failed.
	p := nc.waitPod(t, "badhook", "Failed", 90*time.Second, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if cs := p.Status.ContainerStatuses[0]; cs.State.Running != nil {
		t.Errorf("badhook's container still runs: %+v", cs.State)
	}
	if ev := nc.eventsOf(t, "badhook"); !strings.Contains(ev, "Warning FailedPostStartHook: PostStartHook failed") ||
		!strings.Contains(ev, "Normal Killing: FailedPostStartHook") {
		t.Errorf("badhook's events:\n%s", ev)
	}

	// activeDeadlineSeconds fails the pod with upstream's reason and message.
	p = nc.waitPod(t, "deadline", "failed by its deadline", 90*time.Second, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if p.Status.Reason != "DeadlineExceeded" || p.Status.Message != "Pod was active on the node longer than the specified deadline" {
		t.Errorf("deadline's status: reason %q message %q", p.Status.Reason, p.Status.Message)
	}
	nc.waitPod(t, "deadline", "its container stopped", 60*time.Second, func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Terminated != nil
	})
	if ev := nc.eventsOf(t, "deadline"); !strings.Contains(ev, "Normal DeadlineExceeded: Pod was active on the node longer than the specified deadline") {
		t.Errorf("deadline's events:\n%s", ev)
	}

	// kubectl debug: an ephemeral container in web's network namespace reaches its server on
	// localhost and, with --target, sees the server's processes (pid 1 is /server); its
	// output is its log.
	web := nc.waitPod(t, "web", "Running", 90*time.Second, running)
	r := nc.kubectl(t, "debug", "web", "--image="+bb, "--target=server", "--", "sh", "-c", "echo debug says hi; wget -qO- http://127.0.0.1:8080/from-debugger; echo pid1=$(tr '\\0' ' ' < /proc/1/cmdline)")
	if r.err != nil {
		t.Fatalf("kubectl debug: %s", r)
	}
	name := regexp.MustCompile(`debugger-[a-z0-9]+`).FindString(r.stdout + r.stderr)
	if name == "" {
		t.Fatalf("kubectl debug named no debug container: %s", r)
	}
	web = nc.waitPod(t, "web", "the debug container done", 90*time.Second, func(p *v1.Pod) bool {
		es := p.Status.EphemeralContainerStatuses
		return len(es) == 1 && es[0].Name == name && es[0].State.Terminated != nil
	})
	if term := web.Status.EphemeralContainerStatuses[0].State.Terminated; term.ExitCode != 0 {
		t.Errorf("the debug container exited %d", term.ExitCode)
	}
	if logs := nc.must(t, "logs", "web", "-c", name); !strings.Contains(logs, "debug says hi\n") || !strings.Contains(logs, "path=/from-debugger") ||
		!strings.Contains(logs, "pid1=/server") {
		t.Errorf("kubectl logs web -c %s = %q", name, logs)
	}
	if web.Status.ContainerStatuses[0].RestartCount != 0 || web.Status.ContainerStatuses[0].State.Running == nil {
		t.Errorf("the debug container disturbed the server: %+v", web.Status.ContainerStatuses[0])
	}
	if ev := nc.eventsOf(t, "web"); !strings.Contains(ev, "Normal Started: Started container "+name) {
		t.Errorf("web's events lack the debug container's start:\n%s", ev)
	}

	// Deletion runs the preStop hooks before SIGTERM: exec (writing to the main process's
	// output) and httpGet (logged by the server).
	hooksLogs, webLogs := nc.followLogs(t, "hooks", "main"), nc.followLogs(t, "web", "server")
	nc.must(t, "delete", "pod", "hooks", "web", "--wait=true", "--timeout=90s")
	for _, c := range []struct {
		pod        string
		logs       <-chan string
		hook, term string
	}{
		{"hooks", hooksLogs, "preStop ran", "main got TERM"},
		{"web", webLogs, "GET /before-sigterm", "received SIGTERM"},
	} {
		select {
		case out := <-c.logs:
			h, s := strings.Index(out, c.hook), strings.Index(out, c.term)
			if h < 0 || s < 0 || h > s {
				t.Errorf("%s's log: want %q before %q:\n%s", c.pod, c.hook, c.term, out)
			}
		case <-time.After(90 * time.Second):
			t.Errorf("kubectl logs -f %s did not end after the pod was deleted", c.pod)
		}
	}
}
