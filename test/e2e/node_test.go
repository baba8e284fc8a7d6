package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kubette/kubette/internal/testenv/needs"
	"github.com/kubette/kubette/internal/testenv/testimage"
)

// nodeClusters numbers the node clusters of this test process, so that each gets a pod range
// and a bridge of its own.
var nodeClusters atomic.Int32

// nodeCluster is a cluster whose node is this machine, with the names that keep it apart from
// other clusters on it.
type nodeCluster struct {
	*cluster
	bridge, podCIDR string
}

// startNodeCluster runs `kubette up` with this machine as its node (the built-in runtime,
// runc and CNI) and extraArgs, waits for the Node to be Ready, and takes everything down at
// the end.
func startNodeCluster(t *testing.T, extraArgs ...string) *nodeCluster {
	t.Helper()
	requireTools(t)
	needs.Root(t)
	needs.Binary(t, "runc", "runc")
	needs.CNIPlugins(t)
	n := nodeClusters.Add(1)
	nc := &nodeCluster{
		bridge:  fmt.Sprintf("kbe%d-%d", os.Getpid()%10000, n),
		podCIDR: fmt.Sprintf("10.244.%d.0/24", 200+(os.Getpid()+int(n))%50),
	}
	// t.TempDir registers the removal of every temporary directory of the test at its first
	// call: call it now, so that the removal runs after `kubette down` (clean-ups run last
	// registered first) and finds no mounted root filesystem. `down` itself is registered
	// before the cluster's clean-up, so it runs after `up` stopped.
	_ = t.TempDir()
	var dataDir string
	t.Cleanup(func() {
		if dataDir == "" {
			return
		}
		// No --bridge: down finds the cluster's bridge in its data dir.
		out, err := exec.Command(tools.kubette, "down", "--data-dir", dataDir).CombinedOutput()
		if err != nil {
			t.Errorf("kubette down: %v\n%s", err, out)
		}
	})
	args := []string{"--node=true", "--ingress=false", "--pod-cidr", nc.podCIDR, "--bridge", nc.bridge,
		"--kubelet-port", strconv.Itoa(freePort(t))}
	nc.cluster = startControlPlane(t, "up", append(args, extraArgs...)...)
	dataDir = nc.dataDir
	if !poll(60*time.Second, func() bool {
		r := nc.kubectl(t, "get", "nodes", "-o", "jsonpath={.items[0].status.conditions[?(@.type==\"Ready\")].status}")
		return r.err == nil && r.stdout == "True"
	}) {
		t.Fatalf("the node did not become Ready:\n%s\n%s", nc.kubectl(t, "get", "nodes", "-o", "yaml"), nc.proc.out.String())
	}
	return nc
}

// pod returns the pod as the API server has it.
func (nc *nodeCluster) pod(t *testing.T, name string) *v1.Pod {
	t.Helper()
	out := nc.must(t, "get", "pod", name, "-o", "json")
	var p v1.Pod
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("decode pod %s: %v", name, err)
	}
	return &p
}

// waitPod polls the pod until cond holds, failing with the pod and its events otherwise.
func (nc *nodeCluster) waitPod(t *testing.T, name, what string, timeout time.Duration, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var last *v1.Pod
	if poll(timeout, func() bool { last = nc.pod(t, name); return cond(last) }) {
		return last
	}
	t.Fatalf("pod %s: %s did not happen within %s; pod:\n%s\nevents:\n%s", name, what, timeout,
		nc.must(t, "get", "pod", name, "-o", "yaml"), nc.kubectl(t, "get", "events", "--field-selector", "involvedObject.name="+name).stdout)
	return nil
}

func running(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil
}

func ready(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// httpGet fetches url from this machine (pod IPs are local), retrying until it answers.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	client := &http.Client{Timeout: 3 * time.Second}
	var body string
	var lastErr error
	if poll(30*time.Second, func() bool {
		resp, err := client.Get(url)
		if err != nil {
			lastErr = err
			return false
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			lastErr = fmt.Errorf("status %d, body %q, err %v", resp.StatusCode, b, err)
			return false
		}
		body = string(b)
		return true
	}) {
		return body
	}
	t.Fatalf("GET %s: %v", url, lastErr)
	return ""
}

// TestNodeRunsRealContainers covers the node end to end with the real kubectl: an image loaded
// from a tarball and one pulled from a registry, a bare pod's output and HTTP on its pod IP,
// a Deployment's three processes, SIGTERM on deletion, and restart counts across a restart of
// `up` with the containers left running.
func TestNodeRunsRealContainers(t *testing.T) {
	nc := startNodeCluster(t)

	// An image loaded from a tarball while the cluster runs.
	tarball := testimage.WriteTarball(t, t.TempDir(), "kubette.test/busybox:1", testimage.Busybox(t))
	if out, err := exec.Command(tools.kubette, "image", "load", "--data-dir", nc.dataDir, tarball).CombinedOutput(); err != nil {
		t.Fatalf("kubette image load: %v\n%s", err, out)
	}
	if out, err := exec.Command(tools.kubette, "image", "ls", "--data-dir", nc.dataDir).CombinedOutput(); err != nil || !strings.Contains(string(out), "kubette.test/busybox") {
		t.Fatalf("kubette image ls: %v\n%s", err, out)
	}
	nc.must(t, "run", "hello", "--image=kubette.test/busybox:1", "--image-pull-policy=Never", "--restart=Never",
		"--", "sh", "-c", "echo hello from a real container; echo pid $$$$")
	p := nc.waitPod(t, "hello", "Succeeded", 60*time.Second, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
	if st := p.Status.ContainerStatuses[0].State.Terminated; st == nil || st.ExitCode != 0 || st.Reason != "Completed" {
		t.Errorf("hello's container state = %+v, want terminated 0 Completed", p.Status.ContainerStatuses[0].State)
	}
	if got := nc.must(t, "logs", "hello"); got != "hello from a real container\npid 1\n" {
		t.Errorf("kubectl logs hello = %q", got)
	}

	// The HTTP server image pulled from a registry; its pod IP answers from the host.
	registry := testimage.Registry(t)
	image := registry + "/kubette/server:v1"
	testimage.Push(t, registry, "kubette/server:v1", testimage.HTTPServer(t))
	nc.must(t, "run", "web", "--image="+image, "--env=TERM_DELAY=0")
	p = nc.waitPod(t, "web", "Running", 60*time.Second, running)
	if p.Status.PodIP == "" || p.Status.HostIP == "" || p.Status.StartTime == nil {
		t.Errorf("web's status lacks podIP/hostIP/startTime: %+v", p.Status)
	}
	if body := httpGet(t, "http://"+p.Status.PodIP+":8080/hello"); !strings.Contains(body, "path=/hello") {
		t.Errorf("GET / on the pod IP = %q", body)
	}
	events := nc.must(t, "get", "events", "--field-selector", "involvedObject.name=web", "-o", "jsonpath={range .items[*]}{.reason} {end}")
	for _, want := range []string{"Scheduled", "Pulling", "Pulled", "Created", "Started"} {
		if !strings.Contains(events, want) {
			t.Errorf("web's events %q lack %s", events, want)
		}
	}

	// A Deployment of three replicas: three server processes really run, each in a cgroup of its pod.
	nc.must(t, "create", "deployment", "three", "--image="+image, "--replicas=3")
	nc.must(t, "rollout", "status", "deployment/three", "--timeout=90s")
	pods := nc.must(t, "get", "pods", "-l", "app=three", "-o", "jsonpath={range .items[*]}{.metadata.uid}{\"\\n\"}{end}")
	uids := strings.Fields(pods)
	if len(uids) != 3 {
		t.Fatalf("deployment three has pods %q, want 3", pods)
	}
	for _, uid := range uids {
		dir := filepath.Join("/sys/fs/cgroup/pids/kubette", "pod"+uid)
		procs := cgroupProcs(t, dir)
		if len(procs) == 0 {
			t.Errorf("no process in the cgroup %s of pod %s", dir, uid)
		}
	}

	// Deleting a pod sends SIGTERM first: the server logs it.
	logs := make(chan string, 1)
	go func() {
		r := nc.kubectl(t, "logs", "-f", "web")
		logs <- r.stdout
	}()
	time.Sleep(500 * time.Millisecond) // let the follow start
	nc.must(t, "delete", "pod", "web", "--wait=true", "--timeout=60s")
	select {
	case out := <-logs:
		if !strings.Contains(out, "received SIGTERM") {
			t.Errorf("the followed log of web ends without \"received SIGTERM\":\n%s", out)
		}
	case <-time.After(60 * time.Second):
		t.Errorf("kubectl logs -f web did not end after the pod was deleted")
	}

	// Restart counts and processes survive a restart of `up` (runtime and kubelet included).
	nc.must(t, "run", "crash", "--image=kubette.test/busybox:1", "--image-pull-policy=Never", "--", "sh", "-c", "sleep 1; exit 1")
	nc.waitPod(t, "crash", "a restart", 60*time.Second, func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].RestartCount >= 1
	})
	before := map[string]string{}
	for _, uid := range uids {
		before[uid] = strings.Join(cgroupProcs(t, filepath.Join("/sys/fs/cgroup/pids/kubette", "pod"+uid)), ",")
	}
	crashBefore := nc.pod(t, "crash").Status.ContainerStatuses[0].RestartCount
	nc.stop(t)
	nc.restart(t)
	if !poll(60*time.Second, func() bool {
		r := nc.kubectl(t, "get", "nodes", "-o", "jsonpath={.items[0].status.conditions[?(@.type==\"Ready\")].status}")
		return r.err == nil && r.stdout == "True"
	}) {
		t.Fatalf("the node is not Ready after the restart")
	}
	for _, uid := range uids {
		if got := strings.Join(cgroupProcs(t, filepath.Join("/sys/fs/cgroup/pids/kubette", "pod"+uid)), ","); got != before[uid] {
			t.Errorf("pod %s's processes changed across the restart: %s → %s", uid, before[uid], got)
		}
	}
	nc.waitPod(t, "crash", "its restart count kept", 30*time.Second, func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].RestartCount >= crashBefore
	})
}

// TestNodeReportsFailures checks the states and reasons a user sees for broken pods.
func TestNodeReportsFailures(t *testing.T) {
	nc := startNodeCluster(t)
	registry := testimage.Registry(t)
	testimage.Push(t, registry, "kubette/busybox:v1", testimage.Busybox(t))
	bb := registry + "/kubette/busybox:v1"

	// An image that does not exist: ErrImagePull, then ImagePullBackOff, with the registry's message.
	nc.must(t, "run", "noimage", "--image="+registry+"/kubette/missing:v1")
	nc.waitPod(t, "noimage", "ImagePullBackOff", 90*time.Second, func(p *v1.Pod) bool {
		return waitingReason(p) == "ImagePullBackOff"
	})
	events := nc.must(t, "get", "events", "--field-selector", "involvedObject.name=noimage", "-o", "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}")
	if !strings.Contains(events, "ErrImagePull") && !strings.Contains(events, "Failed") {
		t.Errorf("noimage's events lack the pull failure:\n%s", events)
	}
	if !strings.Contains(strings.ToLower(events), "not found") && !strings.Contains(events, "MANIFEST_UNKNOWN") && !strings.Contains(events, "NAME_UNKNOWN") {
		t.Errorf("noimage's events do not carry the registry's message:\n%s", events)
	}

	// An invalid command: a clear StartError, as containerd's runtime and upstream's kubelet
	// report it (runc create runs in StartContainer): restartPolicy Never, so the container
	// is Terminated StartError, exit code 128, with runc's message, and the pod Failed.
	nc.must(t, "run", "badcmd", "--image="+bb, "--restart=Never", "--command", "--", "/no/such/binary")
	p := nc.waitPod(t, "badcmd", "a StartError", 60*time.Second, func(p *v1.Pod) bool {
		if len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		s := p.Status.ContainerStatuses[0].State
		return s.Terminated != nil && s.Terminated.Reason == "StartError" && p.Status.Phase == v1.PodFailed
	})
	if code, msg := p.Status.ContainerStatuses[0].State.Terminated.ExitCode, containerMessage(p); code != 128 || !strings.Contains(msg, "/no/such/binary") {
		t.Errorf("badcmd: StartError with exit code %d and message %q, want 128 and runc's message naming the missing binary", code, msg)
	}
	if events := nc.must(t, "get", "events", "--field-selector", "involvedObject.name=badcmd", "-o", "jsonpath={range .items[*]}{.type} {.reason}: {.message}{\"\\n\"}{end}"); !strings.Contains(events, "Warning Failed: Error: ") || !strings.Contains(events, "/no/such/binary") {
		t.Errorf("badcmd's events lack the Warning Failed 'Error: ...' naming the binary:\n%s", events)
	}

	// A container that exits 1 goes to CrashLoopBackOff.
	nc.must(t, "run", "crashloop", "--image="+bb, "--", "sh", "-c", "exit 1")
	nc.waitPod(t, "crashloop", "CrashLoopBackOff", 90*time.Second, func(p *v1.Pod) bool {
		return waitingReason(p) == "CrashLoopBackOff"
	})

	// A memory limit kills a hog with OOMKilled.
	hog := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"hog"},"spec":{"restartPolicy":"Never","containers":[{"name":"hog","image":"` + bb + `",
	  "command":["sh","-c","x=a; while true; do x=$x$x; done"],"resources":{"limits":{"memory":"32Mi"}}}]}}`
	applyJSON(t, nc.cluster, hog)
	p = nc.waitPod(t, "hog", "an OOM kill", 90*time.Second, func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Terminated != nil
	})
	if r := p.Status.ContainerStatuses[0].State.Terminated.Reason; r != "OOMKilled" {
		t.Errorf("hog terminated with reason %q, want OOMKilled", r)
	}
}

// applyJSON creates an object from its JSON with kubectl.
func applyJSON(t *testing.T, c *cluster, doc string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "obj.json")
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	c.must(t, "apply", "-f", f)
}

func waitingReason(p *v1.Pod) string {
	if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Waiting == nil {
		return ""
	}
	return p.Status.ContainerStatuses[0].State.Waiting.Reason
}

func containerMessage(p *v1.Pod) string {
	if len(p.Status.ContainerStatuses) == 0 {
		return ""
	}
	s := p.Status.ContainerStatuses[0]
	switch {
	case s.State.Terminated != nil:
		return s.State.Terminated.Message
	case s.State.Waiting != nil:
		return s.State.Waiting.Message
	case s.LastTerminationState.Terminated != nil:
		return s.LastTerminationState.Terminated.Message
	}
	return ""
}

// cgroupProcs lists the processes in a cgroup v1 directory and the cgroups below it.
func cgroupProcs(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err == nil {
			out = append(out, strings.Fields(string(b))...)
		}
		return nil
	})
	return out
}

// TestNodeProbes checks that a failing liveness probe restarts a container, a failing
// readiness probe keeps a pod out of Ready, and a crash loop backs off with growing delays.
func TestNodeProbes(t *testing.T) {
	nc := startNodeCluster(t)
	registry := testimage.Registry(t)
	testimage.Push(t, registry, "kubette/busybox:v1", testimage.Busybox(t))
	bb := registry + "/kubette/busybox:v1"

	// Liveness: the file the exec probe reads disappears after a few seconds.
	applyJSON(t, nc.cluster, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"live"},"spec":{"containers":[{"name":"c","image":"`+bb+`",
	  "command":["sh","-c","touch /tmp/healthy; sleep 3; rm /tmp/healthy; sleep 600"],
	  "livenessProbe":{"exec":{"command":["cat","/tmp/healthy"]},"periodSeconds":1,"failureThreshold":2}}]}}`)
	nc.waitPod(t, "live", "a restart by the liveness probe", 90*time.Second, func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].RestartCount >= 1
	})
	events := nc.must(t, "get", "events", "--field-selector", "involvedObject.name=live", "-o", "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}")
	if !strings.Contains(events, "Unhealthy: Liveness probe failed") {
		t.Errorf("live's events lack the Unhealthy liveness event:\n%s", events)
	}

	// Readiness: nothing listens on the probed port, so the pod runs but is never Ready.
	applyJSON(t, nc.cluster, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"unready"},"spec":{"containers":[{"name":"c","image":"`+bb+`",
	  "command":["sleep","600"],"readinessProbe":{"tcpSocket":{"port":9},"periodSeconds":1}}]}}`)
	p := nc.waitPod(t, "unready", "Running", 60*time.Second, running)
	time.Sleep(3 * time.Second) // several probe periods
	p = nc.pod(t, "unready")
	if ready(p) || p.Status.ContainerStatuses[0].Ready {
		t.Errorf("a pod whose readiness probe fails is Ready: %+v", p.Status)
	}

	// A crash loop waits longer each time (10 s, then 20 s, ... as upstream).
	nc.must(t, "run", "loop", "--image="+bb, "--", "sh", "-c", "exit 1")
	var starts []time.Time
	deadline := time.Now().Add(100 * time.Second)
	for len(starts) < 3 && time.Now().Before(deadline) {
		p := nc.pod(t, "loop")
		if len(p.Status.ContainerStatuses) > 0 {
			if term := p.Status.ContainerStatuses[0].LastTerminationState.Terminated; term != nil {
				at := term.StartedAt.Time
				if len(starts) == 0 || at.After(starts[len(starts)-1]) {
					starts = append(starts, at)
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(starts) < 3 {
		t.Fatalf("loop restarted %d times in 100 s; pod:\n%s", len(starts), nc.must(t, "get", "pod", "loop", "-o", "yaml"))
	}
	if d1, d2 := starts[1].Sub(starts[0]), starts[2].Sub(starts[1]); d2 <= d1 {
		t.Errorf("crash loop delays do not grow: %s then %s", d1, d2)
	}
}

// httpClient is a client for requests from this machine to pod IPs and ClusterIPs.
func httpClient() *http.Client {
	return &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
}
