package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// Runner runs the iptables and conntrack tools. ExecRunner execs the real
// binaries; tests substitute a recorder.
type Runner interface {
	// Restore applies iptables-restore input without flushing the tables
	// (upstream: iptables-restore -w --noflush). It is atomic per table.
	Restore(ctx context.Context, data []byte) error
	// Save returns iptables-save output for (at least) the filter and nat
	// tables.
	Save(ctx context.Context) ([]byte, error)
	// Iptables runs one iptables command (-w is added) and returns its
	// standard output. A command that fails with an exit status returns an
	// error that has an ExitCode() int method (iptables -C exits 1 for a
	// missing rule).
	Iptables(ctx context.Context, args ...string) ([]byte, error)
	// Conntrack runs the conntrack tool; ErrNoConntrack when it is missing.
	Conntrack(ctx context.Context, args ...string) error
}

// ErrNoConntrack says the conntrack binary is not installed.
var ErrNoConntrack = errors.New("conntrack binary not found")

// ExecRunner runs the binaries found on PATH, each prefixed with Prefix when
// set (e.g. "ip", "netns", "exec", "NAME" to work inside a network namespace).
type ExecRunner struct {
	Prefix []string
}

var _ Runner = ExecRunner{}

func (r ExecRunner) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	if len(r.Prefix) > 0 {
		return exec.CommandContext(ctx, r.Prefix[0], append(append(append([]string(nil), r.Prefix[1:]...), name), args...)...)
	}
	return exec.CommandContext(ctx, name, args...)
}

func (r ExecRunner) run(cmd *exec.Cmd, stdin []byte) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), &runError{args: cmd.Args, err: err, stderr: strings.TrimSpace(stderr.String())}
	}
	return stdout.Bytes(), nil
}

// runError is a failed command with its standard error.
type runError struct {
	args   []string
	err    error
	stderr string
}

func (e *runError) Error() string {
	return fmt.Sprintf("%s: %v: %s", strings.Join(e.args, " "), e.err, e.stderr)
}

func (e *runError) Unwrap() error { return e.err }

// ExitCode is the command's exit status, -1 when it did not exit.
func (e *runError) ExitCode() int {
	var ee *exec.ExitError
	if errors.As(e.err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// Restore implements Runner.
func (r ExecRunner) Restore(ctx context.Context, data []byte) error {
	_, err := r.run(r.command(ctx, "iptables-restore", "-w", "5", "--noflush"), data)
	return err
}

// Save implements Runner with one iptables-save run for all tables:
// iptables-nft-save fetches the rules of every chain of the ruleset, one
// netlink request per chain, whatever -t says, so saving filter and nat
// apart costs that twice (10000 Services × 10 endpoints: 4.0 s of CPU for
// one run, 7.6 s for -t nat and -t filter).
func (r ExecRunner) Save(ctx context.Context) ([]byte, error) {
	return r.run(r.command(ctx, "iptables-save"), nil)
}

// Iptables implements Runner.
func (r ExecRunner) Iptables(ctx context.Context, args ...string) ([]byte, error) {
	return r.run(r.command(ctx, "iptables", append([]string{"-w", "5"}, args...)...), nil)
}

// Conntrack implements Runner. Deleting nothing is not an error.
func (r ExecRunner) Conntrack(ctx context.Context, args ...string) error {
	if _, err := exec.LookPath("conntrack"); err != nil {
		return ErrNoConntrack
	}
	_, err := r.run(r.command(ctx, "conntrack", args...), nil)
	var re *runError
	if errors.As(err, &re) && strings.Contains(re.stderr, "0 flow entries have been deleted") {
		return nil
	}
	return err
}

// exitCode returns the exit status carried by err, or -1.
func exitCode(err error) int {
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return -1
}
