package runc

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// liveInit is the init process of a container this Runtime started: State answers from it,
// without a `runc state` process, for as long as the process is alive.
type liveInit struct {
	pid       int
	start     string // starttime of /proc/<pid>/stat, which tells a reused pid apart
	bundle    string
	startedAt time.Time
}

// noteStarted remembers the init of a container Start has just started: its pid from the pid
// file runc create wrote beside the bundle, and the time of the started marker. Anything
// unreadable leaves State to ask runc.
func (r *Runtime) noteStarted(id, bundle string) {
	dir := filepath.Dir(bundle)
	pid, err := readPid(filepath.Join(dir, initPidFile))
	if err != nil {
		return
	}
	start, ok := procStartTime(pid)
	if !ok {
		return
	}
	b, err := os.ReadFile(filepath.Join(dir, startedFile))
	if err != nil {
		return
	}
	at, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b)))
	if err != nil {
		return
	}
	r.mu.Lock()
	r.live[id] = liveInit{pid: pid, start: start, bundle: bundle, startedAt: at}
	r.mu.Unlock()
}

// liveState is the state of a container whose init noteStarted remembered and which is still
// that same live process: running, as `runc state` would say. Once the process is gone (or a
// zombie), the entry is dropped and ok is false: State asks runc and the shim's exit.json.
func (r *Runtime) liveState(id string) (st State, ok bool) {
	r.mu.Lock()
	li, found := r.live[id]
	r.mu.Unlock()
	if !found {
		return State{}, false
	}
	if start, alive := procStartTime(li.pid); !alive || start != li.start {
		r.forget(id)
		return State{}, false
	}
	return State{Status: StatusRunning, Pid: li.pid, StartedAt: li.startedAt}, true
}

// signalLive sends sig to the init of container id that noteStarted remembered, if it is still
// that same live process, and reports whether it did. The signal goes through a pidfd opened
// before the process is recognised by its start time, so that a pid reused in between is never
// signalled.
func (r *Runtime) signalLive(id string, sig syscall.Signal) bool {
	r.mu.Lock()
	li, found := r.live[id]
	r.mu.Unlock()
	if !found {
		return false
	}
	fd, err := unix.PidfdOpen(li.pid, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if start, alive := procStartTime(li.pid); !alive || start != li.start {
		return false
	}
	return unix.PidfdSendSignal(fd, sig, nil, 0) == nil
}

// forget drops what noteStarted remembered of a container.
func (r *Runtime) forget(id string) {
	r.mu.Lock()
	delete(r.live, id)
	r.mu.Unlock()
}

// procStartTime returns the start time (field 22 of /proc/<pid>/stat) of a live process that
// is not a zombie.
func procStartTime(pid int) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", false
	}
	// The command name (field 2) may hold spaces and parentheses: split after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), f[19] is field 22 (starttime).
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return "", false
	}
	return f[19], true
}

// runcInitComm is the command name of runc's init (`runc init`, stage 2) until it execs the
// container's process.
const runcInitComm = "runc:[2:INIT]"

// execWaitLimit bounds how long awaitExec waits for an init that does not exec.
const execWaitLimit = 10 * time.Second

// awaitExec waits until the process pid is no longer runc's init: it has exec'd the
// container's process, or it is gone. `runc start` returns once the init has written runc's
// exec FIFO and the FIFO has been closed, and runc closes its descriptors (the FIFO's among
// them, since the CVE-2024-21626 fix) before the execve: a signal in between reaches runc's
// init, a Go program, and a pid 1 that ignores the signal's default action makes Go's runtime
// exit with status 2 instead (a container stopped just after its start ended with exit code 2
// instead of its process's SIGTERM handling). Another runtime's init has another name: no
// wait. Waiting ends with ctx or after execWaitLimit; the container counts as started either
// way, as runc says.
func awaitExec(ctx context.Context, pid int) {
	path := "/proc/" + strconv.Itoa(pid) + "/comm"
	deadline := time.Now().Add(execWaitLimit)
	for wait := 100 * time.Microsecond; ; wait = min(2*wait, 5*time.Millisecond) {
		b, err := os.ReadFile(path)
		if err != nil || strings.TrimSpace(string(b)) != runcInitComm {
			return
		}
		if _, alive := procStartTime(pid); !alive || time.Now().After(deadline) {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
