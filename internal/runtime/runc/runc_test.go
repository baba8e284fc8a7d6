package runc

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubette/kubette/internal/runtime/oci"
	"github.com/kubette/kubette/internal/testenv/needs"
)

// helperEnv makes the test binary a short-lived "runtime process" that creates and starts a
// container, prints "started", and waits to be killed (TestShimOutlivesRuntime).
const helperEnv = "KUBETTE_RUNC_TEST_HELPER"

func TestMain(m *testing.M) {
	MaybeRunShim()
	if os.Getenv(helperEnv) != "" {
		os.Exit(runHelper(strings.Split(os.Getenv(helperEnv), "\n")))
	}
	os.Exit(m.Run())
}

// runHelper creates and starts container args = {root, id, bundle, logPath} and blocks.
func runHelper(args []string) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	rt, err := New(Config{Root: args[0], Shim: []string{exe}})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	ctx := context.Background()
	if err := rt.Create(ctx, args[1], args[2], args[3]); err != nil {
		fmt.Println(err)
		return 1
	}
	if err := rt.Start(ctx, args[1]); err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("started")
	select {} // until killed
}

// waitFor polls cond every 50 ms until it holds or a generous deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func newID(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// fixture is one runtime with a cgroup parent of its own, removed at cleanup.
type fixture struct {
	rt           *Runtime
	root         string
	cgroupParent string // "/kubette-test-<rand>"
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	needs.Root(t)
	needs.Binary(t, "runc", "runc")
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("needs /bin/busybox (apt-get install -y busybox-static)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "runc")
	// As the serving runtime: runc from a sealed copy of its binary (clonedbin.go).
	rt, err := New(Config{Root: root, Shim: []string{exe}, SealedCopy: true})
	if err != nil {
		t.Fatal(err)
	}
	if rt.sealed == nil {
		t.Fatalf("runc runs from %s, not from a sealed copy", rt.Binary())
	}
	f := &fixture{rt: rt, root: root, cgroupParent: "/kubette-test-" + newID(t)[:12]}
	t.Cleanup(func() {
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*" + f.cgroupParent)
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("remove cgroup %s: %v", d, err)
			}
		}
	})
	return f
}

// container is a created container.
type container struct {
	id, dir, bundle, log string
}

// busyboxRootfs makes a rootfs of /bin/busybox and its applet links.
func busyboxRootfs(t *testing.T, rootfs string) {
	t.Helper()
	for _, d := range []string{"bin", "proc", "sys", "dev", "tmp", "etc"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	src, err := os.Open("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(filepath.Join(rootfs, "bin", "busybox"), os.O_WRONLY|os.O_CREATE, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("/bin/busybox", "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet == "busybox" || strings.Contains(applet, "/") {
			continue
		}
		if err := os.Symlink("busybox", filepath.Join(rootfs, "bin", applet)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(rootfs, "etc", "passwd"), []byte("root:x:0:0:root:/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// create makes a bundle running args and creates the container; edit may change the input.
func (f *fixture) create(t *testing.T, args []string, edit func(*oci.Input)) container {
	t.Helper()
	c := container{id: newID(t), dir: t.TempDir()}
	c.bundle = filepath.Join(c.dir, "bundle")
	c.log = filepath.Join(c.dir, "logs", "0.log")
	rootfs := filepath.Join(c.bundle, "rootfs")
	busyboxRootfs(t, rootfs)
	host, err := oci.ReadHost()
	if err != nil {
		t.Fatal(err)
	}
	in := oci.Input{
		Container: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "test"},
			Command:  args,
		},
		Sandbox:          &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "pod", Namespace: "default", Uid: "uid"}},
		Rootfs:           rootfs,
		Hostname:         "test",
		CgroupsPath:      f.cgroupParent + "/" + c.id,
		MaxOOMScoreAdj:   host.OOMScoreAdj,
		MaxNOFILE:        host.NOFILE,
		HostCapabilities: host.Capabilities,
	}
	if edit != nil {
		edit(&in)
	}
	spec, err := oci.Spec(in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.bundle, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.rt.Delete(context.Background(), c.id); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		// Wait for the shim to finish so that nothing outlives the test.
		if pid, err := readPid(filepath.Join(c.dir, shimPidFile)); err == nil {
			deadline := time.Now().Add(30 * time.Second)
			for shimAlive(c.dir) && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if shimAlive(c.dir) {
				t.Errorf("shim %d still runs after delete", pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	if err := f.rt.Create(context.Background(), c.id, c.bundle, c.log); err != nil {
		t.Fatalf("Create: %v", err)
	}
	return c
}

// run creates and starts a container.
func (f *fixture) run(t *testing.T, args []string, edit func(*oci.Input)) container {
	t.Helper()
	c := f.create(t, args, edit)
	if err := f.rt.Start(context.Background(), c.id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return c
}

// waitStopped polls State until the container has stopped.
func (f *fixture) waitStopped(t *testing.T, id string) State {
	t.Helper()
	var st State
	waitFor(t, "container "+id[:12]+" to stop", func() bool {
		var err error
		st, err = f.rt.State(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return st.Status == StatusStopped
	})
	return st
}

// logEntry is one parsed CRI log line.
type logEntry struct {
	time        time.Time
	stream, tag string
	content     string
}

var logLine = regexp.MustCompile(`^(\S+) (stdout|stderr) (F|P) (.*)$`)

func readLog(t *testing.T, path string) []logEntry {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []logEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m := logLine.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Fatalf("log line not in CRI format: %q", sc.Text())
		}
		ts, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			t.Fatalf("log line timestamp %q: %v", m[1], err)
		}
		out = append(out, logEntry{time: ts, stream: m[2], tag: m[3], content: m[4]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLogAndExitCode(t *testing.T) {
	f := newFixture(t)
	c := f.create(t, []string{"sh", "-c", "echo hello; echo oops >&2; echo; printf 'no newline'; exit 3"}, nil)
	st, err := f.rt.State(context.Background(), c.id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != StatusCreated || st.Pid <= 0 {
		t.Fatalf("after Create: %+v, want created with a pid", st)
	}
	ids, err := f.rt.List(context.Background())
	if err != nil || !slices.Contains(ids, c.id) {
		t.Fatalf("List = %v, %v; want it to hold %s", ids, err, c.id)
	}
	before := time.Now()
	if err := f.rt.Start(context.Background(), c.id); err != nil {
		t.Fatal(err)
	}
	st = f.waitStopped(t, c.id)
	if st.ExitCode != 3 || st.Reason != "Error" || st.OOMKilled {
		t.Errorf("state = %+v, want exit code 3, reason Error", st)
	}
	if st.StartedAt.Before(before.Add(-time.Second)) || st.FinishedAt.Before(st.StartedAt) {
		t.Errorf("startedAt %v finishedAt %v (start called at %v)", st.StartedAt, st.FinishedAt, before)
	}
	var got []string
	for _, e := range readLog(t, c.log) {
		got = append(got, e.stream+" "+e.tag+" "+e.content)
	}
	// stdout and stderr are separate pipes: their relative order is not guaranteed.
	slices.Sort(got)
	want := []string{"stderr F oops", "stdout F ", "stdout F hello", "stdout P no newline"}
	if !slices.Equal(got, want) {
		t.Errorf("log entries = %q, want %q", got, want)
	}
}

func TestCompleted(t *testing.T) {
	f := newFixture(t)
	c := f.run(t, []string{"true"}, nil)
	st := f.waitStopped(t, c.id)
	if st.ExitCode != 0 || st.Reason != "Completed" {
		t.Errorf("state = %+v, want exit code 0, reason Completed", st)
	}
}

func TestLongLinesSplit(t *testing.T) {
	f := newFixture(t)
	c := f.run(t, []string{"sh", "-c", "head -c 40000 /dev/zero | tr '\\0' a; echo; echo short"}, nil)
	f.waitStopped(t, c.id)
	entries := readLog(t, c.log)
	var got []string
	for _, e := range entries {
		if strings.Trim(e.content, "a") != "" && e.content != "short" {
			t.Fatalf("unexpected content %q", e.content)
		}
		got = append(got, fmt.Sprintf("%s %d", e.tag, len(e.content)))
	}
	want := []string{"P 16384", "P 16384", "F 7232", "F 5"}
	if !slices.Equal(got, want) {
		t.Errorf("entries (tag, length) = %q, want %q", got, want)
	}
}

func TestKillSignals(t *testing.T) {
	f := newFixture(t)
	// In the host's pid namespace sleep is not pid 1, so SIGTERM's default action kills it.
	term := f.run(t, []string{"sleep", "1000"}, func(in *oci.Input) {
		in.Container.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_NODE}}}
	})
	// As pid 1 of its own namespace, sleep ignores SIGTERM; SIGKILL still kills it.
	kill := f.run(t, []string{"sleep", "1000"}, nil)
	for _, c := range []container{term, kill} {
		st, err := f.rt.State(context.Background(), c.id)
		if err != nil || st.Status != StatusRunning {
			t.Fatalf("state = %+v, %v; want running", st, err)
		}
	}
	if err := f.rt.Kill(context.Background(), term.id, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := f.rt.Kill(context.Background(), kill.id, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if st := f.waitStopped(t, term.id); st.ExitCode != 143 || st.Reason != "Error" {
		t.Errorf("SIGTERM: state = %+v, want exit code 143", st)
	}
	if st := f.waitStopped(t, kill.id); st.ExitCode != 137 || st.Reason != "Error" {
		t.Errorf("SIGKILL: state = %+v, want exit code 137", st)
	}
	if err := f.rt.Kill(context.Background(), kill.id, syscall.SIGKILL); err != nil {
		t.Errorf("kill a stopped container: %v, want no error", err)
	}
}

func TestOOMKilled(t *testing.T) {
	f := newFixture(t)
	// awk doubles a string until the 16 MiB limit stops it (the machine has no swap; memsw is
	// capped too in case it had).
	c := f.run(t, []string{"awk", "BEGIN { s = \"aaaaaaaa\"; while (1) s = s s }"}, func(in *oci.Input) {
		in.Container.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{
			MemoryLimitInBytes: 16 << 20, MemorySwapLimitInBytes: 16 << 20}}
	})
	st := f.waitStopped(t, c.id)
	if !st.OOMKilled || st.Reason != "OOMKilled" || st.ExitCode != 137 {
		t.Errorf("state = %+v, want OOMKilled with exit code 137", st)
	}
}

func TestExec(t *testing.T) {
	f := newFixture(t)
	c := f.run(t, []string{"sleep", "1000"}, func(in *oci.Input) {
		in.Container.Envs = []*runtimeapi.KeyValue{{Key: "GREETING", Value: []byte("hi")}}
	})
	ctx := context.Background()
	out, errOut, code, err := f.rt.Exec(ctx, c.id, []string{"sh", "-c", "echo $GREETING; echo err >&2; exit 7"}, 0)
	if err != nil || code != 7 || string(out) != "hi\n" || string(errOut) != "err\n" {
		t.Errorf("Exec = %q, %q, %d, %v; want \"hi\\n\", \"err\\n\", 7, nil", out, errOut, code, err)
	}
	if _, _, _, err := f.rt.Exec(ctx, c.id, []string{"/no/such/binary"}, 0); err == nil {
		t.Error("Exec of a missing binary: want an error")
	}
	_, _, _, err = f.rt.Exec(ctx, c.id, []string{"sleep", "999"}, time.Second)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Exec past its timeout: %v, want DeadlineExceeded", err)
	}
	// The timed-out process was killed, not left behind.
	waitFor(t, "the timed-out exec to be gone", func() bool {
		out, _, _, err := f.rt.Exec(ctx, c.id, []string{"ps", "-o", "args"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return !strings.Contains(string(out), "sleep 999")
	})
	if err := f.rt.Kill(ctx, c.id, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	f.waitStopped(t, c.id)
	if _, _, _, err := f.rt.Exec(ctx, c.id, []string{"true"}, 0); err == nil {
		t.Error("Exec in a stopped container: want an error")
	}
}

func TestCreateFailure(t *testing.T) {
	f := newFixture(t)
	c := container{id: newID(t), dir: t.TempDir()}
	c.bundle = filepath.Join(c.dir, "bundle")
	busyboxRootfs(t, filepath.Join(c.bundle, "rootfs"))
	spec, err := oci.Spec(oci.Input{
		Container: &runtimeapi.ContainerConfig{Command: []string{"/no/such/binary"}},
		Rootfs:    filepath.Join(c.bundle, "rootfs"), CgroupsPath: f.cgroupParent + "/" + c.id, MaxNOFILE: 1024,
	})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(spec)
	if err := os.WriteFile(filepath.Join(c.bundle, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.rt.Delete(context.Background(), c.id) })
	err = f.rt.Create(context.Background(), c.id, c.bundle, filepath.Join(c.dir, "0.log"))
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("Create with a missing binary: %v, want runc's \"no such file\" error", err)
	}
}

func TestDelete(t *testing.T) {
	f := newFixture(t)
	c := f.run(t, []string{"sleep", "1000"}, nil)
	ctx := context.Background()
	memCgroup := filepath.Join("/sys/fs/cgroup/memory", f.cgroupParent, c.id)
	if _, err := os.Stat(memCgroup); err != nil {
		t.Fatalf("container cgroup: %v", err)
	}
	if err := f.rt.Delete(ctx, c.id); err != nil {
		t.Fatal(err)
	}
	if _, err := f.rt.State(ctx, c.id); !errors.Is(err, ErrNotFound) {
		t.Errorf("State after Delete: %v, want ErrNotFound", err)
	}
	if _, err := os.Stat(filepath.Join(f.root, c.id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("runc state dir after Delete: %v, want it gone", err)
	}
	for _, ctrl := range []string{"memory", "pids", "cpu", "devices"} {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", ctrl, f.cgroupParent, c.id)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s cgroup after Delete: %v, want it gone", ctrl, err)
		}
	}
	ids, err := f.rt.List(ctx)
	if err != nil || slices.Contains(ids, c.id) {
		t.Errorf("List after Delete = %v, %v", ids, err)
	}
	if err := f.rt.Delete(ctx, c.id); err != nil {
		t.Errorf("second Delete: %v, want nil", err)
	}
	// The shim saw its container die and wrote the exit status.
	waitFor(t, "exit.json", func() bool {
		_, err := os.Stat(filepath.Join(c.dir, exitFile))
		return err == nil
	})
}

func TestUserEnvAndWorkingDir(t *testing.T) {
	f := newFixture(t)
	c := f.run(t, []string{"sh", "-c", "echo $(id -u):$(id -g):$(id -G) $GREETING $(pwd); sleep 1000"}, func(in *oci.Input) {
		in.Container.WorkingDir = "/tmp"
		in.Container.Envs = []*runtimeapi.KeyValue{{Key: "GREETING", Value: []byte("hi")}}
		in.Container.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
			RunAsUser: &runtimeapi.Int64Value{Value: 1000}, RunAsGroup: &runtimeapi.Int64Value{Value: 2000}, SupplementalGroups: []int64{3000}}}
	})
	want := "1000:2000:2000 3000 hi /tmp"
	waitFor(t, "the container's first line", func() bool { return len(readLog(t, c.log)) > 0 })
	if got := readLog(t, c.log)[0].content; got != want {
		t.Errorf("container says %q, want %q", got, want)
	}
	// Exec runs with the container's user, env and working directory.
	out, _, code, err := f.rt.Exec(context.Background(), c.id, []string{"sh", "-c", "echo $(id -u):$(id -g):$(id -G) $GREETING $(pwd)"}, 0)
	if err != nil || code != 0 || string(out) != want+"\n" {
		t.Errorf("Exec = %q, %d, %v; want %q", out, code, err, want)
	}
}

// TestPrivileged runs a privileged container: it gets the runtime's own capabilities (not
// every capability: root here lacks CAP_SYS_RESOURCE, and asking for it would fail) and no
// masked or read-only paths (which an unprivileged container has).
func TestPrivileged(t *testing.T) {
	f := newFixture(t)
	script := []string{"sh", "-c", "grep CapEff /proc/self/status; echo /proc/sys mounts: $(grep -c ' /proc/sys ' /proc/self/mountinfo)"}
	priv := f.run(t, script, func(in *oci.Input) {
		in.Sandbox.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{Privileged: true}}
		in.Container.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{Privileged: true}}
	})
	unpriv := f.run(t, script, nil)
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var own string
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "CapEff:") {
			own = strings.Join(strings.Fields(line), " ")
		}
	}
	for _, tc := range []struct {
		c    container
		want []string
	}{
		{priv, []string{own, "/proc/sys mounts: 0"}},
		{unpriv, []string{"CapEff: 00000000a80425fb", "/proc/sys mounts: 1"}},
	} {
		if st := f.waitStopped(t, tc.c.id); st.ExitCode != 0 {
			t.Errorf("state = %+v, want exit code 0", st)
		}
		var got []string
		for _, e := range readLog(t, tc.c.log) {
			got = append(got, strings.Join(strings.Fields(e.content), " "))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("container says %q, want %q", got, tc.want)
		}
	}
}

func TestDevice(t *testing.T) {
	f := newFixture(t)
	c := f.run(t, []string{"sh", "-c", "echo x > /dev/mynull && head -c 3 /dev/myzero | od -An -tx1"}, func(in *oci.Input) {
		in.Container.Devices = []*runtimeapi.Device{
			{HostPath: "/dev/null", ContainerPath: "/dev/mynull", Permissions: "rw"},
			{HostPath: "/dev/zero", ContainerPath: "/dev/myzero", Permissions: "r"},
		}
	})
	if st := f.waitStopped(t, c.id); st.ExitCode != 0 {
		t.Errorf("state = %+v, want exit code 0 (log %+v)", st, readLog(t, c.log))
	}
	if l := readLog(t, c.log); len(l) != 1 || strings.TrimSpace(l[0].content) != "00 00 00" {
		t.Errorf("log = %+v, want the zeros of /dev/myzero", l)
	}
}

func TestReopenLog(t *testing.T) {
	f := newFixture(t)
	c := f.run(t, []string{"sh", "-c", "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.05; done"}, nil)
	waitFor(t, "output", func() bool { return len(readLog(t, c.log)) > 0 })
	rotated := c.log + ".1"
	if err := os.Rename(c.log, rotated); err != nil {
		t.Fatal(err)
	}
	if err := f.rt.ReopenLog(context.Background(), c.id); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "output in the reopened log", func() bool { return len(readLog(t, c.log)) >= 3 })
	// Every line is in one file or the other, in order, none lost.
	var ticks []string
	for _, e := range append(readLog(t, rotated), readLog(t, c.log)...) {
		ticks = append(ticks, e.content)
	}
	for i, got := range ticks {
		if want := fmt.Sprintf("tick %d", i); got != want {
			t.Fatalf("line %d of the rotated and the new log = %q, want %q", i, got, want)
		}
	}
}

// TestShimOutlivesRuntime starts a container from a child process, kills that process, and
// checks the container keeps running, its output still reaches the log, and its exit is still
// recorded.
func TestShimOutlivesRuntime(t *testing.T) {
	f := newFixture(t)
	c := container{id: newID(t), dir: t.TempDir()}
	c.bundle = filepath.Join(c.dir, "bundle")
	c.log = filepath.Join(c.dir, "logs", "0.log")
	// Write the bundle with the fixture's helpers but create it from the child.
	rootfs := filepath.Join(c.bundle, "rootfs")
	busyboxRootfs(t, rootfs)
	spec, err := oci.Spec(oci.Input{
		Container: &runtimeapi.ContainerConfig{Command: []string{"sh", "-c", "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.1; done"}},
		Rootfs:    rootfs, CgroupsPath: f.cgroupParent + "/" + c.id, MaxNOFILE: 1024,
	})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(spec)
	if err := os.WriteFile(filepath.Join(c.bundle, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.rt.Delete(context.Background(), c.id); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(exe)
	child.Env = append(os.Environ(), helperEnv+"="+strings.Join([]string{f.root, c.id, c.bundle, c.log}, "\n"))
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "started\n" {
		t.Fatalf("helper said %q, %v", line, err)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	st, err := f.rt.State(context.Background(), c.id)
	if err != nil || st.Status != StatusRunning {
		t.Fatalf("state after the runtime process died = %+v, %v; want running", st, err)
	}
	n := len(readLog(t, c.log))
	waitFor(t, "more output after the runtime process died", func() bool { return len(readLog(t, c.log)) >= n+5 })
	if err := f.rt.Kill(context.Background(), c.id, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if st := f.waitStopped(t, c.id); st.ExitCode != 137 {
		t.Errorf("state = %+v, want exit code 137", st)
	}
}

// TestShimReaped checks that the shim, the runtime's child, is reaped once it has exited: no
// zombie is left after the container's end and a later call.
func TestShimReaped(t *testing.T) {
	f := newFixture(t)
	c := f.run(t, []string{"true"}, nil)
	pid, err := readPid(filepath.Join(c.dir, shimPidFile))
	if err != nil {
		t.Fatal(err)
	}
	f.waitStopped(t, c.id)
	waitFor(t, "the shim to be reaped", func() bool {
		if _, err := f.rt.State(context.Background(), c.id); err != nil {
			t.Fatalf("State: %v", err)
		}
		// A reaped process is gone from /proc; a zombie is still there.
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		return errors.Is(err, os.ErrNotExist)
	})
	f.rt.mu.Lock()
	left := len(f.rt.shims)
	f.rt.mu.Unlock()
	if left != 0 {
		t.Errorf("%d shims still to reap", left)
	}
}

// TestBundleFromState checks that Start finds the bundle in runc's state file.
func TestBundleFromState(t *testing.T) {
	f := newFixture(t)
	c := f.create(t, []string{"true"}, nil)
	got, err := f.rt.bundleOf(context.Background(), c.id)
	if err != nil || got != c.bundle {
		t.Errorf("bundleOf = %q, %v; want %q", got, err, c.bundle)
	}
}

// TestStateOfAStartedContainerRunsNoRunc checks that State answers from the init Start
// started while it lives, and asks runc once it has exited or after a restart.
func TestStateOfAStartedContainerRunsNoRunc(t *testing.T) {
	f := newFixture(t)
	calls := wrapRunc(t, f, "runc")
	rt, wrapper := f.rt, f.rt.binary
	stateCalls := func() int {
		b, _ := os.ReadFile(calls)
		n := 0
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(" "+l+" ", " state ") {
				n++
			}
		}
		return n
	}
	c := f.run(t, []string{"sleep", "1000"}, nil)
	pid, err := readPid(filepath.Join(c.dir, initPidFile))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		st, err := rt.State(context.Background(), c.id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != StatusRunning || st.Pid != pid || st.StartedAt.IsZero() {
			t.Fatalf("State = %+v, want running with pid %d and a start time", st, pid)
		}
	}
	if n := stateCalls(); n != 0 {
		t.Errorf("State of a live container ran `runc state` %d times", n)
	}
	// A new Runtime (after a restart) knows nothing and asks runc: the same answer.
	rt2, err := New(Config{Binary: wrapper, Root: f.root, Shim: f.rt.shim})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := rt.State(context.Background(), c.id)
	if got, err := rt2.State(context.Background(), c.id); err != nil || got != want {
		t.Errorf("State after a restart = %+v, %v; want %+v", got, err, want)
	}
	if stateCalls() == 0 {
		t.Error("a restarted Runtime did not ask runc")
	}
	// Once the init is gone, State reports the exit as before.
	if err := rt.Kill(context.Background(), c.id, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	st := f.waitStopped(t, c.id)
	if st.ExitCode != 137 || !st.StartedAt.Equal(want.StartedAt) {
		t.Errorf("State after SIGKILL = %+v, want exit code 137 and the start time %v", st, want.StartedAt)
	}
}

// TestShimPool checks that Create hands containers to shims started ahead, tops the pool up,
// falls back to starting a shim when the idle one is gone, and that Close ends the idle ones.
func TestShimPool(t *testing.T) {
	f := newFixture(t)
	rt, err := New(Config{Root: f.root, Shim: f.rt.shim, ShimPool: 1})
	if err != nil {
		t.Fatal(err)
	}
	f.rt = rt
	idlePid := func() int {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		if len(rt.idle) != 1 {
			t.Fatalf("%d idle shims, want 1", len(rt.idle))
		}
		return rt.idle[0].pid
	}
	f.run(t, []string{"sleep", "1000"}, nil) // no idle shim yet: started by Create
	first := idlePid()
	c := f.run(t, []string{"sh", "-c", "echo from the pool; exit 3"}, nil)
	if pid, err := readPid(filepath.Join(c.dir, shimPidFile)); err != nil || pid != first {
		t.Errorf("shim of the second container = %d, %v; want the idle shim %d", pid, err, first)
	}
	if st := f.waitStopped(t, c.id); st.ExitCode != 3 {
		t.Errorf("exit code %d, want 3", st.ExitCode)
	}
	if entries := readLog(t, c.log); len(entries) != 1 || entries[0].content != "from the pool" {
		t.Errorf("log = %+v", entries)
	}
	second := idlePid()
	if second == first {
		t.Fatal("the pool was not topped up")
	}
	// An idle shim that died is replaced by a shim Create starts.
	if err := syscall.Kill(second, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the idle shim to die", func() bool {
		start, alive := procStartTime(second)
		return !alive && start == ""
	})
	c = f.run(t, []string{"sh", "-c", "echo fallback"}, nil)
	if pid, err := readPid(filepath.Join(c.dir, shimPidFile)); err != nil || pid == second {
		t.Errorf("shim of the third container = %d, %v; want a new one", pid, err)
	}
	if st := f.waitStopped(t, c.id); st.ExitCode != 0 {
		t.Errorf("exit code %d, want 0", st.ExitCode)
	}
	last := idlePid()
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(last, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("idle shim %d after Close: kill 0 = %v, want ESRCH (exited and reaped)", last, err)
	}
	rt.mu.Lock()
	n := len(rt.idle)
	rt.mu.Unlock()
	if n != 0 {
		t.Errorf("%d idle shims after Close", n)
	}
}
