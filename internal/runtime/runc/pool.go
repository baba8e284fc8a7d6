package runc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The shim is the large kubette binary: starting one costs tens of milliseconds of process
// start and package initialisation, on the path of every container's create. With
// Config.ShimPool > 0 the Runtime keeps that many shims started ahead, each waiting for its
// container on a pipe (the job: id, bundle, log path); Create hands the container to one and
// starts a replacement once the container is created. An idle shim whose job pipe closes
// without a job (Close, or the runtime process ended) exits at once.

// poolJobFD is the fd on which a pooled shim reads its job (the ready pipe is fd 3).
const poolJobFD = 4

// closeWait bounds how long Close waits for the idle shims to exit.
const closeWait = 10 * time.Second

// idleShim is a shim started ahead, waiting for a container.
type idleShim struct {
	pid   int
	ready *os.File // read end of the shim's ready pipe
	job   *os.File // write end of the shim's job pipe
}

// shimJob is what a pooled shim reads on its job pipe.
type shimJob struct {
	ID      string `json:"id"`
	Bundle  string `json:"bundle"`
	LogPath string `json:"logPath"`
}

// startShim starts the shim of a container (a's id, bundle and log path) and returns the read
// end of its ready pipe: an idle shim of the pool when there is one, else a new process whose
// stdout and stderr go to shimLog.
func (r *Runtime) startShim(a shimArgs, shimLog *os.File) (*os.File, error) {
	if sh := r.takeIdle(); sh != nil {
		b, err := json.Marshal(shimJob{ID: a.id, Bundle: a.bundle, LogPath: a.logPath})
		if err == nil {
			_, err = sh.job.Write(b)
		}
		if cerr := sh.job.Close(); err == nil {
			err = cerr
		}
		r.mu.Lock()
		r.shims[sh.pid] = struct{}{} // reaped like any other once it exits
		r.mu.Unlock()
		if err == nil {
			return sh.ready, nil
		}
		sh.ready.Close() // the idle shim is gone: start a new one
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	pid, err := r.spawnShim(a.flags(), shimLog, readyW)
	readyW.Close()
	if err != nil {
		readyR.Close()
		return nil, err
	}
	r.mu.Lock()
	r.shims[pid] = struct{}{}
	r.mu.Unlock()
	return readyR, nil
}

// spawnShim starts the shim binary with flags, detached: in its own session, holding no
// directory of the runtime's, with ShimEnv set, out as its stdout and stderr (nil: /dev/null)
// and extra as its fds from 3 on. It returns the shim's pid; the shim is this process's
// child, reaped by pid (reapShims).
func (r *Runtime) spawnShim(flags []string, out *os.File, extra ...*os.File) (int, error) {
	cmd := exec.Command(r.shim[0], append(append([]string(nil), r.shim[1:]...), flags...)...)
	cmd.Env = append(shimEnviron(os.Environ()), ShimEnv+"=1")
	cmd.Dir = "/"
	if out != nil {
		cmd.Stdout, cmd.Stderr = out, out
	}
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start shim: %w", err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	return pid, nil
}

// shimEnviron is env with the collector off for the shim's start (GOGC=off; ShimMain turns
// it back on) unless GOGC is set already.
func shimEnviron(env []string) []string {
	for _, kv := range env {
		if strings.HasPrefix(kv, "GOGC=") {
			return env
		}
	}
	return append(env[:len(env):len(env)], "GOGC=off", shimGCEnv+"=1")
}

// takeIdle removes an idle shim from the pool, or returns nil.
func (r *Runtime) takeIdle() *idleShim {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.idle) == 0 {
		return nil
	}
	sh := r.idle[len(r.idle)-1]
	r.idle = r.idle[:len(r.idle)-1]
	return sh
}

// fillPool starts idle shims until the pool holds Config.ShimPool of them. Failures only
// leave the pool short: Create then starts shims itself.
func (r *Runtime) fillPool() {
	for {
		r.mu.Lock()
		short := !r.closed && len(r.idle) < r.poolSize
		r.mu.Unlock()
		if !short {
			return
		}
		sh, err := r.spawnIdle()
		if err != nil {
			return
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			r.stopIdle([]*idleShim{sh})
			return
		}
		r.idle = append(r.idle, sh)
		r.mu.Unlock()
	}
}

// spawnIdle starts a shim that waits for its job.
func (r *Runtime) spawnIdle() (*idleShim, error) {
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	jobR, jobW, err := os.Pipe()
	if err != nil {
		readyR.Close()
		readyW.Close()
		return nil, err
	}
	pid, err := r.spawnShim([]string{"-root", r.root, "-runc", r.binary, "-detached", "-pooled"}, nil, readyW, jobR)
	readyW.Close()
	jobR.Close()
	if err != nil {
		readyR.Close()
		jobW.Close()
		return nil, err
	}
	return &idleShim{pid: pid, ready: readyR, job: jobW}, nil
}

// Close stops the idle shims of the pool and waits for them to exit; it leaves every
// container and its shim alone. Create after Close starts shims itself.
func (r *Runtime) Close() error {
	r.mu.Lock()
	idle := r.idle
	r.idle, r.closed = nil, true
	r.mu.Unlock()
	return r.stopIdle(idle)
}

// stopIdle closes the job pipes of idle shims, which makes them exit, and reaps them.
func (r *Runtime) stopIdle(idle []*idleShim) error {
	for _, sh := range idle {
		sh.job.Close()
		sh.ready.Close()
	}
	var errs []error
	deadline := time.Now().Add(closeWait)
	for _, sh := range idle {
		for {
			got, err := unix.Wait4(sh.pid, nil, unix.WNOHANG, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if got == sh.pid || err != nil {
				break
			}
			if time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("idle shim %d did not exit within %s", sh.pid, closeWait))
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}

// readJob reads a pooled shim's job from its job pipe; io.EOF means there is none (the pool
// was closed or the runtime ended).
func readJob(a *shimArgs) error {
	f := os.NewFile(poolJobFD, "job")
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("read the job: %w", err)
	}
	if len(b) == 0 {
		return io.EOF
	}
	var j shimJob
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("read the job: %w", err)
	}
	a.id, a.bundle, a.logPath = j.ID, j.Bundle, j.LogPath
	return nil
}

// redirectOutput makes path (opened for appending) the process's stdout and stderr.
func redirectOutput(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, fd := range []int{1, 2} {
		if err := unix.Dup3(int(f.Fd()), fd, 0); err != nil {
			return fmt.Errorf("redirect fd %d to %s: %w", fd, path, err)
		}
	}
	return nil
}
