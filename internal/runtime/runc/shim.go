package runc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// shimGCEnv, set to "1" beside GOGC=off in the shim's environment, tells ShimMain to turn
// the collector back on (GOGC=off without it came from the user and is kept).
const shimGCEnv = "KUBETTE_SHIM_GC"

// ShimEnv is the environment variable the runtime sets to "1" for the shim; MaybeRunShim looks
// for it.
const ShimEnv = "KUBETTE_SHIM"

// ShimBinary is the file name of the shim's own small binary (built from cmd/kubette-shim).
// When it lies beside the running executable and speaks ShimProtocol, the Runtime starts it
// instead of `kubette shim`: the kubette binary links the whole cluster, and starting it (the
// Go runtime and the package initialisation of hundreds of packages) costs ~20 ms of CPU
// against ~2 ms for the small binary, once per container.
const ShimBinary = "kubette-shim"

// ShimProtocol names the contract between the runtime and its shim: flags, environment,
// file descriptors, files in the container directory, attach.sock's framing. Change it with
// any of them, so that a stale kubette-shim beside a newer kubette is not used.
const ShimProtocol = "kubette-shim/3"

// defaultShim is the argv of the shim for the executable exe: ShimBinary beside exe when it
// is there and answers `-protocol` with ShimProtocol, else `exe shim`.
func defaultShim(exe string) []string {
	small := filepath.Join(filepath.Dir(exe), ShimBinary)
	if fi, err := os.Stat(small); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, small, "-protocol").Output()
		if err == nil && strings.TrimSpace(string(out)) == ShimProtocol {
			return []string{small}
		}
	}
	return []string{exe, "shim"}
}

// ioDrainLimit bounds how long the shim waits, once the container's init has exited, for the
// output pipes to close (a process outside the container's pid namespace may still hold them).
const ioDrainLimit = 10 * time.Second

// MaybeRunShim runs the shim and exits when the process was started as one (ShimEnv=1), with
// the process's arguments as the shim's. Test binaries call it first thing in TestMain; see the
// package documentation.
func MaybeRunShim() {
	if os.Getenv(ShimEnv) == "1" {
		os.Exit(ShimMain(os.Args[1:]))
	}
}

// exitStatus is exit.json, written by the shim when the container's init has exited.
type exitStatus struct {
	ExitCode   int       `json:"exitCode"`
	Signal     int       `json:"signal,omitempty"`
	FinishedAt time.Time `json:"finishedAt"`
	OOMKilled  bool      `json:"oomKilled"`
	Message    string    `json:"message,omitempty"`
}

// shimArgs are the shim's flags.
type shimArgs struct {
	id, bundle, root, runc, logPath string
	detached                        bool
}

func (a shimArgs) flags() []string {
	f := []string{"-id", a.id, "-bundle", a.bundle, "-root", a.root, "-runc", a.runc, "-log", a.logPath}
	if a.detached {
		f = append(f, "-detached")
	}
	return f
}

// ShimMain is the body of `kubette shim`: it runs one container (see the package
// documentation) and returns the process's exit code. The runtime gives it a pipe as fd 3 on
// which it reports "ok" or "error: <why>".
func ShimMain(args []string) int {
	// The runtime starts the shim with the collector off (GOGC=off), so that the start of a
	// large binary runs no collection; the shim lives as long as its container and collects
	// as usual from here on, and runc (also a Go program) gets the environment as it was.
	if os.Getenv(shimGCEnv) == "1" {
		debug.SetGCPercent(100)
		_ = os.Unsetenv("GOGC")
		_ = os.Unsetenv(shimGCEnv)
	}
	var a shimArgs
	fs := flag.NewFlagSet("shim", flag.ContinueOnError)
	fs.StringVar(&a.id, "id", "", "container id")
	fs.StringVar(&a.bundle, "bundle", "", "bundle directory")
	fs.StringVar(&a.root, "root", "", "runc --root")
	fs.StringVar(&a.runc, "runc", "runc", "runc binary")
	fs.StringVar(&a.logPath, "log", "", "container log file (CRI format)")
	fs.BoolVar(&a.detached, "detached", false, "internal: already re-executed in its own session")
	pooled := fs.Bool("pooled", false, "internal: started ahead; the container (id, bundle, log) comes as JSON on fd 4")
	protocol := fs.Bool("protocol", false, "print the protocol this shim speaks (ShimProtocol) and exit")
	pause := fs.Bool(pauseFlag[1:], false, "internal: hold a pod's pid namespace (pause.go) instead of running a container")
	fs.String("sandbox", "", "internal: with -pause, the sandbox directory (for kubette down)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *protocol {
		fmt.Println(ShimProtocol)
		return 0
	}
	if *pause {
		return runPause()
	}
	ready := os.NewFile(3, "ready")
	if *pooled {
		if err := readJob(&a); errors.Is(err, io.EOF) {
			ready.Close()
			return 0 // the pool closed: no container for this shim
		} else if err != nil {
			return reportFailure(ready, err)
		}
		if err := redirectOutput(filepath.Join(filepath.Dir(a.bundle), shimLogFile)); err != nil {
			return reportFailure(ready, err)
		}
	}
	if a.id == "" || a.bundle == "" || a.root == "" || a.logPath == "" {
		return reportFailure(ready, errors.New("shim: -id, -bundle, -root and -log are required"))
	}
	if !a.detached {
		return detach(ready, args)
	}
	return runShim(ready, a)
}

// reportFailure tells the runtime why the shim gives up, logs it and returns the exit code.
func reportFailure(ready *os.File, err error) int {
	fmt.Fprintf(os.Stderr, "%s shim: %v\n", time.Now().UTC().Format(time.RFC3339Nano), err)
	if ready != nil {
		fmt.Fprintf(ready, "error: %v", err)
		ready.Close()
	}
	return 1
}

// detach re-executes the shim in a new session and returns at once, so that the real shim is
// nobody's child but init's (or the nearest subreaper's) and the runtime reaps only this short
// first stage.
func detach(ready *os.File, args []string) int {
	// The arguments before ours (e.g. "shim" of `kubette shim`) are kept as they were.
	prefix := os.Args[1 : len(os.Args)-len(args)]
	argv := append(append(append([]string(nil), prefix...), args...), "-detached")
	cmd := exec.Command("/proc/self/exe", argv...)
	cmd.Args[0] = os.Args[0]
	cmd.Dir = "/" // hold no directory of the runtime's
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{ready}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return reportFailure(ready, fmt.Errorf("start detached shim: %w", err))
	}
	return 0
}

// runShim is the detached shim.
func runShim(ready *os.File, a shimArgs) int {
	dir := filepath.Dir(a.bundle)
	// Neither runc nor the container may inherit the ready pipe: Create waits for its EOF.
	unix.CloseOnExec(int(ready.Fd()))
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return reportFailure(ready, fmt.Errorf("become a child subreaper: %w", err))
	}
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE)
	if err := writeFileAtomic(filepath.Join(dir, shimPidFile), []byte(strconv.Itoa(os.Getpid()))); err != nil {
		return reportFailure(ready, err)
	}
	if err := os.MkdirAll(filepath.Dir(a.logPath), 0o755); err != nil {
		return reportFailure(ready, fmt.Errorf("create log directory: %w", err))
	}
	logFile, err := os.OpenFile(a.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return reportFailure(ready, fmt.Errorf("open container log: %w", err))
	}

	ioc, err := readIOConfig(a.bundle)
	if err != nil {
		return reportFailure(ready, err)
	}
	// SIGCHLD is watched before the container exists, so that no exit goes unnoticed.
	sigch := make(chan os.Signal, 1)
	signal.Notify(sigch, syscall.SIGCHLD)

	pidFile := filepath.Join(dir, initPidFile)
	runcLog := filepath.Join(dir, runcLogFile)
	_ = os.Remove(runcLog)
	args := []string{"--root", a.root, "--log", runcLog, "--log-format", "json",
		"create", "--bundle", a.bundle, "--pid-file", pidFile}
	// The container's output: one stream per pipe, or the terminal's master (console.go).
	type output struct {
		r      io.Reader
		name   string
		stream byte
	}
	var (
		outputs []output
		stdin   io.WriteCloser // CRI stdin, which attach sessions write to
		resize  func(TermSize)
		runErr  error
	)
	if ioc.terminal {
		cs, err := listenConsole()
		if err != nil {
			return reportFailure(ready, err)
		}
		cmd := exec.Command(a.runc, append(args, "--console-socket", cs.path, a.id)...)
		cmd.Dir = a.bundle
		if runErr = cmd.Run(); runErr != nil {
			cs.close()
			return reportFailure(ready, fmt.Errorf("runc create: %w: %s", runErr, runcLogError(runcLog)))
		}
		master, err := cs.master()
		if err != nil {
			return reportFailure(ready, err)
		}
		outputs = []output{{ptyReader{master}, "stdout", streamStdout}}
		if ioc.stdin {
			stdin = ptyStdin{master}
		}
		resize = func(sz TermSize) { setTermSize(master, sz) }
	} else {
		outR, outW, err := os.Pipe()
		if err != nil {
			return reportFailure(ready, fmt.Errorf("stdout pipe: %w", err))
		}
		errR, errW, err := os.Pipe()
		if err != nil {
			return reportFailure(ready, fmt.Errorf("stderr pipe: %w", err))
		}
		// A container with CRI stdin reads a pipe that attach sessions write to.
		var inR *os.File
		if ioc.stdin {
			var inW *os.File
			if inR, inW, err = os.Pipe(); err != nil {
				return reportFailure(ready, fmt.Errorf("stdin pipe: %w", err))
			}
			stdin = inW
		}
		cmd := exec.Command(a.runc, append(args, a.id)...)
		cmd.Stdout, cmd.Stderr = outW, errW
		if inR != nil {
			cmd.Stdin = inR
		}
		cmd.Dir = a.bundle
		runErr = cmd.Run()
		outW.Close()
		errW.Close()
		if inR != nil {
			inR.Close()
		}
		if runErr != nil {
			return reportFailure(ready, fmt.Errorf("runc create: %w: %s", runErr, runcLogError(runcLog)))
		}
		outputs = []output{{outR, "stdout", streamStdout}, {errR, "stderr", streamStderr}}
	}
	pid, err := readPid(pidFile)
	if err != nil {
		return reportFailure(ready, err)
	}
	memCgroup := memoryCgroupDir(pid)
	oomBefore := oomKillCount(memCgroup)

	log := &criLog{w: logFile, now: time.Now}
	// SIGUSR1 (Runtime.ReopenLog) reopens the log path, after the kubelet rotated the file.
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		for range usr1 {
			f, err := os.OpenFile(a.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
			if err != nil {
				fmt.Fprintf(os.Stderr, "shim: reopen log: %v\n", err)
				continue
			}
			log.mu.Lock()
			old := log.w
			log.w = f
			log.mu.Unlock()
			if c, ok := old.(io.Closer); ok {
				c.Close()
			}
		}
	}()
	// Attach sessions get the output as it is read, and write the container's stdin.
	hub := newAttachHub(stdin, ioc.stdinOnce, resize)
	if ln, err := listenAttach(dir); err != nil {
		fmt.Fprintf(os.Stderr, "shim: no attach: %v\n", err)
	} else {
		defer os.Remove(filepath.Join(dir, attachSocket))
		defer ln.Close()
		go hub.serve(ln)
	}
	var copiers sync.WaitGroup
	for _, s := range outputs {
		copiers.Add(1)
		go func() {
			defer copiers.Done()
			if err := log.copyStream(io.TeeReader(s.r, hub.writer(s.stream)), s.name); err != nil {
				fmt.Fprintf(os.Stderr, "shim: %s: %v\n", s.name, err)
			}
		}()
	}
	fmt.Fprint(ready, "ok")
	ready.Close()

	ws := reap(pid, sigch)
	st := exitStatus{FinishedAt: time.Now().UTC()}
	switch {
	case ws == nil:
		st.ExitCode = 255
		st.Message = "the container's init vanished without an exit status"
	case ws.Signaled():
		st.Signal = int(ws.Signal())
		st.ExitCode = 128 + st.Signal
	default:
		st.ExitCode = ws.ExitStatus()
	}
	st.OOMKilled = oomKillCount(memCgroup) > oomBefore

	drained := make(chan struct{})
	go func() {
		copiers.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(ioDrainLimit):
		fmt.Fprintln(os.Stderr, "shim: output pipes still open after the container's init exited; not waiting for them")
	}
	hub.close()
	b, err := json.Marshal(st)
	if err != nil {
		return reportFailure(nil, err)
	}
	if err := writeFileAtomic(filepath.Join(dir, exitFile), b); err != nil {
		return reportFailure(nil, err)
	}
	return 0
}

// reap waits for the container's init (pid) and returns its status, reaping every other
// child on the way (orphans the shim inherits as a subreaper). It returns nil if the shim has
// no children left and pid is gone without having been seen.
func reap(pid int, sigch <-chan os.Signal) *unix.WaitStatus {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		for {
			var ws unix.WaitStatus
			got, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if err == unix.EINTR {
				continue
			}
			if errors.Is(err, unix.ECHILD) {
				if unix.Kill(pid, 0) != nil {
					return nil
				}
				break
			}
			if err != nil || got <= 0 {
				break
			}
			if got == pid && (ws.Exited() || ws.Signaled()) {
				return &ws
			}
		}
		select {
		case <-sigch:
		case <-tick.C:
		}
	}
}

// memoryCgroupDir is the cgroup v1 memory directory of pid ("" if it has none).
func memoryCgroupDir(pid int) string {
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controller-list:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				return filepath.Join("/sys/fs/cgroup/memory", parts[2])
			}
		}
	}
	return ""
}

// oomKillCount reads the oom_kill counter of a cgroup v1 memory directory (0 when unknown).
func oomKillCount(dir string) int {
	if dir == "" {
		return 0
	}
	b, err := os.ReadFile(filepath.Join(dir, "memory.oom_control"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// runcLogError is the last error runc wrote to its JSON log file, or the file's text when it
// holds no error.
func runcLogError(path string) string {
	if msg := runcLoggedError(path); msg != "" {
		return msg
	}
	b, err := os.ReadFile(path)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return "(runc logged nothing)"
	}
	return strings.TrimSpace(string(b))
}

// runcLoggedError is the last error runc wrote to its JSON log file ("" if none).
func runcLoggedError(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	msg := ""
	for _, line := range strings.Split(string(b), "\n") {
		var e struct{ Level, Msg string }
		if json.Unmarshal([]byte(line), &e) == nil && (e.Level == "error" || e.Level == "fatal") {
			msg = e.Msg
		}
	}
	return msg
}

func readPid(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read pid file: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pid file %s: bad pid %q", path, b)
	}
	return pid, nil
}

// writeFileAtomic writes a file that readers see whole or not at all.
func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
