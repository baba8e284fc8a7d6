package runc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startNamed starts a shell script whose file name, and so whose command name until it execs
// something else, is name; the cleanup kills and reaps it.
func startNamed(t *testing.T, name, script string) *exec.Cmd {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return cmd
}

func comm(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.TrimSpace(string(b))
}

// TestAwaitExec waits while the process is named as runc's init and returns once it has
// exec'd something else, at once for any other process, and when the process ends.
func TestAwaitExec(t *testing.T) {
	ctx := context.Background()

	execs := startNamed(t, runcInitComm, "sleep 0.3; exec sleep 1000")
	awaitExec(ctx, execs.Process.Pid)
	if c := comm(execs.Process.Pid); c != "sleep" {
		t.Errorf("after awaitExec the process is %q, want it to have exec'd sleep", c)
	}

	other := startNamed(t, "other", "sleep 1000")
	octx, ocancel := context.WithTimeout(ctx, time.Minute)
	defer ocancel()
	awaitExec(octx, other.Process.Pid)
	if octx.Err() != nil {
		t.Errorf("awaitExec of a process not named as runc's init waited for it")
	}

	ends := startNamed(t, runcInitComm, "sleep 0.3; exit 3")
	awaitExec(ctx, ends.Process.Pid) // returns once the process is a zombie or reaped

	stuck := startNamed(t, runcInitComm, "sleep 1000")
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	awaitExec(cctx, stuck.Process.Pid) // returns with ctx
	if c := comm(stuck.Process.Pid); c != runcInitComm {
		t.Errorf("the stuck process is %q", c)
	}
}
