// Package runc runs OCI bundles with the runc binary, each container under a shim that outlives
// the runtime process.
//
// Create starts the shim (Config.Shim, normally `kubette shim`) in a new session, with the
// -detached flag: the shim is the runtime's child, which the Runtime reaps on a later call once
// the shim has exited (without -detached, the shim first re-executes itself in a new session
// and exits, so that no process of its starter has to reap it; that costs a second start of the
// binary). The shim becomes a child subreaper, runs `runc create` with two pipes as the container's stdout and stderr, reports
// "ready" or runc's error to Create over an inherited pipe, then copies both pipes into the
// container's log file in the CRI format, reaps the container's init and writes exit.json beside
// the bundle (in the container directory) before it exits. A bundle whose process has a
// terminal (CRI tty) is created with --console-socket instead: the shim holds the pty master
// runc sends and copies it to the log as stdout (console.go). Start does what `runc start` does
// itself, through runc's exec FIFO (fifo.go; `runc start` when it cannot), and returns once
// runc's init has exec'd the container's process (awaitExec). State, Delete, Exec and List run
// runc directly; State merges `runc state` with exit.json, except for a container this Runtime
// started whose init still lives, which it reports running without asking runc. Kill signals an
// init this Runtime started through a pidfd, falling back to `runc kill`. The shim is ShimBinary beside the
// executable when there is one: a small binary whose start costs a tenth of kubette's.
// ExecStream runs `runc exec` with streams (and a terminal); Attach talks to the shim's attach
// socket (attach.sock in the container directory): the shim fans the container's output out to
// attach sessions and, for a container whose config.json carries AnnotationStdin, holds the
// container's stdin pipe, which sessions write to.
//
// With Config.ShimPool > 0, shims are started ahead with -pooled and wait for their container
// (id, bundle, log path as JSON) on fd 4; Create hands the container to one of them and starts a
// replacement, so that a container's create does not wait for the binary to start. Close ends
// the idle ones.
//
// Files the package keeps in the container directory (the parent of the bundle): exit.json
// (the shim), shim.log (the shim's own stdout and stderr), shim.pid, init.pid, runc.log (runc's
// log during create), started (the time Start began), attach.sock (the shim's) and,
// while an exec runs, its exec-*/ directory.
//
// # Running the shim from a test binary
//
// A package whose tests create containers runs the shim by re-executing its own test binary:
//
//	func TestMain(m *testing.M) {
//		runc.MaybeRunShim() // never returns when the binary runs as a shim
//		os.Exit(m.Run())
//	}
//
// and configures the runtime with Config{Shim: []string{exe}} where exe is os.Executable().
// The runtime always starts the shim with ShimEnv=1 in its environment; MaybeRunShim runs
// ShimMain with the binary's arguments and exits when it sees that variable.
package runc
