package nginx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process runs one nginx master in the foreground (`daemon off;` in the
// config) as a child of the controller and restarts it when it dies.
//
// Foreground rather than daemon mode: the controller is then nginx's parent,
// learns of its death from wait(2) at once instead of polling a pid file, can
// never signal an unrelated process that reused a stale pid, and the child
// gets SIGTERM through the parent-death signal if the controller is killed.
type Process struct {
	// Binary is the nginx executable.
	Binary string
	// Prefix is nginx's prefix directory (see Config.Prefix).
	Prefix string
	// Conf is the configuration file the master reads (and re-reads on
	// reload).
	Conf string
	// Logger receives start, exit and restart messages.
	Logger *slog.Logger
	// MinRestartDelay and MaxRestartDelay bound the back-off between
	// restarts (defaults 100 ms and 10 s).
	MinRestartDelay, MaxRestartDelay time.Duration
	// StopTimeout is how long a graceful stop (SIGQUIT) may take before the
	// master is killed (default 10 s).
	StopTimeout time.Duration
	// Control is the control socket the configurations listen on
	// (ControlSocket). It is removed before each start, as a killed master
	// leaves it behind and nginx would not bind it again; ReloadConfirmed
	// asks it which configuration is served.
	Control string
	// OnStart, when set, is called after each start of a master.
	OnStart func()

	// startMu is held while a master starts (until it wrote its pid file,
	// so its signal handlers are installed and its sockets bound) and
	// while Check runs: `nginx -t` binds a unix socket that does not exist
	// yet, which a master starting at the same time would find taken, and
	// a SIGHUP before the handlers are installed would kill the master.
	startMu sync.Mutex
	mu      sync.Mutex
	pid     int
	starts  int
}

// readyTimeout bounds the wait for a starting master's pid file.
const readyTimeout = 30 * time.Second

// Check runs Check on conf with p's binary and prefix, never while a master
// is starting.
func (p *Process) Check(ctx context.Context, conf string) error {
	p.startMu.Lock()
	defer p.startMu.Unlock()
	return Check(ctx, p.Binary, p.Prefix, conf)
}

// awaitReady waits until the master pid wrote its pid file, exited, or
// readyTimeout passed.
func (p *Process) awaitReady(pid int, exited <-chan struct{}) {
	file := filepath.Join(p.Prefix, "nginx.pid")
	want := strconv.Itoa(pid)
	deadline := time.Now().Add(readyTimeout)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(file); err == nil && strings.TrimSpace(string(b)) == want {
			return
		}
		select {
		case <-exited:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Run starts nginx and keeps it running until ctx is done; then it stops
// nginx gracefully (SIGQUIT, SIGKILL after StopTimeout) and returns.
func (p *Process) Run(ctx context.Context) error {
	minDelay, maxDelay := p.MinRestartDelay, p.MaxRestartDelay
	if minDelay <= 0 {
		minDelay = 100 * time.Millisecond
	}
	if maxDelay <= 0 {
		maxDelay = 10 * time.Second
	}
	stop := p.StopTimeout
	if stop <= 0 {
		stop = 10 * time.Second
	}
	log := p.Logger
	if log == nil {
		log = slog.Default()
	}
	p.killStale(log)
	delay := minDelay
	for {
		started := time.Now()
		err := p.runOnce(ctx, stop)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(started) > time.Minute {
			delay = minDelay
		}
		log.Warn("nginx exited; restarting", "err", err, "in", delay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(2*delay, maxDelay)
	}
}

func (p *Process) runOnce(ctx context.Context, stop time.Duration) error {
	p.startMu.Lock()
	if p.Control != "" {
		if err := os.Remove(p.Control); err != nil && !errors.Is(err, os.ErrNotExist) {
			p.startMu.Unlock()
			return fmt.Errorf("remove stale control socket: %w", err)
		}
	}
	cmd := exec.Command(p.Binary, "-p", p.Prefix+"/", "-e", filepath.Join(p.Prefix, "logs", "error.log"), "-c", p.Conf)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	if err := cmd.Start(); err != nil {
		p.startMu.Unlock()
		return fmt.Errorf("start nginx: %w", err)
	}
	p.mu.Lock()
	p.pid = cmd.Process.Pid
	p.starts++
	p.mu.Unlock()
	done := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		close(exited)
		done <- err
	}()
	p.awaitReady(cmd.Process.Pid, exited)
	p.startMu.Unlock()
	if p.OnStart != nil {
		p.OnStart()
	}
	defer func() {
		p.mu.Lock()
		p.pid = 0
		p.mu.Unlock()
	}()
	select {
	case err := <-done:
		// Workers of a master that died keep the listening sockets;
		// they share its process group (Setpgid), so it goes as a whole.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return fmt.Errorf("nginx (pid %d): %w", cmd.Process.Pid, err)
	case <-ctx.Done():
	}
	_ = cmd.Process.Signal(syscall.SIGQUIT)
	t := time.NewTimer(stop)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // workers left behind, if any
	return nil
}

// killStale stops a master that a previous controller left running with
// this prefix (found through its pid file), so the ports are free.
func (p *Process) killStale(log *slog.Logger) {
	b, err := os.ReadFile(filepath.Join(p.Prefix, "nginx.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmdline), p.Conf) {
		return
	}
	log.Info("stopping an nginx left by a previous run", "pid", pid)
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	for i := 0; i < 100; i++ {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// Reload asks the running master to re-read its configuration (SIGHUP),
// waiting for a master that is starting to be ready. It reports false when
// no master is running (the next start reads the new configuration anyway).
func (p *Process) Reload() (bool, error) {
	p.startMu.Lock()
	defer p.startMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pid == 0 {
		return false, nil
	}
	if err := syscall.Kill(p.pid, syscall.SIGHUP); err != nil {
		return false, fmt.Errorf("reload nginx (pid %d): %w", p.pid, err)
	}
	return true, nil
}

// ReloadError is a reload nginx did not take: the master logged an error
// while reading the new configuration (it then keeps serving the old one), or
// no worker served the new configuration in time.
type ReloadError struct {
	// Message is the master's "[emerg]" message, or what was awaited.
	Message string
}

func (e *ReloadError) Error() string { return "nginx reload failed: " + e.Message }

// ErrorLog is the master's error log.
func (p *Process) ErrorLog() string { return filepath.Join(p.Prefix, "logs", "error.log") }

// ReloadConfirmed reloads nginx (SIGHUP) and waits until a worker answers on
// the control socket with id, the ConfigID of the configuration written to
// Conf. It returns a *ReloadError as soon as the master logs an "[emerg]"
// line after the signal (e.g. a listen address taken: `nginx -t` does not
// bind, a reload does), or when timeout passes without the new id served.
// With no master running it does nothing: the next start reads Conf.
func (p *Process) ReloadConfirmed(ctx context.Context, id string, timeout time.Duration) error {
	logFile := p.ErrorLog()
	var offset int64
	if st, err := os.Stat(logFile); err == nil {
		offset = st.Size()
	}
	p.mu.Lock()
	pid := p.pid
	p.mu.Unlock()
	ok, err := p.Reload()
	if err != nil || !ok {
		return err
	}
	ctl := Control{Socket: p.Control}
	deadline := time.Now().Add(timeout)
	emerg := fmt.Sprintf("[emerg] %d#", pid)
	for {
		got, cerr := ctl.ConfigID(ctx)
		if cerr == nil && got == id {
			return nil
		}
		if msg := logLineAfter(logFile, offset, emerg); msg != "" {
			return &ReloadError{Message: msg}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("confirm nginx reload: %w", ctx.Err())
		}
		if time.Now().After(deadline) {
			why := fmt.Sprintf("it served %q", got)
			if cerr != nil {
				why = cerr.Error()
			}
			return &ReloadError{Message: fmt.Sprintf("no worker served configuration %s within %v (%s)", id, timeout, why)}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// logLineAfter returns the message of the first line of file after offset
// that contains marker ("" when none does).
func logLineAfter(file string, offset int64, marker string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, err := io.ReadAll(io.LimitReader(f, 4<<20))
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if i := strings.Index(l, marker); i >= 0 {
			msg := l[i+len(marker):]
			if j := strings.Index(msg, ": "); j >= 0 {
				msg = msg[j+2:]
			}
			return msg
		}
	}
	return ""
}

// Pid returns the running master's pid, 0 when none runs.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

// Starts counts the masters started so far.
func (p *Process) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}
