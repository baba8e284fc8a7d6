package runc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubette/kubette/internal/runtime/oci"
)

// wrapRunc returns a runc wrapper called name that logs each call's arguments to the returned
// file, and points f at a Runtime that uses it.
func wrapRunc(t *testing.T, f *fixture, name string) (calls string) {
	t.Helper()
	realRunc, err := exec.LookPath("runc")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	calls = filepath.Join(dir, "calls")
	wrapper := filepath.Join(dir, name)
	script := "#!/bin/sh\necho \"$*\" >> " + calls + "\nexec " + realRunc + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	rt, err := New(Config{Binary: wrapper, Root: f.root, Shim: f.rt.shim})
	if err != nil {
		t.Fatal(err)
	}
	f.rt = rt
	return calls
}

// ranRunc reports whether the calls file holds a runc call with the subcommand cmd.
func ranRunc(calls, cmd string) bool {
	b, _ := os.ReadFile(calls)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(" "+l+" ", " "+cmd+" ") {
			return true
		}
	}
	return false
}

// TestKillLiveInit checks that Kill signals the init of a container this Runtime started
// without `runc kill`, and that a Runtime that did not start it (after a restart) still can.
func TestKillLiveInit(t *testing.T) {
	f := newFixture(t)
	calls := wrapRunc(t, f, "runc")
	// In the host's pid namespace sleep is not pid 1, so SIGTERM's default action kills it.
	c := f.run(t, []string{"sleep", "1000"}, func(in *oci.Input) {
		in.Container.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_NODE}}}
	})
	if err := f.rt.Kill(context.Background(), c.id, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if st := f.waitStopped(t, c.id); st.ExitCode != 128+int(syscall.SIGTERM) {
		t.Errorf("after SIGTERM: %+v, want exit code %d", st, 128+int(syscall.SIGTERM))
	}
	if ranRunc(calls, "kill") {
		t.Error("Kill of a live init this Runtime started ran `runc kill`")
	}
	// Killing it again, now that it has exited, is no error.
	if err := f.rt.Kill(context.Background(), c.id, syscall.SIGKILL); err != nil {
		t.Errorf("Kill of a stopped container: %v", err)
	}

	c2 := f.run(t, []string{"sleep", "1000"}, nil)
	restarted := wrapRunc(t, f, "runc")
	if err := f.rt.Kill(context.Background(), c2.id, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if st := f.waitStopped(t, c2.id); st.ExitCode != 137 {
		t.Errorf("after SIGKILL by a restarted Runtime: %+v, want exit code 137", st)
	}
	if !ranRunc(restarted, "kill") {
		t.Error("a Runtime that did not start the container did not ask runc to kill it")
	}
}
