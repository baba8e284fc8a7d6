package runc

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// runcStatus is what `runc state` says of id.
func runcStatus(t *testing.T, f *fixture, id string) string {
	t.Helper()
	out, err := exec.Command("runc", "--root", f.root, "state", id).Output()
	if err != nil {
		t.Fatalf("runc state: %v", err)
	}
	var st struct{ Status string }
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatal(err)
	}
	return st.Status
}

// TestStartByFifo checks that Start starts a runc container through its exec FIFO, without
// `runc start`: the process runs (its output reaches the log), runc reports it running, the
// FIFO is gone, and Start returned only once the init had exec'd the process.
func TestStartByFifo(t *testing.T) {
	f := newFixture(t)
	calls := wrapRunc(t, f, "runc")
	c := f.run(t, []string{"sh", "-c", "echo started; exec sleep 1000"}, nil)
	if ranRunc(calls, "start") {
		t.Error("Start ran `runc start`")
	}
	pid, err := readPid(filepath.Join(c.dir, initPidFile))
	if err != nil {
		t.Fatal(err)
	}
	if got := comm(pid); got == runcInitComm {
		t.Errorf("after Start the init is still %q: Start returned before the exec", got)
	}
	if _, err := os.Lstat(filepath.Join(f.root, c.id, execFifo)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("exec fifo after Start: %v, want it removed", err)
	}
	if got := runcStatus(t, f, c.id); got != "running" {
		t.Errorf("runc state says %q, want running", got)
	}
	waitFor(t, "the container's output", func() bool {
		for _, e := range readLog(t, c.log) {
			if e.content == "started" {
				return true
			}
		}
		return false
	})
	if err := f.rt.Kill(context.Background(), c.id, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if st := f.waitStopped(t, c.id); st.ExitCode != 137 {
		t.Errorf("after SIGKILL: %+v, want exit code 137", st)
	}
}

// TestSignalRightAfterStart sends SIGTERM to the init's pid the moment Start returns, the race
// that made containers started through the FIFO exit 2: runc's init, a Go program, got the
// signal after closing the FIFO but before its execve (without awaitExec, about 1 in 30 here).
// sleep as the pid namespace's init ignores SIGTERM, so only the SIGKILL that follows ends it:
// 137 each time, never 2.
func TestSignalRightAfterStart(t *testing.T) {
	f := newFixture(t)
	for i := range 16 {
		c := f.run(t, []string{"sleep", "1000"}, nil)
		pid, err := readPid(filepath.Join(c.dir, initPidFile))
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // let a misdelivered SIGTERM end the init first
		if err := f.rt.Kill(context.Background(), c.id, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if st := f.waitStopped(t, c.id); st.ExitCode != 137 {
			t.Errorf("container %d: SIGTERM then SIGKILL right after Start: %+v, want exit code 137", i, st)
		}
	}
}

// TestStartOtherRuntime checks that an OCI runtime not called runc is started with its own
// start command.
func TestStartOtherRuntime(t *testing.T) {
	f := newFixture(t)
	calls := wrapRunc(t, f, "runc-wrapped")
	c := f.run(t, []string{"sleep", "1000"}, nil)
	if !ranRunc(calls, "start") {
		t.Error("Start of a runtime not called runc did not run its start command")
	}
	if got := runcStatus(t, f, c.id); got != "running" {
		t.Errorf("runc state says %q, want running", got)
	}
}

// TestStartDeadInit checks that Start of a created container whose init died fails (with
// runc's word for it) instead of waiting for the init's byte, and takes its started marker
// back.
func TestStartDeadInit(t *testing.T) {
	f := newFixture(t)
	calls := wrapRunc(t, f, "runc")
	c := f.create(t, []string{"sleep", "1000"}, nil)
	pid, err := readPid(filepath.Join(c.dir, initPidFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the init to die", func() bool { _, alive := procStartTime(pid); return !alive })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.rt.Start(ctx, c.id); err == nil {
		t.Fatal("Start of a container whose init died succeeded")
	}
	if ctx.Err() != nil {
		t.Fatal("Start waited until its deadline")
	}
	if !ranRunc(calls, "start") {
		t.Error("the failed Start did not leave the verdict to `runc start`")
	}
	if _, err := os.Stat(filepath.Join(c.dir, startedFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("started marker after a failed Start: %v", err)
	}
}
