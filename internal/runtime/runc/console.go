package runc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A container whose config.json asks for a terminal (process.terminal, CRI tty) gets its stdio
// on a pty that runc creates inside the container: runc sends the pty's master over the
// console socket (`runc create --console-socket`), and the shim holds it. The master's output
// goes to the log and to attach sessions as stdout (a terminal has no stderr), attach
// sessions' stdin is written to it (with CRI stdin), and their terminal sizes are set on it.

// consoleWait bounds how long the shim waits for runc to send the master once `runc create`
// has returned (runc sends it before it returns; the bound only guards against a runtime that
// does not).
const consoleWait = 10 * time.Second

// consoleSocket is a unix socket for runc's --console-socket in a directory of its own under
// the system's temporary directory (a short path, whatever the container directory's length).
type consoleSocket struct {
	dir  string
	ln   *unixListener
	got  chan consoleResult
	path string
}

type consoleResult struct {
	master *os.File
	err    error
}

// listenConsole makes the console socket and starts waiting for runc's connection.
func listenConsole() (*consoleSocket, error) {
	dir, err := os.MkdirTemp("", "kubette-console-")
	if err != nil {
		return nil, fmt.Errorf("console socket: %w", err)
	}
	path := filepath.Join(dir, "console.sock")
	ln, err := listenUnix(path)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("console socket: %w", err)
	}
	cs := &consoleSocket{dir: dir, ln: ln, got: make(chan consoleResult, 1), path: path}
	go func() {
		m, err := acceptMaster(ln)
		cs.got <- consoleResult{m, err}
	}()
	return cs, nil
}

// acceptMaster accepts runc's connection and receives the pty master it sends (one fd as
// SCM_RIGHTS, with the pty's name as the message).
func acceptMaster(ln *unixListener) (*os.File, error) {
	conn, err := ln.Accept()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	name := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, err := conn.readMsg(name, oob)
	if err != nil {
		return nil, fmt.Errorf("receive the terminal: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return nil, fmt.Errorf("receive the terminal: %w", err)
	}
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds[1:] {
			unix.Close(fd)
		}
		if len(fds) > 0 {
			return os.NewFile(uintptr(fds[0]), string(name[:n])), nil
		}
	}
	return nil, errors.New("receive the terminal: no file descriptor in runc's message")
}

// master returns the pty master runc sent, once `runc create` has returned. It closes the
// socket: runc connects once.
func (cs *consoleSocket) master() (*os.File, error) {
	defer cs.close()
	select {
	case r := <-cs.got:
		return r.master, r.err
	case <-time.After(consoleWait):
		return nil, errors.New("runc sent no terminal")
	}
}

// close removes the socket (and stops a pending accept).
func (cs *consoleSocket) close() {
	cs.ln.Close()
	os.RemoveAll(cs.dir)
}

// ptyReader reads a pty master, whose read fails with EIO once no process holds the terminal
// open any more: that is its end of file.
type ptyReader struct{ f *os.File }

func (p ptyReader) Read(b []byte) (int, error) {
	n, err := p.f.Read(b)
	if errors.Is(err, syscall.EIO) {
		return n, io.EOF
	}
	return n, err
}

// ptyStdin is a terminal's master as the container's stdin. A terminal has no end of input
// but the one its line discipline reads: closing it (stdin_once, or the container's end)
// sends the end-of-file character (^D) instead of hanging the terminal up, and the master
// stays open for the output.
type ptyStdin struct{ f *os.File }

func (p ptyStdin) Write(b []byte) (int, error) { return p.f.Write(b) }

// Close writes the ^D from a goroutine of its own: the hub closes stdin under its lock, and a
// terminal whose input nobody reads (a process that holds it and never reads) would block the
// write. The goroutine ends with the write, or with the shim.
func (p ptyStdin) Close() error {
	go func() { _, _ = p.f.Write([]byte{4}) }()
	return nil
}

// setTermSize sets a terminal's size (zero sizes are left alone).
func setTermSize(master *os.File, sz TermSize) {
	if sz.Width == 0 || sz.Height == 0 {
		return
	}
	_ = unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: sz.Width, Row: sz.Height})
}
