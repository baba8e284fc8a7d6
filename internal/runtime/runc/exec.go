package runc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// TermSize is a terminal's size in character cells.
type TermSize struct {
	Width, Height uint16
}

// StreamOptions are the streams of an interactive exec (ExecStream). A nil Stdin gives the
// process /dev/null; a nil Stdout or Stderr discards that output. With TTY the process gets a
// terminal: its output (stdout and stderr together) goes to Stdout, Stderr is unused, and
// Resize (optional) sets the terminal's size.
type StreamOptions struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	TTY            bool
	Resize         <-chan TermSize
}

// firstSizeWait bounds how long a terminal exec waits for the client's first terminal size.
const firstSizeWait = time.Second

// execDrainLimit bounds how long ExecStream waits, once the process has exited, for its output
// to close (a background process it started may hold it open).
const execDrainLimit = 2 * time.Second

// ExecStream runs cmd in a running container with the container's process settings and the
// given streams, and returns the process's exit code once it has exited. The process is
// killed when ctx ends. An error means the process could not be run (or was killed because ctx
// ended); a non-zero exit code is no error.
//
// runc runs in the foreground. With TTY, runc allocates the process's terminal and copies it
// to runc's own terminal: ExecStream gives runc the other side of a pseudo-terminal of its own,
// set to raw mode, copies that to the streams, and resizes it (runc follows with SIGWINCH).
func (r *Runtime) ExecStream(ctx context.Context, id string, cmd []string, o StreamOptions) (exitCode int, err error) {
	if len(cmd) == 0 {
		return -1, fmt.Errorf("exec in container %s: no command", id)
	}
	// The process's terminal gets the client's first size from the start (OCI consoleSize):
	// wait a moment for it (kubectl sends its terminal's at once). Later sizes follow through
	// our terminal (runTTY).
	var size *TermSize
	if o.TTY && o.Resize != nil {
		select {
		case sz, ok := <-o.Resize:
			if ok {
				size = &sz
			}
		case <-time.After(firstSizeWait):
		case <-ctx.Done():
			return -1, fmt.Errorf("exec in container %s: %w", id, ctx.Err())
		}
	}
	p, err := r.prepareExec(ctx, id, cmd, o.TTY, size)
	if err != nil {
		return -1, fmt.Errorf("exec in container %s: %w", id, err)
	}
	defer os.RemoveAll(p.dir)

	c := exec.Command(r.binary, "--root", r.root, "--log", p.logFile, "--log-format", "json",
		"exec", "--process", p.procFile, "--pid-file", p.pidFile, id)
	c.Dir = "/"
	if o.TTY {
		exitCode, err = r.runTTY(ctx, c, p, o, size)
	} else {
		exitCode, err = r.runPipes(ctx, c, p, o)
	}
	if err != nil {
		return -1, fmt.Errorf("exec in container %s: %w", id, err)
	}
	return exitCode, nil
}

// execFiles are the files of one exec: the process.json runc reads, the pid file it writes
// and its log.
type execFiles struct {
	dir, procFile, pidFile, logFile string
}

// prepareExec checks that the container runs and writes the process.json of cmd: the
// container's own process settings with cmd as arguments.
func (r *Runtime) prepareExec(ctx context.Context, id string, cmd []string, tty bool, size *TermSize) (execFiles, error) {
	rs, err := r.runcState(ctx, id)
	if err != nil {
		return execFiles{}, err
	}
	if rs.Status != "running" {
		return execFiles{}, fmt.Errorf("container is %s, not running", rs.Status)
	}
	b, err := os.ReadFile(filepath.Join(rs.Bundle, "config.json"))
	if err != nil {
		return execFiles{}, err
	}
	var spec specs.Spec
	if err := json.Unmarshal(b, &spec); err != nil || spec.Process == nil {
		return execFiles{}, fmt.Errorf("bad config.json: %v", err)
	}
	proc := *spec.Process
	proc.Args = cmd
	proc.Terminal = tty
	proc.ConsoleSize = nil
	if tty && size != nil && size.Width > 0 && size.Height > 0 {
		proc.ConsoleSize = &specs.Box{Width: uint(size.Width), Height: uint(size.Height)}
	}
	if tty && !hasEnv(proc.Env, "TERM") {
		proc.Env = append(append([]string(nil), proc.Env...), "TERM=xterm")
	}
	dir, err := os.MkdirTemp(filepath.Dir(rs.Bundle), "exec-")
	if err != nil {
		return execFiles{}, err
	}
	p := execFiles{dir: dir, procFile: filepath.Join(dir, "process.json"), pidFile: filepath.Join(dir, "pid"), logFile: filepath.Join(dir, "runc.log")}
	pb, err := json.Marshal(proc)
	if err == nil {
		err = os.WriteFile(p.procFile, pb, 0o600)
	}
	if err != nil {
		os.RemoveAll(dir)
		return execFiles{}, err
	}
	return p, nil
}

func hasEnv(env []string, name string) bool {
	for _, e := range env {
		if len(e) > len(name) && e[:len(name)] == name && e[len(name)] == '=' {
			return true
		}
	}
	return false
}

// runPipes runs c with pipes for the streams.
func (r *Runtime) runPipes(ctx context.Context, c *exec.Cmd, p execFiles, o StreamOptions) (int, error) {
	var stdinW *os.File
	if o.Stdin != nil {
		inR, inW, err := os.Pipe()
		if err != nil {
			return -1, err
		}
		defer inR.Close()
		c.Stdin, stdinW = inR, inW
	}
	c.Stdout, c.Stderr = orDiscard(o.Stdout), orDiscard(o.Stderr)
	c.WaitDelay = execDrainLimit
	if err := c.Start(); err != nil {
		if stdinW != nil {
			stdinW.Close()
		}
		return -1, err
	}
	if stdinW != nil {
		c.Stdin.(*os.File).Close()
		// The copy ends when the client closes stdin (the process sees EOF) or, once the
		// process is gone, at the next write; a read the client never answers is left to
		// end with the client's connection.
		go func() {
			_, _ = io.Copy(stdinW, o.Stdin)
			stdinW.Close()
		}()
	}
	return r.wait(ctx, c, p)
}

// runTTY runs c with a pseudo-terminal of ours as its stdio.
func (r *Runtime) runTTY(ctx context.Context, c *exec.Cmd, p execFiles, o StreamOptions, size *TermSize) (int, error) {
	master, slave, err := pty.Open()
	if err != nil {
		return -1, fmt.Errorf("open a pseudo-terminal: %w", err)
	}
	defer master.Close()
	// Raw from the start: no echo or line editing of ours in front of the process's terminal.
	if _, err := term.MakeRaw(int(slave.Fd())); err != nil {
		slave.Close()
		return -1, fmt.Errorf("pseudo-terminal raw mode: %w", err)
	}
	if size != nil {
		_ = pty.Setsize(master, &pty.Winsize{Cols: size.Width, Rows: size.Height})
	}
	c.Stdin, c.Stdout, c.Stderr = slave, slave, slave
	// runc's controlling terminal is the slave: a resize of the master signals runc, which
	// resizes the process's terminal to match.
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	err = c.Start()
	slave.Close()
	if err != nil {
		return -1, err
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	defer func() {
		close(done)
		wg.Wait()
	}()
	if o.Resize != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			forEachResize(done, o.Resize, func(sz TermSize) error {
				_ = pty.Setsize(master, &pty.Winsize{Cols: sz.Width, Rows: sz.Height})
				return nil // a size the terminal refused does not end the session
			})
		}()
	}
	if o.Stdin != nil {
		go func() { _, _ = io.Copy(master, o.Stdin) }()
	}
	out := make(chan struct{})
	go func() {
		// EIO once the slave side is closed by everyone: the end of the output.
		_, _ = io.Copy(orDiscard(o.Stdout), master)
		close(out)
	}()
	code, err := r.wait(ctx, c, p)
	select {
	case <-out:
	case <-time.After(execDrainLimit):
	}
	return code, err
}

// wait waits for runc to exit, killing the process if ctx ends first, and turns runc's exit
// into the process's exit code.
func (r *Runtime) wait(ctx context.Context, c *exec.Cmd, p execFiles) (int, error) {
	exited := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-exited:
		case <-ctx.Done():
			// runc forwards signals but cannot forward SIGKILL: kill the process itself, then runc.
			if pid, err := readPid(p.pidFile); err == nil {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
			_ = c.Process.Kill()
		}
	}()
	err := c.Wait()
	close(exited)
	<-stopped
	if ctx.Err() != nil {
		return -1, ctx.Err()
	}
	var ee *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay) && c.ProcessState != nil:
		return c.ProcessState.ExitCode(), nil
	case errors.As(err, &ee):
		// runc exits 255 with an error in its log when it could not run the process (no such
		// executable, container gone); otherwise its exit code is the process's.
		if msg := runcLoggedError(p.logFile); msg != "" && ee.ExitCode() == 255 {
			return -1, errors.New(msg)
		}
		if ee.ExitCode() < 0 {
			return -1, fmt.Errorf("runc exec: %w", err)
		}
		return ee.ExitCode(), nil
	default:
		return -1, err
	}
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
