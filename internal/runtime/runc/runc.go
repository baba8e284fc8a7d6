package runc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Files in the container directory (the bundle's parent).
const (
	exitFile    = "exit.json"
	shimLogFile = "shim.log"
	shimPidFile = "shim.pid"
	initPidFile = "init.pid"
	runcLogFile = "runc.log"
	startedFile = "started"
)

// ErrNotFound is returned (wrapped) for a container runc does not know.
var ErrNotFound = errors.New("container not found")

// Config configures a Runtime.
type Config struct {
	Binary string // "runc" (or "crun"); default "runc"
	Root   string // runc --root; created if missing
	// Shim is the argv that starts the shim, e.g. {os.Executable(), "shim"}. Default: the
	// small ShimBinary beside the running executable when there is one, else exactly that.
	Shim []string
	// ShimPool is how many shims are kept started ahead of Create (pool.go); 0 starts each
	// shim in Create.
	ShimPool int
	// SealedCopy, when Binary is runc, runs runc from a sealed in-memory copy of its binary
	// that the Runtime holds while it lives, so that runc's init makes no protected copy of
	// itself per container (clonedbin.go); if the copy cannot be made, runc runs from
	// Binary as it is.
	SealedCopy bool
}

// Runtime drives the runc binary. Its only state of its own is the pids of the shims it started
// (its children, reaped once they exit) and the init processes of the containers it started
// (so that State needs no `runc state` while they live): everything else lives in runc's root
// and in the container directories, so a new Runtime adopts the containers of an old one.
type Runtime struct {
	binary string   // absolute path (of the sealed copy when there is one)
	isRunc bool     // the binary is runc (not crun)
	sealed *os.File // the sealed copy of runc's binary, nil without one
	root   string
	shim   []string

	mu       sync.Mutex
	shims    map[int]struct{}    // pids of started shims not yet reaped
	live     map[string]liveInit // container ID → the init Start started (see live.go)
	poolSize int                 // Config.ShimPool
	idle     []*idleShim         // shims started ahead (pool.go)
	closed   bool                // Close ran: no more idle shims
}

// New checks that the runc binary exists and creates Root.
func New(cfg Config) (*Runtime, error) {
	if cfg.Binary == "" {
		cfg.Binary = "runc"
	}
	bin, err := exec.LookPath(cfg.Binary)
	if err != nil {
		return nil, fmt.Errorf("runc runtime: %w", err)
	}
	if cfg.Root == "" {
		return nil, errors.New("runc runtime: Root is required")
	}
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("runc runtime: root: %w", err)
	}
	if err := os.MkdirAll(root, 0o711); err != nil {
		return nil, fmt.Errorf("runc runtime: create root: %w", err)
	}
	shim := cfg.Shim
	if len(shim) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("runc runtime: find the shim: %w", err)
		}
		shim = defaultShim(exe)
	}
	r := &Runtime{binary: bin, isRunc: filepath.Base(bin) == "runc", root: root, shim: append([]string(nil), shim...), shims: map[int]struct{}{}, live: map[string]liveInit{}, poolSize: max(cfg.ShimPool, 0)}
	if cfg.SealedCopy && r.isRunc {
		if f, err := sealedCopy(bin); err == nil {
			r.sealed, r.binary = f, fdPath(f)
		}
	}
	return r, nil
}

// Binary is the path runc runs from (/proc/<pid>/fd/<n> of the sealed copy when there is
// one).
func (r *Runtime) Binary() string { return r.binary }

// Status is a container's lifecycle state.
type Status string

// The statuses State reports.
const (
	StatusCreated Status = "created"
	StatusRunning Status = "running"
	StatusStopped Status = "stopped"
)

// State is what State reports about a container.
type State struct {
	Status                Status
	Pid                   int
	ExitCode              int
	StartedAt, FinishedAt time.Time
	OOMKilled             bool
	Reason                string // "OOMKilled", "Error", "Completed", "StartError"
	Message               string
}

// Create creates the container of bundleDir under a new shim and returns once runc has
// created it (or failed to). The shim copies the container's stdout and stderr into logPath in
// the CRI format; logPath's directory is created if missing. Create writes nothing to
// bundleDir; its files go to the bundle's parent directory. When ctx ends before the shim has
// reported, Create returns ctx's error while runc may still create the container: the caller
// deletes the id as after any failed Create.
func (r *Runtime) Create(ctx context.Context, id, bundleDir, logPath string) (err error) {
	bundleDir, err = filepath.Abs(bundleDir)
	if err != nil {
		return fmt.Errorf("create container %s: %w", id, err)
	}
	r.forget(id)
	dir := filepath.Dir(bundleDir)
	for _, f := range []string{exitFile, startedFile, initPidFile, shimPidFile} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("create container %s: %w", id, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return fmt.Errorf("create container %s: log directory: %w", id, err)
	}
	shimLog, err := os.OpenFile(filepath.Join(dir, shimLogFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("create container %s: %w", id, err)
	}
	defer shimLog.Close()

	r.reapShims()
	// The shim starts detached: in its own session, holding no directory of the runtime's. It
	// is this process's child, reaped by a later call (reapShims) once it has exited; starting
	// it through a first stage that re-executes it and exits would cost a second start of the
	// (large) binary on every container's create. An idle shim of the pool, started ahead,
	// saves even the one start; the pool is topped up once this container is created.
	a := shimArgs{id: id, bundle: bundleDir, root: r.root, runc: r.binary, logPath: logPath, detached: true}
	readyR, err := r.startShim(a, shimLog)
	if err != nil {
		return fmt.Errorf("create container %s: %w", id, err)
	}
	defer readyR.Close()
	defer r.fillPool()
	stop := context.AfterFunc(ctx, func() { _ = readyR.SetReadDeadline(time.Now()) })
	defer stop()
	msg, err := io.ReadAll(readyR)
	if err != nil {
		return fmt.Errorf("create container %s: wait for the shim: %w", id, errors.Join(err, ctx.Err()))
	}
	switch s := string(msg); {
	case s == "ok":
		return nil
	case strings.HasPrefix(s, "error: "):
		return fmt.Errorf("create container %s: %s", id, strings.TrimPrefix(s, "error: "))
	default:
		return fmt.Errorf("create container %s: the shim exited without reporting: %s", id, tail(filepath.Join(dir, shimLogFile)))
	}
}

// reapShims reaps the shims this Runtime started that have exited since. Every call that may
// follow a container's end (Create, State, Delete, List) runs it, so an exited shim stays a
// zombie only until the runtime's next such call.
func (r *Runtime) reapShims() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for pid := range r.shims {
		var ws unix.WaitStatus
		got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		for errors.Is(err, unix.EINTR) {
			got, err = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		}
		if got == pid || err != nil { // reaped, or no longer this process's child
			delete(r.shims, pid)
		}
	}
}

// tail is the end of a log file, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no shim log)"
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	return s
}

// Start starts a created container's process as `runc start` does, through runc's exec FIFO
// (fifo.go) when it can, else with `runc start`, and returns once runc's init has exec'd the
// process (awaitExec).
func (r *Runtime) Start(ctx context.Context, id string) error {
	bundle, err := r.bundleOf(ctx, id)
	if err != nil {
		return fmt.Errorf("start container %s: %w", id, err)
	}
	marker := filepath.Join(filepath.Dir(bundle), startedFile)
	// Written before the start so that StartedAt never follows FinishedAt.
	if err := writeFileAtomic(marker, []byte(time.Now().UTC().Format(time.RFC3339Nano))); err != nil {
		return fmt.Errorf("start container %s: %w", id, err)
	}
	pid, perr := readPid(filepath.Join(filepath.Dir(bundle), initPidFile))
	err = errFifoUnusable
	if perr == nil {
		err = r.startByFifo(ctx, id, pid)
	}
	if errors.Is(err, errFifoUnusable) {
		_, err = r.run(ctx, "start", id)
	}
	if err != nil {
		_ = os.Remove(marker)
		return fmt.Errorf("start container %s: %w", id, err)
	}
	if perr == nil {
		awaitExec(ctx, pid)
	}
	r.noteStarted(id, bundle)
	return nil
}

// bundleOf returns a container's bundle directory. It reads the bundle label runc keeps in
// its state file (<root>/<id>/state.json, written atomically), which saves a `runc state`
// process on every start; when that file cannot be read or names no bundle, it asks runc.
func (r *Runtime) bundleOf(ctx context.Context, id string) (string, error) {
	if validContainerID(id) {
		if b, err := os.ReadFile(filepath.Join(r.root, id, "state.json")); err == nil {
			var st struct {
				Config struct {
					Labels []string `json:"labels"`
				} `json:"config"`
			}
			if json.Unmarshal(b, &st) == nil {
				for _, l := range st.Config.Labels {
					if v, ok := strings.CutPrefix(l, "bundle="); ok && filepath.IsAbs(v) {
						return v, nil
					}
				}
			}
		}
	}
	rs, err := r.runcState(ctx, id)
	if err != nil {
		return "", err
	}
	return rs.Bundle, nil
}

// validContainerID reports whether id can name a directory below runc's root (no path
// separators, not . or ..), as runc itself requires.
func validContainerID(id string) bool {
	return id != "" && id != "." && id != ".." && !strings.ContainsAny(id, "/\\\x00")
}

// runcState is `runc state`'s JSON.
type runcState struct {
	ID      string    `json:"id"`
	Pid     int       `json:"pid"`
	Status  string    `json:"status"`
	Bundle  string    `json:"bundle"`
	Created time.Time `json:"created"`
}

func (r *Runtime) runcState(ctx context.Context, id string) (runcState, error) {
	out, err := r.run(ctx, "state", id)
	if err != nil {
		return runcState{}, err
	}
	var rs runcState
	if err := json.Unmarshal(out, &rs); err != nil {
		return runcState{}, fmt.Errorf("runc state: %w", err)
	}
	return rs, nil
}

// State reports a container's state: runc's, merged with the shim's exit.json once the
// container's init has exited. Until the shim has written exit.json the container counts as
// still running (or created), as under containerd, where a container stops with the shim's
// exit event.
func (r *Runtime) State(ctx context.Context, id string) (State, error) {
	r.reapShims()
	if st, ok := r.liveState(id); ok {
		return st, nil
	}
	rs, err := r.runcState(ctx, id)
	if err != nil {
		return State{}, fmt.Errorf("state of container %s: %w", id, err)
	}
	dir := filepath.Dir(rs.Bundle)
	st := State{Pid: rs.Pid}
	started := false
	if b, err := os.ReadFile(filepath.Join(dir, startedFile)); err == nil {
		if t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b))); err == nil {
			st.StartedAt, started = t, true
		}
	}
	switch rs.Status {
	case "created":
		st.Status = StatusCreated
	case "running", "paused", "pausing":
		st.Status = StatusRunning
	default:
		st.Status = StatusStopped
	}
	var ex exitStatus
	b, err := os.ReadFile(filepath.Join(dir, exitFile))
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &ex); err != nil {
			return State{}, fmt.Errorf("state of container %s: %s: %w", id, exitFile, err)
		}
		st.Status = StatusStopped
	case !errors.Is(err, os.ErrNotExist):
		return State{}, fmt.Errorf("state of container %s: %w", id, err)
	case st.Status != StatusStopped:
		return st, nil
	case shimAlive(dir):
		// The init has exited and the shim is about to write exit.json.
		st.Status = StatusRunning
		if !started {
			st.Status = StatusCreated
		}
		return st, nil
	default:
		ex = exitStatus{ExitCode: 255, Message: "the container's shim is gone: exit status unknown"}
	}
	st.ExitCode, st.FinishedAt, st.OOMKilled, st.Message = ex.ExitCode, ex.FinishedAt, ex.OOMKilled, ex.Message
	switch {
	case ex.OOMKilled:
		st.Reason = "OOMKilled"
	case !started:
		st.Reason = "StartError"
	case ex.ExitCode == 0:
		st.Reason = "Completed"
	default:
		st.Reason = "Error"
	}
	return st, nil
}

// shimAlive reports whether the shim of the container directory dir still runs.
func shimAlive(dir string) bool {
	pid, err := readPid(filepath.Join(dir, shimPidFile))
	if err != nil {
		return false
	}
	if unix.Kill(pid, 0) != nil {
		return false
	}
	// A reused pid is not our shim: its state is not a zombie and its cmdline names the shim
	// flags.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && bytes.Contains(b, []byte("-detached"))
}

// Kill sends sig to the container's init. Killing a container that is already stopped is no
// error. The init of a container this Runtime started is signalled directly while it lives
// (live.go), as `runc kill` would signal it, without a runc process.
func (r *Runtime) Kill(ctx context.Context, id string, sig syscall.Signal) error {
	if r.signalLive(id, sig) {
		return nil
	}
	_, err := r.run(ctx, "kill", id, strconv.Itoa(int(sig)))
	if err != nil && !strings.Contains(err.Error(), "not running") {
		return fmt.Errorf("kill container %s: %w", id, err)
	}
	return nil
}

// ReopenLog makes the container's shim reopen its log path, after the kubelet renamed the file
// to rotate it (CRI ReopenContainerLog). The shim reopens it asynchronously, within moments;
// until then output still goes to the renamed file.
func (r *Runtime) ReopenLog(ctx context.Context, id string) error {
	rs, err := r.runcState(ctx, id)
	if err != nil {
		return fmt.Errorf("reopen log of container %s: %w", id, err)
	}
	dir := filepath.Dir(rs.Bundle)
	pid, err := readPid(filepath.Join(dir, shimPidFile))
	if err != nil || !shimAlive(dir) {
		return fmt.Errorf("reopen log of container %s: its shim is not running", id)
	}
	if err := unix.Kill(pid, unix.SIGUSR1); err != nil {
		return fmt.Errorf("reopen log of container %s: signal the shim: %w", id, err)
	}
	return nil
}

// Delete kills the container if it still runs and removes it from runc (state and cgroups).
// Deleting a container runc does not know is no error.
func (r *Runtime) Delete(ctx context.Context, id string) error {
	defer r.reapShims()
	r.forget(id)
	if _, err := r.run(ctx, "delete", "--force", id); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("delete container %s: %w", id, err)
	}
	if err := os.RemoveAll(filepath.Join(r.root, id)); err != nil {
		return fmt.Errorf("delete container %s: %w", id, err)
	}
	return nil
}

// Exec runs cmd in a running container with the container's process settings (env, user,
// working directory, capabilities) and returns its output and exit code. When timeout (if
// > 0) passes, the process is killed and the error wraps context.DeadlineExceeded.
func (r *Runtime) Exec(ctx context.Context, id string, cmd []string, timeout time.Duration) (stdout, stderr []byte, exitCode int, err error) {
	if len(cmd) == 0 {
		return nil, nil, -1, fmt.Errorf("exec in container %s: no command", id)
	}
	rs, err := r.runcState(ctx, id)
	if err != nil {
		return nil, nil, -1, fmt.Errorf("exec in container %s: %w", id, err)
	}
	if rs.Status != "running" {
		return nil, nil, -1, fmt.Errorf("exec in container %s: container is %s, not running", id, rs.Status)
	}
	b, err := os.ReadFile(filepath.Join(rs.Bundle, "config.json"))
	if err != nil {
		return nil, nil, -1, fmt.Errorf("exec in container %s: %w", id, err)
	}
	var spec specs.Spec
	if err := json.Unmarshal(b, &spec); err != nil || spec.Process == nil {
		return nil, nil, -1, fmt.Errorf("exec in container %s: bad config.json: %v", id, err)
	}
	proc := *spec.Process
	proc.Args = cmd
	proc.Terminal = false
	proc.ConsoleSize = nil

	tmp, err := os.MkdirTemp(filepath.Dir(rs.Bundle), "exec-")
	if err != nil {
		return nil, nil, -1, fmt.Errorf("exec in container %s: %w", id, err)
	}
	defer os.RemoveAll(tmp)
	pb, err := json.Marshal(proc)
	if err != nil {
		return nil, nil, -1, fmt.Errorf("exec in container %s: %w", id, err)
	}
	procFile, pidFile, logFile := filepath.Join(tmp, "process.json"), filepath.Join(tmp, "pid"), filepath.Join(tmp, "runc.log")
	if err := os.WriteFile(procFile, pb, 0o600); err != nil {
		return nil, nil, -1, fmt.Errorf("exec in container %s: %w", id, err)
	}

	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var outBuf, errBuf bytes.Buffer
	c := exec.CommandContext(ctx, r.binary, "--root", r.root, "--log", logFile, "--log-format", "json",
		"exec", "--process", procFile, "--pid-file", pidFile, id)
	c.Stdout, c.Stderr = &outBuf, &errBuf
	c.Cancel = func() error {
		// runc forwards signals but cannot forward SIGKILL: kill the process itself, then runc.
		if pid, err := readPid(pidFile); err == nil {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		return c.Process.Kill()
	}
	c.WaitDelay = 5 * time.Second
	runErr := c.Run()
	if ctx.Err() != nil {
		return outBuf.Bytes(), errBuf.Bytes(), -1, fmt.Errorf("exec in container %s: %w", id, ctx.Err())
	}
	var ee *exec.ExitError
	switch {
	case runErr == nil:
		return outBuf.Bytes(), errBuf.Bytes(), 0, nil
	case errors.As(runErr, &ee):
		// runc exits 255 with an error in its log when it could not run the process (no such
		// executable, container gone); otherwise its exit code is the process's.
		if msg := runcLoggedError(logFile); msg != "" && ee.ExitCode() == 255 {
			return outBuf.Bytes(), errBuf.Bytes(), -1, fmt.Errorf("exec in container %s: %s", id, msg)
		}
		return outBuf.Bytes(), errBuf.Bytes(), ee.ExitCode(), nil
	default:
		return outBuf.Bytes(), errBuf.Bytes(), -1, fmt.Errorf("exec in container %s: %w", id, runErr)
	}
}

// List returns the IDs of the containers runc knows under Root.
func (r *Runtime) List(ctx context.Context) ([]string, error) {
	r.reapShims()
	out, err := r.run(ctx, "list", "--format", "json")
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	var list []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	ids := make([]string, 0, len(list))
	for _, c := range list {
		ids = append(ids, c.ID)
	}
	return ids, nil
}

// run runs `runc --root Root args...` and returns its stdout. The error carries runc's message;
// it wraps ErrNotFound when runc says the container does not exist.
func (r *Runtime) run(ctx context.Context, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, r.binary, append([]string{"--root", r.root, "--log-format", "json"}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := runcMessage(stderr.Bytes())
		if strings.Contains(msg, "does not exist") {
			return nil, fmt.Errorf("runc %s: %s: %w", args[0], msg, ErrNotFound)
		}
		return nil, fmt.Errorf("runc %s: %w: %s", args[0], err, msg)
	}
	return stdout.Bytes(), nil
}

// runcMessage extracts the messages of runc's JSON log lines on stderr (the text as is when
// it is not JSON).
func runcMessage(stderr []byte) string {
	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(string(stderr)), "\n") {
		var e struct{ Level, Msg string }
		if json.Unmarshal([]byte(line), &e) == nil && e.Msg != "" {
			msgs = append(msgs, e.Msg)
		} else if line != "" {
			msgs = append(msgs, line)
		}
	}
	return strings.Join(msgs, "; ")
}
