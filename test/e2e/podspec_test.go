package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubette/kubette/internal/testenv/testimage"
)

// TestPodSpec runs real containers that use what a pod spec brings in from outside the
// image — ConfigMap, Secret, emptyDir and hostPath volumes, env from ConfigMaps, Secrets and
// the pod's fields — and reads their logs with kubectl's flags (--previous over a crash loop,
// --tail, --since, --since-time, -c, --timestamps). One cluster serves both subtests, which
// run in parallel. At the end no mount under the cluster's data dir or the hostPath directory
// is left.
func TestPodSpec(t *testing.T) {
	requireTools(t)
	var dataDir string
	hostDir := t.TempDir()
	// Registered before the cluster's clean-ups, so it runs after `kubette down` (clean-ups
	// run last registered first), before the temporary directories are removed.
	t.Cleanup(func() {
		if dataDir != "" {
			checkNoMounts(t, dataDir, hostDir)
		}
	})
	nc := startNodeCluster(t)
	dataDir = nc.dataDir
	registry := testimage.Registry(t)
	testimage.Push(t, registry, "kubette/busybox:v1", testimage.Busybox(t))
	image := registry + "/kubette/busybox:v1"

	t.Run("Volumes", func(t *testing.T) {
		t.Parallel()
		testPodSpecVolumes(t, nc, image, hostDir)
	})
	t.Run("Logs", func(t *testing.T) {
		t.Parallel()
		testPodSpecLogs(t, nc, image)
	})
	t.Run("SharedNamespaces", func(t *testing.T) {
		t.Parallel()
		testPodSpecSharedNamespaces(t, nc, image)
	})
}

// testPodSpecSharedNamespaces: a pod's containers share its IPC namespace and /dev/shm, and
// with shareProcessNamespace its processes, as on any Kubernetes node.
func testPodSpecSharedNamespaces(t *testing.T, nc *nodeCluster, image string) {
	for _, share := range []bool{true, false} {
		name := fmt.Sprintf("shared-%v", share)
		nc.must(t, "apply", "-f", writeFile(t, name+".yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %[1]s}
spec:
  shareProcessNamespace: %[2]v
  terminationGracePeriodSeconds: 1
  containers:
  - {name: a, image: %[3]s, command: [sleep, "3601"]}
  - {name: b, image: %[3]s, command: [sleep, "3602"]}
`, name, share, image)))
		nc.waitPod(t, name, "Running", 2*time.Minute, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
		exec := func(c string, cmd ...string) string {
			return strings.TrimSpace(nc.must(t, append([]string{"exec", name, "-c", c, "--"}, cmd...)...))
		}
		if ia, ib := exec("a", "busybox", "readlink", "/proc/self/ns/ipc"), exec("b", "busybox", "readlink", "/proc/self/ns/ipc"); ia != ib {
			t.Errorf("%s: IPC namespaces %s and %s, want the pod's", name, ia, ib)
		}
		exec("a", "sh", "-c", "echo from-a > /dev/shm/note")
		if got := exec("b", "cat", "/dev/shm/note"); got != "from-a" {
			t.Errorf("%s: b reads %q in /dev/shm, want what a wrote", name, got)
		}
		ps := exec("b", "ps", "-o", "args")
		if sees := strings.Contains(ps, "sleep 3601"); sees != share {
			t.Errorf("shareProcessNamespace %v: b sees a's process: %v; ps:\n%s", share, sees, ps)
		}
		nc.must(t, "delete", "pod", name, "--wait=true")
	}
}

// volumesScript is the app container's program: it prints what the pod spec gave it, writes
// a file back to the host, tries to write into the ConfigMap volume, then sleeps. $0 is the
// container's first argument, "expanded=$(POD_NS)" expanded by the kubelet.
const volumesScript = `echo "$0"
echo "greeting=$GREETING"
echo "password=$PASSWORD"
echo "cm_greeting=$CM_greeting"
echo "cm_color=$CM_color"
echo "sec_password=$SEC_password"
echo "pod_name=$POD_NAME"
echo "pod_ns=$POD_NS"
echo "pod_ip=$POD_IP"
echo "node_name=$NODE_NAME"
echo "cfg_file=` + "`cat /etc/cfg/greeting`" + `"
echo "sec_file=` + "`cat /etc/sec/password`" + `"
echo "sec_mode=` + "`busybox stat -L -c %a /etc/sec/password`" + `"
echo "cfg_mode=` + "`busybox stat -L -c %a /etc/cfg/greeting`" + `"
echo "init_file=` + "`cat /work/from-init`" + `"
echo "host_file=` + "`cat /host/in.txt`" + `"
echo "from the container" > /host/out.txt
if touch /etc/cfg/new 2>/dev/null; then echo cfg_ro=no; else echo cfg_ro=yes; fi
echo done
exec sleep 3600
`

func testPodSpecVolumes(t *testing.T, nc *nodeCluster, image, hostDir string) {
	nc.must(t, "create", "configmap", "cfg", "--from-literal=greeting=hello world", "--from-literal=color=blue")
	nc.must(t, "create", "secret", "generic", "sec", "--from-literal=password=s3cr3t!")
	if err := os.WriteFile(filepath.Join(hostDir, "in.txt"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	fieldEnv := func(name, path string) v1.EnvVar {
		return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}}
	}
	mode := int32(0o400)
	dirType := v1.HostPathDirectory
	pod := v1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "volumes"},
		Spec: v1.PodSpec{
			Volumes: []v1.Volume{
				{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
				{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec", DefaultMode: &mode}}},
				{Name: "work", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: hostDir, Type: &dirType}}},
			},
			InitContainers: []v1.Container{{
				Name: "init", Image: image,
				Command:      []string{"sh", "-c", "echo written by init > /work/from-init"},
				VolumeMounts: []v1.VolumeMount{{Name: "work", MountPath: "/work"}},
			}},
			Containers: []v1.Container{{
				Name: "app", Image: image,
				Command: []string{"sh", "-c", volumesScript, "expanded=$(POD_NS)"},
				Env: []v1.EnvVar{
					{Name: "GREETING", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
						LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "greeting"}}},
					{Name: "PASSWORD", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
						LocalObjectReference: v1.LocalObjectReference{Name: "sec"}, Key: "password"}}},
					fieldEnv("POD_NAME", "metadata.name"),
					fieldEnv("POD_NS", "metadata.namespace"),
					fieldEnv("POD_IP", "status.podIP"),
					fieldEnv("NODE_NAME", "spec.nodeName"),
				},
				EnvFrom: []v1.EnvFromSource{
					{Prefix: "CM_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}},
					{Prefix: "SEC_", SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}}},
				},
				VolumeMounts: []v1.VolumeMount{
					{Name: "cfg", MountPath: "/etc/cfg"},
					{Name: "sec", MountPath: "/etc/sec"},
					{Name: "work", MountPath: "/work"},
					{Name: "host", MountPath: "/host"},
				},
			}},
		},
	}
	doc, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	applyJSON(t, nc.cluster, string(doc))
	p := nc.waitPod(t, "volumes", "Running", 120*time.Second, running)
	var logs string
	if !poll(60*time.Second, func() bool {
		logs = nc.kubectl(t, "logs", "volumes", "-c", "app").stdout
		return strings.HasSuffix(logs, "done\n")
	}) {
		t.Fatalf("the app container did not print its values within 60 s; logs:\n%s", logs)
	}
	want := strings.Join([]string{
		"expanded=default",
		"greeting=hello world",
		"password=s3cr3t!",
		"cm_greeting=hello world",
		"cm_color=blue",
		"sec_password=s3cr3t!",
		"pod_name=volumes",
		"pod_ns=default",
		"pod_ip=" + p.Status.PodIP,
		"node_name=" + p.Spec.NodeName,
		"cfg_file=hello world",
		"sec_file=s3cr3t!",
		"sec_mode=400",
		"cfg_mode=644",
		"init_file=written by init",
		"host_file=from the host",
		"cfg_ro=yes",
		"done",
	}, "\n") + "\n"
	if p.Status.PodIP == "" || p.Spec.NodeName == "" {
		t.Errorf("the pod has no podIP (%q) or nodeName (%q)", p.Status.PodIP, p.Spec.NodeName)
	}
	if logs != want {
		t.Errorf("kubectl logs volumes -c app =\n%s\nwant\n%s", logs, want)
	}

	// kubectl exec reads the mounted files; the init container's log is its own (empty).
	if got := nc.must(t, "exec", "volumes", "-c", "app", "--", "cat", "/etc/cfg/color", "/work/from-init"); got != "bluewritten by init\n" {
		t.Errorf("kubectl exec cat /etc/cfg/color /work/from-init = %q", got)
	}
	if got := nc.must(t, "logs", "volumes", "-c", "init"); got != "" {
		t.Errorf("kubectl logs volumes -c init = %q, want nothing", got)
	}
	// The container's file on the host.
	if b, err := os.ReadFile(filepath.Join(hostDir, "out.txt")); err != nil || string(b) != "from the container\n" {
		t.Errorf("the file the container wrote into the hostPath: %q, %v", b, err)
	}
	// The Secret volume is a tmpfs of its own on the node, as upstream.
	secretDir := filepath.Join(nc.dataDir, "kubelet", "pods", string(p.UID), "volumes", "kubernetes.io~secret", "sec")
	if fs := mountedFS(t, secretDir); fs != "tmpfs" {
		t.Errorf("the secret volume %s is mounted as %q, want tmpfs", secretDir, fs)
	}

	// Deleting the pod unmounts and removes its volumes.
	nc.must(t, "delete", "pod", "volumes", "--wait=true", "--timeout=90s")
	podDir := filepath.Join(nc.dataDir, "kubelet", "pods", string(p.UID))
	if !poll(60*time.Second, func() bool {
		_, err := os.Stat(podDir)
		return os.IsNotExist(err)
	}) {
		t.Errorf("%s is still there 60 s after the pod was deleted", podDir)
	}
	if fs := mountedFS(t, secretDir); fs != "" {
		t.Errorf("the secret volume %s is still mounted (%s) after the pod was deleted", secretDir, fs)
	}
}

// crashScript counts its attempts in an emptyDir (kept across restarts), prints three numbered
// lines, and exits 1 in its first two attempts (the second after 8 s, so that the test sees
// it run); the third attempt sleeps.
const crashScript = `n=` + "`cat /state/n 2>/dev/null || echo 0`" + `
n=` + "`busybox expr $n + 1`" + `
echo $n > /state/n
echo "attempt $n line 1"
echo "attempt $n line 2"
echo "attempt $n line 3"
case $n in
1) exit 1;;
2) sleep 8; exit 1;;
esac
exec sleep 3600
`

func testPodSpecLogs(t *testing.T, nc *nodeCluster, image string) {
	pod := v1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "crashy"},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyAlways,
			Volumes:       []v1.Volume{{Name: "state", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
			Containers: []v1.Container{
				{Name: "count", Image: image, Command: []string{"sh", "-c", crashScript},
					VolumeMounts: []v1.VolumeMount{{Name: "state", MountPath: "/state"}}},
				{Name: "side", Image: image, Command: []string{"sh", "-c", "echo side one; echo side two; exec sleep 3600"}},
			},
		},
	}
	doc, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	applyJSON(t, nc.cluster, string(doc))
	lines := func(n int) string {
		return fmt.Sprintf("attempt %d line 1\nattempt %d line 2\nattempt %d line 3\n", n, n, n)
	}
	count := func(p *v1.Pod) *v1.ContainerStatus {
		for i := range p.Status.ContainerStatuses {
			if p.Status.ContainerStatuses[i].Name == "count" {
				return &p.Status.ContainerStatuses[i]
			}
		}
		return nil
	}

	// The first crash is restarted at once (as upstream: the back-off holds from the second
	// crash on); while the second attempt runs (8 s), --previous is the first attempt.
	p := nc.waitPod(t, "crashy", "the first crash", 120*time.Second, func(p *v1.Pod) bool {
		cs := count(p)
		return cs != nil && cs.LastTerminationState.Terminated != nil
	})
	if got := nc.must(t, "logs", "crashy", "-c", "count", "--previous"); got != lines(1) {
		t.Errorf("after the first crash (state %+v), kubectl logs --previous = %q, want %q", count(p).State, got, lines(1))
	}

	// The second crash waits out a 10 s back-off: meanwhile --previous is that crash, the
	// status's last termination (as upstream), not the attempt before it. Once the third
	// attempt runs it is the second attempt as well, so a slow poll that misses the back-off
	// asserts the same.
	p = nc.waitPod(t, "crashy", "the second crash", 150*time.Second, func(p *v1.Pod) bool {
		cs := count(p)
		return cs != nil && cs.RestartCount >= 1 && cs.LastTerminationState.Terminated != nil &&
			((cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff") || cs.RestartCount >= 2)
	})
	t.Logf("after the second crash: restartCount %d, state %+v", count(p).RestartCount, count(p).State)
	if got := nc.must(t, "logs", "crashy", "-c", "count", "--previous"); got != lines(2) {
		t.Errorf("after the second crash (state %+v), kubectl logs --previous = %q, want %q", count(p).State, got, lines(2))
	}

	// The third attempt runs: --previous is the second.
	nc.waitPod(t, "crashy", "the third attempt running", 150*time.Second, func(p *v1.Pod) bool {
		cs := count(p)
		return cs != nil && cs.RestartCount >= 2 && cs.State.Running != nil
	})
	var got string
	if !poll(30*time.Second, func() bool {
		got = nc.kubectl(t, "logs", "crashy", "-c", "count").stdout
		return got == lines(3)
	}) {
		t.Errorf("kubectl logs crashy -c count = %q, want %q", got, lines(3))
	}
	if got := nc.must(t, "logs", "crashy", "-c", "count", "--previous"); got != lines(2) {
		t.Errorf("kubectl logs --previous in the third attempt = %q, want %q", got, lines(2))
	}
	if got := nc.must(t, "logs", "crashy", "-c", "count", "--tail=1"); got != "attempt 3 line 3\n" {
		t.Errorf("kubectl logs --tail=1 = %q", got)
	}
	if got := nc.must(t, "logs", "crashy", "-c", "count", "--tail=2", "--previous"); got != "attempt 2 line 2\nattempt 2 line 3\n" {
		t.Errorf("kubectl logs --tail=2 --previous = %q", got)
	}
	if got := nc.must(t, "logs", "crashy", "-c", "count", "--since=1h"); got != lines(3) {
		t.Errorf("kubectl logs --since=1h = %q, want %q", got, lines(3))
	}
	// A sinceTime in the future: no entry is that new (upstream's kubelet skips every entry
	// before sinceTime and the API server does not reject a future one).
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if got := nc.must(t, "logs", "crashy", "-c", "count", "--since-time="+future); got != "" {
		t.Errorf("kubectl logs --since-time=%s = %q, want nothing", future, got)
	}
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	if got := nc.must(t, "logs", "crashy", "-c", "count", "--since-time="+past); got != lines(3) {
		t.Errorf("kubectl logs --since-time=%s = %q, want %q", past, got, lines(3))
	}

	// --timestamps: each line starts with its RFC3339Nano time and a space.
	stamped := nc.must(t, "logs", "crashy", "-c", "count", "--timestamps")
	re := regexp.MustCompile(`^(\S+) (attempt 3 line \d)$`)
	var texts []string
	for _, line := range strings.Split(strings.TrimSuffix(stamped, "\n"), "\n") {
		m := re.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("kubectl logs --timestamps: line %q is not \"<time> attempt 3 line N\"", line)
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			t.Errorf("kubectl logs --timestamps: %q is not an RFC3339Nano time: %v", m[1], err)
		} else if d := time.Since(at); d < -time.Minute || d > time.Hour {
			t.Errorf("kubectl logs --timestamps: time %s is %s from now", m[1], d)
		}
		texts = append(texts, m[2])
	}
	if strings.Join(texts, "\n")+"\n" != lines(3) {
		t.Errorf("kubectl logs --timestamps = %q, want the third attempt's lines", stamped)
	}

	// -c picks the other container, which never restarted: it has no previous.
	if got := nc.must(t, "logs", "crashy", "-c", "side"); got != "side one\nside two\n" {
		t.Errorf("kubectl logs crashy -c side = %q", got)
	}
	r := nc.mustFail(t, "logs", "crashy", "-c", "side", "--previous")
	if want := `previous terminated container "side" in pod "crashy" not found`; !strings.Contains(r.stderr, want) {
		t.Errorf("kubectl logs -c side --previous: stderr lacks %q: %s", want, r)
	}
	r = nc.mustFail(t, "logs", "crashy", "-c", "nope")
	if !strings.Contains(r.stderr, "nope") {
		t.Errorf("kubectl logs -c nope: stderr does not name the container: %s", r)
	}
	nc.must(t, "delete", "pod", "crashy", "--wait=true", "--timeout=90s")
}

// mountedFS returns the file system type of the mount at dir in this process's mount
// namespace, or "" when nothing is mounted there.
func mountedFS(t *testing.T, dir string) string {
	t.Helper()
	fs := ""
	for _, m := range mountInfo(t) {
		if m.point == dir {
			fs = m.fstype // the last one wins: it is on top
		}
	}
	return fs
}

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct{ point, fstype string }

// mountInfo reads this process's mount table.
func mountInfo(t *testing.T) []mountEntry {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatalf("read mountinfo: %v", err)
	}
	var out []mountEntry
	for _, line := range strings.Split(string(b), "\n") {
		// ID parent major:minor root mountpoint options [optional...] - fstype source superopts
		f := strings.Fields(line)
		if len(f) < 7 {
			continue
		}
		e := mountEntry{point: unescapeMount(f[4])}
		for i := 6; i < len(f)-1; i++ {
			if f[i] == "-" {
				e.fstype = f[i+1]
				break
			}
		}
		out = append(out, e)
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes of space, tab, newline and backslash.
func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// checkNoMounts fails the test if anything is still mounted at or below one of dirs.
func checkNoMounts(t *testing.T, dirs ...string) {
	t.Helper()
	for _, m := range mountInfo(t) {
		for _, d := range dirs {
			if m.point == d || strings.HasPrefix(m.point, d+"/") {
				t.Errorf("%s (%s) is still mounted after the cluster was taken down", m.point, m.fstype)
			}
		}
	}
}
